-- Neural-network ops (conv1d/conv2d, max/avg/adaptive-avg pooling,
-- batch_norm, layer_norm, embedding): each forward against a direct loop in
-- Lua doubles, each backward (torch._backward) against central finite
-- differences of sum(out * R) in float64, and every error path.
local T = require "harness"
local test, close, eq, raises = T.test, T.close, T.eq, T.raises
local F64 = {dtype = "float64"}
local floor, ceil = math.floor, math.ceil

-- ---- helpers -----------------------------------------------------------------

local function numel(shape)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  return n
end

local function rand_flat(shape, lo, hi)
  local t = {}
  for i = 1, numel(shape) do t[i] = (lo or -1) + ((hi or 1) - (lo or -1)) * math.random() end
  return t
end

-- a float64 tensor of shape from a flat list (a 1-element dim 0 list for 0 elements is avoided by callers)
local function tensor(flat, shape, dt) return torch.tensor(flat, {dtype = dt or "float64"}):reshape(shape) end

-- element (0-based indices) of a flat row-major list with the given shape
local function at(flat, shape, ...)
  local idx, k = 0, {...}
  for d = 1, #shape do idx = idx * shape[d] + k[d] end
  return flat[idx + 1]
end

-- the same values, laid out as a non-contiguous tensor: built with the last two
-- dims swapped, then transposed back
local function noncontig(flat, shape)
  local nd = #shape
  local sw = {table.unpack(shape)}
  sw[nd - 1], sw[nd] = shape[nd], shape[nd - 1]
  local out, i = {}, 0
  local lead = numel(shape) // (shape[nd - 1] * shape[nd])
  for l = 0, lead - 1 do
    for a = 0, shape[nd] - 1 do
      for b = 0, shape[nd - 1] - 1 do
        i = i + 1
        out[i] = flat[l * shape[nd - 1] * shape[nd] + b * shape[nd] + a + 1]
      end
    end
  end
  local t = tensor(out, sw):transpose(nd - 2, nd - 1)
  assert(not t:is_contiguous(), "noncontig: expected a non-contiguous view")
  return t
end

-- a tensor's shape as a plain Lua list
local function shape(t)
  local r = {}
  for d = 1, t:dim() do r[d] = t:size(d - 1) end
  return r
end

local function pair(v) if type(v) == "table" then return v[1], v[2] end return v, v end

