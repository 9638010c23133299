-- CUDA nn kernels (im2col / col2im through conv2d, depthwise convolution,
-- max / average / adaptive pooling, batch norm, max-pool backward) and the
-- fused Adam step, each against the CPU on the same inputs: float32,
-- float64 and the half types (computed in float32 by the op layer),
-- non-contiguous inputs, padding, stride, dilation, ceil_mode, ties and
-- NaN in max pooling, empty and large inputs, and the error paths.
-- Convolution runs with cuDNN (where libcudnn loads) and without it
-- (torch.backends.cudnn.enabled), under its benchmark, deterministic and
-- TF32 flags. Runs only with a GPU.
local T = require "harness"
local test, close, eq, raises = T.test, T.close, T.eq, T.raises

-- cuDNN's float32 convolutions may use TF32 by default (torch.backends.cudnn.allow_tf32,
-- as PyTorch): the float32 comparisons here want float32 precision, so it is off for
-- this file except in the TF32 case. The binding may not exist yet: then cuDNN runs
-- with its defaults wherever it loads, and the flag cases run the default path.
local cudnn = torch.backends and torch.backends.cudnn
local cudnn_defaults = cudnn and {enabled = cudnn.enabled, benchmark = cudnn.benchmark,
                                  deterministic = cudnn.deterministic, allow_tf32 = cudnn.allow_tf32}
if cudnn then cudnn.allow_tf32 = false end

-- f() with the torch.backends.cudnn fields of `flags` set, the previous values restored
-- after (on an error too); without the binding, f() as is.
local function with_cudnn(flags, f)
  if not cudnn then return f() end
  local saved = {}
  for k in pairs(flags) do saved[k] = cudnn[k] end
  for k, v in pairs(flags) do cudnn[k] = v end
  local ok, err = pcall(f)
  for k, v in pairs(saved) do cudnn[k] = v end
  if not ok then error(err, 0) end
end

local function need_cuda()
  if not (cuda and cuda.is_available()) then T.skip("no CUDA device") end
end

local TOL = {float32 = 1e-5, float64 = 1e-12, float16 = 1e-2, bfloat16 = 2e-2}

local function shape(t) return tostring(t.shape) end

-- got (cuda) against want (cpu): device, dtype, shape, values
local function match(got, want, r, what)
  eq(got.is_cuda, true, what .. ": result on cuda")
  eq(got.dtype, want.dtype, what .. ": dtype")
  eq(shape(got), shape(want), what .. ": shape")
  if want.dtype == "torch.int64" then close(got:cpu(), want, 0, 0, what)
  else close(got:cpu():double(), want:double(), r, r, what) end
end

-- f on the CPU inputs and on their CUDA copies; every result compared.
local function same(what, r, f, ...)
  local cpu, gpu = {...}, {}
  for i, t in ipairs(cpu) do gpu[i] = t:cuda() end
  local want = table.pack(f(table.unpack(cpu)))
  local got = table.pack(f(table.unpack(gpu)))
  eq(got.n, want.n, what .. ": results")
  for i = 1, want.n do
    if want[i] ~= nil then match(got[i], want[i], r, what .. " result " .. i) end
  end
end

-- max |got - want| - rtol*|want| <= atol with tensor ops (large results)
local function close_big(got, want, rtol, atol, what)
  local g, w = got:cpu():double(), want:double()
  local worst = ((g - w):abs() - w:abs() * rtol):max():item()
  T.ok(worst <= atol, ("%s: max error past the tolerance by %g (rtol %g, atol %g)"):format(what, worst, rtol, atol))
end

local function randn(s, dt) return torch.randn(s):to(dt or "float32") end
-- a non-contiguous view with t's values: built transposed, then transposed back
local function nc(t) return t:transpose(-1, -2):contiguous():transpose(-1, -2) end

-- ---- convolution -------------------------------------------------------------------

local conv_cases = { -- x shape, weight shape, options
  {{2, 3, 9, 8}, {4, 3, 3, 3}, {padding = 1}},
  {{2, 3, 11, 10}, {5, 3, 3, 2}, {stride = {2, 3}, padding = {1, 0}, dilation = {2, 1}}},
  {{1, 4, 7, 7}, {6, 2, 3, 3}, {groups = 2, stride = 2, padding = 2}},
  {{3, 4, 8, 9}, {8, 1, 3, 3}, {groups = 4, padding = 1}},              -- depthwise, 2 outputs per channel
  {{2, 6, 9, 7}, {6, 1, 5, 3}, {groups = 6, stride = {2, 1}, padding = {2, 1}, dilation = {1, 2}}}, -- depthwise
  {{1, 2, 5, 5}, {3, 2, 1, 1}, {}},                                      -- 1x1
  {{2, 1, 28, 28}, {8, 1, 5, 5}, {stride = 1}},                          -- thin K: per-sample products
}

