-- nn.functional: PyTorch's torch.nn.functional over torch ops. Arguments as
-- PyTorch takes them, positionally or in a trailing options table:
-- F.conv2d(x, w, b, {stride = 2, padding = 1}) or F.conv2d(x, w, b, 2, 1).
-- Ops with no kernel of their own (leaky_relu, hardswish, softmin, normalize,
-- the 1-d pools, dropout, pad) are composed from differentiable ones.
local torch = torch
local C = require "tensh.nn.common"
local A = require "tensh.args"
local interp = require "tensh.nn.interpolation"
local raise, args, shape_str, pyfloat = C.raise, C.args, C.shape_str, C.pyfloat
local is_tensor = torch.is_tensor

local F = {}
F.cosine_similarity = torch.cosine_similarity -- tensor_extra.lua's, which loads first

-- input, weight, bias: arguments 1, 2, 3 of every function that takes them
local position = {input = 1, weight = 2, bias = 3}
local function check_tensor(fn, v, what)
  return A.check_tensor(fn, position[what or "input"], v)
end

-- Whether an in-place variant may run: PyTorch's in-place activations are
-- hints; where the result feeds autograd we compute out of place instead.
local function can_inplace(x) return not (x.requires_grad and torch.is_grad_enabled()) end

-- ---- activations ------------------------------------------------------------------

function F.relu(x, ...)
  check_tensor("relu", x)
  local a = args("relu", {"inplace"}, ...)
  if a.inplace then return x:relu_() end
  return x:relu()
end
function F.relu_(x) return check_tensor("relu_", x):relu_() end

function F.relu6(x, ...)
  check_tensor("relu6", x)
  local a = args("relu6", {"inplace"}, ...)
  if a.inplace then return x:clamp_(0, 6) end
  if not x:is_floating_point() then return x:clamp(0, 6) end
  -- PyTorch's gradient passes strictly inside (0, 6) only: not at the kinks (clamp's
  -- does) nor at NaN (its vectorised hardtanh_backward masks with 0 < x < 6)
  local inside
  do
    local _ <close> = torch.no_grad()
    inside = x:gt(0):logical_and(x:lt(6))
  end
  return torch.where(inside, x, x:detach():clamp(0, 6))
end

function F.leaky_relu(x, ...)
  check_tensor("leaky_relu", x)
  local a = args("leaky_relu", {"negative_slope", "inplace"}, ...)
  local slope = a.negative_slope or 0.01
  if type(slope) ~= "number" then raise("leaky_relu: negative_slope must be a number, got %s", type(slope)) end
  -- the factor is a constant of x's sign, so its gradient is exactly PyTorch's (1 or slope)
  local factor
  do
    local _ <close> = torch.no_grad()
    factor = torch.where(x:gt(0), torch.ones_like(x), torch.full_like(x, slope))
  end
  if a.inplace then return x:mul_(factor) end
  return x * factor
end

function F.gelu(x, ...)
  check_tensor("gelu", x)
  local a = args("gelu", {"approximate"}, ...)
  local ap = a.approximate or "none"
  if ap ~= "none" and ap ~= "tanh" then raise("gelu: approximate must be 'none' or 'tanh', got %s", A.show(ap)) end
  return torch.gelu(x, {approximate = ap})
end

function F.silu(x, ...)
  check_tensor("silu", x)
  local a = args("silu", {"inplace"}, ...)
  if a.inplace then return x:silu_() end
  return x:silu()
end

function F.sigmoid(x) return check_tensor("sigmoid", x):sigmoid() end
function F.tanh(x) return check_tensor("tanh", x):tanh() end

-- x * relu6(x + 3) / 6; its derivative (2x + 3) / 6 on [-3, 3] comes out of clamp's
function F.hardswish(x, ...)
  check_tensor("hardswish", x)
  local a = args("hardswish", {"inplace"}, ...)
  local y = x * (x + 3):clamp(0, 6):div(6)
  if a.inplace and can_inplace(x) then return x:copy_(y) end
  return y
end