-- Central differences of L = sum(f(inputs) * R) with respect to inputs[k] (flat lists).
local function numgrad(f, inputs, shapes, R, k)
  local function loss()
    local ts = {}
    for i = 1, #inputs do ts[i] = inputs[i] and tensor(inputs[i], shapes[i]) or nil end
    local out = T.flat(f(table.unpack(ts, 1, #inputs)))
    local s = 0
    for i = 1, #out do s = s + out[i] * R[i] end
    return s
  end
  local g, l, h = {}, inputs[k], 1e-6
  for i = 1, #l do
    local v = l[i]
    l[i] = v + h
    local a = loss()
    l[i] = v - h
    local b = loss()
    l[i] = v
    g[i] = (a - b) / (2 * h)
  end
  return g
end

-- Checks each listed analytic gradient against finite differences.
local function check_grads(name, f, inputs, shapes, R, grads)
  for k, gk in pairs(grads) do
    close(gk, numgrad(f, inputs, shapes, R, k), 1e-5, 1e-6, name .. ": gradient of input " .. k)
  end
end

-- ---- references ------------------------------------------------------------------

-- x (N, C, H, W), w (O, C/G, kh, kw), b (O) or nil: flat lists -> flat out, shape
local function conv2d_ref(x, xs, w, ws, b, stride, padding, dilation, G)
  local N, C, H, W = table.unpack(xs)
  local O, Cg, kh, kw = table.unpack(ws)
  local sh, sw = pair(stride)
  local ph, pw = pair(padding)
  local dh, dw = pair(dilation)
  local Ho = floor((H + 2 * ph - dh * (kh - 1) - 1) / sh) + 1
  local Wo = floor((W + 2 * pw - dw * (kw - 1) - 1) / sw) + 1
  local Og = O // G
  local out = {}
  for n = 0, N - 1 do
    for o = 0, O - 1 do
      local g = o // Og
      for y = 0, Ho - 1 do
        for xx = 0, Wo - 1 do
          local s = b and b[o + 1] or 0
          for c = 0, Cg - 1 do
            for i = 0, kh - 1 do
              for j = 0, kw - 1 do
                local iy, ix = y * sh - ph + i * dh, xx * sw - pw + j * dw
                if iy >= 0 and iy < H and ix >= 0 and ix < W then
                  s = s + at(x, xs, n, g * Cg + c, iy, ix) * at(w, ws, o, c, i, j)
                end
              end
            end
          end
          out[#out + 1] = s
        end
      end
    end
  end
  return out, {N, O, Ho, Wo}
end

local function pool_out(n, k, s, p, d, ceil_mode)
  local o = floor((n + 2 * p - d * (k - 1) - 1 + (ceil_mode and s - 1 or 0)) / s) + 1
  if ceil_mode and (o - 1) * s >= n + p then o = o - 1 end
  return o
end

-- max pool: values and flat h*W+w indices
local function maxpool_ref(x, xs, k, s, p, d, ceil_mode)
  local N, C, H, W = table.unpack(xs)
  local kh, kw = pair(k)
  local sh, sw = pair(s or k)
  local ph, pw = pair(p or 0)
  local dh, dw = pair(d or 1)
  local Ho, Wo = pool_out(H, kh, sh, ph, dh, ceil_mode), pool_out(W, kw, sw, pw, dw, ceil_mode)
  local out, idx = {}, {}
  for n = 0, N - 1 do
    for c = 0, C - 1 do
      for y = 0, Ho - 1 do
        for xx = 0, Wo - 1 do
          local best, bi = -math.huge, nil
          for i = 0, kh - 1 do
            for j = 0, kw - 1 do
              local iy, ix = y * sh - ph + i * dh, xx * sw - pw + j * dw
              if iy >= 0 and iy < H and ix >= 0 and ix < W then
                local v = at(x, xs, n, c, iy, ix)
                if not bi or v > best or v ~= v then best, bi = v, iy * W + ix end -- NaN wins, as torch
              end
            end
          end
          out[#out + 1], idx[#idx + 1] = best, bi
        end
      end
    end
  end
  return out, idx, {N, C, Ho, Wo}
end

local function avgpool_ref(x, xs, k, s, p, ceil_mode, count_pad)
  local N, C, H, W = table.unpack(xs)
  local kh, kw = pair(k)
  local sh, sw = pair(s or k)
  local ph, pw = pair(p or 0)
  local Ho, Wo = pool_out(H, kh, sh, ph, 1, ceil_mode), pool_out(W, kw, sw, pw, 1, ceil_mode)
  local out = {}
  for n = 0, N - 1 do
    for c = 0, C - 1 do
      for y = 0, Ho - 1 do
        for xx = 0, Wo - 1 do
          local hs, ws = y * sh - ph, xx * sw - pw
          local he, we = math.min(hs + kh, H + ph), math.min(ws + kw, W + pw)
          local pool = (he - hs) * (we - ws)
          local s, cnt = 0, 0
          for iy = math.max(hs, 0), math.min(he, H) - 1 do
            for ix = math.max(ws, 0), math.min(we, W) - 1 do
              s, cnt = s + at(x, xs, n, c, iy, ix), cnt + 1
            end
          end
          out[#out + 1] = s / (count_pad and pool or cnt)
        end
      end
    end
  end
  return out, {N, C, Ho, Wo}
end

local function adaptive_ref(x, xs, oh, ow)
  local N, C, H, W = table.unpack(xs)
  local out = {}
  for n = 0, N - 1 do
    for c = 0, C - 1 do
      for i = 0, oh - 1 do
        local h0, h1 = floor(i * H / oh), ceil((i + 1) * H / oh)
        for j = 0, ow - 1 do
          local w0, w1 = floor(j * W / ow), ceil((j + 1) * W / ow)
          local s = 0
          for y = h0, h1 - 1 do for xx = w0, w1 - 1 do s = s + at(x, xs, n, c, y, xx) end end
          out[#out + 1] = s / ((h1 - h0) * (w1 - w0))
        end
      end
    end
  end
  return out, {N, C, oh, ow}
end

-- per-channel mean and biased variance of x (N, C, S...) flat
local function channel_stats(x, xs)
  local N, C = xs[1], xs[2]
  local S = numel(xs) // (N * C)
  local mean, var = {}, {}
  for c = 0, C - 1 do
    local s = 0
    for n = 0, N - 1 do for k = 0, S - 1 do s = s + x[(n * C + c) * S + k + 1] end end
    mean[c + 1] = s / (N * S)
    local v = 0
    for n = 0, N - 1 do for k = 0, S - 1 do v = v + (x[(n * C + c) * S + k + 1] - mean[c + 1]) ^ 2 end end
    var[c + 1] = v / (N * S)
  end
  return mean, var, N * S
end

local function bn_apply(x, xs, mean, var, w, b, eps)
  local N, C = xs[1], xs[2]
  local S = numel(xs) // (N * C)
  local out = {}
  for n = 0, N - 1 do
    for c = 0, C - 1 do
      for k = 0, S - 1 do
        local i = (n * C + c) * S + k + 1
        out[i] = (x[i] - mean[c + 1]) / math.sqrt(var[c + 1] + eps) * (w and w[c + 1] or 1) + (b and b[c + 1] or 0)
      end
    end
  end
  return out
end

-- ---- conv2d ----------------------------------------------------------------------

local conv_cases = {
  -- N, C, H, W, O, kh, kw, stride, padding, dilation, groups, bias, noncontig
  {1, 3, 5, 6, 4, 3, 3, 1, 0, 1, 1, true, false},
  {2, 3, 7, 6, 2, 3, 2, {2, 1}, {1, 0}, 1, 1, true, true},
  {3, 4, 6, 7, 6, 2, 3, 2, 1, 2, 2, false, false},
  {2, 4, 8, 5, 4, 3, 3, 1, 2, {2, 1}, 4, true, true},  -- depthwise
  {2, 3, 6, 6, 6, 3, 3, 2, 1, 1, 3, false, false},     -- depthwise, multiplier 2
  {2, 2, 5, 5, 3, 1, 1, 1, 0, 1, 1, true, true},       -- 1x1
  {1, 6, 4, 5, 4, 2, 2, {1, 2}, 1, 1, 2, true, false},
}

local function conv_opts(c) return {stride = c[8], padding = c[9], dilation = c[10], groups = c[11]} end

test("conv2d matches a direct loop: strides, paddings, dilations, groups, depthwise, non-contiguous", function()
  for ci, c in ipairs(conv_cases) do
    local N, C, H, W, O, kh, kw, _, _, _, G, hasb, nc = table.unpack(c)
    local xs, ws = {N, C, H, W}, {O, C // G, kh, kw}
    local x, w, b = rand_flat(xs), rand_flat(ws), hasb and rand_flat({O}) or nil
    local ref, rs = conv2d_ref(x, xs, w, ws, b, c[8], c[9], c[10], G)
    local xt = nc and noncontig(x, xs) or tensor(x, xs)
    local y = torch.conv2d(xt, tensor(w, ws), b and tensor(b, {O}), conv_opts(c))
    eq(T.fmt(shape(y)), T.fmt(rs), "case " .. ci .. " shape")
    eq(y.dtype, "torch.float64", "case " .. ci .. " dtype")
    close(y, ref, 1e-10, 1e-12, "conv2d case " .. ci)
  end
end)

test("conv2d: float32, float16 and bfloat16 agree with the float64 reference", function()
  local xs, ws = {2, 4, 6, 6}, {4, 2, 3, 3}
  local x, w, b = rand_flat(xs), rand_flat(ws), rand_flat({4})
  for _, G in ipairs({2, 4 // 2}) do
    local ref = conv2d_ref(x, xs, w, {4, 4 // G, 3, 3}, b, 1, 1, 1, G)
    ws = {4, 4 // G, 3, 3}
    for dt, tol in pairs({float32 = 1e-5, float16 = 2e-2, bfloat16 = 8e-2}) do
      local y = torch.conv2d(tensor(x, xs, dt), tensor(w, ws, dt), tensor(b, {4}, dt), {padding = 1, groups = G})
      eq(y.dtype, "torch." .. dt, dt .. " result dtype")
      close(y, ref, tol, tol, "conv2d " .. dt)
    end
  end
  -- depthwise in float32
  local wd = rand_flat({8, 1, 3, 3})
  local ref = conv2d_ref(x, xs, wd, {8, 1, 3, 3}, nil, 2, 1, 1, 4)
  close(torch.conv2d(tensor(x, xs, "float32"), tensor(wd, {8, 1, 3, 3}, "float32"), nil, {stride = 2, padding = 1, groups = 4}),
        ref, 1e-5, 1e-5, "depthwise float32")
end)

test("conv2d: unbatched (C, H, W) input, empty batch, conv1d", function()
  local xs, ws = {1, 3, 5, 5}, {2, 3, 3, 3}
  local x, w = rand_flat(xs), rand_flat(ws)
  local ref = conv2d_ref(x, xs, w, ws, nil, 1, 1, 1, 1)
  local y = torch.conv2d(tensor(x, {3, 5, 5}), tensor(w, ws), nil, {padding = 1})
  eq(T.fmt(shape(y)), T.fmt({2, 5, 5}), "unbatched shape")
  close(y, ref, 1e-10, 1e-12, "unbatched conv2d")
  local e = torch.conv2d(torch.zeros(0, 3, 5, 5, F64), tensor(w, ws), nil, {padding = 1})
  eq(T.fmt(shape(e)), T.fmt({0, 2, 5, 5}), "empty batch shape")
  -- conv1d is conv2d over a height of 1
  local x1, w1, b1 = rand_flat({2, 4, 9}), rand_flat({6, 2, 3}), rand_flat({6})
  local r1, rs1 = conv2d_ref(x1, {2, 4, 1, 9}, w1, {6, 2, 1, 3}, b1, {1, 2}, {0, 1}, {1, 2}, 2)
  local y1 = torch.conv1d(tensor(x1, {2, 4, 9}), tensor(w1, {6, 2, 3}), tensor(b1, {6}),
                          {stride = 2, padding = 1, dilation = 2, groups = 2})
  eq(T.fmt(shape(y1)), T.fmt({2, 6, rs1[4]}), "conv1d shape")
  close(y1, r1, 1e-10, 1e-12, "conv1d")
end)

test("conv2d backward matches finite differences (groups, depthwise, stride, dilation, padding)", function()
  local cases = {
    {2, 2, 4, 5, 3, 2, 3, {2, 1}, {1, 0}, 1, 1},
    {1, 4, 5, 4, 4, 3, 2, 1, 1, {2, 1}, 2},
    {2, 3, 4, 4, 6, 3, 3, 2, 1, 1, 3}, -- depthwise
  }
  for ci, c in ipairs(cases) do
    local N, C, H, W, O, kh, kw, _, _, _, G = table.unpack(c)
    local xs, ws = {N, C, H, W}, {O, C // G, kh, kw}
    local x, w, b = rand_flat(xs), rand_flat(ws), rand_flat({O})
    local opts = conv_opts(c)
    local f = function(xt, wt, bt) return torch.conv2d(xt, wt, bt, opts) end
    local y = f(tensor(x, xs), tensor(w, ws), tensor(b, {O}))
    local R = rand_flat(shape(y))
    local gi, gw, gb = torch._backward.conv2d(tensor(R, shape(y)), noncontig(x, xs), tensor(w, ws), opts)
    eq(T.fmt(shape(gi)), T.fmt(xs), "grad_input shape")
    eq(T.fmt(shape(gw)), T.fmt(ws), "grad_weight shape")
    check_grads("conv2d case " .. ci, f, {x, w, b}, {xs, ws, {O}}, R, {gi, gw, gb})
  end
  -- conv1d backward, unbatched
  local x, w = rand_flat({3, 7}), rand_flat({2, 3, 3})
  local opts = {stride = 2, padding = 1}
  local f = function(xt, wt) return torch.conv1d(xt, wt, nil, opts) end
  local y = f(tensor(x, {3, 7}), tensor(w, {2, 3, 3}))
  local R = rand_flat(shape(y))
  local gi, gw = torch._backward.conv1d(tensor(R, shape(y)), tensor(x, {3, 7}), tensor(w, {2, 3, 3}), opts)
  check_grads("conv1d", f, {x, w}, {{3, 7}, {2, 3, 3}}, R, {gi, gw})
end)

-- float32 convolution runs on oneDNN when the build has it, and on im2col + GEMM with
-- torch.backends.mkldnn.enabled = false: both against float64 (whose backward the finite
-- differences above check), forward and backward, on shapes wide enough for oneDNN's
-- blocked kernels too.
T.cpu_test("conv2d float32 on oneDNN and on im2col agrees with float64, forward and backward", function()
  local cases = {table.unpack(conv_cases)}
  cases[#cases + 1] = {3, 32, 9, 8, 48, 3, 3, 1, 1, 1, 1, true, true}   -- blocked layouts
  cases[#cases + 1] = {2, 1, 12, 12, 16, 3, 3, 1, 1, 1, 1, true, false} -- a first layer
  cases[#cases + 1] = {2, 32, 7, 7, 32, 3, 3, 2, 1, 1, 32, true, false} -- depthwise, wide
  cases[#cases + 1] = {2, 16, 6, 6, 32, 1, 1, 1, 0, 1, 2, false, true}  -- grouped 1x1
  local was = torch.backends.mkldnn.enabled
  for ci, c in ipairs(cases) do
    local N, C, H, W, O, kh, kw, _, _, _, G, hasb, nc = table.unpack(c)
    local xs, ws = {N, C, H, W}, {O, C // G, kh, kw}
    local x, w, b = rand_flat(xs), rand_flat(ws), hasb and rand_flat({O}) or nil
    local opts = conv_opts(c)
    local y64 = torch.conv2d(tensor(x, xs), tensor(w, ws), b and tensor(b, {O}), opts)
    local R = rand_flat(shape(y64))
    local gi64, gw64, gb64 = torch._backward.conv2d(tensor(R, shape(y64)), tensor(x, xs), tensor(w, ws), opts)
    for _, on in ipairs({true, false}) do
      torch.backends.mkldnn.enabled = on
      local what = ("case %d (mkldnn %s)"):format(ci, tostring(on))
      local runs = torch.backends._library_runs("cpu")
      local x32 = (nc and noncontig(x, xs) or tensor(x, xs)):float()
      local y = torch.conv2d(x32, tensor(w, ws, "float32"), b and tensor(b, {O}, "float32"), opts)
      eq(y.dtype, "torch.float32", what .. " dtype")
      close(y, y64, 1e-4, 1e-4, what .. " forward")
      -- grad_out transposed in memory: a non-contiguous gradient
      local g32 = tensor(R, shape(y64), "float32"):transpose(2, 3):contiguous():transpose(2, 3)
      local gi, gw, gb = torch._backward.conv2d(g32, x32, tensor(w, ws, "float32"), opts)
      close(gi, gi64, 1e-4, 1e-4, what .. " grad_input")
      close(gw, gw64, 2e-4, 2e-4, what .. " grad_weight")
      close(gb, gb64, 2e-4, 2e-4, what .. " grad_bias")
      -- oneDNN takes every float32 case here: forward, grad_input, grad_weight
      local want = (on and torch.backends.mkldnn.is_available()) and 3 or 0
      eq(torch.backends._library_runs("cpu") - runs, want, what .. " oneDNN calls")
    end
  end
  torch.backends.mkldnn.enabled = was
end)

T.cpu_test("torch.backends: settings are booleans with known names", function()
  eq(type(torch.backends.mkldnn.is_available()), "boolean", "mkldnn.is_available")
  eq(torch.backends.mkldnn.enabled, true, "mkldnn on by default")
  eq(torch.backends.cudnn.allow_tf32, true, "cudnn.allow_tf32 defaults to PyTorch's true")
  eq(torch.backends.cudnn.benchmark, false, "cudnn.benchmark defaults to false")
  raises(function() torch.backends.mkldnn.enable = false end, "torch.backends.mkldnn has no setting 'enable' (its settings: enabled)")
  raises(function() torch.backends.cudnn.benchmark = "yes" end, "torch.backends.cudnn.benchmark must be true or false, got string")
  raises(function() torch.backends.cuda.matmul.allow_tf32 = 1 end, "torch.backends.cuda.matmul.allow_tf32 must be true or false, got number")
  raises(function() torch.backends._library_runs("tpu") end, "invalid option 'tpu'")
  -- reading a misspelt setting raises as every namespace does (issue 29); private names probe as nil
  raises(function() return torch.backends.mkldnn.no_such_setting end,
    "torch.backends.mkldnn has no setting 'no_such_setting' (its settings: enabled)")
  eq(torch.backends.mkldnn._no_such_private, nil, "a private name reads as nil")
  local prec = torch.get_float32_matmul_precision()
  torch.backends.cuda.matmul.allow_tf32 = true
  eq(torch.get_float32_matmul_precision(), "high", "allow_tf32 is precision high")
  torch.backends.cuda.matmul.allow_tf32 = false
  eq(torch.get_float32_matmul_precision(), "highest", "no tf32 is precision highest")
  torch.set_float32_matmul_precision(prec)
end)

test("conv2d errors name the op, the shapes and the fix", function()
  local x, w = torch.randn(1, 3, 8, 8), torch.randn(4, 3, 3, 3)
  raises(function() torch.conv2d(torch.randn(3, 32), w) end, "conv2d: expected a 4-D input (N, C, H, W) or a 3-D unbatched one (C, H, W), got shape (3, 32)")
  raises(function() torch.conv2d(torch.randn(1, 16, 8, 8), w) end, "conv2d: input has 16 channels but weight expects 3 (groups 1)")
  raises(function() torch.conv2d(x, torch.randn(4, 3, 3)) end, "conv2d: expected a 4-D weight")
  raises(function() torch.conv2d(torch.randn(1, 4, 8, 8), torch.randn(4, 2, 3, 3), nil, {groups = 3}) end, "conv2d: groups 3 does not divide the input's 4 channels")
  raises(function() torch.conv2d(torch.randn(1, 4, 8, 8), torch.randn(3, 2, 3, 3), nil, {groups = 2}) end, "conv2d: groups 2 does not divide the weight's 3 output channels")
  raises(function() torch.conv2d(torch.randn(1, 3, 2, 2), w) end, "conv2d: kernel size (3, 3) (dilated (3, 3)) can't be greater than the padded input size (2, 2)")
  raises(function() torch.conv2d(torch.randn(1, 3, 4, 4), w, nil, {dilation = 2}) end, "can't be greater than the padded input size (4, 4)")
  raises(function() torch.conv2d(x, w, nil, {stride = 0}) end, "conv2d: stride must be positive, got (0, 0)")
  raises(function() torch.conv2d(x, w, nil, {dilation = {1, 0}}) end, "conv2d: dilation must be positive, got (1, 0)")
  raises(function() torch.conv2d(x, w, nil, {padding = -1}) end, "conv2d: padding must be non-negative, got (-1, -1)")
  raises(function() torch.conv2d(x, w, nil, {groups = 0}) end, "conv2d: groups must be positive, got 0")
  raises(function() torch.conv2d(x, w:double()) end, "conv2d: input (float32) and weight (float64) must have the same dtype")
  raises(function() torch.conv2d(x, w, torch.randn(3)) end, "conv2d: expected a bias of shape (4,), got (3,)")
  raises(function() torch.conv2d(x:long(), w:long()) end, "conv2d: expected a floating-point input, got int64")
  raises(function() torch.conv2d(x, w, nil, {stride = "a"}) end, "option 'stride' must be an integer or a pair of integers")
  raises(function() torch.conv2d("x", w) end, "bad argument #1 to 'conv2d' (tensor expected, got string)")
  raises(function() torch.conv2d(x, w, nil, 5) end, "conv2d: options table expected at argument #4")
  raises(function() torch.conv1d(torch.randn(3, 4, 5, 6), torch.randn(2, 4, 3)) end, "conv1d: expected a 3-D input (N, C, L)")
  raises(function() torch._backward.conv2d(torch.randn(1, 4, 5, 5), x, w) end, "conv2d_backward: grad_output has shape (1, 4, 5, 5) but the output has shape (1, 4, 6, 6)")
end)

-- ---- pooling ---------------------------------------------------------------------

local pool_cases = {
  -- shape, kernel, stride, padding, dilation, ceil_mode
  {{1, 2, 6, 6}, 2, nil, 0, 1, false},
  {{2, 3, 7, 5}, 3, 2, 1, 1, false},
  {{2, 2, 7, 6}, 3, 2, 1, 1, true},
  {{1, 2, 8, 7}, {3, 2}, {2, 1}, {1, 0}, {2, 1}, false},
  {{2, 1, 5, 5}, 2, 2, 0, 1, true},
  {{1, 3, 9, 8}, {2, 3}, {3, 2}, {1, 1}, 1, true},
}

test("max_pool2d values and indices match a direct loop, ceil_mode, dilation, non-contiguous", function()
  for ci, c in ipairs(pool_cases) do
    local xs = c[1]
    local x = rand_flat(xs)
    local ref, ridx, rs = maxpool_ref(x, xs, c[2], c[3], c[4], c[5], c[6])
    local opts = {stride = c[3], padding = c[4], dilation = c[5], ceil_mode = c[6], return_indices = true}
    for _, nc in ipairs({false, true}) do
      local xt = nc and noncontig(x, xs) or tensor(x, xs)
      local y, idx = torch.max_pool2d(xt, c[2], opts)
      eq(T.fmt(shape(y)), T.fmt(rs), "case " .. ci .. " shape")
      close(y, ref, 0, 0, "max_pool2d case " .. ci)
      eq(idx.dtype, "torch.int64", "indices dtype")
      close(idx, ridx, 0, 0, "max_pool2d indices case " .. ci)
    end
    eq(select("#", torch.max_pool2d(tensor(x, xs), c[2], {stride = c[3], padding = c[4]})), 1, "no indices unless asked")
  end
  -- unbatched, float32
  local x = rand_flat({2, 5, 5})
  local ref = maxpool_ref(x, {1, 2, 5, 5}, 2, 1, 1, 1, false)
  close(torch.max_pool2d(tensor(x, {2, 5, 5}, "float32"), 2, {stride = 1, padding = 1}), ref, 1e-6, 1e-7, "unbatched float32")
end)

test("max_pool2d 2x2: ties keep the first, NaN wins, rows wider than one block", function()
  -- small integers make ties common; Wo = 260 crosses the kernel's 256-column blocks
  local xs = {2, 3, 4, 520}
  local x = {}
  for i = 1, numel(xs) do x[i] = math.random(0, 3) end
  for i = 1, numel(xs), 7 do x[i] = 0 / 0 end
  local ref, ridx = maxpool_ref(x, xs, 2)
  for _, dt in ipairs({"float32", "float64"}) do
    local y, idx = torch.max_pool2d(tensor(x, xs, dt), 2, {return_indices = true})
    eq(T.fmt(shape(y)), T.fmt({2, 3, 2, 260}), dt .. " shape")
    local yl, il = y:flatten():tolist(), idx:flatten():tolist()
    for i = 1, #ref do
      if ref[i] ~= ref[i] then
        if yl[i] == yl[i] then error(("%s element %d: expected NaN, got %s"):format(dt, i, yl[i])) end
      elseif yl[i] ~= ref[i] then
        error(("%s element %d: expected %s, got %s"):format(dt, i, ref[i], yl[i]))
      end
      if il[i] ~= ridx[i] then error(("%s index %d: expected %d, got %d"):format(dt, i, ridx[i], il[i])) end
    end
  end
end)

test("max_pool2d backward matches finite differences", function()
  for ci, c in ipairs({pool_cases[2], pool_cases[3], pool_cases[4]}) do
    local xs = {1, 1, c[1][3], c[1][4]}
    local x = rand_flat(xs)
    local opts = {stride = c[3], padding = c[4], dilation = c[5], ceil_mode = c[6]}
    local f = function(xt) return torch.max_pool2d(xt, c[2], opts) end
    local y, idx = torch.max_pool2d(tensor(x, xs), c[2], {stride = c[3], padding = c[4], dilation = c[5],
                                                         ceil_mode = c[6], return_indices = true})
    local R = rand_flat(shape(y))
    local g = torch._backward.max_pool2d(tensor(R, shape(y)), idx, tensor(x, xs))
    eq(T.fmt(shape(g)), T.fmt(xs), "grad shape")
    check_grads("max_pool2d case " .. ci, f, {x}, {xs}, R, {g})
  end
  -- overlapping windows send the gradient of one maximum several times
  local x = tensor({1, 2, 3, 9, 4, 5, 6, 7, 8}, {1, 1, 3, 3})
  local _, idx = torch.max_pool2d(x, 2, {stride = 1, return_indices = true})
  local g = torch._backward.max_pool2d(torch.ones(1, 1, 2, 2, F64), idx, x)
  close(g, {0, 0, 0, 2, 0, 1, 0, 0, 1}, 0, 0, "max_pool2d gradient accumulates")
  -- a gradient of another float dtype is converted to the input's (it was read as the input's type)
  local g32 = torch._backward.max_pool2d(torch.ones(1, 1, 2, 2, {dtype = "float32", device = x.device}), idx, x)
  close(g32, {0, 0, 0, 2, 0, 1, 0, 0, 1}, 0, 0, "max_pool2d gradient of a float32 grad_output")
end)

test("avg_pool2d matches a direct loop: count_include_pad, ceil_mode, non-square", function()
  for ci, c in ipairs(pool_cases) do
    if c[5] == 1 then
      local xs = c[1]
      local x = rand_flat(xs)
      for _, cp in ipairs({true, false}) do
        local ref, rs = avgpool_ref(x, xs, c[2], c[3], c[4], c[6], cp)
        local y = torch.avg_pool2d(noncontig(x, xs), c[2], {stride = c[3], padding = c[4], ceil_mode = c[6], count_include_pad = cp})
        eq(T.fmt(shape(y)), T.fmt(rs), "case " .. ci .. " shape")
        close(y, ref, 1e-12, 1e-12, "avg_pool2d case " .. ci .. " count_include_pad " .. tostring(cp))
      end
    end
  end
end)

test("avg_pool2d backward matches finite differences", function()
  for ci, c in ipairs({pool_cases[2], pool_cases[3], pool_cases[6]}) do
    local xs = {1, 2, c[1][3], c[1][4]}
    local x = rand_flat(xs)
    for _, cp in ipairs({true, false}) do
      local opts = {stride = c[3], padding = c[4], ceil_mode = c[6], count_include_pad = cp}
      local f = function(xt) return torch.avg_pool2d(xt, c[2], opts) end
      local y = f(tensor(x, xs))
      local R = rand_flat(shape(y))
      local g = torch._backward.avg_pool2d(noncontig(R, shape(y)), tensor(x, xs), c[2], opts)
      check_grads("avg_pool2d case " .. ci, f, {x}, {xs}, R, {g})
    end
  end
end)

test("adaptive_avg_pool2d matches torch's window formula, forward and backward", function()
  for ci, c in ipairs({{{2, 2, 7, 5}, {3, 2}}, {{1, 3, 4, 4}, 1}, {{1, 1, 5, 3}, {7, 4}}, {{2, 1, 6, 6}, 3}}) do
    local xs = c[1]
    local oh, ow = pair(c[2])
    local x = rand_flat(xs)
    local ref, rs = adaptive_ref(x, xs, oh, ow)
    local y = torch.adaptive_avg_pool2d(noncontig(x, xs), c[2])
    eq(T.fmt(shape(y)), T.fmt(rs), "case " .. ci .. " shape")
    close(y, ref, 1e-12, 1e-12, "adaptive case " .. ci)
    local f = function(xt) return torch.adaptive_avg_pool2d(xt, c[2]) end
    local R = rand_flat(rs)
    local g = torch._backward.adaptive_avg_pool2d(tensor(R, rs), tensor(x, xs))
    check_grads("adaptive case " .. ci, f, {x}, {xs}, R, {g})
  end
  local y = torch.adaptive_avg_pool2d(torch.ones(3, 4, 4, {dtype = "float16"}), 2)
  eq(T.fmt(shape(y)), T.fmt({3, 2, 2}), "unbatched shape")
  eq(y.dtype, "torch.float16", "float16 stays float16")
end)

test("pooling errors", function()
  local x = torch.randn(1, 2, 6, 6)
  raises(function() torch.max_pool2d(torch.randn(6, 6), 2) end, "max_pool2d: expected a 4-D input (N, C, H, W) or a 3-D unbatched one (C, H, W), got shape (6, 6)")
  raises(function() torch.max_pool2d(x, 3, {padding = 2}) end, "max_pool2d: padding should be at most half of the kernel size, but got padding (2, 2) and kernel_size (3, 3)")
  raises(function() torch.max_pool2d(x, 0) end, "max_pool2d: kernel_size must be positive, got (0, 0)")
  raises(function() torch.max_pool2d(x, 2, {stride = 0}) end, "max_pool2d: stride must be positive, got (0, 0)")
  raises(function() torch.max_pool2d(x, 2, {dilation = 0}) end, "max_pool2d: dilation must be positive")
  raises(function() torch.max_pool2d(torch.randn(1, 2, 2, 2), 3) end, "max_pool2d: given input size (2, 2, 2), the calculated output size (2, 0, 0) is too small")
  raises(function() torch.max_pool2d(x:long(), 2) end, "max_pool2d: expected a floating-point input, got int64")
  raises(function() torch.max_pool2d(x, "a") end, "kernel_size must be an integer or a pair of integers")
  raises(function() torch.avg_pool2d(x, 2, {padding = -1}) end, "avg_pool2d: padding must be non-negative, got (-1, -1)")
  raises(function() torch.avg_pool2d(x, 2, {dilation = 2}) end, "avg_pool2d: dilation is not supported")
  raises(function() torch.adaptive_avg_pool2d(torch.randn(2, 2), 1) end, "adaptive_avg_pool2d: expected a 4-D input")
  raises(function() torch.adaptive_avg_pool2d(x, -1) end, "adaptive_avg_pool2d: output_size must be non-negative, got (-1, -1)")
  raises(function() torch.adaptive_avg_pool2d(torch.randn(1, 2, 0, 3), 1) end, "adaptive_avg_pool2d: expected non-empty spatial dims")
  local y, idx = torch.max_pool2d(x, 2, {return_indices = true})
  raises(function() torch._backward.max_pool2d(y, idx:float(), x) end, "max_pool2d_backward: expected int64 indices, got float32")
  raises(function() torch._backward.max_pool2d(torch.randn(1, 2, 4, 4), idx, x) end, "max_pool2d_backward: indices of shape (1, 2, 3, 3) do not match grad_output of shape (1, 2, 4, 4)")
  for _, v in ipairs({-1, 99}) do -- -1 too: no value of an index may mean "all were fine"
    local bad = idx:clone()
    bad[{0, 0, 0, 0}] = v
    raises(function() torch._backward.max_pool2d(y, bad, x) end, "max_pool2d_backward: index " .. v .. " is out of bounds")
  end
  raises(function() torch._backward.avg_pool2d(torch.randn(1, 2, 4, 4), x, 2) end, "avg_pool2d_backward: grad_output has shape (1, 2, 4, 4) but the output has shape (1, 2, 3, 3)")
end)

-- ---- batch_norm --------------------------------------------------------------------

test("batch_norm training: batch statistics, running stats updated as torch, 2-D and 4-D", function()
  for ci, xs in ipairs({{4, 3}, {2, 3, 4, 5}, {3, 2, 5}}) do
    local C = xs[2]
    local x, w, b = rand_flat(xs), rand_flat({C}), rand_flat({C})
    local rm0, rv0 = rand_flat({C}), rand_flat({C}, 0.5, 2)
    local rm, rv = tensor(rm0, {C}), tensor(rv0, {C})
    local mom, eps = 0.3, 1e-3
    local y, sm, si = torch._nn.batch_norm(noncontig(x, xs), rm, rv, tensor(w, {C}), tensor(b, {C}), true, mom, eps)
    local mean, var, M = channel_stats(x, xs)
    close(y, bn_apply(x, xs, mean, var, w, b, eps), 1e-10, 1e-12, "case " .. ci .. " output")
    local erm, erv, einv = {}, {}, {}
    for c = 1, C do
      erm[c] = (1 - mom) * rm0[c] + mom * mean[c]
      erv[c] = (1 - mom) * rv0[c] + mom * var[c] * M / (M - 1)
      einv[c] = 1 / math.sqrt(var[c] + eps)
    end
    close(rm, erm, 1e-12, 1e-12, "case " .. ci .. " running_mean")
    close(rv, erv, 1e-12, 1e-12, "case " .. ci .. " running_var (unbiased)")
    close(sm, mean, 1e-12, 1e-12, "saved_mean")
    close(si, einv, 1e-10, 1e-12, "saved_invstd")
  end
  -- no affine parameters, no running stats, float32
  local xs = {5, 2, 3}
  local x = rand_flat(xs)
  local mean, var = channel_stats(x, xs)
  local y = torch.batch_norm(tensor(x, xs, "float32"), nil, nil, nil, nil, true, 0.1, 1e-5)
  eq(y.dtype, "torch.float32", "float32 result")
  close(y, bn_apply(x, xs, mean, var, nil, nil, 1e-5), 1e-4, 1e-5, "no affine float32")
end)

test("batch_norm eval uses the running statistics and leaves them alone", function()
  local xs = {2, 3, 2, 2}
  local x, w, b = rand_flat(xs), rand_flat({3}), rand_flat({3})
  local rm0, rv0 = rand_flat({3}), rand_flat({3}, 0.5, 2)
  local rm, rv = tensor(rm0, {3}), tensor(rv0, {3})
  local y = torch.batch_norm(tensor(x, xs), rm, rv, tensor(w, {3}), tensor(b, {3}), false, 0.1, 1e-5)
  close(y, bn_apply(x, xs, rm0, rv0, w, b, 1e-5), 1e-10, 1e-12, "eval output")
  close(rm, rm0, 0, 0, "running_mean unchanged")
  close(rv, rv0, 0, 0, "running_var unchanged")
end)

test("batch_norm backward matches finite differences, training and eval", function()
  for ci, xs in ipairs({{3, 2, 2, 2}, {4, 3}}) do
    local C = xs[2]
    local x, w, b = rand_flat(xs), rand_flat({C}), rand_flat({C})
    local rm, rv = rand_flat({C}), rand_flat({C}, 0.5, 2)
    for _, training in ipairs({true, false}) do
      local f = function(xt, wt, bt)
        return (torch.batch_norm(xt, not training and tensor(rm, {C}) or nil, not training and tensor(rv, {C}) or nil,
                                 wt, bt, training, 0.1, 1e-5))
      end
      local y, sm, si = torch._nn.batch_norm(tensor(x, xs), not training and tensor(rm, {C}) or nil,
                                         not training and tensor(rv, {C}) or nil, tensor(w, {C}), tensor(b, {C}), training, 0.1, 1e-5)
      local R = rand_flat(xs)
      local gx, gw, gb = torch._backward.batch_norm(tensor(R, xs), noncontig(x, xs), tensor(w, {C}), sm, si, training)
      check_grads("batch_norm case " .. ci .. " training " .. tostring(training), f, {x, w, b}, {xs, {C}, {C}}, R, {gx, gw, gb})
    end
  end
  -- without weight: the gradient is that of weight 1
  local xs = {3, 2, 4}
  local x = rand_flat(xs)
  local f = function(xt) return (torch.batch_norm(xt, nil, nil, nil, nil, true, 0.1, 1e-5)) end
  local _, sm, si = torch._nn.batch_norm(tensor(x, xs), nil, nil, nil, nil, true, 0.1, 1e-5)
  local R = rand_flat(xs)
  local gx = torch._backward.batch_norm(tensor(R, xs), tensor(x, xs), nil, sm, si, true)
  check_grads("batch_norm without weight", f, {x}, {xs}, R, {gx})
end)

test("batch_norm errors", function()
  local x = torch.randn(4, 3)
  raises(function() torch.batch_norm(torch.randn(3), nil, nil, nil, nil, true) end, "batch_norm: expected an input of at least 2 dims (N, C, ...), got shape (3,)")
  raises(function() torch.batch_norm(torch.randn(1, 3), nil, nil, nil, nil, true) end, "batch_norm: expected more than 1 value per channel when training, got input size (1, 3)")
  raises(function() torch.batch_norm(x, torch.zeros(4), torch.ones(4), nil, nil, true) end, "batch_norm: running_mean should be a 1-D tensor of 3 elements, got shape (4,)")
  raises(function() torch.batch_norm(x, nil, nil, torch.ones(2), nil, true) end, "batch_norm: weight should be a 1-D tensor of 3 elements, got shape (2,)")
  raises(function() torch.batch_norm(x, nil, nil, nil, nil, false) end, "batch_norm: running_mean and running_var must be given in evaluation mode")
  raises(function() torch.batch_norm(x:long(), nil, nil, nil, nil, true) end, "batch_norm: expected a floating-point input, got int64")
  raises(function() torch._backward.batch_norm(torch.randn(4, 2), x, nil, torch.zeros(3), torch.ones(3), true) end, "batch_norm_backward: grad_output has shape (4, 2) but the input has shape (4, 3)")
end)

-- ---- layer_norm ---------------------------------------------------------------------

local function ln_ref(x, M, D, w, b, eps)
  local out = {}
  for m = 0, M - 1 do
    local s, v = 0, 0
    for d = 1, D do s = s + x[m * D + d] end
    local mean = s / D
    for d = 1, D do v = v + (x[m * D + d] - mean) ^ 2 end
    local r = 1 / math.sqrt(v / D + eps)
    for d = 1, D do out[m * D + d] = (x[m * D + d] - mean) * r * (w and w[d] or 1) + (b and b[d] or 0) end
  end
  return out
end

test("layer_norm forward and backward", function()
  for ci, c in ipairs({{{3, 4}, {4}}, {{2, 3, 4}, {3, 4}}, {{2, 2, 5}, 5}}) do
    local xs, ns = c[1], type(c[2]) == "table" and c[2] or {c[2]}
    local D = numel(ns)
    local M = numel(xs) // D
    local x, w, b = rand_flat(xs), rand_flat(ns), rand_flat(ns)
    local y, mean, rstd = torch._nn.layer_norm(noncontig(x, xs), c[2], tensor(w, ns), tensor(b, ns), 1e-5)
    close(y, ln_ref(x, M, D, w, b, 1e-5), 1e-10, 1e-12, "layer_norm case " .. ci)
    local ms = {table.unpack(xs)}
    for d = #xs - #ns + 1, #xs do ms[d] = 1 end
    eq(T.fmt(shape(mean)), T.fmt(ms), "saved_mean shape")
    local f = function(xt, wt, bt) return (torch.layer_norm(xt, c[2], wt, bt, 1e-5)) end
    local R = rand_flat(xs)
    local gx, gw, gb = torch._backward.layer_norm(tensor(R, xs), tensor(x, xs), c[2], mean, rstd, tensor(w, ns))
    eq(T.fmt(shape(gw)), T.fmt(ns), "grad_weight shape")
    check_grads("layer_norm case " .. ci, f, {x, w, b}, {xs, ns, ns}, R, {gx, gw, gb})
  end
  local x = rand_flat({2, 3})
  close(torch.layer_norm(tensor(x, {2, 3}, "float32"), 3), ln_ref(x, 2, 3, nil, nil, 1e-5), 1e-4, 1e-5, "no affine float32")
  raises(function() torch.layer_norm(torch.randn(2, 3, 4), {4, 5}) end, "layer_norm: expected an input with shape (*, 4, 5), but got input of size (2, 3, 4)")
  raises(function() torch.layer_norm(torch.randn(2, 4), 4, torch.ones(3)) end, "layer_norm: expected weight of shape (4,), got (3,)")
  raises(function() torch.layer_norm(torch.randn(2, 4):long(), 4) end, "layer_norm: expected a floating-point input, got int64")
end)

-- float32 rows long and many enough that the kernel splits them over threads and sums the
-- weight and bias gradients per thread: values against the float64 Lua loops, and each gradient
-- alone (the others not needed) equal to the one computed with all three
test("layer_norm float32 on many rows against float64 loops", function()
  local M, D = 1031, 96
  local x, w, b, R = rand_flat({M, D}, -3, 5), rand_flat({D}), rand_flat({D}), rand_flat({M, D})
  local xt, wt, bt = tensor(x, {M, D}, "float32"), tensor(w, {D}, "float32"), tensor(b, {D}, "float32")
  local y, mean, rstd = torch._nn.layer_norm(xt, D, wt, bt, 1e-5)
  close(y, ln_ref(x, M, D, w, b, 1e-5), 1e-4, 1e-4, "forward")
  -- references in Lua doubles: gw = sum go * xhat, gb = sum go, gx per row
  local rgw, rgb, rgx = {}, {}, {}
  for d = 1, D do rgw[d], rgb[d] = 0, 0 end
  for m = 0, M - 1 do
    local s, v = 0, 0
    for d = 1, D do s = s + x[m * D + d] end
    local mu = s / D
    for d = 1, D do v = v + (x[m * D + d] - mu) ^ 2 end
    local r = 1 / math.sqrt(v / D + 1e-5)
    local sg, sgx = 0, 0
    for d = 1, D do
      local xh, g = (x[m * D + d] - mu) * r, R[m * D + d]
      rgw[d], rgb[d] = rgw[d] + g * xh, rgb[d] + g
      sg, sgx = sg + g * w[d], sgx + g * w[d] * xh
    end
    for d = 1, D do
      local xh = (x[m * D + d] - mu) * r
      rgx[m * D + d] = r * (R[m * D + d] * w[d] - sg / D - xh * sgx / D)
    end
  end
  local Rt = tensor(R, {M, D}, "float32")
  local gx, gw, gb = torch._backward.layer_norm(Rt, xt, D, mean, rstd, wt)
  close(gx, rgx, 1e-3, 1e-4, "grad_input")
  close(gw, rgw, 1e-4, 1e-3, "grad_weight")
  close(gb, rgb, 1e-4, 1e-3, "grad_bias")
  for k, want in ipairs({gx, gw, gb}) do
    local ins = {xt:clone(), wt:clone(), bt:clone()}
    ins[k]:requires_grad_(true)
    torch.layer_norm(ins[1], D, ins[2], ins[3], 1e-5):mul(Rt):sum():backward()
    close(ins[k].grad, want, 0, 0, "gradient " .. k .. " alone")
  end
end)

-- ---- embedding ------------------------------------------------------------------------

test("embedding gathers rows; backward accumulates duplicates and skips padding_idx", function()
  local V, D = 5, 3
  local w = rand_flat({V, D})
  local idx = {{1, 4, 1}, {0, 2, 1}}
  local y = torch.embedding(tensor(w, {V, D}), torch.tensor(idx, {dtype = "int64"}))
  eq(T.fmt(shape(y)), T.fmt({2, 3, D}), "shape")
  local ref = {}
  for _, row in ipairs(idx) do for _, i in ipairs(row) do for d = 1, D do ref[#ref + 1] = w[i * D + d] end end end
  close(y, ref, 0, 0, "rows")
  close(torch.embedding(tensor(w, {V, D}), torch.tensor({3, 3}, {dtype = "int32"})),
        {w[10], w[11], w[12], w[10], w[11], w[12]}, 0, 0, "int32 indices")
  eq(T.fmt(shape(torch.embedding(tensor(w, {V, D}), torch.tensor(2, {dtype = "int64"})))), T.fmt({D}), "0-dim index")
  local G = rand_flat({2, 3, D})
  local it = torch.tensor(idx, {dtype = "int64"})
  for _, pad in ipairs({false, 1, -4}) do
    local expect = {}
    for i = 1, V * D do expect[i] = 0 end
    local k = 0
    for _, row in ipairs(idx) do
      for _, i in ipairs(row) do
        for d = 1, D do expect[i * D + d] = expect[i * D + d] + G[k * D + d] end
        k = k + 1
      end
    end
    if pad then for d = 1, D do expect[1 * D + d] = 0 end end
    local g = torch._backward.embedding(noncontig(G, {2, 3, D}), it, V, pad or nil)
    eq(T.fmt(shape(g)), T.fmt({V, D}), "grad shape")
    close(g, expect, 1e-12, 1e-12, "embedding backward, padding_idx " .. tostring(pad))
  end
  -- a bad index raises at once on the CPU, at the next synchronisation (here tolist's) on a device, as PyTorch's
  -- device asserts: a training step's lookups never wait for the host
  raises(function() return torch.embedding(tensor(w, {V, D}), torch.tensor({1, 7}, {dtype = "int64"})):tolist() end, "embedding: index 7 is out of range for a weight of 5 rows (expected 0 <= index < 5)")
  raises(function() return torch.embedding(tensor(w, {V, D}), torch.tensor({-1}, {dtype = "int64"})):tolist() end, "embedding: index -1 is out of range")
  raises(function() torch.embedding(tensor(w, {V, D}), torch.tensor({1.0})) end, "embedding: expected indices of dtype int64 or int32, got float32")
  raises(function() torch.embedding(torch.randn(5), it) end, "embedding: expected a 2-D weight (num_embeddings, embedding_dim), got shape (5,)")
  raises(function() torch._backward.embedding(torch.randn(2, 3), it, V) end, "embedding_backward: grad_output of shape (2, 3) does not match indices of shape (2, 3)")
  raises(function() torch._backward.embedding(torch.randn(2, 3, D), it, V, 5) end, "embedding_backward: padding_idx 5 must be within num_embeddings (5)")
  raises(function() return torch._backward.embedding(torch.randn(2, 3, D), it, 3):tolist() end, "embedding_backward: index 4 is out of range for a weight of 3 rows")
end)

T.run()