test("conv2d forward and backward without cuDNN (im2col, col2im, depthwise) match the CPU", function()
  need_cuda()
  with_cudnn({enabled = false}, function()
    for ci, c in ipairs(conv_cases) do
      for _, dt in ipairs({"float32", "float64", "float16"}) do
        local r = TOL[dt] * (dt == "float32" and 10 or 1)
        local x, w, b = randn(c[1], dt), randn(c[2], dt), randn({c[2][1]}, dt)
        local what = ("conv case %d %s"):format(ci, dt)
        same(what, r, function(xx, ww, bb) return torch.conv2d(xx, ww, bb, c[3]) end, x, w, b)
        same(what .. " no bias, non-contiguous x", r, function(xx, ww) return torch.conv2d(nc(xx), ww, nil, c[3]) end, x, w)
        local y = torch.conv2d(x, w, b, c[3])
        local go = randn(y:size(), dt)
        same(what .. " backward", r * 10, function(gg, xx, ww) return torch._backward.conv2d(gg, xx, ww, c[3]) end, go, x, w)
        same(what .. " backward, expanded grad", r * 10, function(xx, ww)
          return torch._backward.conv2d(torch.ones(1, 1, 1, 1, {dtype = dt}):to(xx):expand(y:size()), nc(xx), ww, c[3])
        end, x, w)
      end
    end
  end)
end)

test("conv2d with cuDNN off and on: unbatched, empty batch, conv1d, a large input", function()
  need_cuda()
  for _, enabled in ipairs({false, true}) do
    with_cudnn({enabled = enabled}, function()
      local on = enabled and " (cudnn on)" or " (cudnn off)"
      same("unbatched" .. on, 1e-4, function(x, w) return torch.conv2d(x, w, nil, {padding = 1}) end, randn({3, 6, 6}),
           randn({2, 3, 3, 3}))
      same("empty batch" .. on, 0, function(x, w) return torch.conv2d(x, w, nil, {padding = 1}) end, randn({0, 3, 6, 6}),
           randn({2, 3, 3, 3}))
      same("depthwise empty batch backward" .. on, 0, function(g, x, w) return torch._backward.conv2d(g, x, w, {groups = 3}) end,
           randn({0, 3, 4, 4}), randn({0, 3, 6, 6}), randn({3, 1, 3, 3}))
      same("conv1d" .. on, 1e-4, function(x, w, b) return torch.conv1d(x, w, b, {padding = 2, stride = 2}) end,
           randn({2, 3, 17}), randn({4, 3, 5}), randn({4}))
      same("conv1d depthwise backward" .. on, 1e-4,
           function(g, x, w) return torch._backward.conv1d(g, x, w, {groups = 3, padding = 1}) end,
           randn({2, 3, 9}), randn({2, 3, 9}), randn({3, 1, 3}))
      local x, w = randn({4, 16, 128, 128}), randn({16, 16, 3, 3})
      -- cuDNN may choose Winograd or FFT, whose rounding is not a direct sum's
      close_big(torch.conv2d(x:cuda(), w:cuda(), nil, {padding = 1}), torch.conv2d(x, w, nil, {padding = 1}), 1e-4,
                enabled and 5e-4 or 1e-4, "conv2d 4x16x128x128" .. on)
      local wd = randn({32, 1, 3, 3})
      close_big(torch.conv2d(x:cuda(), wd:cuda(), nil, {padding = 1, groups = 16}),
                torch.conv2d(x, wd, nil, {padding = 1, groups = 16}), 1e-5, 1e-5, "depthwise 4x16x128x128" .. on)
      local y = torch.conv2d(x, wd, nil, {padding = 1, groups = 16})
      local go = randn(y:size())
      local gi, gw = torch._backward.conv2d(go:cuda(), x:cuda(), wd:cuda(), {padding = 1, groups = 16})
      local ri, rw = torch._backward.conv2d(go, x, wd, {padding = 1, groups = 16})
      close_big(gi, ri, 1e-5, 1e-5, "depthwise backward input, large" .. on)
      close_big(gw, rw, 1e-4, 1e-2, "depthwise backward weight, large" .. on) -- sums of 2^16 products
    end)
  end
end)

-- ---- convolution through cuDNN ----------------------------------------------------------

-- t's values in a contiguous view one element past its storage's start: not 16-byte
-- aligned (cuDNN gets an aligned copy)
local function misaligned(t)
  local flat = t:reshape(-1)
  return torch.cat({flat:narrow(0, 0, 1), flat}):narrow(0, 1, t:numel()):view(t:size())
