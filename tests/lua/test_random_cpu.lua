-- torch.rand on float32 has a loop of its own (src/cpu/random.c, dropout's
-- masks): element j takes word j % 4 of Philox counter offset + j / 4, so the
-- values do not depend on the length asked for or the thread count.
local T = require "harness"
local test, eq, ok = T.cpu_test, T.eq, T.ok

test("float32 rand: the same draws at any length and thread count", function()
  local threads = torch.get_num_threads()
  torch.manual_seed(11)
  local long = torch.rand(100003)
  torch.manual_seed(11)
  local short = torch.rand(37)
  eq(short:eq(long:narrow(0, 0, 37)):all():item(), true, "a prefix draws the same values")
  for _, nt in ipairs({1, 2, 3}) do
    torch.set_num_threads(nt)
    torch.manual_seed(11)
    local again = torch.rand(100003)
    eq(again:eq(long):all():item(), true, nt .. " threads")
  end
  torch.set_num_threads(threads)
  ok(long:min():item() >= 0 and long:max():item() < 1, "in [0, 1)")
  T.close(long:mean(), 0.5, 0, 0.005, "mean")
  -- uniform_ on a float32 tensor and rand with a range go through the op's bounds
  torch.manual_seed(11)
  local u = torch.empty(100003):uniform_(-2, 3)
  T.close(u, long * 5 - 2, 1e-6, 1e-6, "uniform_(-2, 3) is -2 + 5 u of the same draws")
end)

-- Philox4x32-10's four words in Lua's 64-bit integers: the reference the
-- kernel's 8-lane loop must match bit for bit (its known answer is test_core's)
local M = 0xFFFFFFFF
local function philox(seed, ctr)
  local c0, c1, c2, c3 = ctr & M, (ctr >> 32) & M, 0, 0
  local k0, k1 = seed & M, (seed >> 32) & M
  for _ = 1, 10 do
    local p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2 -- below 2^64: exact as unsigned bits
    c0, c1, c2, c3 = ((p1 >> 32) ~ c1 ~ k0) & M, p1 & M, ((p0 >> 32) ~ c3 ~ k1) & M, p0 & M
    k0, k1 = (k0 + 0x9E3779B9) & M, (k1 + 0xBB67AE85) & M
  end
  return {c0, c1, c2, c3}
end
local function f32(x) return (string.unpack("f", string.pack("f", x))) end

test("float32 rand is Philox word j % 4 of counter offset + j / 4, across a 2^32 carry of the counter", function()
  for _, st in ipairs({{seed = 11, offset = 0}, {seed = 0x123456789ABC, offset = (1 << 32) - 13},
                       {seed = -1, offset = (7 << 32) - 3}}) do
    for _, range in ipairs({{0, 1}, {-2, 3}}) do
      torch.set_rng_state(st)
      -- 60 counters: AVX-512's 32- and 16-lane blocks, AVX2's 8, blocks that
      -- would straddle the carry and a tail, whose last counter gives only 2
      -- of its words
      local n = 4 * 59 + 2
      local got = torch.empty(n):uniform_(range[1], range[2]):tolist()
      for j = 0, n - 1 do
        local u = (philox(st.seed, st.offset + j // 4)[j % 4 + 1] >> 8) / 16777216.0
        local want = f32(range[1] + (range[2] - range[1]) * u)
        if got[j + 1] ~= want then
          eq(got[j + 1], want, ("seed %x offset %x + %d, range [%g, %g)"):format(st.seed, st.offset, j, range[1], range[2]))
        end
      end
    end
  end
  ok(true, "all equal")
end)

-- F.dropout's keep factors come from one kernel (RAND's keep mode); they are
-- the bits of the four-op composition it replaced, for the same generator state
test("torch._dropout_mask is rand_like(x):ge(p):to(x.dtype):mul_(1 / (1 - p)), every float dtype", function()
  for _, dt in ipairs({"float32", "float64", "float16", "bfloat16"}) do
    for _, p in ipairs({0.1, 0.5, 1 / 3, 0}) do
      local x = torch.randn({7, 149}, {dtype = dt}):t() -- 1043 elements, not contiguous
      torch.manual_seed(23)
      local got = torch._dropout_mask(x, p)
      torch.manual_seed(23)
      local want = torch.rand_like(x):ge(p):to(x.dtype):mul_(1 / (1 - p))
      eq(got.dtype, x.dtype, "dtype")
      eq(tostring(got.shape), tostring(x.shape), "shape")
      eq(got:eq(want):all():item(), true, ("%s, p = %g: the same factors"):format(dt, p))
    end
  end
  T.raises(function() torch._dropout_mask(torch.ones(3), 1) end, "0 <= p < 1", "p = 1")
  T.raises(function() torch._dropout_mask(torch.ones(3), -0.5) end, "0 <= p < 1", "p < 0")
  T.raises(function() torch._dropout_mask(torch.ones(3, {dtype = "int64"}), 0.5) end, "floating point", "integers")
  T.raises(function() torch._dropout_mask(torch.ones(3), "half") end, "number expected", "p not a number")
end)

T.run()
