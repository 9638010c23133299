-- nn.functional: PyTorch's torch.nn.functional over torch ops. Arguments as
-- PyTorch takes them, positionally or in a trailing options table:
-- F.conv2d(x, w, b, {stride = 2, padding = 1}) or F.conv2d(x, w, b, 2, 1).
-- Ops with no kernel of their own (leaky_relu, hardswish, dropout, pad) are
-- composed from differentiable ones.
local torch = torch
local C = require "tensh.nn.common"
local A = require "tensh.args"
local raise, args, shape_str, pyfloat = C.raise, C.args, C.shape_str, C.pyfloat
local is_tensor = torch.is_tensor

local F = {}

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
  return x:clamp(0, 6)
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
    else keep = torch.rand_like(x):ge(p):to(x.dtype):mul_(1 / (1 - p)) end
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

function F.max_pool2d(x, kernel_size, ...)
  check_tensor("max_pool2d", x)
  local a = args("max_pool2d", {"stride", "padding", "dilation", "ceil_mode", "return_indices"}, ...)
  if kernel_size == nil then raise("max_pool2d: kernel_size is required") end
  return torch.max_pool2d(x, kernel_size, {stride = a.stride, padding = a.padding or 0, dilation = a.dilation or 1,
    ceil_mode = a.ceil_mode or false, return_indices = a.return_indices or false})
end

function F.avg_pool2d(x, kernel_size, ...)
  check_tensor("avg_pool2d", x)
  local a = args("avg_pool2d", {"stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"}, ...)
  if kernel_size == nil then raise("avg_pool2d: kernel_size is required") end
  if a.divisor_override ~= nil then raise("avg_pool2d: divisor_override is not supported") end
  local count = a.count_include_pad
  if count == nil then count = true end
  return torch.avg_pool2d(x, kernel_size, {stride = a.stride, padding = a.padding or 0,
    ceil_mode = a.ceil_mode or false, count_include_pad = count})
end

function F.adaptive_avg_pool2d(x, output_size)
  check_tensor("adaptive_avg_pool2d", x)
  if output_size == nil then raise("adaptive_avg_pool2d: output_size is required") end
  return torch.adaptive_avg_pool2d(x, output_size)
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
  if getmetatable(shape) == getmetatable(x.shape) then shape = shape:totable() end
  if type(shape) == "table" then
    for i, v in ipairs(shape) do C.check_int(fn, ("normalized_shape[%d]"):format(i), v) end
  elseif shape == nil or type(shape) ~= "number" then
    raise("%s: normalized_shape must be an integer or a list of integers, got %s", fn, A.show(shape))
  else
    C.check_int(fn, "normalized_shape", shape)
  end
  local a = args(fn, {"weight", "bias", "eps"}, ...)
  local eps = affine_args(fn, a)
  local out = torch.layer_norm(x, normalized_shape, a.weight, a.bias, eps)
  return out
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