end

local dnn_cases = { -- x shape, weight shape, options
  {{2, 3, 9, 8}, {4, 3, 3, 3}, {padding = 1}},
  {{2, 3, 11, 10}, {6, 3, 3, 2}, {stride = {2, 3}, padding = {1, 0}, dilation = {2, 1}}},
  {{2, 4, 7, 7}, {6, 2, 3, 3}, {groups = 2, stride = 2, padding = 2}},
  {{3, 8, 8, 9}, {16, 1, 3, 3}, {groups = 8, padding = 1}},                                  -- depthwise, 2 per channel
  {{2, 6, 9, 7}, {6, 1, 5, 3}, {groups = 6, stride = {2, 1}, padding = {2, 1}, dilation = {1, 2}}}, -- depthwise
  {{4, 16, 12, 12}, {8, 16, 1, 1}, {}},                                                      -- 1x1
  {{2, 3, 6, 6}, {4, 3, 5, 5}, {padding = 3}},                                               -- padding past the kernel's half
  {{3, 1, 28, 28}, {8, 1, 5, 5}, {stride = 2}},                                              -- one input channel
  {{1, 12, 10, 10}, {12, 4, 3, 3}, {groups = 3, dilation = 2, padding = 2}},
}

-- case c = {x shape, weight shape, options} in dtype dt: every result of the forward
-- (bias, no bias on a non-contiguous x, misaligned x and weight), the backward (all
-- three gradients; a non-contiguous grad_out) and autograd with only the weight and bias
-- wanted, on cuda against the CPU
local function conv_all(what, r, dt, c, conv, bwd)
  local x, w, b, opts = randn(c[1], dt), randn(c[2], dt), randn({c[2][1]}, dt), c[3]
  same(what .. " forward", r, function(xx, ww, bb) return conv(xx, ww, bb, opts) end, x, w, b)
  same(what .. " forward, non-contiguous x, no bias", r, function(xx, ww) return conv(nc(xx), ww, nil, opts) end, x, w)
  same(what .. " forward, misaligned x and weight", r, function(xx, ww, bb)
    return conv(misaligned(xx), misaligned(ww), bb, opts)
  end, x, w, b)
  local go = randn(conv(x, w, b, opts):size(), dt)
  same(what .. " backward", r * 10, function(gg, xx, ww) return bwd(gg, xx, ww, opts) end, go, x, w)
  same(what .. " backward, non-contiguous grad_out, misaligned x", r * 10, function(gg, xx, ww)
    return bwd(nc(gg), misaligned(xx), ww, opts)
  end, go, x, w)
  same(what .. " autograd, weight and bias only", r * 10, function(gg, xx, ww, bb)
    local wl, bl = ww:clone(), bb:clone()
    wl.requires_grad, bl.requires_grad = true, true
    local loss = (conv(xx, wl, bl, opts) * gg):sum()
    loss:backward()
    return wl.grad, bl.grad
  end, go, x, w, b)
end

test("cuDNN: loaded where the build found it, flags at PyTorch's defaults", function()
  need_cuda()
  if not cudnn then T.skip("torch.backends.cudnn is not bound yet") end
  eq(cudnn_defaults.enabled, true, "enabled by default")
  eq(cudnn_defaults.benchmark, false, "benchmark off by default")
  eq(cudnn_defaults.deterministic, false, "deterministic off by default")
  eq(cudnn_defaults.allow_tf32, true, "allow_tf32 on by default")
  local v = cudnn.version and cudnn.version()
  if not v or v == 0 then T.skip("libcudnn did not load (TENSH_CUDNN_LIB): convolutions use im2col + GEMM") end
  T.ok(v >= 90000 and v < 100000, "cuDNN 9.x expected, got version " .. tostring(v))
end)

test("conv2d with cuDNN on and off matches the CPU: float32 without TF32, float64, groups, depthwise, stride, padding, dilation", function()
  need_cuda()
  for _, enabled in ipairs({true, false}) do
    with_cudnn({enabled = enabled, allow_tf32 = false}, function()
      for ci, c in ipairs(dnn_cases) do
        for _, dt in ipairs({"float32", "float64"}) do
          local r = TOL[dt] * (dt == "float32" and 10 or 1)
          local what = ("cudnn %s case %d %s"):format(enabled and "on" or "off", ci, dt)
          local runs = torch.backends._library_runs("cuda")
          conv_all(what, r, dt, c, torch.conv2d, torch._backward.conv2d)
          -- with cuDNN loaded and on, it (not the im2col fallback) computed them
          local ran = torch.backends._library_runs("cuda") - runs
          if enabled and (cudnn.version() or 0) > 0 then T.ok(ran > 0, what .. ": cuDNN never ran") end
          if not enabled then eq(ran, 0, what .. ": cuDNN ran while disabled") end
        end
      end
    end)
  end
end)

