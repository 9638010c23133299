-- Every registry op on both backends, data-driven (in the spirit of ggml's
-- test-backend-ops): a table of cases, each a function of input tensors, its
-- dtypes and its layouts (contiguous, strided, offset, broadcast, empty,
-- large). Each case runs on the CPU and on cuda with the same inputs and the
-- results (and gradients, where the case asks) must agree at the dtype's
-- tolerance. The CPU is the reference: its ops are checked against float64
-- and finite differences in their own files. torch.backends._dispatch_counts
-- proves each case ran its ops on cuda, and the last case fails if a
-- registry op was run by no case. Skips without a CUDA device (the
-- simulated device runs it in make test).
local T = require "harness"
local test, close, eq, ok = T.test, T.close, T.eq, T.ok
local F = nn.functional

local function need_cuda()
  if not (cuda and cuda.is_available()) then T.skip("no CUDA device") end
end

local FLOATS = {"float32", "float64", "float16", "bfloat16"}
local INTS = {"int64", "int32", "int16", "int8", "uint8"}
local TOL = {float64 = 1e-12, float32 = 2e-5, float16 = 2e-3, bfloat16 = 1.6e-2}

-- ---- inputs ------------------------------------------------------------------------------
-- gen(shape, dtype): fresh random values on the CPU, kind-appropriate
local GEN = {
  any = function(shape, dt)
    if dt == "bool" then return torch.randint(0, 2, shape, {device = "cpu"}):bool() end
    if dt == "uint8" then return torch.randint(0, 20, shape, {device = "cpu"}):to("uint8") end
    if dt == "int64" or dt == "int32" or dt == "int16" or dt == "int8" then return torch.randint(-9, 10, shape, {device = "cpu"}):to(dt) end
    return torch.randn(shape, {device = "cpu"}):to(dt)
  end,
  positive = function(shape, dt) return (torch.rand(shape, {device = "cpu"}) * 3 + 0.25):to(dt) end,
  unit = function(shape, dt) return (torch.rand(shape, {device = "cpu"}) * 1.8 - 0.9):to(dt) end, -- asin, atanh, erfinv
  above_one = function(shape, dt) return (torch.rand(shape, {device = "cpu"}) * 3 + 1.1):to(dt) end, -- acosh
  nonzero_int = function(shape, dt) -- divisors: no zeros
    local v = torch.randint(1, 7, shape, {device = "cpu"})
    return (v * (torch.randint(0, 2, shape, {device = "cpu"}) * 2 - 1)):to(dt)
  end,
}

