-- The ATen op PyTorch's profiler names where a tensh kernel corresponds to
-- one (PyTorch users read "aten::addmm", "aten::relu"), by registry name
-- (src/ops/ops*.def). Kernels with no single ATen counterpart are left out and
-- keep their own name: "bmm" runs every matmul, 2-d ones included (aten::mm,
-- aten::addmm in PyTorch), im2col/col2im are steps inside a convolution,
-- the optimizer steps are foreach loops there, the batch-norm pieces and
-- the recurrent cells are pieces of larger ATen ops. Both convolution
-- backward kernels are PyTorch's one convolution_backward. The upsample
-- kernels serve both the 1-d and the 2-d ATen ops.
return {
  copy = "aten::copy_", fill = "aten::fill_", arange = "aten::arange", linspace = "aten::linspace",
  rand = "aten::uniform_", randn = "aten::normal_", randint = "aten::random_", randperm = "aten::randperm",
  neg = "aten::neg", abs = "aten::abs", sign = "aten::sign", floor = "aten::floor", ceil = "aten::ceil",
  round = "aten::round", relu = "aten::relu", exp = "aten::exp", log = "aten::log", log1p = "aten::log1p",
  sqrt = "aten::sqrt", rsqrt = "aten::rsqrt", sin = "aten::sin", cos = "aten::cos", tanh = "aten::tanh",
  sigmoid = "aten::sigmoid", gelu = "aten::gelu", silu = "aten::silu", reciprocal = "aten::reciprocal",
  logical_not = "aten::logical_not", clamp = "aten::clamp", pow_scalar = "aten::pow",
  add = "aten::add", sub = "aten::sub", mul = "aten::mul", div = "aten::div", floor_divide = "aten::floor_divide",
  remainder = "aten::remainder", pow = "aten::pow", maximum = "aten::maximum", minimum = "aten::minimum",
  eq = "aten::eq", ne = "aten::ne", lt = "aten::lt", le = "aten::le", gt = "aten::gt", ge = "aten::ge",
  logical_and = "aten::logical_and", logical_or = "aten::logical_or", where = "aten::where", lerp = "aten::lerp",
  threshold_backward = "aten::threshold_backward",
  trunc = "aten::trunc", bitwise_not = "aten::bitwise_not", expm1 = "aten::expm1", exp2 = "aten::exp2",
  log2 = "aten::log2", log10 = "aten::log10", tan = "aten::tan", sinh = "aten::sinh", cosh = "aten::cosh",
  asinh = "aten::asinh", acosh = "aten::acosh", atanh = "aten::atanh", asin = "aten::asin", acos = "aten::acos",
  atan = "aten::atan", erf = "aten::erf", erfinv = "aten::erfinv", fmod = "aten::fmod", div_trunc = "aten::div",
  bitwise_and = "aten::bitwise_and", bitwise_or = "aten::bitwise_or", bitwise_xor = "aten::bitwise_xor",
  atan2 = "aten::atan2", copysign = "aten::copysign",
  amp_non_finite_check_and_unscale = "aten::_amp_foreach_non_finite_check_and_unscale_",
  gemm_bias = "aten::addmm", cat = "aten::cat", gather = "aten::gather", scatter = "aten::scatter", masked_select = "aten::masked_select",
  masked_scatter = "aten::masked_scatter", nonzero = "aten::nonzero", sort = "aten::sort", topk = "aten::topk",
  unique = "aten::_unique2",
  conv2d_forward = "aten::mkldnn_convolution", conv2d_backward_input = "aten::convolution_backward",
  conv2d_backward_weight = "aten::convolution_backward", conv2d_depthwise = "aten::_conv_depthwise2d",
  conv2d_depthwise_backward = "aten::convolution_backward",
  max_pool2d = "aten::max_pool2d_with_indices", max_pool2d_backward = "aten::max_pool2d_with_indices_backward",
  avg_pool2d = "aten::avg_pool2d", avg_pool2d_backward = "aten::avg_pool2d_backward",
  adaptive_avg_pool2d = "aten::_adaptive_avg_pool2d", adaptive_avg_pool2d_backward = "aten::_adaptive_avg_pool2d_backward",
  layer_norm = "aten::native_layer_norm", layer_norm_backward = "aten::native_layer_norm_backward",
  sum = "aten::sum", prod = "aten::prod", max = "aten::max", min = "aten::min", var = "aten::var",
  norm = "aten::linalg_vector_norm", all = "aten::all", any = "aten::any", logsumexp = "aten::logsumexp",
  cumsum = "aten::cumsum", softmax = "aten::_softmax", log_softmax = "aten::_log_softmax",
  softplus = "aten::softplus", softplus_backward = "aten::softplus_backward", elu = "aten::elu",
  elu_backward = "aten::elu_backward", hardtanh = "aten::hardtanh", hardtanh_backward = "aten::hardtanh_backward",
  log_sigmoid = "aten::log_sigmoid_forward", log_sigmoid_backward = "aten::log_sigmoid_backward", mish = "aten::mish",
  mish_backward = "aten::mish_backward", group_norm = "aten::native_group_norm",
  group_norm_backward = "aten::native_group_norm_backward", adaptive_max_pool2d = "aten::adaptive_max_pool2d",
}
