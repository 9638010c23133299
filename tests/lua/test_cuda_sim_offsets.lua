-- Views at odd element offsets through every vectorised CUDA path: a 16-byte
-- load needs a 16-byte aligned address, so each path must test its pointers
-- and fall back when a view starts elsewhere. Offsets 0 to 16 elements (every
-- residue of the address mod 16 for every element size), lengths that are no
-- multiple of the vector width; each result against the CPU's on the same
-- views. The paths: loops.cuh's dense elementwise kernel (inputs and an output
-- view), batch norm's elementwise kernels (nn.cu), the fused optimizer step
-- (optim.cu), reductions along a contiguous line (reduce.cu), nonzero of
-- bytes, cat and index_add / index_copy rows (index.cu). On the simulated
-- device a misaligned vector access fails the launch with a report
-- (sim/check.cc), so a wrong alignment test fails here. Runs only with a GPU.
local T = require "harness"
local test, close, eq = T.test, T.close, T.eq

local function need_cuda()
  if not (cuda and cuda.is_available()) then T.skip("no CUDA device") end
end

local OFFSETS = {0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16}
local TOL = {float32 = 1e-5, float64 = 1e-12, float16 = 1e-2, bfloat16 = 2e-2}

-- n elements of base starting at element o (a contiguous 1-d view)
local function at(base, o, n) return base:narrow(0, o, n) end

local function values(dt, n)
  if dt == "bool" then return torch.rand(n):lt(0.5) end
  if dt == "uint8" or dt == "int64" or dt == "int32" then return torch.randint(0, 100, {n}):to(dt) end
  return torch.randn(n):to(dt)
end

local function match(got, want, r, what)
  eq(got.is_cuda, true, what .. ": on cuda")
  eq(tostring(got.shape), tostring(want.shape), what .. ": shape")
  if want.dtype == "torch.bool" or want.dtype == "torch.int64" or want.dtype == "torch.uint8" then
    close(got:cpu():long(), want:long(), 0, 0, what)
  else
    close(got:cpu():double(), want:double(), r, r, what)
  end
end

test("elementwise (loops.cuh): inputs and an output at every offset", function()
  need_cuda()
  local n = 37
  for _, dt in ipairs({"float32", "float16", "float64", "uint8", "int64", "bool"}) do
    local a, b = values(dt, n + 16), values(dt, n + 16)
    local ga, gb = a:cuda(), b:cuda()
    for _, o in ipairs(OFFSETS) do
      local what = ("%s offset %d"):format(dt, o)
      local op = dt == "bool" and torch.logical_or or torch.maximum
      match(op(at(ga, o, n), at(gb, 0, n)), op(at(a, o, n), at(b, 0, n)), 0, what .. " (first input)")
      match(op(at(ga, 0, n), at(gb, o, n)), op(at(a, 0, n), at(b, o, n)), 0, what .. " (second input)")
      if dt ~= "bool" and dt ~= "uint8" then
        match(at(ga, o, n):neg(), at(a, o, n):neg(), 0, what .. " (unary)")
      end
      -- the output a view at the offset: written in place
      local oc, og = a:clone(), ga:clone()
      at(oc, o, n):copy_(op(at(a, 0, n), at(b, 0, n)))
      at(og, o, n):copy_(op(at(ga, 0, n), at(gb, 0, n)))
      match(og, oc, 0, what .. " (output view)")
      local cc, cg = b:clone(), gb:clone()
      at(cc, o, n):copy_(at(a, 16 - o, n))
      at(cg, o, n):copy_(at(ga, 16 - o, n))
      match(cg, cc, 0, what .. " (copy between offsets)")
    end
  end
end)

test("reductions (reduce.cu): sum, max, argmax, mean along a contiguous line at every offset", function()
  need_cuda()
  for _, dt in ipairs({"float32", "float16", "float64", "int64", "uint8"}) do
    for _, n in ipairs({5, 37, 300}) do
      local a = values(dt, n + 16)
      local ga = a:cuda()
      for _, o in ipairs(OFFSETS) do
        local what = ("%s n=%d offset %d"):format(dt, n, o)
        local r = (TOL[dt] or 0) * n
        match(at(ga, o, n):sum(), at(a, o, n):sum(), r, what .. " sum")
        match(at(ga, o, n):max(), at(a, o, n):max(), 0, what .. " max")
        match(at(ga, o, n):argmax(), at(a, o, n):argmax(), 0, what .. " argmax")
        if dt ~= "int64" and dt ~= "uint8" then match(at(ga, o, n):mean(), at(a, o, n):mean(), r, what .. " mean") end
        -- rows of a 2-d view starting at the offset
        local rows, cols = 3, math.floor(n / 3)
        match(at(ga, o, rows * cols):view(rows, cols):sum(1), at(a, o, rows * cols):view(rows, cols):sum(1), r,
              what .. " row sums")
      end
    end
  end
end)

-- (index.cu counts the non-zero bytes first, to size the result; torch.count_nonzero is a sum)
test("nonzero and masked_select of bool and uint8 (index.cu's 16-byte counting loads) at every offset", function()
  need_cuda()
  for _, dt in ipairs({"bool", "uint8"}) do
    for _, n in ipairs({15, 16, 17, 100, 1000}) do
      local a, x = values(dt, n + 16), torch.randn(n)
      local ga, gx = a:cuda(), x:cuda()
      for _, o in ipairs(OFFSETS) do
        local what = ("%s n=%d offset %d"):format(dt, n, o)
        match(torch.nonzero(at(ga, o, n)), torch.nonzero(at(a, o, n)), 0, "nonzero " .. what)
        if dt == "bool" then
          match(gx:masked_select(at(ga, o, n)), x:masked_select(at(a, o, n)), 0, "masked_select " .. what)
        end
      end
    end
  end
end)

