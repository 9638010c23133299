-- CUDA reductions, scans and softmax against the CPU kernels (the oracle):
-- every dtype, every dim, contiguous and strided layouts built on the device
-- (permuted, stepped slices, transposed, expanded, unaligned rows), the
-- kernels' paths (short and long rows, columns, split and chunked long
-- lines, the register and two-pass softmaxes), special values (NaN, inf,
-- ties, integer wrapping), empty inputs, large inputs and the error cases.
local T = require "harness"
local test, close, eq, raises = T.test, T.close, T.eq, T.raises

local function need_cuda()
  if not (cuda and cuda.is_available()) then T.skip("no CUDA device") end
end

local ALL = {"float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"}
local FLOATS = {"float32", "float64", "float16", "bfloat16"}
local function is_float(dt) return dt:find("float") ~= nil end

-- (rtol, atol) per result dtype; integers, bools and indices are exact
local TOL = {float32 = {1e-5, 1e-4}, float64 = {1e-12, 1e-12}, float16 = {1e-2, 1e-2}, bfloat16 = {2e-2, 2e-2}}
local function tol_of(dt)
  local t = TOL[dt:gsub("^torch%.", "")]
  if t then return t[1], t[2] end
  return 0, 0
end

-- random CPU data of dtype dt: floats uniform in [lo, hi), integers in [lo, hi)
local function rand(shape, dt, lo, hi)
  if is_float(dt) then
    lo, hi = lo or -3, hi or 3
    return (torch.rand(shape) * (hi - lo) + lo):to(dt)
  elseif dt == "bool" then
    return torch.randint(0, 2, shape):to("bool")
  end
  return torch.randint(lo or -20, hi or 20, shape):to(dt) -- uint8 wraps the negatives, the same on both devices
end

-- Runs f on view(x) on the CPU and on view(x:cuda()) (so strided layouts
-- exist on the device too); each result must be on CUDA with the CPU's dtype
-- and shape and values within the result dtype's tolerance (scaled by `loose`).
local function check(x, view, f, what, loose)
  local rc = table.pack(f(view(x)))
  local rg = table.pack(f(view(x:cuda())))
  eq(rg.n, rc.n, what .. ": number of results")
  for i = 1, rc.n do
    local c, g = rc[i], rg[i]
    T.ok(g.is_cuda, what .. ": result " .. i .. " is on cuda")
    eq(g.dtype, c.dtype, what .. ": result " .. i .. " dtype")
    eq(tostring(g.shape), tostring(c.shape), what .. ": result " .. i .. " shape")
    local rt, at = tol_of(c.dtype)
    rt, at = rt * (loose or 1), at * (loose or 1)
    if c:numel() <= 20000 then
      close(g:cpu(), c, rt, at, what .. ": result " .. i)
    elseif rt == 0 then -- large exact results: compared by a CPU op rather than element by element in Lua
      T.ok(torch.equal(g:cpu(), c), what .. ": result " .. i .. " differs from the CPU's")
    else
      local a, e = g:cpu():to("float64"), c:to("float64")
      if not torch.allclose(a, e, rt, at, true) then
        local worst = ((a - e):abs() - (e:abs() * rt + at)):amax():item()
        error(("%s: result %d: exceeds rtol %g, atol %g (by %g at worst)"):format(what, i, rt, at, worst))
      end
    end
  end
end

local function id(x) return x end

-- layouts: name, shape of the base tensor, view applied on each device, dims to reduce
local LAYOUTS = {
  {"contiguous", {3, 4, 5}, id, {0, 1, 2, -1}},
  {"permuted", {4, 5, 6}, function(x) return x:permute(2, 0, 1) end, {0, 1, 2}},
  {"stepped slice", {6, 7, 9}, function(x) return x[{ {}, {0, 7, 2}, {1, 9, 3} }] end, {0, 1, 2}},
  {"transposed", {33, 65}, function(x) return x:t() end, {0, 1}},
  {"expanded rows", {1, 50}, function(x) return x:expand(40, 50) end, {0, 1}},
  {"expanded cols", {40, 1}, function(x) return x:expand(40, 50) end, {0, 1}},
  {"long rows", {3, 5000}, id, {0, 1}},
  {"many short rows", {3000, 5}, id, {0, 1}},
  {"middle dim", {4, 300, 17}, id, {1}},
  {"unaligned rows", {9, 131}, function(x) return x[{ {}, {1, 131} }] end, {1, 0}},
}