test("conv1d with cuDNN on and off matches the CPU", function()
  need_cuda()
  local cases = {
    {{2, 3, 17}, {4, 3, 5}, {padding = 2, stride = 2}},
    {{2, 6, 20}, {12, 1, 3}, {groups = 6, padding = 1, dilation = 3}},
    {{1, 4, 9}, {6, 2, 1}, {groups = 2}},
  }
  for _, enabled in ipairs({true, false}) do
    with_cudnn({enabled = enabled}, function()
      for ci, c in ipairs(cases) do
        for _, dt in ipairs({"float32", "float64"}) do
          local what = ("conv1d cudnn %s case %d %s"):format(enabled and "on" or "off", ci, dt)
          conv_all(what, TOL[dt] * 10, dt, c, torch.conv1d, torch._backward.conv1d)
        end
      end
    end)
  end
end)

test("conv2d with cuDNN: empty batch, unbatched input, half types, benchmark and deterministic", function()
  need_cuda()
  with_cudnn({enabled = true}, function()
    for _, dt in ipairs({"float32", "float64"}) do
      same("empty batch " .. dt, 0, function(x, w, b) return torch.conv2d(x, w, b, {padding = 1}) end,
           randn({0, 3, 6, 6}, dt), randn({4, 3, 3, 3}, dt), randn({4}, dt))
      same("empty batch backward " .. dt, 0, function(g, x, w) return torch._backward.conv2d(g, x, w, {padding = 1}) end,
           randn({0, 4, 6, 6}, dt), randn({0, 3, 6, 6}, dt), randn({4, 3, 3, 3}, dt))
      same("empty batch depthwise backward " .. dt, 0, function(g, x, w) return torch._backward.conv2d(g, x, w, {groups = 3}) end,
           randn({0, 3, 4, 4}, dt), randn({0, 3, 6, 6}, dt), randn({3, 1, 3, 3}, dt))
    end
    same("unbatched", 1e-4, function(x, w, b) return torch.conv2d(x, w, b, {padding = 1}) end, randn({3, 6, 6}),
         randn({2, 3, 3, 3}), randn({2}))
    -- float16 and bfloat16 are computed in float32 by the op layer: cuDNN's float32 path
    for _, dt in ipairs({"float16", "bfloat16"}) do
      local x, w = randn({2, 4, 8, 8}, dt), randn({6, 4, 3, 3}, dt)
      same("conv2d " .. dt, TOL[dt], function(xx, ww) return torch.conv2d(xx, ww, nil, {padding = 1}) end, x, w)
      same("conv2d backward " .. dt, TOL[dt] * 2, function(g, xx, ww) return torch._backward.conv2d(g, xx, ww, {padding = 1}) end,
           randn({2, 6, 8, 8}, dt), x, w)
    end
  end)
  local x, w, b = randn({4, 8, 10, 10}), randn({8, 4, 3, 3}), randn({8})
  local opts = {groups = 2, padding = 1, stride = 2}
  local go = randn(torch.conv2d(x, w, b, opts):size())
  for _, flags in ipairs({{benchmark = true}, {deterministic = true}, {benchmark = true, deterministic = true}}) do
    with_cudnn(flags, function()
      local what = ("benchmark %s, deterministic %s"):format(tostring(flags.benchmark), tostring(flags.deterministic))
      -- twice: the second call takes the cached choice
      for round = 1, 2 do
        local wr = what .. " round " .. round
        same(wr .. " forward", 1e-4, function(xx, ww, bb) return torch.conv2d(xx, ww, bb, opts) end, x, w, b)
        same(wr .. " backward", 1e-3, function(gg, xx, ww) return torch._backward.conv2d(gg, xx, ww, opts) end, go, x, w)
      end
      if flags.deterministic then -- the same bits every time
        local a = table.pack(torch._backward.conv2d(go:cuda(), x:cuda(), w:cuda(), opts))
        local c = table.pack(torch._backward.conv2d(go:cuda(), x:cuda(), w:cuda(), opts))
        for i = 1, 3 do close(c[i]:cpu(), a[i]:cpu(), 0, 0, what .. " rerun, result " .. i) end
      end
    end)
  end
end)