-- relu6(x + 3) / 6, with PyTorch's gradient: 1/6 strictly inside (-3, 3), else 0
function F.hardsigmoid(x, ...)
  check_tensor("hardsigmoid", x)
  local a = args("hardsigmoid", {"inplace"}, ...)
  local inside, high
  do
    local _ <close> = torch.no_grad()
    inside = x:gt(-3):logical_and(x:lt(3))
    high = torch.where(x:ne(x), x, x:ge(3):to(x.dtype)) -- NaN stays NaN, as PyTorch
  end
  local y = torch.where(inside, x / 6 + 0.5, high)
  if a.inplace and can_inplace(x) then return x:copy_(y) end
  return y
end

-- ---- activations with kernels of their own (torch._nn, src/ops/op_nn_act.c) ------------------

local nnc = torch._nn

-- y, or x overwritten with it when inplace is asked and autograd allows it (as hardswish)
local function maybe_inplace(x, y, inplace)
  if inplace and can_inplace(x) then return x:copy_(y) end
  return y
end

-- softplus(x, beta = 1, threshold = 20): log(1 + exp(beta x)) / beta, x itself where
-- beta x > threshold
function F.softplus(x, ...)
  local fn = "nn.functional.softplus"
  check_tensor("softplus", x)
  local a = args(fn, {"beta", "threshold"}, ...)
  local beta = A.check_number(fn, "beta", a.beta == nil and 1 or a.beta)
  local threshold = A.check_number(fn, "threshold", a.threshold == nil and 20 or a.threshold)
  if beta == 0 then raise("%s: beta must not be 0 (it divides)", fn) end
  return nnc.softplus(x, beta, threshold)
end

-- elu(x, alpha = 1.0, inplace = false): x where x > 0, alpha (exp(x) - 1) elsewhere
function F.elu(x, ...)
  local fn = "nn.functional.elu"
  check_tensor("elu", x)
  local a = args(fn, {"alpha", "inplace"}, ...)
  local alpha = A.check_number(fn, "alpha", a.alpha == nil and 1.0 or a.alpha)
  return maybe_inplace(x, nnc.elu(x, alpha), a.inplace)
end

-- hardtanh(x, min_val = -1.0, max_val = 1.0, inplace = false): x clamped to [min_val, max_val]
function F.hardtanh(x, ...)
  local fn = "nn.functional.hardtanh"
  check_tensor("hardtanh", x)
  local a = args(fn, {"min_val", "max_val", "inplace"}, ...)
  local lo = A.check_number(fn, "min_val", a.min_val == nil and -1.0 or a.min_val)
  local hi = A.check_number(fn, "max_val", a.max_val == nil and 1.0 or a.max_val)
  return maybe_inplace(x, nnc.hardtanh(x, lo, hi), a.inplace)
end

-- logsigmoid(x): log(1 / (1 + exp(-x))), computed without overflow
function F.logsigmoid(x) return nnc.log_sigmoid(check_tensor("logsigmoid", x)) end

-- mish(x, inplace = false): x tanh(softplus(x))
function F.mish(x, ...)
  check_tensor("mish", x)
  local a = args("nn.functional.mish", {"inplace"}, ...)
  return maybe_inplace(x, nnc.mish(x), a.inplace)
end

-- PyTorch's implicit dim for softmax called without one (legacy): 0 for 0-, 1- and 3-D
local function softmax_dim(x, dim)
  if dim ~= nil then return dim end
  local n = x:dim()
  return (n == 0 or n == 1 or n == 3) and 0 or 1
end

-- softmax and log_softmax: (x, dim, _stacklevel, dtype), checked here so
-- that an error names the argument the user gave, not the ops' own
local function softmax_args(name, x, ...)
  local fn = "nn.functional." .. name
  check_tensor(name, x)
  local a = args(fn, {"dim", "_stacklevel", "dtype"}, ...)
  if a.dim ~= nil then C.check_int(fn, "dim", a.dim) end
  if a.dtype ~= nil then x = x:to(A.check_dtype(fn, "dtype", a.dtype)) end
  return x, softmax_dim(x, a.dim)