-- reductions of every dtype: f(x, dim or nil)
local ANY_DTYPE = {
  sum = function(x, d) return x:sum(d) end,
  amax = function(x, d) return x:amax(d) end,
  amin = function(x, d) return x:amin(d) end,
  max = function(x, d) if d then return x:max(d) end return x:max() end, -- values and indices
  min = function(x, d) if d then return x:min(d) end return x:min() end,
  argmax = function(x, d) return x:argmax(d) end,
  argmin = function(x, d) return x:argmin(d) end,
  all = function(x, d) return x:all(d, {keepdim = d == nil}) end,
  any = function(x, d) return x:any(d, {keepdim = d == nil}) end,
  logsumexp = function(x, d) return x:logsumexp(d or {0}) end,
}
-- reductions of floating dtypes only
local FLOAT_ONLY = {
  mean = function(x, d) return x:mean(d) end,
  var = function(x, d) return x:var(d) end,
  std0 = function(x, d) return x:std(d, {correction = 0}) end,
  var2 = function(x, d) return x:var(d, {correction = 2}) end,
  norm2 = function(x, d) return x:norm(2, d) end,
  norm1 = function(x, d) return x:norm(1, d) end,
  norm0 = function(x, d) return x:norm(0, d) end,
  norm35 = function(x, d) return x:norm(3.5, d) end,
  norminf = function(x, d) return x:norm(math.huge, d) end,
  normneginf = function(x, d) return x:norm(-math.huge, d) end,
}