test("conv2d with cuDNN and TF32 allowed stays within TF32's tolerance", function()
  need_cuda()
  with_cudnn({enabled = true, allow_tf32 = true}, function()
    local x, w, b = randn({4, 64, 16, 16}), randn({32, 64, 3, 3}), randn({32})
    local opts = {padding = 1}
    close_big(torch.conv2d(x:cuda(), w:cuda(), b:cuda(), opts), torch.conv2d(x, w, b, opts), 1e-2, 1e-1, "tf32 forward")
    local go = randn({4, 32, 16, 16})
    local gi, gw, gb = torch._backward.conv2d(go:cuda(), x:cuda(), w:cuda(), opts)
    local ri, rw, rb = torch._backward.conv2d(go, x, w, opts)
    close_big(gi, ri, 1e-2, 1e-1, "tf32 grad_input")
    close_big(gw, rw, 1e-2, 1e-1, "tf32 grad_weight")
    close_big(gb, rb, 1e-4, 1e-3, "grad_bias") -- a plain sum, no TF32
  end)
end)

-- ---- pooling -------------------------------------------------------------------------

local pool_cases = { -- x shape, kernel, stride, padding, dilation, ceil_mode
  {{2, 3, 8, 8}, 2, 2, 0, 1, false},
  {{2, 2, 7, 6}, 3, 2, 1, 1, true},
  {{1, 2, 8, 7}, {3, 2}, {2, 1}, {1, 0}, {2, 1}, false},
  {{2, 1, 5, 5}, 2, 2, 0, 1, true},
  {{1, 3, 9, 8}, {2, 3}, {3, 2}, {1, 1}, 1, true},
  {{3, 2, 6, 6}, 3, 1, 1, 2, false},
}

test("max_pool2d values, indices and backward match the CPU", function()
  need_cuda()
  for ci, c in ipairs(pool_cases) do
    local opts = {stride = c[3], padding = c[4], dilation = c[5], ceil_mode = c[6], return_indices = true}
    for _, dt in ipairs({"float32", "float64", "float16", "bfloat16"}) do
      local x = randn(c[1], dt)
      local what = ("max_pool2d case %d %s"):format(ci, dt)
      same(what, 0, function(xx) return torch.max_pool2d(xx, c[2], opts) end, x)
      same(what .. " non-contiguous", 0, function(xx) return torch.max_pool2d(nc(xx), c[2], opts) end, x)
      local y, idx = torch.max_pool2d(x, c[2], opts)
      same(what .. " backward", TOL[dt], function(g, i, xx) return torch._backward.max_pool2d(g, i, xx) end,
           randn(y:size(), dt), idx, x)
    end
  end
end)

test("max_pool2d: the first index on ties, NaN wins (the last NaN), infinities", function()
  need_cuda()
  local nan, inf = 0 / 0, math.huge
  local x = torch.tensor({{{{1, 1, 2, 2}, {1, 1, 2, 2}, {nan, 3, 5, nan}, {4, nan, nan, 5}}}})
  same("ties and NaN", 0, function(xx) return torch.max_pool2d(xx, 2, {return_indices = true}) end, x)
  same("overlapping windows", 0, function(xx) return torch.max_pool2d(xx, 3, {stride = 1, padding = 1, return_indices = true}) end, x)
  local xi = torch.tensor({{{{-inf, -inf}, {-inf, -inf}}}})
  same("all -inf", 0, function(xx) return torch.max_pool2d(xx, 2, {return_indices = true}) end, xi)
end)

test("max_pool2d backward: gradients accumulate, bad indices fail as on the CPU", function()
  need_cuda()
  local x = torch.tensor({{{{1, 2, 3}, {9, 4, 5}, {6, 7, 8}}}}, {dtype = "float64"})
  local _, idx = torch.max_pool2d(x, 2, {stride = 1, return_indices = true})
  same("overlapping windows accumulate", 0, function(g, i, xx) return torch._backward.max_pool2d(g, i, xx) end,
       torch.ones(1, 1, 2, 2, {dtype = "float64"}), idx, x)
  local bad = torch.tensor({{{{0, 1}, {99, 2}}}})
  raises(function() torch._backward.max_pool2d(torch.ones(1, 1, 2, 2):cuda(), bad:cuda(), x:cuda()) end,
         "max_pool2d_backward: index 99 is out of bounds for an input plane of 9 elements")
  raises(function() torch._backward.max_pool2d(torch.ones(1, 1, 2, 2):cuda(), (bad - 100):cuda(), x:cuda()) end,
         "is out of bounds for an input plane of 9 elements")
  -- the session goes on: a good call after the error
  same("after an error", 0, function(g, i, xx) return torch._backward.max_pool2d(g, i, xx) end,
       torch.ones(1, 1, 2, 2, {dtype = "float64"}), idx, x)
end)