end

function F.softmax(x, ...) return torch.softmax(softmax_args("softmax", x, ...)) end
function F.log_softmax(x, ...) return torch.log_softmax(softmax_args("log_softmax", x, ...)) end
-- softmin(x, dim, _stacklevel, dtype): softmax of -x, as PyTorch composes it
function F.softmin(x, ...)
  local y, dim = softmax_args("softmin", x, ...)
  return torch.softmax(-y, dim)
end

-- ---- dropout --------------------------------------------------------------------------

local function check_p(fn, p)
  if type(p) ~= "number" or p < 0 or p > 1 then
    raise("%s: dropout probability has to be between 0 and 1, but got %s", fn,
      type(p) == "number" and pyfloat(p) or type(p))
  end
end
F._check_dropout_p = check_p

-- keeps each element with probability 1 - p and scales the kept ones by 1 / (1 - p)
function F.dropout(x, ...)
  check_tensor("dropout", x)
  local a = args("dropout", {"p", "training", "inplace"}, ...)
  local p = a.p == nil and 0.5 or a.p
  check_p("dropout", p)
  if not A.is_floating_dtype(x.dtype) then
    raise("nn.functional.dropout: expected a floating point input, got %s (convert it with x:float())", x.dtype)
  end
  local training = a.training == nil and true or a.training
  if not training or p == 0 or x:numel() == 0 then return x end
  local keep
  do
    local _ <close> = torch.no_grad()
    if p == 1 then keep = torch.zeros_like(x)
    else keep = torch._dropout_mask(x, p) end -- rand_like(x):ge(p):to(x.dtype):mul_(1 / (1 - p)) in one kernel
  end
  if a.inplace then return x:mul_(keep) end
  return x * keep
end

-- ---- linear and convolution -----------------------------------------------------------