local function sorted_keys(t)
  local k = {}
  for n in pairs(t) do k[#k + 1] = n end
  table.sort(k)
  return k
end

local function each_layout_dim(fn)
  for _, L in ipairs(LAYOUTS) do
    local dims = {table.unpack(L[4])}
    dims[#dims + 1] = false -- everything
    for _, d in ipairs(dims) do fn(L, d or nil) end
  end
end

test("cuda reductions of every dtype over every layout and dim", function()
  need_cuda()
  for _, dt in ipairs(ALL) do
    each_layout_dim(function(L, d)
      local x = rand(L[2], dt)
      for _, name in ipairs(sorted_keys(ANY_DTYPE)) do
        check(x, L[3], function(v) return ANY_DTYPE[name](v, d) end,
              ("%s %s %s dim=%s"):format(dt, L[1], name, tostring(d)))
      end
    end)
  end
end)

test("cuda prod of every dtype (floats near 1: no overflow), wrapping for integers", function()
  need_cuda()
  for _, dt in ipairs(ALL) do
    each_layout_dim(function(L, d)
      local x = is_float(dt) and rand(L[2], dt, 0.5, 1.5) or rand(L[2], dt)
      check(x, L[3], function(v) return v:prod(d) end, ("%s %s prod dim=%s"):format(dt, L[1], tostring(d)))
    end)
  end
end)

test("cuda float reductions: mean, var/std with corrections, norms", function()
  need_cuda()
  for _, dt in ipairs(FLOATS) do
    each_layout_dim(function(L, d)
      local x = rand(L[2], dt)
      for _, name in ipairs(sorted_keys(FLOAT_ONLY)) do
        check(x, L[3], function(v) return FLOAT_ONLY[name](v, d) end,
              ("%s %s %s dim=%s"):format(dt, L[1], name, tostring(d)))
      end
    end)
  end
end)

test("cuda reductions over dim lists and keepdim", function()
  need_cuda()
  local x = rand({5, 6, 7}, "float32")
  for _, dims in ipairs({{0, 2}, {-1, 0}, {2, 0, 1}, {1, 2}}) do
    for _, keep in ipairs({false, true}) do
      local what = ("dims=%s keepdim=%s"):format(T.fmt(dims), tostring(keep))
      check(x, id, function(v) return v:sum(dims, keep) end, "sum " .. what)
      check(x, id, function(v) return v:amax(dims, keep) end, "amax " .. what)
      check(x, id, function(v) return v:var(dims, true, keep) end, "var " .. what)
      check(x, id, function(v) return v:logsumexp(dims, keep) end, "logsumexp " .. what)
    end
  end
  check(x, id, function(v) return v:max(1, true) end, "max keepdim")
end)

test("cuda max/min: NaN wins with its index, ties give the first index (also across threads and blocks)", function()
  need_cuda()
  local nan = 0 / 0
  local x = torch.tensor({{1, nan, 3, nan}, {2, 2, 1, 0}, {nan, 5, 5, 1}})
  for _, dt in ipairs(FLOATS) do
    local xd = x:to(dt)
    check(xd, id, function(v) return v:max(1) end, dt .. " max NaN")
    check(xd, id, function(v) return v:min(1) end, dt .. " min NaN")
    check(xd, id, function(v) return v:max(0) end, dt .. " max NaN columns")
    check(xd, id, function(v) return v:argmax() end, dt .. " argmax NaN")
    check(xd, id, function(v) return v:norm(math.huge, 1) end, dt .. " inf-norm NaN")
  end
  -- equal maxima far apart in one long line (different threads, split blocks)
  for _, n in ipairs({1000, 100000, 3 * 2 ^ 20}) do
    local z = torch.zeros({n})
    z[n - 1] = 5
    z[n // 2] = 5
    z[7] = 5
    z[n // 3] = -5
    z[n - 2] = -5
    check(z, id, function(v) return v:max(0) end, "max ties n=" .. n)
    check(z, id, function(v) return v:min(0) end, "min ties n=" .. n)
    check(z, id, function(v) return v:argmax() end, "argmax ties n=" .. n)
    check(z:to("int32"), id, function(v) return v:argmax() end, "int argmax ties n=" .. n)
    check(z:to("float16"), id, function(v) return v:argmin() end, "half argmin ties n=" .. n)
    check(z:view(n // 4, 4), id, function(v) return v:max(0) end, "column max ties n=" .. n)
  end
  -- a constant tensor: index 0 everywhere
  check(torch.ones({64, 300}), id, function(v) return v:max(1) end, "constant rows")
  check(torch.ones({300, 64}), id, function(v) return v:max(0) end, "constant columns")
  check(torch.full({5}, -math.huge), id, function(v) return v:max(0) end, "all -inf")
end)

test("cuda logsumexp: -inf rows, +inf, NaN and large values", function()
  need_cuda()
  local inf, nan = math.huge, 0 / 0
  local rows = {{-inf, -inf, -inf}, {1, inf, 2}, {1, nan, 2}, {1000, 1000.5, -1000}, {-inf, 3, -inf},
                {inf, -inf, 0}, {-1e4, -1e4 + 1, -1e4 + 2}}
  for _, dt in ipairs({"float32", "float64"}) do
    local x = torch.tensor(rows):to(dt)
    check(x, id, function(v) return v:logsumexp(1) end, dt .. " logsumexp rows")
    check(x, function(v) return v:t() end, function(v) return v:logsumexp(0) end, dt .. " logsumexp columns")
  end
  -- a rising sequence (the running reference moves often)
  check(torch.arange(0, 5000):to("float32"), id, function(v) return v:logsumexp(0) end, "rising")
  check(torch.arange(0, 5000):to("float32") * -1, id, function(v) return v:logsumexp(0) end, "falling")
  check(torch.arange(0, 50):to("int32"), id, function(v) return v:logsumexp(0) end, "int logsumexp is float32")
end)

test("cuda var: constant rows, one element, offset data", function()
  need_cuda()
  check(torch.full({4, 1000}, 3.25), id, function(v) return v:var(1) end, "constant")
  check(torch.tensor({{3.0}}), id, function(v) return v:var(1) end, "one element is NaN")
  check(torch.tensor({{3.0}}), id, function(v) return v:var(1, {correction = 0}) end, "one element, population")
  local x = torch.randn({8, 4096}):to("float64") * 1e-3 + 1e6
  check(x, id, function(v) return v:var(1) end, "offset float64")
  check(x:to("float32"), id, function(v) return v:std(1) end, "offset float32")
  check(torch.tensor({1, math.huge, 2}), id, function(v) return v:var(0) end, "inf gives NaN")
end)

test("cuda integer reductions wrap like torch", function()
  need_cuda()
  local big = torch.tensor({math.maxinteger, 1, 5})
  check(big, id, function(v) return v:sum() end, "sum wraps")
  check(big, id, function(v) return v:prod() end, "prod wraps")
  check(big, id, function(v) return v:cumsum(0) end, "cumsum wraps")
  check(torch.tensor({9007199254740993, 1}), id, function(v) return v:sum() end, "int64 sum is exact")
  check(torch.full({300}, 200):to("uint8"), id, function(v) return v:sum() end, "uint8 sums to int64")
  check(torch.tensor({true, false, true}), id, function(v) return v:sum() end, "bool sums to int64")
end)

test("cuda empty inputs: identities, and the CPU's errors where there is none", function()
  need_cuda()
  for _, dt in ipairs({"float32", "int64", "bool"}) do
    local a, b = torch.zeros({0, 3}):to(dt), torch.zeros({3, 0}):to(dt)
    for _, name in ipairs({"sum", "prod", "all", "any"}) do
      check(a, id, function(v) return v[name](v, 0) end, dt .. " " .. name .. " over an empty dim")
      check(b, id, function(v) return v[name](v, 1) end, dt .. " " .. name .. " over an empty last dim")
      check(a, id, function(v) return v[name](v, 1) end, dt .. " " .. name .. " of no lines")
      -- all/any over everything give a Lua boolean; keepdim keeps a tensor to compare
      local opts = (name == "all" or name == "any") and {keepdim = true} or nil
      check(a, id, function(v) return v[name](v, opts) end, dt .. " " .. name .. " of nothing")
    end
    check(b, id, function(v) return v:cumsum(1) end, dt .. " cumsum of empty rows")
    check(a, id, function(v) return v:cumsum(0) end, dt .. " cumsum of an empty dim")
  end
  local e = torch.zeros({0, 4})
  for _, f in ipairs({function(v) return v:mean(0) end, function(v) return v:var(0) end,
                      function(v) return v:norm(2, 0) end, function(v) return v:logsumexp(0) end,
                      function(v) return v:softmax(0) end, function(v) return v:log_softmax(1) end}) do
    check(e, id, f, "float empty")
  end
  -- no lines because an inner line dim is empty: (3, 0, 2) over its last dim once divided by zero
  -- on the host while planning the launch (the fuzzer's crash)
  local c = torch.zeros({3, 0, 2})
  for name, f in pairs({sum = function(v) return v:sum(2) end, max = function(v) return (v:max(2)) end,
                        argmax = function(v) return v:argmax(2) end, var = function(v) return v:var(2) end,
                        logsumexp = function(v) return v:logsumexp(2) end, cumsum = function(v) return v:cumsum(2) end,
                        softmax = function(v) return v:softmax(2) end, log_softmax = function(v) return v:log_softmax(2) end}) do
    check(c, id, f, name .. " of no lines (an empty inner line dim)")
  end
  local g = torch.zeros({0}):cuda()
  raises(function() return g:max() end, "expected reduction dim to be specified")
  raises(function() return torch.zeros({2, 0}):cuda():argmax(1) end, "to have non-zero size")
  raises(function() return g:norm(math.huge) end, "does not have an identity")
  raises(function() return torch.zeros({3}, {dtype = "int64"}):cuda():var() end, "floating point")
  raises(function() return torch.zeros({3}, {dtype = "int32"}):cuda():softmax(0) end, "floating point")
end)

test("cuda cumsum of every dtype over every layout and dim", function()
  need_cuda()
  for _, dt in ipairs(ALL) do
    for _, L in ipairs(LAYOUTS) do
      local x = rand(L[2], dt)
      for _, d in ipairs(L[4]) do
        check(x, L[3], function(v) return v:cumsum(d) end, ("%s %s cumsum dim=%d"):format(dt, L[1], d))
      end
    end
  end
  -- the kernel paths: many lines in columns (chunked and not), short rows, a warp per row, long rows
  for _, s in ipairs({{64, 4096, 0}, {512, 1024, 0}, {5000, 7, 1}, {100, 2000, 1}, {30, 9000, 1}, {3, 70000, 1}}) do
    local x = rand({s[1], s[2]}, "float32")
    check(x, id, function(v) return v:cumsum(s[3]) end, ("cumsum %dx%d dim %d"):format(s[1], s[2], s[3]))
    local xi = rand({s[1], s[2]}, "int32")
    check(xi, id, function(v) return v:cumsum(s[3]) end, ("int cumsum %dx%d dim %d"):format(s[1], s[2], s[3]))
  end
end)

test("cuda softmax and log_softmax over layouts, dims and dtypes", function()
  need_cuda()
  for _, dt in ipairs(FLOATS) do
    for _, L in ipairs(LAYOUTS) do
      local x = rand(L[2], dt)
      for _, d in ipairs(L[4]) do
        check(x, L[3], function(v) return v:softmax(d) end, ("%s %s softmax dim=%d"):format(dt, L[1], d))
        check(x, L[3], function(v) return v:log_softmax(d) end, ("%s %s log_softmax dim=%d"):format(dt, L[1], d))
      end
    end
  end
end)

test("cuda softmax paths: row lengths around each kernel's limits, aligned and not", function()
  need_cuda()
  for _, dt in ipairs(FLOATS) do
    for _, R in ipairs({1, 2, 7, 32, 33, 100, 1000, 1023, 1024, 1025, 2048, 4096, 5000, 16384, 16388, 20000}) do
      local x = rand({6, R + 1}, dt, -8, 8)
      local what = ("%s R=%d"):format(dt, R)
      local aligned = function(v) return v[{ {}, {0, R} }]:contiguous() end
      local offset = function(v) return v[{ {}, {1, R + 1} }] end -- rows start one element in
      check(x, aligned, function(v) return v:softmax(1) end, what .. " softmax")
      check(x, aligned, function(v) return v:log_softmax(1) end, what .. " log_softmax")
      check(x, offset, function(v) return v:softmax(-1) end, what .. " softmax, unaligned rows")
      check(x, offset, function(v) return v:log_softmax(-1) end, what .. " log_softmax, unaligned rows")
    end
  end
  -- softmax over the first dim of a matrix (columns), a middle dim, and the lines of a transposed view
  local x = rand({700, 300}, "float32")
  check(x, id, function(v) return v:softmax(0) end, "columns")
  check(x, function(v) return v:t() end, function(v) return v:log_softmax(1) end, "transposed rows")
  check(rand({4, 50, 33}, "float32"), id, function(v) return v:softmax(1) end, "middle dim")
end)

test("cuda softmax special values: +inf, -inf rows and NaN give the CPU's NaNs", function()
  need_cuda()
  local inf, nan = math.huge, 0 / 0
  for _, R in ipairs({4, 40, 2000, 20000}) do
    for _, dt in ipairs({"float32", "float64", "float16"}) do
      local x = torch.zeros({5, R})
      x[{ {0, 1}, {} }]:fill_(-inf) -- an all -inf row
      x[1][R - 1] = inf             -- a +inf
      x[2][1] = nan                 -- a NaN
      x[3][0] = -inf                -- one -inf among numbers
      x[4][R // 2] = 50             -- a dominant value
      x = x:to(dt)
      local what = ("%s R=%d"):format(dt, R)
      check(x, id, function(v) return v:softmax(1) end, what .. " softmax")
      check(x, id, function(v) return v:log_softmax(1) end, what .. " log_softmax")
      check(x, function(v) return v:t() end, function(v) return v:softmax(0) end, what .. " softmax of columns")
      check(x, function(v) return v:t() end, function(v) return v:log_softmax(0) end, what .. " log_softmax of columns")
    end
  end
end)

test("cuda reductions of large inputs (> 2^20 elements): split lines and columns", function()
  need_cuda()
  local n = 2 ^ 21
  local x = torch.randn({n})
  -- float32 sums accumulate in float on the GPU: a looser absolute tolerance at this size
  check(x, id, function(v) return v:sum() end, "sum of 2^21", 10)
  check(x, id, function(v) return v:mean() end, "mean of 2^21", 10)
  check(x, id, function(v) return v:max(0) end, "max of 2^21")
  check(x, id, function(v) return v:var() end, "var of 2^21")
  check(x, id, function(v) return v:norm() end, "norm of 2^21")
  check(x, id, function(v) return v:logsumexp(0) end, "logsumexp of 2^21")
  check(x, id, function(v) return v:all({keepdim = true}) end, "all of 2^21") -- keepdim: a tensor to compare
  check(x, id, function(v) return v:cumsum(0) end, "cumsum of 2^21", 10)
  check(x:to("float64"), id, function(v) return v:cumsum(0) end, "float64 cumsum of 2^21")
  check(x:to("int64"), id, function(v) return v:cumsum(0) end, "int64 cumsum of 2^21")
  check(x:to("float16"), id, function(v) return v:sum() end, "float16 sum of 2^21")
  for _, s in ipairs({{4, n // 4}, {n // 4, 4}, {2048, 1024}, {1024, 2048}}) do
    local m = x:view(s[1], s[2])
    for d = 0, 1 do
      local what = ("%dx%d dim %d"):format(s[1], s[2], d)
      check(m, id, function(v) return v:sum(d) end, "sum " .. what, 10)
      check(m, id, function(v) return v:amin(d) end, "amin " .. what)
      check(m, id, function(v) return v:argmax(d) end, "argmax " .. what)
      check(m, id, function(v) return v:std(d) end, "std " .. what)
      check(m, id, function(v) return v:logsumexp(d) end, "logsumexp " .. what)
      check(m, id, function(v) return v:softmax(d) end, "softmax " .. what)
      check(m, id, function(v) return v:cumsum(d) end, "cumsum " .. what, 10)
      check(m:to("int32"), id, function(v) return v:sum(d) end, "int sum " .. what)
    end
  end
end)

test("cuda column sums of a short dim (bias gradients) run in one launch and match the CPU", function()
  need_cuda()
  torch.manual_seed(23)
  -- rows x lines: under and over the one-pass bound (4096 rows), line counts not a multiple of 8
  for _, s in ipairs({{512, 768}, {2048, 300}, {4096, 33}, {300, 17}, {3000, 1025}, {5000, 64}}) do
    local x = torch.randn(s[1], s[2])
    local what = ("%dx%d"):format(s[1], s[2])
    check(x, id, function(v) return v:sum(0) end, "sum(0) " .. what, 10)
    check(x:to("float64"), id, function(v) return v:sum(0) end, "float64 sum(0) " .. what)
    check(x, id, function(v) return v:amax(0) end, "amax(0) " .. what)
    check(x:view(s[1] // 4, 4, s[2]), id, function(v) return v:sum({0, 1}) end, "sum over two dims " .. what, 10)
  end
  local g = torch.randn(2048, 768, {device = "cuda"})
  cuda.synchronize()
  local l0 = cuda.launch_count()
  local _ = g:sum(0)
  eq(cuda.launch_count() - l0, 1, "a bias gradient's sum over 2048 rows: one launch")
end)

T.run()