test("avg_pool2d forward and backward: count_include_pad, ceil_mode, non-contiguous", function()
  need_cuda()
  for ci, c in ipairs(pool_cases) do
    if c[5] == 1 then
      for _, cp in ipairs({true, false}) do
        local opts = {stride = c[3], padding = c[4], ceil_mode = c[6], count_include_pad = cp}
        for _, dt in ipairs({"float32", "float64", "bfloat16"}) do
          local x = randn(c[1], dt)
          local what = ("avg_pool2d case %d %s count_include_pad %s"):format(ci, dt, tostring(cp))
          same(what, TOL[dt], function(xx) return torch.avg_pool2d(nc(xx), c[2], opts) end, x)
          local y = torch.avg_pool2d(x, c[2], opts)
          same(what .. " backward", TOL[dt], function(g, xx) return torch._backward.avg_pool2d(nc(g), xx, c[2], opts) end,
               randn(y:size(), dt), x)
        end
      end
    end
  end
end)

test("adaptive_avg_pool2d forward and backward, down and up sampling", function()
  need_cuda()
  for ci, c in ipairs({{{2, 2, 7, 5}, {3, 2}}, {{1, 3, 4, 4}, 1}, {{1, 1, 5, 3}, {7, 4}}, {{2, 1, 6, 6}, 3},
                       {{2, 3, 13, 17}, {5, 4}}, {{1, 2, 4, 4}, {0, 2}}}) do
    for _, dt in ipairs({"float32", "float64", "float16"}) do
      local x = randn(c[1], dt)
      local what = ("adaptive case %d %s"):format(ci, dt)
      same(what, TOL[dt], function(xx) return torch.adaptive_avg_pool2d(nc(xx), c[2]) end, x)
      local y = torch.adaptive_avg_pool2d(x, c[2])
      same(what .. " backward", TOL[dt], function(g, xx) return torch._backward.adaptive_avg_pool2d(g, xx) end,
           randn(y:size(), dt), x)
    end
  end
end)

-- A grad_output of another float dtype than the input's is converted to the input's: the kernels read
-- it as the input's compute type (max_pool2d's read a float16 grad as float32, past its block's end).
-- The reference is the backward of the grad converted by hand to the input's dtype, on the CPU (as
-- PyTorch's engine converts it; the half inputs compute in float32, hence their tolerance).
test("pool backward with a float16 / bfloat16 grad_output of another dtype than the input's", function()
  need_cuda()
  local x4 = randn({2, 3, 7, 6})
  local backward = {
    max_pool2d = function(g, xx, idx) return torch._backward.max_pool2d(g, idx, xx) end,
    avg_pool2d = function(g, xx) return torch._backward.avg_pool2d(g, xx, 3, {stride = 2, padding = 1}) end,
    adaptive_avg_pool2d = function(g, xx) return torch._backward.adaptive_avg_pool2d(g, xx) end,
  }
  for _, xdt in ipairs({"float32", "float64", "float16", "bfloat16"}) do
    local x = x4:to(xdt)
    local _, idx = torch.max_pool2d(x, 2, {return_indices = true})
    local out_size = {max_pool2d = idx:size(), avg_pool2d = torch.avg_pool2d(x, 3, {stride = 2, padding = 1}):size(),
                      adaptive_avg_pool2d = torch.adaptive_avg_pool2d(x, {3, 4}):size()}
    for _, gdt in ipairs({"float16", "bfloat16"}) do
      if gdt ~= xdt then
        for name, bw in pairs(backward) do
          local g = randn(out_size[name], gdt)
          local what = ("%s backward, %s input, %s grad"):format(name, xdt, gdt)
          local want = bw(g:to(xdt), x, idx)
          close(bw(g, x, idx):double(), want:double(), TOL[xdt], TOL[xdt], what .. " on the cpu")
          same(what, TOL[xdt], bw, g, x, idx)
        end
      end
    end
  end
end)

test("pooling over a large input (over 2^20 elements)", function()
  need_cuda()
  local x = randn({8, 32, 64, 80})
  local y, idx = torch.max_pool2d(x:cuda(), 3, {stride = 2, padding = 1, return_indices = true})
  local ry, ridx = torch.max_pool2d(x, 3, {stride = 2, padding = 1, return_indices = true})
  close_big(y, ry, 0, 0, "max_pool2d values")
  close_big(idx:double(), ridx:double(), 0, 0, "max_pool2d indices")
  close_big(torch.avg_pool2d(x:cuda(), 3, {stride = 2, padding = 1}), torch.avg_pool2d(x, 3, {stride = 2, padding = 1}),
            1e-6, 1e-6, "avg_pool2d")
  close_big(torch.adaptive_avg_pool2d(x:cuda(), {7, 9}), torch.adaptive_avg_pool2d(x, {7, 9}), 1e-6, 1e-6, "adaptive")
  local go = randn(ry:size())
  close_big(torch._backward.max_pool2d(go:cuda(), idx, x:cuda()), torch._backward.max_pool2d(go, ridx, x), 1e-6, 1e-6,
            "max_pool2d backward")
end)