-- x (*, in) @ weight (out, in)^T + bias (out)
function F.linear(x, w, b)
  check_tensor("linear", x)
  check_tensor("linear", w, "weight")
  if b ~= nil then check_tensor("linear", b, "bias") end
  if x:dim() == 2 and b ~= nil then return torch.addmm(b, x, w:t()) end
  if x:dim() > 2 and w:dim() == 2 then
    -- (*, in) as rows of one GEMM: a batched matmul would compute the weight's
    -- gradient per batch and sum it (a (batch, out, in) temporary)
    local shape = x.shape:totable()
    shape[#shape] = w.shape[0]
    local rows = x:reshape(-1, x.shape[-1])
    local y = b ~= nil and torch.addmm(b, rows, w:t()) or rows:mm(w:t())
    return y:view(shape)
  end
  local y = x:matmul(w:t())
  if b ~= nil then y = y + b end
  return y
end

-- padding = "same" (stride 1) or "valid": per-dim symmetric padding, plus
-- the extra right-side padding that an even dilated kernel needs (for F.pad)
local function conv_padding(fn, padding, w, dilation, stride, nd)
  if type(padding) ~= "string" then return padding, nil end
  if padding == "valid" then return 0, nil end
  if padding ~= "same" then raise("%s: padding must be an integer, a list, 'same' or 'valid', got '%s'", fn, padding) end
  for d = 1, nd do
    if stride[d] ~= 1 then raise("%s: padding='same' is not supported for strided convolutions", fn) end
  end
  local sym, extra, need_extra = {}, {}, false
  for d = 1, nd do
    local k = w.shape[w:dim() - nd + d - 1]
    local total = dilation[d] * (k - 1)
    sym[d] = total // 2
    extra[d] = total - 2 * sym[d]
    if extra[d] > 0 then need_extra = true end
  end
  if not need_extra then return sym, nil end
  local pad = {} -- F.pad order: last dim first, (left, right)
  for d = nd, 1, -1 do
    pad[#pad + 1] = 0
    pad[#pad + 1] = extra[d]
  end
  return sym, pad
end

local function conv(fn, nd, x, w, b, ...)
  check_tensor(fn, x)
  check_tensor(fn, w, "weight")
  if b ~= nil then check_tensor(fn, b, "bias") end
  local a = args(fn, {"stride", "padding", "dilation", "groups"}, ...)
  local stride = C.ntuple(fn, "stride", a.stride or 1, nd, 1)
  local dilation = C.ntuple(fn, "dilation", a.dilation or 1, nd, 1)
  local padding, extra = conv_padding(fn, a.padding or 0, w, dilation, stride, nd)
  if extra then x = F.pad(x, extra) end
  local opts = {stride = stride, padding = C.ntuple(fn, "padding", padding, nd, 0), dilation = dilation,
    groups = C.check_int(fn, "groups", a.groups or 1, 1)}
  if nd == 1 then
    opts.stride, opts.padding, opts.dilation = opts.stride[1], opts.padding[1], opts.dilation[1]
    return torch.conv1d(x, w, b, opts)
  end
  return torch.conv2d(x, w, b, opts)
end

function F.conv1d(x, w, b, ...) return conv("conv1d", 1, x, w, b, ...) end
function F.conv2d(x, w, b, ...) return conv("conv2d", 2, x, w, b, ...) end

-- ---- pooling ------------------------------------------------------------------------------

-- Sizes may be torch.Size values, as in PyTorch (a layer's output_size = x.shape[...]): the
-- kernels take plain lists, and a torch.Size counts from 0
local plain = A.plain

function F.max_pool2d(x, kernel_size, ...)
  check_tensor("max_pool2d", x)
  local a = args("max_pool2d", {"stride", "padding", "dilation", "ceil_mode", "return_indices"}, ...)
  if kernel_size == nil then raise("max_pool2d: kernel_size is required") end
  return torch.max_pool2d(x, plain(kernel_size), {stride = plain(a.stride), padding = plain(a.padding or 0),
    dilation = plain(a.dilation or 1), ceil_mode = a.ceil_mode or false, return_indices = a.return_indices or false})
end

function F.avg_pool2d(x, kernel_size, ...)
  check_tensor("avg_pool2d", x)
  local a = args("avg_pool2d", {"stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"}, ...)
  if kernel_size == nil then raise("avg_pool2d: kernel_size is required") end
  if a.divisor_override ~= nil then raise("avg_pool2d: divisor_override is not supported") end
  local count = a.count_include_pad
  if count == nil then count = true end
  return torch.avg_pool2d(x, plain(kernel_size), {stride = plain(a.stride), padding = plain(a.padding or 0),
    ceil_mode = a.ceil_mode or false, count_include_pad = count})
end

function F.adaptive_avg_pool2d(x, output_size)
  check_tensor("adaptive_avg_pool2d", x)
  if output_size == nil then raise("adaptive_avg_pool2d: output_size is required") end
  return torch.adaptive_avg_pool2d(x, C.ntuple("nn.functional.adaptive_avg_pool2d", "output_size", output_size, 2, 0))
end

-- adaptive_max_pool2d(x, output_size, return_indices = false): the maxima of
-- adaptive_avg_pool2d's windows (and their indices into H*W)
function F.adaptive_max_pool2d(x, output_size, ...)
  local fn = "nn.functional.adaptive_max_pool2d"
  check_tensor("adaptive_max_pool2d", x)
  local a = args(fn, {"return_indices"}, ...)
  if output_size == nil then raise("%s: output_size is required", fn) end
  local y, idx = nnc.adaptive_max_pool2d(x, C.ntuple(fn, "output_size", output_size, 2, 0))
  if a.return_indices then return y, idx end
  return y
end

-- The 1-d pools run the 2-d kernels on (N, C, 1, L) (as PyTorch does): the arguments
-- are single integers (or lists of one) checked here, so errors speak of 1-d sizes.
local function single(fn, what, v, min)
  v = plain(v)
  if type(v) == "table" then
    if #v ~= 1 then raise("%s: %s must be an integer or a list of 1 integer, got a list of %d", fn, what, #v) end
    v = v[1]
  end
  return C.check_int(fn, what, v, min)
end

-- kernel k, stride s, padding p, dilation d of a 1-d pool over x (N, C, L) or (C, L): checked,
-- with PyTorch's output length rule
local function pool1d_args(fn, x, kernel_size, a)
  if kernel_size == nil then raise("%s: kernel_size is required", fn) end
  if x:dim() ~= 2 and x:dim() ~= 3 then
    raise("%s: expected a 2-D (C, L) or 3-D (N, C, L) input, got shape %s", fn, shape_str(x))
  end
  local k = single(fn, "kernel_size", kernel_size, 1)
  local stride = plain(a.stride)
  local s = (stride == nil or (type(stride) == "table" and #stride == 0)) and k or single(fn, "stride", stride, 1)
  local p = single(fn, "padding", a.padding or 0, 0)
  local d = single(fn, "dilation", a.dilation or 1, 1)
  if p > k // 2 then
    raise("%s: padding should be at most half of kernel size, but got padding=%d and kernel_size=%d", fn, p, k)
  end
  local L = x.shape[-1]
  local out = (L + 2 * p - d * (k - 1) - 1 + (a.ceil_mode and s - 1 or 0)) // s + 1
  if a.ceil_mode and (out - 1) * s >= L + p then out = out - 1 end
  if out < 1 then
    raise("%s: given an input of length %d, the output length %d is too small (kernel_size %d, stride %d, padding %d, "
      .. "dilation %d)", fn, L, out, k, s, p, d)
  end
  return k, s, p, d
end

-- max_pool1d(x, kernel_size, stride = kernel_size, padding = 0, dilation = 1, ceil_mode = false,
-- return_indices = false); indices count along L
function F.max_pool1d(x, kernel_size, ...)
  local fn = "nn.functional.max_pool1d"
  check_tensor("max_pool1d", x)
  local a = args(fn, {"stride", "padding", "dilation", "ceil_mode", "return_indices"}, ...)
  local k, s, p, d = pool1d_args(fn, x, kernel_size, a)
  local y, idx = torch.max_pool2d(x:unsqueeze(-2), {1, k}, {stride = {1, s}, padding = {0, p}, dilation = {1, d},
    ceil_mode = a.ceil_mode or false, return_indices = true})
  if a.return_indices then return y:squeeze(-2), idx:squeeze(-2) end
  return y:squeeze(-2)
end

-- avg_pool1d(x, kernel_size, stride = kernel_size, padding = 0, ceil_mode = false, count_include_pad = true)
function F.avg_pool1d(x, kernel_size, ...)
  local fn = "nn.functional.avg_pool1d"
  check_tensor("avg_pool1d", x)
  local a = args(fn, {"stride", "padding", "ceil_mode", "count_include_pad"}, ...)
  local k, s, p = pool1d_args(fn, x, kernel_size, a)
  local count = a.count_include_pad
  if count == nil then count = true end
  return torch.avg_pool2d(x:unsqueeze(-2), {1, k}, {stride = {1, s}, padding = {0, p},
    ceil_mode = a.ceil_mode or false, count_include_pad = count}):squeeze(-2)
end

-- ---- normalisation ------------------------------------------------------------------------

-- F.batch_norm(x, running_mean, running_var, weight, bias, training = false, momentum = 0.1, eps = 1e-5)
-- the optional weight, bias and eps of batch_norm and layer_norm
local function affine_args(fn, a)
  A.check_optional_tensor(fn, "weight", a.weight)
  A.check_optional_tensor(fn, "bias", a.bias)
  return A.check_number(fn, "eps", a.eps or 1e-5)
end

function F.batch_norm(x, running_mean, running_var, ...)
  local fn = "nn.functional.batch_norm"
  check_tensor("batch_norm", x)
  A.check_optional_tensor(fn, "running_mean", running_mean)
  A.check_optional_tensor(fn, "running_var", running_var)
  local a = args(fn, {"weight", "bias", "training", "momentum", "eps"}, ...)
  local eps = affine_args(fn, a)
  local training = A.check_boolean(fn, "training", a.training or false)
  local momentum = a.momentum
  if momentum == nil then momentum = 0.1 end
  local out = torch.batch_norm(x, running_mean, running_var, a.weight, a.bias, training,
    A.check_number(fn, "momentum", momentum), eps)
  return out
end

-- F.layer_norm(x, normalized_shape, weight, bias, eps = 1e-5)
function F.layer_norm(x, normalized_shape, ...)
  local fn = "nn.functional.layer_norm"
  check_tensor("layer_norm", x)
  local shape = normalized_shape
  shape = plain(shape)
  if type(shape) == "table" then
    -- every entry up to the length (a hole is a nil entry), and no more dims than x has
    for i = 1, #shape do C.check_int(fn, ("normalized_shape[%d]"):format(i), shape[i]) end
    for k in pairs(shape) do
      if math.type(k) ~= "integer" or k < 1 or k > #shape then
        raise("%s: normalized_shape must be a list of integers, got a table with the key %s", fn, A.show(k))
      end
    end
    if #shape > x:dim() then
      raise("%s: normalized_shape %s has more dims than the input's %d", fn, A.show(shape), x:dim())
    end
  elseif shape == nil or type(shape) ~= "number" then
    raise("%s: normalized_shape must be an integer or a list of integers, got %s", fn, A.show(shape))
  else
    C.check_int(fn, "normalized_shape", shape)
  end
  local a = args(fn, {"weight", "bias", "eps"}, ...)
  local eps = affine_args(fn, a)
  local out = torch.layer_norm(x, shape, a.weight, a.bias, eps)
  return out
end

-- F.group_norm(x, num_groups, weight, bias, eps = 1e-5): x (N, C, *) normalised over each
-- sample's groups of C / num_groups channels, then scaled and shifted per channel
function F.group_norm(x, num_groups, ...)
  local fn = "nn.functional.group_norm"
  check_tensor("group_norm", x)
  if num_groups == nil then raise("%s: num_groups is required", fn) end
  C.check_int(fn, "num_groups", num_groups, 1)
  local a = args(fn, {"weight", "bias", "eps"}, ...)
  return nnc.group_norm(x, num_groups, a.weight, a.bias, affine_args(fn, a))
end

-- F.normalize(x, p = 2.0, dim = 1, eps = 1e-12): x / max(||x||_p along dim, eps), as
-- PyTorch composes it
function F.normalize(x, ...)
  local fn = "nn.functional.normalize"
  check_tensor("normalize", x)
  local a = args(fn, {"p", "dim", "eps", "out"}, ...)
  if a.out ~= nil then raise("%s: out is not supported (use the returned tensor)", fn) end
  local p = A.check_number(fn, "p", a.p == nil and 2.0 or a.p)
  local dim = C.check_int(fn, "dim", a.dim == nil and 1 or a.dim)
  local eps = A.check_number(fn, "eps", a.eps == nil and 1e-12 or a.eps)
  return x / x:norm(p, dim, {keepdim = true}):clamp_min(eps):expand_as(x)
end

-- ---- interpolation ------------------------------------------------------------------------

-- F.interpolate(x, size, scale_factor, mode = "nearest", align_corners, recompute_scale_factor,
-- antialias = false): x (N, C, L) ("nearest", "linear") or (N, C, H, W) ("nearest",
-- "bilinear") resized to size, or to floor(in * scale_factor) with the scale itself used
-- for the source positions (unless recompute_scale_factor), as PyTorch 1.13
function F.interpolate(x, ...)
  local fn = "nn.functional.interpolate"
  check_tensor("interpolate", x)
  local a = args(fn, {"size", "scale_factor", "mode", "align_corners", "recompute_scale_factor", "antialias"}, ...)
  local mode, align, recompute = interp.options(fn, a)
  local nd = x:dim() - 2
  if nd ~= 1 and nd ~= 2 then
    raise("%s: expected a 3-D (N, C, L) or 4-D (N, C, H, W) input, got shape %s", fn, shape_str(x))
  end
  if mode == "linear" and nd ~= 1 then raise("%s: got %dD input, but linear mode needs 3D input", fn, x:dim()) end
  if mode == "bilinear" and nd ~= 2 then raise("%s: got %dD input, but bilinear mode needs 4D input", fn, x:dim()) end
  local size, factor = a.size, a.scale_factor
  local out, scales
  if size ~= nil then
    out = interp.spatial(fn, "size", size, nd, true)
  else
    scales = interp.spatial(fn, "scale_factor", factor, nd, false)
    out = {}
    for i = 1, nd do
      out[i] = math.floor(x.shape[i + 1] * scales[i])
      if math.type(out[i]) ~= "integer" then raise("%s: scale_factor %s gives too large an output", fn, A.show(scales[i])) end
    end
    if recompute then scales = nil end -- the kernel recomputes the scale from the sizes
  end
  return nnc.upsample(x, mode == "nearest" and "nearest" or "linear", out, scales, align)
end

-- ---- embedding, one_hot, pad ------------------------------------------------------------

-- F.embedding(indices, weight, padding_idx): rows of weight; the padding row
-- gets no gradient
function F.embedding(input, weight, ...)
  check_tensor("embedding", input)
  check_tensor("embedding", weight, "weight")
  local a = args("embedding", {"padding_idx", "max_norm", "norm_type", "scale_grad_by_freq", "sparse"}, ...)
  if a.max_norm ~= nil then raise("embedding: max_norm is not supported") end
  if a.scale_grad_by_freq then raise("embedding: scale_grad_by_freq is not supported") end
  if a.sparse then raise("embedding: sparse gradients are not supported") end
  if weight:dim() ~= 2 then raise("embedding: 'weight' must be 2-D (num_embeddings, embedding_dim), got %d-d", weight:dim()) end
  local pad = a.padding_idx
  if pad ~= nil then
    pad = C.check_int("embedding", "padding_idx", pad)
    local n = weight.shape[0]
    if pad < -n or pad >= n then raise("embedding: padding_idx %d must be within num_embeddings (%d)", pad, n) end
    if pad < 0 then pad = pad + n end
  end
  return torch.embedding(weight, input, pad ~= nil and {padding_idx = pad} or nil)
end

function F.one_hot(t, num_classes)
  check_tensor("one_hot", t)
  return torch.one_hot(t, num_classes and C.check_int("nn.functional.one_hot", "num_classes", num_classes) or -1)
end

-- F.pad(x, {left, right[, top, bottom, ...]}, mode = "constant", value = 0): pads
-- the last dims (last first); negative amounts crop. Built from cat/narrow.
function F.pad(x, pad, ...)
  check_tensor("pad", x)
  local a = args("pad", {"mode", "value"}, ...)
  local mode = a.mode or "constant"
  if mode ~= "constant" then raise("pad: only mode 'constant' is supported, got '%s'", tostring(mode)) end
  pad = plain(pad)
  if type(pad) ~= "table" or #pad % 2 ~= 0 then raise("pad: padding length must be divisible by 2") end
  if #pad // 2 > x:dim() then
    raise("pad: padding length %d is too large for an input of shape %s (at most 2 per dim)", #pad, shape_str(x))
  end
  local value = a.value or 0
  local out = x
  for i = 1, #pad // 2 do
    local d = x:dim() - i
    local l = C.check_int("pad", "padding", pad[2 * i - 1])
    local r = C.check_int("pad", "padding", pad[2 * i])
    if l < 0 then out = out:narrow(d, -l, out.shape[d] + l); l = 0 end
    if r < 0 then out = out:narrow(d, 0, out.shape[d] + r); r = 0 end
    if l > 0 or r > 0 then
      local parts = {}
      local function block(n)
        local s = out.shape:totable()
        s[d + 1] = n
        return torch.full(s, value, {dtype = out.dtype, device = tostring(out.device)})
      end
      if l > 0 then parts[#parts + 1] = block(l) end
      parts[#parts + 1] = out
      if r > 0 then parts[#parts + 1] = block(r) end
      out = torch.cat(parts, d)
    end
  end
  return out
end

return F