-- layouts: a view of a fresh base, built the same way on each device
local function numel(shape) local n = 1 for _, s in ipairs(shape) do n = n * s end return n end
local LAYOUTS = {
  contig = {make = function(shape) return {shape}, function(b) return b end end},
  strided = {make = function(shape) -- the transpose of a (.., b, a) base: no unit stride in the last dim
    if #shape < 2 then
      local s = {shape[1] * 2}
      return {s}, function(b) return b[{{0, shape[1] * 2, 2}}] end
    end
    local s = {table.unpack(shape)}
    s[#s], s[#s - 1] = s[#s - 1], s[#s]
    return {s}, function(b) return b:transpose(#shape - 2, #shape - 1) end
  end},
  offset = {make = function(shape) -- starts one element into its storage (misaligned)
    return {{numel(shape) + 1}}, function(b) return b[{{1, numel(shape) + 1}}]:view(shape) end
  end},
  broadcast = {make = function(shape) -- the first dim expanded from 1
    local s = {table.unpack(shape)}
    s[1] = 1
    return {s}, function(b) return b:expand(shape) end
  end},
}

local function base_of(spec, shape, dt, layout)
  local bases, view = LAYOUTS[layout].make(shape)
  return GEN[spec.gen or "any"](bases[1], spec.dtype_of and spec.dtype_of(dt) or dt), view
end

-- ---- comparison ---------------------------------------------------------------------------
local function flat_results(r, out)
  out = out or {}
  if torch.is_tensor(r) then out[#out + 1] = r
  elseif type(r) == "table" then for _, v in ipairs(r) do flat_results(v, out) end
  elseif r ~= nil then out[#out + 1] = r end
  return out
end

local function compare(a, b, tol, what)
  if not torch.is_tensor(a) then return eq(b, a, what) end
  eq(b.device.type, "cuda", what .. ": cuda result's device")
  eq(b.dtype, a.dtype, what .. ": dtype")
  eq(tostring(b.shape), tostring(a.shape), what .. ": shape")
  local x, y = a, b:cpu()
  if x:numel() == 0 then return end
  if x.dtype == "bool" then x, y = x:to("int64"), y:to("int64") end
  if x.dtype == "float16" or x.dtype == "bfloat16" then x, y = x:double(), y:double() end
  close(y:tolist(), x:tolist(), tol, tol, what)
end

-- runs spec on one shape/dtype/layout: the same inputs on both devices
local function run_case(spec, shape, dt, layout)
  local what = ("%s %s %s %s"):format(spec.name, dt, layout, tostring(torch.Size(shape)))
  local n = spec.nin or 1
  local grad = spec.grad and TOL[dt] ~= nil -- floating dtypes only
  local cpu_in, cuda_in = {}, {}
  for k = 1, n do
    local b, view = base_of(spec, (spec.shapes_of and spec.shapes_of(shape, k)) or shape, dt,
      k == 1 and layout or (layout == "broadcast" and "contig" or layout))
    cpu_in[k], cuda_in[k] = view(b), view(b:cuda())
    if grad then
      cpu_in[k] = cpu_in[k]:detach():requires_grad_(true)
      cuda_in[k] = cuda_in[k]:detach():requires_grad_(true)
    end
  end
  local rc = flat_results(spec.fn(table.unpack(cpu_in, 1, n)))
  local rg = flat_results(spec.fn(table.unpack(cuda_in, 1, n)))
  eq(#rg, #rc, what .. ": result count")
  local tol = spec.tol and spec.tol[dt] or TOL[dt] or 0
  for i = 1, #rc do compare(rc[i], rg[i], tol, what .. " result " .. i) end
  if grad then
    rc[1]:sum():backward()
    rg[1]:sum():backward()
    for k = 1, n do compare(cpu_in[k].grad, cuda_in[k].grad, tol * 10, what .. " grad " .. k) end
  end
end

-- ---- the table ----------------------------------------------------------------------------
local cases = {}
local function case(spec) cases[#cases + 1] = spec end

-- Every unary op of the registry (T.unary_ops), as x:op() on the floating
-- dtypes (and the integers for the ops that keep the dtype: TS_KIND_UNARY),
-- with gradients where its registry line has a backward. UNARY_SPEC gives an
-- op another call, its inputs' domain (gen) or its dtypes.
local function scaled(op) -- integers and halves far apart: floor, round... move
  return function(x) local y = x * 3 return y[op](y) end
end
local UNARY_SPEC = {
  neg = {fn = function(x) return -x end},
  floor = {fn = scaled("floor")}, ceil = {fn = scaled("ceil")}, round = {fn = scaled("round")}, trunc = {fn = scaled("trunc")},
  log = {gen = "positive"}, log1p = {gen = "positive"}, sqrt = {gen = "positive"}, rsqrt = {gen = "positive"},
  reciprocal = {gen = "positive"}, log2 = {gen = "positive"}, log10 = {gen = "positive"},
  tan = {gen = "unit"}, atanh = {gen = "unit"}, asin = {gen = "unit"}, acos = {gen = "unit"}, erfinv = {gen = "unit"},
  acosh = {gen = "above_one"},
  gelu = {fn = function(x) return F.gelu(x) end}, silu = {fn = function(x) return F.silu(x) end},
  clamp = {fn = function(x) return x:clamp(-0.5, 0.7) end},
  pow_scalar = {fn = function(x) return x:pow(3) end},
  logical_not = {dtypes = {"bool", "float32", "int64"}},
  bitwise_not = {dtypes = {"bool", table.unpack(INTS)}},
}
local unary_names, registry = T.unary_ops()
for _, name in ipairs(unary_names) do
  local u, line = UNARY_SPEC[name] or {}, registry[name]
  local dts = u.dtypes
  if not dts then
    dts = {table.unpack(FLOATS)}
    if line.kind == "unary" then for _, d in ipairs(INTS) do dts[#dts + 1] = d end end
  end
  case({name = name, ops = {name}, fn = u.fn or function(x) return x[name](x) end, dtypes = dts, gen = u.gen,
        grad = line.grad_fn ~= nil, shapes = {{5, 7}, {3, 0}, {4, 1, 6}}, layouts = {"contig", "strided", "offset", "broadcast"}})
end

-- ReLU's backward kernel: the gradient coming in is x (through the product),
-- so it varies; the relu case above gives it expanded ones
case({name = "threshold_backward", ops = {"relu", "threshold_backward"}, fn = function(x) return x:relu() * x end,
      dtypes = FLOATS, grad = true, shapes = {{5, 7}, {3, 0}, {4, 1, 6}}, layouts = {"contig", "strided", "offset"}})

-- GELU's backward kernel, exact and of the tanh approximation, with a varying gradient
case({name = "gelu_backward", ops = {"gelu", "gelu_backward"}, fn = function(x) return F.gelu(x) * x end,
      dtypes = FLOATS, grad = true, shapes = {{5, 7}, {3, 0}, {4, 1, 6}}, layouts = {"contig", "strided", "offset"}})
case({name = "gelu_backward tanh", ops = {"gelu", "gelu_backward"},
      fn = function(x) return F.gelu(x, {approximate = "tanh"}) * x end,
      dtypes = FLOATS, grad = true, shapes = {{5, 7}, {4, 1, 6}}, layouts = {"contig", "strided"}})

local BINARY = {
  {"add", function(a, b) return a + b end, FLOATS, INTS, grad = true},
  {"sub", function(a, b) return a - b end, FLOATS, INTS, grad = true},
  {"mul", function(a, b) return a * b end, FLOATS, INTS, grad = true},
  {"div", function(a, b) return a / b end, FLOATS, gen = "positive", grad = true},
  {"floor_divide", function(a, b) return a:floor_divide(b) end, {"int64", "int32"}, gen = "nonzero_int"},
  {"remainder", function(a, b) return a:remainder(b) end, {"int64", "float32", "float64"}, gen = "nonzero_int"},
  {"pow", function(a, b) return a:pow(b) end, {"float32", "float64"}, gen = "positive"},
  {"maximum", function(a, b) return torch.maximum(a, b) end, FLOATS, INTS},
  {"minimum", function(a, b) return torch.minimum(a, b) end, FLOATS, INTS},
  {"eq", function(a, b) return a:eq(b) end, {"int64", "float32"}},
  {"ne", function(a, b) return a:ne(b) end, {"int64", "float32"}},
  {"lt", function(a, b) return a:lt(b) end, FLOATS, INTS},
  {"le", function(a, b) return a:le(b) end, {"int64", "float32"}},
  {"gt", function(a, b) return a:gt(b) end, {"int64", "float64"}},
  {"ge", function(a, b) return a:ge(b) end, {"int32", "float16"}},
  {"logical_and", function(a, b) return a:logical_and(b) end, {"bool", "int64"}},
  {"logical_or", function(a, b) return a:logical_or(b) end, {"bool", "float32"}},
  {"fmod", function(a, b) return a:fmod(b) end, {"int64", "int8", "float32", "float64"}, gen = "nonzero_int", grad = true},
  {"div_trunc", function(a, b) return torch.div(a, b, {rounding_mode = "trunc"}) end, {"int32", "float32", "float16"}, gen = "nonzero_int"},
  {"bitwise_and", function(a, b) return a:bitwise_and(b) end, {"bool"}, INTS},
  {"bitwise_or", function(a, b) return a:bitwise_or(b) end, {"bool", "int64", "uint8"}},
  {"bitwise_xor", function(a, b) return a:bitwise_xor(b) end, {"bool", "int32", "int8"}},
  {"atan2", function(a, b) return torch.atan2(a, b) end, FLOATS, grad = true},
  {"copysign", function(a, b) return torch.copysign(a, b) end, FLOATS, grad = true},
}
for _, b in ipairs(BINARY) do
  local dts = {table.unpack(b[3])}
  for _, d in ipairs(b[4] or {}) do dts[#dts + 1] = d end
  case({name = b[1], ops = {b[1]}, fn = b[2], nin = 2, dtypes = dts, gen = b.gen, grad = b.grad,
        shapes = {{6, 5}, {0, 3}, {2, 3, 4}}, layouts = {"contig", "strided", "offset", "broadcast"}})
end

case({name = "where", ops = {"where"}, nin = 3, dtypes = {"float32", "int64", "float16"},
      fn = function(c, a, b) return torch.where(c:gt(0), a, b) end, shapes = {{4, 6}, {0}}, layouts = {"contig", "strided", "broadcast"}})
case({name = "lerp", ops = {"lerp"}, nin = 2, dtypes = FLOATS, fn = function(a, b) return torch.lerp(a, b, 0.3) end,
      shapes = {{4, 6}}, layouts = {"contig", "strided", "offset"}})
case({name = "copy and casts", ops = {"copy"}, dtypes = {"float32", "float64", "float16", "bfloat16", "int64", "int32", "uint8", "bool"},
      fn = function(x) return {x:to("float32"), x:to("int64"), x:to("bool"), x:to("float16"), x:clone()} end,
      shapes = {{7, 5}, {0, 2}}, layouts = {"contig", "strided", "offset", "broadcast"}})
case({name = "fill", ops = {"fill"}, dtypes = {"float32", "int64", "bfloat16"},
      fn = function(x) local y = x:clone() y:fill_(2.5) return y end, shapes = {{5, 4}}, layouts = {"contig", "strided"}})

local REDUCE = {
  {"sum", function(x) return {x:sum(), x:sum(0), x:sum(-1, {keepdim = true})} end, {"float32", "float64", "int64", "float16"}, grad = true},
  {"prod", function(x) return {x:prod(-1)} end, {"float32", "float64", "int64"}},
  {"max", function(x) return {x:max(), x:max(1)} end, FLOATS, INTS},
  {"min", function(x) return {x:min(), x:min(0)} end, {"float32", "int32"}},
  {"var", function(x) return {x:var(), x:var(1)} end, {"float32", "float64"}, grad = true},
  {"norm", function(x) return {x:norm()} end, {"float32", "float64"}},
  {"all", function(x) return {x:all({keepdim = true}), x:all(1)} end, {"bool", "int64"}}, -- keepdim: a tensor (no dim alone gives a Lua boolean)
  {"any", function(x) return {x:any({keepdim = true}), x:any(0)} end, {"bool", "float32"}},
  {"logsumexp", function(x) return {x:logsumexp(1)} end, {"float32", "float64"}, grad = true},
  {"cumsum", function(x) return {x:cumsum(1), x:cumsum(0)} end, {"float32", "float64", "int64"}, grad = true},
  {"softmax", function(x) return {x:softmax(1), x:softmax(0)} end, FLOATS, grad = true},
  {"log_softmax", function(x) return {x:log_softmax(1)} end, {"float32", "float64"}, grad = true},
}
for _, r in ipairs(REDUCE) do
  local dts = {table.unpack(r[3])}
  for _, d in ipairs(r[4] or {}) do dts[#dts + 1] = d end
  case({name = r[1], ops = {r[1]}, fn = r[2], dtypes = dts, grad = r.grad, tol = {float32 = 1e-4, float16 = 1e-2},
        shapes = {{6, 9}, {3, 300}, {40, 1}}, layouts = {"contig", "strided", "offset"}})
end

case({name = "cat", ops = {"cat"}, nin = 2, dtypes = {"float32", "int64", "bool", "bfloat16"},
      fn = function(a, b) return {torch.cat({a, b}, 0), torch.cat({a, b}, 1)} end, shapes = {{3, 4}}, layouts = {"contig", "strided", "offset"}})
case({name = "gather, scatter, index_select", ops = {"gather", "scatter"}, dtypes = {"float32", "int64", "float16"},
      fn = function(x)
        local idx = torch.tensor({{2, 0, 1, 2}, {1, 1, 0, 3}}, {device = x.device}) -- repeats: gather, scatter_add
        local perm = torch.tensor({{2, 0, 4, 1}, {3, 1, 0, 4}}, {device = x.device}) -- scatter: one writer a slot
        return {x:gather(1, idx), x:index_select(0, torch.tensor({2, 0}, {device = x.device})),
                torch.zeros(4, 5, {dtype = x.dtype, device = x.device}):scatter(1, perm, x[{{0, 2}, {0, 4}}]),
                torch.zeros(4, 5, {dtype = x.dtype, device = x.device}):scatter_add(1, idx, x[{{0, 2}, {0, 4}}])}
      end, shapes = {{4, 5}}, layouts = {"contig", "strided", "offset"}})
case({name = "masks", ops = {"masked_select", "masked_scatter", "nonzero"}, dtypes = {"float32", "int64"},
      fn = function(x)
        local m = x:gt(0)
        local y = x:clone()
        y[m] = x[m] * 2
        return {x[m], x:masked_select(m), m:nonzero(), y, x:masked_fill(m, 7)}
      end, shapes = {{5, 6}, {0, 3}}, layouts = {"contig", "strided", "offset", "broadcast"}})
case({name = "sort, topk, unique", ops = {"sort", "topk", "unique"}, dtypes = {"float32", "int64", "float64"},
      fn = function(x)
        local v, i = x:sort(1)
        local dv, di = x:sort(0, {descending = true})
        local tv, ti = x:topk(2, 1)
        local u, inv, cnt = torch.unique(x, {return_inverse = true, return_counts = true})
        return {v, i, dv, di, tv, ti, u, inv, cnt}
      end, gen = "nonzero_int", shapes = {{5, 7}}, layouts = {"contig", "strided", "offset"}})
case({name = "bmm and matmul", ops = {"bmm"}, nin = 2, dtypes = FLOATS, tol = {float32 = 1e-4, float16 = 1e-2, bfloat16 = 4e-2},
      shapes_of = function(s, k) return k == 1 and {s[1], s[2], s[3]} or {s[1], s[3], s[2]} end,
      fn = function(a, b) return {a:bmm(b), a[0]:matmul(b[0])} end, grad = true,
      shapes = {{2, 5, 3}, {3, 17, 33}}, layouts = {"contig", "strided", "offset"}})
-- a Linear layer: x (M, K), weight (N, K), bias (N); cuBLASLt adds the bias in the forward GEMM and sums
-- the bias gradient in the weight gradient's (float64 and a strided x take the composed path)
case({name = "linear", ops = {"gemm_bias", "gemm_bgrad"}, nin = 3, dtypes = FLOATS,
      tol = {float32 = 1e-4, float16 = 1e-2, bfloat16 = 4e-2},
      shapes_of = function(s, k) return k == 1 and {s[1], s[2]} or k == 2 and {s[3], s[2]} or {s[3]} end,
      fn = function(x, w, b) return F.linear(x, w, b) end, grad = true,
      shapes = {{5, 7, 3}, {17, 33, 9}}, layouts = {"contig", "strided", "offset"}})

-- nn: convolution (im2col, col2im, depthwise), pooling, batch norm, with their backward
local function conv_case(x, groups)
  local w = (torch.arange(x:size(1) // groups * 4 * 9, {device = "cpu"}):float():view(4, x:size(1) // groups, 3, 3) * 0.01)
      :to(x.dtype):to(x.device)
  return F.conv2d(x, w, nil, {padding = 1, groups = groups})
end
case({name = "conv2d", ops = {"im2col", "col2im"}, dtypes = {"float32", "float64"}, grad = true, tol = {float32 = 1e-4},
      fn = function(x) return conv_case(x, 1) end, shapes = {{2, 3, 6, 5}}, layouts = {"contig", "strided"}})
case({name = "depthwise conv2d", ops = {"conv2d_depthwise", "conv2d_depthwise_backward"}, dtypes = {"float32", "float64"},
      grad = true, tol = {float32 = 1e-4}, fn = function(x) return conv_case(x, 4) end, shapes = {{2, 4, 6, 5}},
      layouts = {"contig", "offset"}})
case({name = "pooling", ops = {"max_pool2d", "max_pool2d_backward", "avg_pool2d", "avg_pool2d_backward",
                              "adaptive_avg_pool2d", "adaptive_avg_pool2d_backward"}, dtypes = {"float32", "float64"},
      grad = true, fn = function(x)
        return {F.max_pool2d(x, 2) + F.avg_pool2d(x, 2, {stride = 2}) + F.adaptive_avg_pool2d(x, {3, 3})}
      end, shapes = {{2, 3, 6, 6}}, layouts = {"contig", "strided"}})
case({name = "batch_norm", ops = {"batch_norm_stats", "batch_norm_elemt", "batch_norm_backward_reduce",
                                 "batch_norm_backward_elemt"}, dtypes = {"float32", "float64"}, grad = true, tol = {float32 = 1e-4},
      fn = function(x)
        local C = x:size(1)
        local rm, rv = torch.zeros(C, {device = x.device}):to(x.dtype), torch.ones(C, {device = x.device}):to(x.dtype)
        return {F.batch_norm(x, rm, rv, nil, nil, true), rm, rv}
      end, shapes = {{4, 3, 5, 5}, {6, 2}}, layouts = {"contig", "strided"}})

-- layer norm over the last dim, with weight and bias; the output weighted by a fixed pattern so
-- that x's gradient is not the near-zero gradient of a plain sum
case({name = "layer_norm", ops = {"layer_norm", "layer_norm_backward"}, dtypes = {"float32", "float64"}, grad = true,
      tol = {float32 = 1e-4}, nin = 3,
      shapes_of = function(shape, k) return k == 1 and shape or {shape[#shape]} end,
      fn = function(x, w, b)
        local D = x:size(-1)
        local y, mean, rstd = torch._nn.layer_norm(x, {D}, w, b, 1e-5)
        local pattern = (torch.arange(x:numel(), {device = x.device}):to(x.dtype):view(x.shape) * 0.61):sin()
        return {y * pattern, mean, rstd}
      end, shapes = {{4, 3, 5}, {6, 1}, {0, 4}, {40, 300},
        {700, 9}, -- more rows than the backward's blocks: each block sums several rows' dgamma/dbeta
        {3, 1100}}, -- rows wider than the fused backward keeps (4 columns a thread): the three-launch path
      layouts = {"contig", "strided"}})

-- issue 21's ops: the activations with kernels of their own, group norm (long rows: the
-- reduction's plane pass), interpolation and adaptive max pooling; each output weighted by
-- a fixed pattern, their weighted sum first (its gradient is compared)
local function pattern(t) return (torch.arange(t:numel(), {device = t.device}):to(t.dtype):view(t.shape) * 0.61):sin() end
local function weighted(list)
  local total
  for _, t in ipairs(list) do
    local s = (t * pattern(t)):sum()
    total = total and total + s or s
  end
  return {total, table.unpack(list)}
end
case({name = "activations (issue 21)", ops = {"softplus", "softplus_backward", "elu", "elu_backward", "hardtanh",
                                              "hardtanh_backward", "log_sigmoid", "log_sigmoid_backward", "mish",
                                              "mish_backward"}, dtypes = FLOATS, grad = true,
      fn = function(x)
        return weighted({F.softplus(x * 3, 1.5, 2), F.elu(x, 0.7), F.hardtanh(x, -0.5, 0.8), F.logsigmoid(x * 4),
          F.mish(x * 2)})
      end, shapes = {{5, 7}, {0, 3}}, layouts = {"contig", "strided", "offset", "broadcast"}})
case({name = "group_norm", ops = {"group_norm", "group_norm_backward"}, dtypes = {"float32", "float64"}, grad = true,
      tol = {float32 = 1e-4}, nin = 3, shapes_of = function(shape, k) return k == 1 and shape or {shape[2]} end,
      fn = function(x, w, b) return weighted({F.group_norm(x, 2, w, b)}) end,
      shapes = {{4, 6, 5}, {3, 4, 600}, {0, 4, 3}}, layouts = {"contig", "strided"}})
case({name = "interpolate, adaptive_max_pool2d", ops = {"upsample_nearest2d", "upsample_nearest2d_backward",
                                                      "upsample_bilinear2d", "upsample_bilinear2d_backward",
                                                      "adaptive_max_pool2d", "max_pool2d_backward"},
      dtypes = {"float32", "float64"}, grad = true, tol = {float32 = 1e-4},
      fn = function(x)
        return weighted({F.interpolate(x, {size = {7, 9}, mode = "bilinear"}), F.interpolate(x, {scale_factor = 1.5}),
          F.interpolate(x[0], {size = 11, mode = "linear", align_corners = true}), F.adaptive_max_pool2d(x, {4, 3})})
      end, shapes = {{2, 3, 5, 6}}, layouts = {"contig", "strided"}})
-- the fused classification losses: x (N, C[, S]) logits, class targets from x's shape (every
-- fifth ignored), a weight, label smoothing, each reduction, nll_loss on log-probabilities; the
-- first result mixes them so that x's gradient goes through every path. (2100, 600) is past one
-- block's share: the reduction takes two launches there.
local function class_targets(x)
  local C, shape = x:size(1), x.shape:totable()
  table.remove(shape, 2)
  local M = x:numel() // C
  local i = torch.arange(M, {device = x.device})
  return ((i * 7) % C):masked_fill((i % 5):eq(3), -100):view(shape)
end
case({name = "classification losses", ops = {"nll_loss", "nll_loss_backward"}, dtypes = {"float32", "float64"},
      grad = true, tol = {float32 = 1e-4},
      fn = function(x)
        local t, C = class_targets(x), x:size(1)
        local w = (torch.arange(C, {device = x.device}):to(x.dtype) * 0.37):sin() + 1.5
        local mean = F.cross_entropy(x, t, {weight = w, label_smoothing = 0.1})
        local sum = F.cross_entropy(x, t, {reduction = "sum"})
        local none = F.cross_entropy(x, t, {reduction = "none", label_smoothing = 0.2})
        local nll = F.nll_loss(x:log_softmax(1), t, {weight = w})
        local pattern = (torch.arange(none:numel(), {device = x.device}):to(x.dtype):view(none.shape) * 0.61):sin()
        return {mean + 0.3 * sum + (none * pattern):sum() + 0.7 * nll, mean, sum, none, nll}
      end, shapes = {{6, 5}, {3, 4, 5}, {0, 4}, {2100, 600}}, layouts = {"contig", "strided"}})

-- the recurrent cells through the recurrence op: x (L 4, N 3, 12) is the input projection
case({name = "recurrent layers", ops = {"lstm_cell", "lstm_cell_backward", "gru_cell", "gru_cell_backward",
                                       "rnn_cell", "rnn_cell_backward"}, dtypes = {"float32", "float64"}, grad = true,
      tol = {float32 = 1e-4},
      fn = function(x)
        local w = (torch.arange(36, {device = x.device}):to(x.dtype):view(12, 3) * 0.37):sin()
        local o1, h1, c1 = torch._rnn_layer("lstm", x, w, {batch_sizes = {3, 2, 2, 1}})
        local o2, h2 = torch._rnn_layer("gru", x:narrow(2, 0, 9), w:narrow(0, 0, 9), {reverse = true})
        local o3 = torch._rnn_layer("rnn_tanh", x:narrow(2, 0, 3), w:narrow(0, 3, 3))
        local o4 = torch._rnn_layer("rnn_relu", x:narrow(2, 3, 3), w:narrow(0, 6, 3), {reverse = true})
        return {o1 + o2 + o3 + o4, h1, c1, h2}
      end, shapes = {{4, 3, 12}}, layouts = {"contig", "strided"}})

-- fused attention: x (B 2, L 5, 8) as query, key and value, with a float mask and causal
case({name = "scaled dot-product attention", ops = {"sdpa_forward", "sdpa_backward"}, dtypes = {"float32", "float64"},
      grad = true, tol = {float32 = 1e-4},
      fn = function(x)
        local mask = (torch.arange(25, {device = x.device}):to(x.dtype):view(5, 5) * 0.7):sin()
        local a = F.scaled_dot_product_attention(x, x:narrow(1, 1, 4), x:narrow(1, 0, 4), {attn_mask = mask:narrow(1, 0, 4)})
        local b = F.scaled_dot_product_attention(x, x, x, {is_causal = true, scale = 0.5})
        return {a, b}
      end, shapes = {{2, 5, 8}}, layouts = {"contig", "strided"}})

-- optimizers: the fused steps, from the same parameters and gradients
local function optim_case(make)
  return function(p, g)
    local q = p:detach():clone():requires_grad_(true)
    local opt = make({q})
    for _ = 1, 3 do
      opt:zero_grad()
      q.grad = g:clone()
      opt:step()
    end
    return q:detach()
  end
end
for _, o in ipairs({{"adam_step", function(ps) return optim.Adam(ps, {lr = 0.01, weight_decay = 0.1}) end},
                    {"sgd_step", function(ps) return optim.SGD(ps, {lr = 0.1, momentum = 0.9, nesterov = true}) end},
                    {"rmsprop_step", function(ps) return optim.RMSprop(ps, {lr = 0.01, momentum = 0.5}) end}}) do
  case({name = o[1], ops = {o[1]}, nin = 2, dtypes = {"float32", "float64"}, fn = optim_case(o[2]), tol = {float32 = 1e-5},
        shapes = {{7, 3}}, layouts = {"contig"}})
end

-- a group past one launch's table (48 parameters): 61 parameters, one of them empty, of
-- several sizes, float32 and float64 mixed
local function many_params_case(make)
  return function(p, g)
    local qs, gs = {}, {}
    for i = 0, 60 do
      local n = i == 17 and 0 or i % 7 + 1
      local q = p[i]:narrow(0, 0, n):clone()
      if i % 3 == 0 then q = q:double() end
      qs[#qs + 1] = q:requires_grad_(true)
      gs[#gs + 1] = g[i]:narrow(0, 0, n):clone():to(q.dtype)
    end
    local opt = make(qs)
    for _ = 1, 2 do
      opt:zero_grad()
      for i, q in ipairs(qs) do q.grad = gs[i] end
      opt:step()
    end
    local out = {}
    for i, q in ipairs(qs) do out[i] = q:detach() end
    return out
  end
end
for _, o in ipairs({{"adam_step", function(ps) return optim.AdamW(ps, {lr = 0.01}) end},
                    {"sgd_step", function(ps) return optim.SGD(ps, {lr = 0.1, momentum = 0.9}) end}}) do
  case({name = o[1] .. " over 61 parameters", ops = {o[1]}, nin = 2, dtypes = {"float32"}, fn = many_params_case(o[2]),
        tol = {float32 = 1e-5}, shapes = {{61, 7}}, layouts = {"contig"}})
end

-- zero_grad({set_to_none = false}): the grads zeroed by one _foreach_zero_ call
case({name = "foreach_zero", ops = {"foreach_zero"}, nin = 1, dtypes = {"float32", "float64"},
      fn = function(x)
        local ps = {}
        for i = 0, 60 do -- past one launch's table, one of them empty
          local n = i == 17 and 0 or i % 7 + 1
          local q = x[i]:narrow(0, 0, n):clone():requires_grad_(true)
          q.grad = x[i]:narrow(0, 0, n) + 1
          ps[#ps + 1] = q
        end
        optim.SGD(ps):zero_grad({set_to_none = false})
        local out = {}
        for i, q in ipairs(ps) do out[i] = q.grad end
        return out
      end, shapes = {{61, 7}}, layouts = {"contig"}})

-- binary_cross_entropy's range check (its error path: test_losses, test_cuda_counts)
case({name = "binary_cross_entropy", ops = {"check_range"}, nin = 2, dtypes = {"float32", "float64", "float16"},
      tol = {float16 = 5e-3}, fn = function(a, b)
        return {F.binary_cross_entropy(a:sigmoid(), b:sigmoid(), {reduction = "none"}), F.binary_cross_entropy(a:sigmoid(), b:sigmoid())}
      end, shapes = {{5, 7}, {0, 3}}, layouts = {"contig", "strided"}})

-- clip_grad_norm_'s fused kernels: 61 gradients (past one table; one empty, one past a chunk),
-- the 2-norm and the max, clipped (max_norm below the total) and not
case({name = "clip_grad_norm", ops = {"clip_grad_norm"}, nin = 1, dtypes = {"float32", "float64"}, tol = {float32 = 1e-5},
      fn = function(x)
        local out = {}
        for _, p in ipairs({2, math.huge}) do
          for _, max_norm in ipairs({0.5, 1e6}) do
            local ps = {}
            for i = 0, 60 do
              local n = i == 17 and 0 or i == 40 and 20000 or i % 9 + 1
              local q = x:narrow(0, i, 1):expand(n + 1, x:size(1)):reshape(-1):narrow(0, 0, n):clone()
              ps[#ps + 1] = q:requires_grad_(true)
              q.grad = (q:detach() * (i + 1)):sin()
            end
            out[#out + 1] = nn.utils.clip_grad_norm_(ps, max_norm, {norm_type = p})
            for _, q in ipairs(ps) do out[#out + 1] = q.grad end
          end
        end
        return out
      end, shapes = {{61, 61}}, layouts = {"contig"}})

-- large: past 2^20 elements (several blocks of every grid-stride loop, 64-bit-safe sizes)
case({name = "large", ops = {"add", "sum", "cumsum", "softmax", "sort"}, dtypes = {"float32"}, tol = {float32 = 1e-3},
      fn = function(x) return {x + 1, x:sum(), x:view(1025, 1024):cumsum(1), x:view(1025, 1024):softmax(1), x[{{0, 5000}}]:sort()} end,
      shapes = {{1025 * 1024}}, layouts = {"contig", "offset"}})

-- mixed precision: GradScaler's fused check and unscale (a strided tensor too), and
-- the found_inf flag of a tensor holding an inf
case({name = "amp unscale", ops = {"amp_non_finite_check_and_unscale"}, nin = 2,
      dtypes = {"float32", "float64", "float16", "bfloat16"}, shapes = {{7, 3}}, layouts = {"contig"},
      fn = function(a, b)
        local x, y, z = a:clone(), b:t():clone():t(), a:clone()
        local found, found_z = torch.zeros({}, {device = a.device}), torch.zeros({}, {device = a.device})
        torch._amp_foreach_non_finite_check_and_unscale_({x, y}, found, torch.full({}, 0.125, {device = a.device}))
        z[{2, 1}] = math.huge
        torch._amp_foreach_non_finite_check_and_unscale_({z}, found_z, torch.full({}, 0.5, {device = a.device}))
        return {x, y, found, found_z}
      end})

-- ---- the tests ------------------------------------------------------------------------------
for _, spec in ipairs(cases) do
  test(spec.name .. " on cuda equals the CPU", function()
    need_cuda()
    torch.backends._dispatch_counts(true)
    local before = torch.backends._dispatch_counts().cuda
    for _, dt in ipairs(spec.dtypes) do
      for _, shape in ipairs(spec.shapes) do
        for _, layout in ipairs(spec.layouts) do run_case(spec, shape, dt, layout) end
      end
    end
    local after = torch.backends._dispatch_counts().cuda
    for _, op in ipairs(spec.ops) do
      ok((after[op] or 0) > (before[op] or 0), spec.name .. ": op " .. op .. " never ran on cuda")
    end
  end)
end

-- random ops: the same generator state gives the same bits on both devices
test("random ops give the CPU's values for the same seed", function()
  need_cuda()
  for _, make in ipairs({
    function(d) return torch.rand({5, 7}, {device = d}) end,
    -- four elements a Philox counter (rand below float64): whole and partial counters
    function(d) return torch.rand({1003}, {device = d}) end,
    function(d) return torch.rand({37}, {device = d, dtype = "float16"}) end,
    function(d) return torch.rand({38}, {device = d, dtype = "bfloat16"}) end,
    function(d) return torch.empty({6, 11}, {device = d}):uniform_(-2, 3) end,
    function(d) return torch.rand({9}, {device = d, dtype = "float64"}) end,
    function(d) return torch._dropout_mask(torch.empty({1003}, {device = d}), 0.3) end, -- F.dropout's factors
    function(d) return torch._dropout_mask(torch.empty({37}, {device = d, dtype = "float16"}), 0.1) end,
    function(d) return torch._dropout_mask(torch.empty({9}, {device = d, dtype = "float64"}), 0.5) end,
    function(d) return torch.randn({1000}, {device = d, dtype = "float64"}) end,
    function(d) return torch.randint(-5, 100, {6, 6}, {device = d}) end,
    function(d) return torch.randperm(300, {device = d}) end,
    function(d) return torch.arange(3, 40, 3, {device = d}) end,
    function(d) return torch.linspace(-1, 1, 9, {device = d}) end,
  }) do
    torch.manual_seed(7)
    local a = make("cpu")
    torch.manual_seed(7)
    local b = make("cuda")
    compare(a, b, 1e-6, "random op " .. tostring(a.shape))
  end
end)

test("every registry op ran on cuda in some case", function()
  need_cuda()
  if os.getenv("TEST_FILTER") then T.skip("TEST_FILTER ran only some cases") end
  local counts = torch.backends._dispatch_counts(false).cuda
  local exempt = { -- TS_KIND_LIBRARY: cuDNN's, where it loads (the composed path ran im2col instead)
    conv2d_forward = true, conv2d_backward_input = true, conv2d_backward_weight = true}
  local missing, n = {}, 0
  for op, calls in pairs(counts) do
    n = n + 1
    if calls == 0 and not exempt[op] then missing[#missing + 1] = op end
  end
  table.sort(missing)
  ok(n >= 90, "the registry lists " .. n .. " ops")
  eq(table.concat(missing, ", "), "", "registry ops no case ran on cuda")
end)

T.run()