-- ---- batch norm ---------------------------------------------------------------------

local bn_shapes = {{16, 5}, {4, 3, 7}, {3, 4, 5, 6}, {2, 3, 32, 20}, {5, 2, 1000}, {200, 7, 3}}

test("batch_norm training and eval, forward and backward, match the CPU", function()
  need_cuda()
  for si, xs in ipairs(bn_shapes) do
    local C = xs[2]
    for _, dt in ipairs({"float32", "float64", "float16"}) do
      local r = TOL[dt] * (dt == "float32" and 10 or 1)
      local x, w, b = randn(xs, dt), randn({C}, dt), randn({C}, dt)
      local rm, rv = randn({C}, dt), torch.rand({C}):to(dt) + 0.5
      local what = ("batch_norm shape %d %s"):format(si, dt)
      for _, training in ipairs({true, false}) do
        local tw = what .. (training and " training" or " eval")
        -- running stats are updated in place: each side gets its own copies
        same(tw, r, function(xx, m, v, ww, bb) return torch.batch_norm(nc(xx), m, v, ww, bb, training, 0.1, 1e-5) end,
             x, rm:clone(), rv:clone(), w, b)
        local mc, vc = rm:clone(), rv:clone()
        local mg, vg = rm:cuda(), rv:cuda()
        torch.batch_norm(x, mc, vc, w, b, training, 0.1, 1e-5)
        torch.batch_norm(x:cuda(), mg, vg, w:cuda(), b:cuda(), training, 0.1, 1e-5)
        match(mg, mc, r, tw .. " running_mean")
        match(vg, vc, r, tw .. " running_var")
        local _, sm, si2 = torch._nn.batch_norm(x, rm, rv, w, b, training, 0.1, 1e-5)
        same(tw .. " backward", r * 10, function(g, xx, ww, m, s) return torch._backward.batch_norm(g, xx, ww, m, s, training) end,
             randn(xs, dt), x, w, sm, si2)
      end
      same(what .. " no weight", r, function(xx) return torch.batch_norm(xx, nil, nil, nil, nil, true, 0.1, 1e-5) end, x)
    end
  end
end)

test("batch_norm: statistics stay accurate far from zero, empty batches, large inputs", function()
  need_cuda()
  local x = torch.randn({64, 3, 50}):double() * 0.01 + 10000
  local _, m1, s1 = torch._nn.batch_norm(x:cuda(), nil, nil, nil, nil, true, 0.1, 0)
  local _, m2, s2 = torch._nn.batch_norm(x, nil, nil, nil, nil, true, 0.1, 0)
  match(m1, m2, 1e-12, "mean far from zero")
  match(s1, s2, 1e-8, "invstd far from zero (Welford, not sum of squares)")
  local xf = x:float()
  local _, m3, s3 = torch._nn.batch_norm(xf:cuda(), nil, nil, nil, nil, true, 0.1, 0)
  local _, m4, s4 = torch._nn.batch_norm(xf, nil, nil, nil, nil, true, 0.1, 0)
  match(m3, m4, 1e-6, "float32 mean far from zero")
  match(s3, s4, 1e-4, "float32 invstd far from zero")
  -- an empty batch: NaN statistics, an empty result
  same("empty batch", 0, function(xx) return torch.batch_norm(xx, nil, nil, nil, nil, true, 0.1, 1e-5) end,
       randn({0, 3, 4}))
  same("empty batch backward", 0, function(g, xx, ww, m, s) return torch._backward.batch_norm(g, xx, ww, m, s, true) end,
       randn({0, 3, 4}), randn({0, 3, 4}), randn({3}), randn({3}), torch.ones(3))
  local big = randn({16, 8, 96, 96})
  local y1, bm1, bs1 = torch._nn.batch_norm(big:cuda(), nil, nil, nil, nil, true, 0.1, 1e-5)
  local y2, bm2, bs2 = torch._nn.batch_norm(big, nil, nil, nil, nil, true, 0.1, 1e-5)
  close_big(y1, y2, 1e-5, 1e-5, "batch_norm 16x8x96x96")
  close_big(bm1, bm2, 1e-5, 1e-6, "mean, large")
  close_big(bs1, bs2, 1e-5, 1e-6, "invstd, large")
  local go = randn(big:size())
  local g1, w1, b1 = torch._backward.batch_norm(go:cuda(), big:cuda(), torch.ones(8):cuda(), bm1, bs1, true)
  local g2, w2, b2 = torch._backward.batch_norm(go, big, torch.ones(8), bm2, bs2, true)
  close_big(g1, g2, 1e-4, 1e-4, "grad input, large")
  close_big(w1, w2, 1e-4, 1e-2, "grad weight, large")
  close_big(b1, b2, 1e-4, 1e-2, "grad bias, large")
  -- many short channels: (N, C) with C large
  same("batch_norm (4096, 300)", 1e-4, function(xx) return torch.batch_norm(xx, nil, nil, nil, nil, true, 0.1, 1e-5) end,
       randn({4096, 300}))
end)