test("cat of views at every offset (index.cu's row copies)", function()
  need_cuda()
  for _, dt in ipairs({"float32", "float16", "float64", "uint8"}) do
    local a = values(dt, 16 + 6 * 20)
    local ga = a:cuda()
    for _, o in ipairs(OFFSETS) do
      local what = ("cat %s offset %d"):format(dt, o)
      local x, gx = at(a, o, 6 * 20):view(6, 20), at(ga, o, 6 * 20):view(6, 20)
      local y, gy = at(a, 16 - o, 4 * 20):view(4, 20), at(ga, 16 - o, 4 * 20):view(4, 20)
      match(torch.cat({gx, gy}, 0), torch.cat({x, y}, 0), 0, what .. " dim 0")
      match(torch.cat({gx, gx}, 1), torch.cat({x, x}, 1), 0, what .. " dim 1")
    end
  end
end)

test("index_add and index_copy rows of views at every offset (index.cu)", function()
  need_cuda()
  local rows, cols = 6, 40 -- rows of 160 bytes in float32: the row kernel
  for _, dt in ipairs({"float32", "float64", "float16"}) do
    local base, src = values(dt, 16 + rows * cols), values(dt, 16 + 4 * cols)
    local gbase, gsrc = base:cuda(), src:cuda()
    local idx = torch.tensor({4, 0, 4, 2})
    for _, o in ipairs(OFFSETS) do
      local what = ("%s offset %d"):format(dt, o)
      local t, gt = at(base, o, rows * cols):view(rows, cols), at(gbase, o, rows * cols):view(rows, cols)
      local s, gs = at(src, 16 - o, 4 * cols):view(4, cols), at(gsrc, 16 - o, 4 * cols):view(4, cols)
      match(torch.index_add(gt, 0, idx:cuda(), gs), torch.index_add(t, 0, idx, s), TOL[dt] * 4, what .. " index_add")
      local once = torch.tensor({4, 0, 1, 2})
      match(torch.index_copy(gt, 0, once:cuda(), gs), torch.index_copy(t, 0, once, s), 0, what .. " index_copy")
    end
  end
end)

test("batch norm's elementwise kernels (nn.cu) on inputs at every offset", function()
  need_cuda()
  local N, C, H, W = 2, 3, 2, 4
  local n = N * C * H * W
  for _, dt in ipairs({"float32", "float64"}) do
    local base, gbase = values(dt, n + 16), nil
    gbase = base:cuda()
    local w, b = torch.randn(C):to(dt), torch.randn(C):to(dt)
    local gw, gb = w:cuda(), b:cuda()
    for _, o in ipairs(OFFSETS) do
      local what = ("batch_norm %s offset %d"):format(dt, o)
      local x, gx = at(base, o, n):view(N, C, H, W), at(gbase, o, n):view(N, C, H, W)
      for _, training in ipairs({true, false}) do
        local rm, rv = torch.zeros(C):to(dt), torch.ones(C):to(dt)
        local y, sm, si = torch._nn.batch_norm(x, rm, rv, w, b, training, 0.1, 1e-5) -- with the saved statistics
        local grm, grv = torch.zeros(C):to(dt):cuda(), torch.ones(C):to(dt):cuda()
        local gy, gsm, gsi = torch._nn.batch_norm(gx, grm, grv, gw, gb, training, 0.1, 1e-5)
        match(gy, y, TOL[dt] * 10, what .. (training and " training" or " eval"))
        local g, gg = at(base, 16 - o, n):view(N, C, H, W), at(gbase, 16 - o, n):view(N, C, H, W)
        local want = table.pack(torch._backward.batch_norm(g, x, w, sm, si, training))
        local got = table.pack(torch._backward.batch_norm(gg, gx, gw, gsm, gsi, training))
        for i = 1, want.n do
          if want[i] ~= nil then match(got[i], want[i], TOL[dt] * 100, what .. " backward result " .. i) end
        end
      end
    end
  end
end)

test("the fused Adam step (optim.cu) on parameters, gradients and moments at every offset", function()
  need_cuda()
  local n = 37
  for _, dt in ipairs({"float32", "float64"}) do
    for _, o in ipairs(OFFSETS) do
      local what = ("adam %s offset %d"):format(dt, o)
      local bases = {}
      for k = 1, 4 do bases[k] = k == 4 and torch.rand(n + 16):to(dt) or torch.randn(n + 16):to(dt) end
      local cpu, gpu = {}, {}
      for k = 1, 4 do
        local off = k % 2 == 1 and o or 16 - o -- p and m at o, g and v at 16 - o
        cpu[k] = {at(bases[k], off, n)}
        gpu[k] = {at(bases[k]:cuda(), off, n)}
      end
      for step = 1, 2 do
        torch._adam_step(cpu[1], cpu[2], cpu[3], cpu[4], nil, {lr = 1e-2, step = step})
        torch._adam_step(gpu[1], gpu[2], gpu[3], gpu[4], nil, {lr = 1e-2, step = step})
      end
      for k, name in ipairs({"param", "grad", "exp_avg", "exp_avg_sq"}) do
        match(gpu[k][1], cpu[k][1], TOL[dt] * 10, what .. " " .. name)
      end
    end
  end
end)

T.run()