-- ---- the fused Adam step ---------------------------------------------------------------

-- A parameter group: sizes cover one chunk, several chunks, tails that are no
-- multiple of the vector width, an empty tensor and a misaligned view; dtypes mixed.
local function group(dts)
  local sizes = {{7}, {16384 * 2 + 5}, {33, 17}, {0}, {4, 4}, {1}}
  local g = {p = {}, g = {}, m = {}, v = {}, vm = {}}
  for i, s in ipairs(sizes) do
    local dt = dts[(i - 1) % #dts + 1]
    g.p[i], g.g[i] = randn(s, dt), randn(s, dt)
    g.m[i], g.v[i], g.vm[i] = randn(s, dt) * 0.1, torch.rand(s):to(dt) * 0.1, torch.rand(s):to(dt) * 0.2
  end
  -- one element past the start of its storage: not 16-byte aligned
  g.base = randn({1001})
  g.p[#g.p + 1] = g.base:narrow(0, 1, 1000)
  g.g[#g.g + 1], g.m[#g.m + 1], g.v[#g.v + 1], g.vm[#g.vm + 1] = randn({1000}), randn({1000}), torch.rand({1000}), torch.rand({1000})
  return g
end

local function to_cuda(g)
  local r = {}
  for _, k in ipairs({"p", "g", "m", "v", "vm"}) do
    r[k] = {}
    for i, t in ipairs(g[k]) do r[k][i] = t:cuda() end
  end
  r.p[#r.p] = g.base:cuda():narrow(0, 1, 1000) -- misaligned on the device too
  return r
end

test("_adam_step on cuda matches the CPU: Adam, AdamW, amsgrad, maximize, mixed dtypes", function()
  need_cuda()
  local configs = {
    {lr = 1e-2},
    {lr = 1e-3, weight_decay = 0.1},
    {lr = 1e-3, weight_decay = 0.05, decoupled = true},
    {lr = 2e-3, amsgrad = true, maximize = true, weight_decay = 0.01},
    {lr = 1e-2, beta1 = 0.8, beta2 = 0.95, eps = 1e-6, amsgrad = true, decoupled = true, weight_decay = 0.1},
  }
  for ci, cfg in ipairs(configs) do
    for _, dts in ipairs({{"float32"}, {"float64"}, {"float32", "float64"}}) do
      local cpu = group(dts)
      local gpu = to_cuda(cpu)
      for step = 1, 3 do
        local o = {}
        for k, v in pairs(cfg) do o[k] = v end
        o.step = step
        torch._adam_step(cpu.p, cpu.g, cpu.m, cpu.v, cfg.amsgrad and cpu.vm or nil, o)
        torch._adam_step(gpu.p, gpu.g, gpu.m, gpu.v, cfg.amsgrad and gpu.vm or nil, o)
      end
      for _, k in ipairs({"p", "m", "v", "vm"}) do
        for i = 1, #cpu[k] do
          local r = cpu[k][i].dtype == "torch.float64" and 1e-12 or 1e-5
          match(gpu[k][i], cpu[k][i], r, ("adam config %d %s %s[%d]"):format(ci, table.concat(dts, "+"), k, i))
        end
      end
    end
  end
end)

test("optim.Adam on a cuda model takes the same steps as on the CPU", function()
  need_cuda()
  local w0 = randn({64, 32})
  local wc, wg = w0:clone(), w0:cuda()
  wc.requires_grad, wg.requires_grad = true, true
  local oc, og = optim.Adam({wc}, {lr = 1e-2}), optim.Adam({wg}, {lr = 1e-2})
  local x = randn({16, 64})
  for _ = 1, 4 do
    oc:zero_grad()
    og:zero_grad()
    local lc, lg = x:matmul(wc):pow(2):sum(), x:cuda():matmul(wg):pow(2):sum()
    lc:backward()
    lg:backward()
    oc:step()
    og:step()
  end
  close(wg:detach():cpu(), wc:detach(), 1e-4, 1e-5, "weights after 4 Adam steps")
end)

T.run()
