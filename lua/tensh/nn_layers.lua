-- The layers of nn: constructors, parameter names, shapes, initialisation
-- and extra_repr as PyTorch's; forward through nn.functional. Containers
-- (Sequential, ModuleList, ModuleDict) and loss modules (thin wrappers over
-- the functional losses of tensh.losses) are here too.
-- Returns a function that adds the classes to the nn table it is given.
local torch = torch
local C = require "tensh.nn_common"
local raise, args, pyval, tuple, shape_str = C.raise, C.args, C.pyval, C.tuple, C.shape_str
local check_int, ntuple = C.check_int, C.ntuple
local is_tensor = torch.is_tensor

return function(nn)
  local Module, F, init = nn.Module, nn.functional, nn.init
  local Parameter = nn.Parameter

  -- options for torch.empty & co from a layer's device/dtype arguments
  local function factory(a)
    return {device = a.device ~= nil and tostring(a.device) or nil, dtype = a.dtype}
  end

  local function check_input(name, x)
    if not is_tensor(x) then raise("%s: expected a tensor input, got %s", name, type(x)) end
  end

  -- the layer's parameters and x must share a device: say both and how to fix it
  local function check_device(name, x, p)
    if p == nil then return end
    local xd, pd = tostring(x.device), tostring(p.device)
    if xd ~= pd then
      raise("%s: input is on %s but the layer's parameters are on %s; move the input (x:to(\"%s\")) or the model (model:to(\"%s\"))",
        name, xd, pd, pd, xd)
    end
  end

  local function uniform_bias(bias, fan_in)
    if bias == nil then return end
    local bound = fan_in > 0 and 1 / math.sqrt(fan_in) or 0
    init.uniform_(bias, -bound, bound)
  end

  -- ---- simple layers ------------------------------------------------------------------

  local Identity = Module:extend("Identity")
  nn.Identity = Identity
  function Identity:init() end -- takes and ignores any arguments, as PyTorch's
  function Identity:forward(x) return x end

  local Linear = Module:extend("Linear")
  nn.Linear = Linear
  -- Linear(in_features, out_features, {bias = true, device =, dtype =}): weight (out, in), bias (out)
  function Linear:init(in_features, out_features, ...)
    local a = args("Linear", {"bias", "device", "dtype"}, ...)
    self.in_features = check_int("Linear", "in_features", in_features, 0)
    self.out_features = check_int("Linear", "out_features", out_features, 0)
    local fo = factory(a)
    self.weight = Parameter(torch.empty(self.out_features, self.in_features, fo))
    if a.bias == false then self:register_parameter("bias", nil)
    else self.bias = Parameter(torch.empty(self.out_features, fo)) end
    self:reset_parameters()
  end
  function Linear:reset_parameters()
    init.kaiming_uniform_(self.weight, {a = math.sqrt(5)})
    uniform_bias(self.bias, self.in_features)
  end
  function Linear:extra_repr()
    return ("in_features=%d, out_features=%d, bias=%s"):format(self.in_features, self.out_features, pyval(self.bias ~= nil))
  end
  function Linear:forward(x)
    local name = ("Linear(%d -> %d)"):format(self.in_features, self.out_features)
    check_input(name, x)
    local w = self.weight
    check_device(name, x, w)
    local n = x:dim() > 0 and x.shape[-1] or nil
    if n ~= self.in_features then
      raise("%s: input has %s features (shape %s), expected %d in its last dim", name, n and tostring(n) or "no",
        shape_str(x), self.in_features)
    end
    return F.linear(x, w, self.bias)
  end

  local Flatten = Module:extend("Flatten")
  nn.Flatten = Flatten
  function Flatten:init(...)
    local a = args("Flatten", {"start_dim", "end_dim"}, ...)
    self.start_dim = a.start_dim or 1
    self.end_dim = a.end_dim or -1
  end
  function Flatten:extra_repr() return ("start_dim=%d, end_dim=%d"):format(self.start_dim, self.end_dim) end
  function Flatten:forward(x)
    check_input("Flatten", x)
    return x:flatten(self.start_dim, self.end_dim)
  end

  local Unflatten = Module:extend("Unflatten")
  nn.Unflatten = Unflatten
  function Unflatten:init(dim, unflattened_size)
    self.dim = check_int("Unflatten", "dim", dim)
    if type(unflattened_size) ~= "table" then
      raise("Unflatten: unflattened_size must be a list of integers, got %s", type(unflattened_size))
    end
    local s = {}
    for i, v in ipairs(unflattened_size) do s[i] = check_int("Unflatten", "unflattened_size", v) end
    self.unflattened_size = s
  end
  function Unflatten:extra_repr() return ("dim=%d, unflattened_size=%s"):format(self.dim, tuple(self.unflattened_size)) end
  function Unflatten:forward(x)
    check_input("Unflatten", x)
    return x:unflatten(self.dim, self.unflattened_size)
  end

  local Dropout = Module:extend("Dropout")
  nn.Dropout = Dropout
  function Dropout:init(...)
    local a = args("Dropout", {"p", "inplace"}, ...)
    local p = a.p == nil and 0.5 or a.p
    F._check_dropout_p("Dropout", p)
    self.p, self.inplace = p, a.inplace or false
  end
  function Dropout:extra_repr() return ("p=%s, inplace=%s"):format(pyval(self.p), pyval(self.inplace)) end
  function Dropout:forward(x)
    check_input("Dropout", x)
    return F.dropout(x, self.p, self.training, self.inplace)
  end

  -- ---- activations ------------------------------------------------------------------------

  local function inplace_repr(self) return self.inplace and "inplace=True" or "" end

  -- an activation whose only option is inplace; `repr` says whether PyTorch prints it
  local function inplace_activation(name, fn, repr)
    local cls = Module:extend(name)
    nn[name] = cls
    function cls:init(...)
      local a = args(name, {"inplace"}, ...)
      self.inplace = a.inplace or false
    end
    if repr then cls.extra_repr = inplace_repr end
    function cls:forward(x)
      check_input(name, x)
      return fn(x, self.inplace)
    end
  end
  inplace_activation("ReLU", F.relu, true)
  inplace_activation("ReLU6", F.relu6, true)
  inplace_activation("SiLU", F.silu, true)
  inplace_activation("Hardswish", F.hardswish, false)
  inplace_activation("Hardsigmoid", F.hardsigmoid, false)

  local function plain_activation(name, fn)
    local cls = Module:extend(name)
    nn[name] = cls
    function cls:forward(x)
      check_input(name, x)
      return fn(x)
    end
  end
  plain_activation("Sigmoid", F.sigmoid)
  plain_activation("Tanh", F.tanh)

  local LeakyReLU = Module:extend("LeakyReLU")
  nn.LeakyReLU = LeakyReLU
  function LeakyReLU:init(...)
    local a = args("LeakyReLU", {"negative_slope", "inplace"}, ...)
    self.negative_slope = a.negative_slope == nil and 0.01 or a.negative_slope
    if type(self.negative_slope) ~= "number" then
      raise("LeakyReLU: negative_slope must be a number, got %s", type(self.negative_slope))
    end
    self.inplace = a.inplace or false
  end
  function LeakyReLU:extra_repr()
    return ("negative_slope=%s%s"):format(pyval(self.negative_slope), self.inplace and ", inplace=True" or "")
  end
  function LeakyReLU:forward(x)
    check_input("LeakyReLU", x)
    return F.leaky_relu(x, self.negative_slope, self.inplace)
  end

  local GELU = Module:extend("GELU")
  nn.GELU = GELU
  function GELU:init(...)
    local a = args("GELU", {"approximate"}, ...)
    local ap = a.approximate or "none"
    if ap ~= "none" and ap ~= "tanh" then raise("GELU: approximate must be 'none' or 'tanh', got '%s'", tostring(ap)) end
    self.approximate = ap
  end
  function GELU:extra_repr() return ("approximate='%s'"):format(self.approximate) end
  function GELU:forward(x)
    check_input("GELU", x)
    return F.gelu(x, self.approximate)
  end

  local function softmax_class(name, fn)
    local cls = Module:extend(name)
    nn[name] = cls
    function cls:init(...)
      local a = args(name, {"dim"}, ...)
      if a.dim ~= nil then check_int(name, "dim", a.dim) end
      self.dim = a.dim
    end
    function cls:extra_repr() return "dim=" .. pyval(self.dim) end
    function cls:forward(x)
      check_input(name, x)
      return fn(x, self.dim)
    end
  end
  softmax_class("Softmax", F.softmax)
  softmax_class("LogSoftmax", F.log_softmax)

  -- ---- convolution ------------------------------------------------------------------------

  local function conv_class(name, nd)
    local cls = Module:extend(name)
    nn[name] = cls
    local fconv = nd == 1 and F.conv1d or F.conv2d
    -- Conv2d(in, out, kernel_size, {stride, padding, dilation, groups, bias, padding_mode, device, dtype})
    function cls:init(in_channels, out_channels, kernel_size, ...)
      local a = args(name, {"stride", "padding", "dilation", "groups", "bias", "padding_mode", "device", "dtype"}, ...)
      self.in_channels = check_int(name, "in_channels", in_channels, 1)
      self.out_channels = check_int(name, "out_channels", out_channels, 1)
      if kernel_size == nil then raise("%s: kernel_size is required", name) end
      self.kernel_size = ntuple(name, "kernel_size", kernel_size, nd, 1)
      self.stride = ntuple(name, "stride", a.stride or 1, nd, 1)
      self.dilation = ntuple(name, "dilation", a.dilation or 1, nd, 1)
      local padding = a.padding or 0
      if type(padding) == "string" then
        if padding ~= "same" and padding ~= "valid" then
          raise("%s: invalid padding string '%s', should be one of {'valid', 'same'}", name, padding)
        end
        if padding == "same" then
          for d = 1, nd do
            if self.stride[d] ~= 1 then raise("%s: padding='same' is not supported for strided convolutions", name) end
          end
        end
        self.padding = padding
      else
        self.padding = ntuple(name, "padding", padding, nd, 0)
      end
      self.groups = check_int(name, "groups", a.groups or 1, 1)
      if self.in_channels % self.groups ~= 0 then raise("%s: in_channels must be divisible by groups", name) end
      if self.out_channels % self.groups ~= 0 then raise("%s: out_channels must be divisible by groups", name) end
      self.padding_mode = a.padding_mode or "zeros"
      if self.padding_mode ~= "zeros" then
        raise("%s: padding_mode '%s' is not supported (only 'zeros')", name, tostring(self.padding_mode))
      end
      local zeros = {}
      for d = 1, nd do zeros[d] = 0 end
      self.output_padding = zeros
      local fo = factory(a)
      local wshape = {self.out_channels, self.in_channels // self.groups}
      for d = 1, nd do wshape[#wshape + 1] = self.kernel_size[d] end
      self.weight = Parameter(torch.empty(wshape, fo))
      if a.bias == false then self:register_parameter("bias", nil)
      else self.bias = Parameter(torch.empty(self.out_channels, fo)) end
      self:reset_parameters()
    end
    function cls:reset_parameters()
      init.kaiming_uniform_(self.weight, {a = math.sqrt(5)})
      if self.bias ~= nil then
        local fan_in = init._calculate_fan_in_and_fan_out(self.weight)
        uniform_bias(self.bias, fan_in)
      end
    end
    local function all_eq(list, v)
      if type(list) ~= "table" then return false end
      for _, x in ipairs(list) do if x ~= v then return false end end
      return true
    end
    function cls:extra_repr()
      local s = ("%d, %d, kernel_size=%s, stride=%s"):format(self.in_channels, self.out_channels,
        tuple(self.kernel_size), tuple(self.stride))
      if not all_eq(self.padding, 0) then s = s .. ", padding=" .. pyval(self.padding) end
      if not all_eq(self.dilation, 1) then s = s .. ", dilation=" .. tuple(self.dilation) end
      if self.groups ~= 1 then s = s .. ", groups=" .. self.groups end
      if self.bias == nil then s = s .. ", bias=False" end
      return s
    end
    function cls:forward(x)
      local short = ("%s(%d -> %d, kernel_size=%s)"):format(name, self.in_channels, self.out_channels, tuple(self.kernel_size))
      check_input(short, x)
      if x:dim() ~= nd + 1 and x:dim() ~= nd + 2 then
        local dims = nd == 1 and "(N, C, L) or (C, L)" or "(N, C, H, W) or (C, H, W)"
        raise("%s: expected a %d-D or %d-D input %s, got shape %s", short, nd + 2, nd + 1, dims, shape_str(x))
      end
      local c = x.shape[-(nd + 1)]
      if c ~= self.in_channels then
        raise("%s: input has %d channels (shape %s), expected %d", short, c, shape_str(x), self.in_channels)
      end
      check_device(short, x, self.weight)
      return fconv(x, self.weight, self.bias,
        {stride = self.stride, padding = self.padding, dilation = self.dilation, groups = self.groups})
    end
  end
  conv_class("Conv1d", 1)
  conv_class("Conv2d", 2)

  -- ---- pooling -----------------------------------------------------------------------------

  local MaxPool2d = Module:extend("MaxPool2d")
  nn.MaxPool2d = MaxPool2d
  function MaxPool2d:init(kernel_size, ...)
    local a = args("MaxPool2d", {"stride", "padding", "dilation", "return_indices", "ceil_mode"}, ...)
    if kernel_size == nil then raise("MaxPool2d: kernel_size is required") end
    self.kernel_size = kernel_size
    self.stride = a.stride or kernel_size
    self.padding, self.dilation = a.padding or 0, a.dilation or 1
    self.return_indices, self.ceil_mode = a.return_indices or false, a.ceil_mode or false
  end
  function MaxPool2d:extra_repr()
    return ("kernel_size=%s, stride=%s, padding=%s, dilation=%s, ceil_mode=%s"):format(pyval(self.kernel_size),
      pyval(self.stride), pyval(self.padding), pyval(self.dilation), pyval(self.ceil_mode))
  end
  function MaxPool2d:forward(x)
    check_input("MaxPool2d", x)
    return F.max_pool2d(x, self.kernel_size, {stride = self.stride, padding = self.padding, dilation = self.dilation,
      ceil_mode = self.ceil_mode, return_indices = self.return_indices})
  end

  local AvgPool2d = Module:extend("AvgPool2d")
  nn.AvgPool2d = AvgPool2d
  function AvgPool2d:init(kernel_size, ...)
    local a = args("AvgPool2d", {"stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"}, ...)
    if kernel_size == nil then raise("AvgPool2d: kernel_size is required") end
    if a.divisor_override ~= nil then raise("AvgPool2d: divisor_override is not supported") end
    self.kernel_size = kernel_size
    self.stride = a.stride or kernel_size
    self.padding, self.ceil_mode = a.padding or 0, a.ceil_mode or false
    self.count_include_pad = a.count_include_pad == nil and true or a.count_include_pad
  end
  function AvgPool2d:extra_repr()
    return ("kernel_size=%s, stride=%s, padding=%s"):format(pyval(self.kernel_size), pyval(self.stride), pyval(self.padding))
  end
  function AvgPool2d:forward(x)
    check_input("AvgPool2d", x)
    return F.avg_pool2d(x, self.kernel_size, {stride = self.stride, padding = self.padding, ceil_mode = self.ceil_mode,
      count_include_pad = self.count_include_pad})
  end

  local AdaptiveAvgPool2d = Module:extend("AdaptiveAvgPool2d")
  nn.AdaptiveAvgPool2d = AdaptiveAvgPool2d
  function AdaptiveAvgPool2d:init(output_size)
    if output_size == nil then raise("AdaptiveAvgPool2d: output_size is required") end
    ntuple("AdaptiveAvgPool2d", "output_size", output_size, 2, 0)
    self.output_size = output_size
  end
  function AdaptiveAvgPool2d:extra_repr() return "output_size=" .. pyval(self.output_size) end
  function AdaptiveAvgPool2d:forward(x)
    check_input("AdaptiveAvgPool2d", x)
    return F.adaptive_avg_pool2d(x, self.output_size)
  end

  -- ---- normalisation -------------------------------------------------------------------------

  -- BatchNorm1d/2d(num_features, {eps = 1e-5, momentum = 0.1, affine = true, track_running_stats = true});
  -- momentum = false is PyTorch's momentum=None (a cumulative average)
  local function batchnorm_class(name, dims_ok, dims_text)
    local cls = Module:extend(name)
    nn[name] = cls
    function cls:init(num_features, ...)
      local a = args(name, {"eps", "momentum", "affine", "track_running_stats", "device", "dtype"}, ...)
      self.num_features = check_int(name, "num_features", num_features, 1)
      self.eps = a.eps == nil and 1e-5 or a.eps
      if a.momentum == false then self.momentum = nil else self.momentum = a.momentum == nil and 0.1 or a.momentum end
      self.affine = a.affine == nil and true or a.affine
      self.track_running_stats = a.track_running_stats == nil and true or a.track_running_stats
      local fo = factory(a)
      local n = self.num_features
      if self.affine then
        self.weight = Parameter(torch.ones(n, fo))
        self.bias = Parameter(torch.zeros(n, fo))
      else
        self:register_parameter("weight", nil)
        self:register_parameter("bias", nil)
      end
      if self.track_running_stats then
        self:register_buffer("running_mean", torch.zeros(n, fo))
        self:register_buffer("running_var", torch.ones(n, fo))
        self:register_buffer("num_batches_tracked",
          torch.tensor(0, {dtype = "int64", device = fo.device}))
      else
        self:register_buffer("running_mean", nil)
        self:register_buffer("running_var", nil)
        self:register_buffer("num_batches_tracked", nil)
      end
    end
    function cls:reset_running_stats()
      if not self.track_running_stats then return end
      local _ <close> = torch.no_grad()
      self.running_mean:zero_()
      self.running_var:fill_(1)
      self.num_batches_tracked:zero_()
    end
    function cls:reset_parameters()
      self:reset_running_stats()
      if self.affine then
        init.ones_(self.weight)
        init.zeros_(self.bias)
      end
    end
    function cls:extra_repr()
      return ("%d, eps=%s, momentum=%s, affine=%s, track_running_stats=%s"):format(self.num_features, pyval(self.eps),
        pyval(self.momentum), pyval(self.affine), pyval(self.track_running_stats))
    end
    function cls:forward(x)
      local short = ("%s(%d)"):format(name, self.num_features)
      check_input(short, x)
      if not dims_ok[x:dim()] then raise("%s: expected %s input (got %dD input)", short, dims_text, x:dim()) end
      if x.shape[1] ~= self.num_features then
        raise("%s: input has %d channels (shape %s), expected %d", short, x.shape[1], shape_str(x), self.num_features)
      end
      check_device(short, x, self.weight or self.running_mean)
      local factor = self.momentum or 0
      if self.training and self.track_running_stats then
        local nbt = self.num_batches_tracked
        if nbt ~= nil then
          do
            local _ <close> = torch.no_grad()
            nbt:add_(1)
          end
          if self.momentum == nil then factor = 1 / nbt:item() end
        end
      end
      local rm, rv = self.running_mean, self.running_var
      local bn_training = self.training or (rm == nil and rv == nil)
      if self.training and not self.track_running_stats then rm, rv = nil, nil end
      return F.batch_norm(x, rm, rv, self.weight, self.bias, bn_training, factor, self.eps)
    end
  end
  batchnorm_class("BatchNorm1d", {[2] = true, [3] = true}, "2D or 3D")
  batchnorm_class("BatchNorm2d", {[4] = true}, "4D")

  local LayerNorm = Module:extend("LayerNorm")
  nn.LayerNorm = LayerNorm
  -- LayerNorm(normalized_shape, {eps = 1e-5, elementwise_affine = true, bias = true})
  function LayerNorm:init(normalized_shape, ...)
    local a = args("LayerNorm", {"eps", "elementwise_affine", "bias", "device", "dtype"}, ...)
    local shape = type(normalized_shape) == "number" and {normalized_shape} or normalized_shape
    if type(shape) ~= "table" or #shape == 0 then
      raise("LayerNorm: normalized_shape must be an integer or a non-empty list of integers")
    end
    local s = {}
    for i, v in ipairs(shape) do s[i] = check_int("LayerNorm", "normalized_shape", v, 0) end
    self.normalized_shape = s
    self.eps = a.eps == nil and 1e-5 or a.eps
    self.elementwise_affine = a.elementwise_affine == nil and true or a.elementwise_affine
    local fo = factory(a)
    if self.elementwise_affine then
      self.weight = Parameter(torch.ones(s, fo))
      if a.bias == false then self:register_parameter("bias", nil)
      else self.bias = Parameter(torch.zeros(s, fo)) end
    else
      self:register_parameter("weight", nil)
      self:register_parameter("bias", nil)
    end
  end
  function LayerNorm:reset_parameters()
    if self.weight ~= nil then init.ones_(self.weight) end
    if self.bias ~= nil then init.zeros_(self.bias) end
  end
  function LayerNorm:extra_repr()
    return ("%s, eps=%s, elementwise_affine=%s"):format(tuple(self.normalized_shape), pyval(self.eps),
      pyval(self.elementwise_affine))
  end
  function LayerNorm:forward(x)
    local s = self.normalized_shape
    local short = ("LayerNorm(%s)"):format(tuple(s))
    check_input(short, x)
    local ok = x:dim() >= #s
    for i = 1, #s do
      if not ok then break end
      ok = x.shape[x:dim() - #s + i - 1] == s[i]
    end
    if not ok then
      local star = {"*"}
      for i, v in ipairs(s) do star[i + 1] = v end
      raise("%s: expected input with shape (%s), but got input of shape %s", short, table.concat(star, ", "), shape_str(x))
    end
    check_device(short, x, self.weight)
    return F.layer_norm(x, s, self.weight, self.bias, self.eps)
  end

  local Embedding = Module:extend("Embedding")
  nn.Embedding = Embedding
  -- Embedding(num_embeddings, embedding_dim, {padding_idx =, _weight =, _freeze =}): weight (num, dim) ~ N(0, 1)
  function Embedding:init(num_embeddings, embedding_dim, ...)
    local a = args("Embedding", {"padding_idx", "max_norm", "norm_type", "scale_grad_by_freq", "sparse", "_weight",
      "_freeze", "device", "dtype"}, ...)
    self.num_embeddings = check_int("Embedding", "num_embeddings", num_embeddings, 0)
    self.embedding_dim = check_int("Embedding", "embedding_dim", embedding_dim, 0)
    if a.max_norm ~= nil then raise("Embedding: max_norm is not supported") end
    if a.scale_grad_by_freq then raise("Embedding: scale_grad_by_freq is not supported") end
    if a.sparse then raise("Embedding: sparse gradients are not supported") end
    local pad = a.padding_idx
    if pad ~= nil then
      pad = check_int("Embedding", "padding_idx", pad)
      if pad >= self.num_embeddings or pad < -self.num_embeddings then
        raise("Embedding: padding_idx must be within num_embeddings (got %d for %d)", pad, self.num_embeddings)
      end
      if pad < 0 then pad = pad + self.num_embeddings end
    end
    self.padding_idx = pad
    self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse = nil, 2.0, false, false
    if a._weight ~= nil then
      local w = a._weight
      if not is_tensor(w) or w:dim() ~= 2 or w.shape[0] ~= self.num_embeddings or w.shape[1] ~= self.embedding_dim then
        raise("Embedding: _weight must be a tensor of shape (%d, %d)", self.num_embeddings, self.embedding_dim)
      end
      self.weight = Parameter(w, not a._freeze)
    else
      self.weight = Parameter(torch.empty(self.num_embeddings, self.embedding_dim, factory(a)))
      self:reset_parameters()
    end
  end
  function Embedding:reset_parameters()
    init.normal_(self.weight)
    if self.padding_idx ~= nil then
      local _ <close> = torch.no_grad()
      self.weight:select(0, self.padding_idx):zero_()
    end
  end
  function Embedding:extra_repr()
    local s = ("%d, %d"):format(self.num_embeddings, self.embedding_dim)
    if self.padding_idx ~= nil then s = s .. ", padding_idx=" .. self.padding_idx end
    return s
  end
  function Embedding:forward(idx)
    local short = ("Embedding(%d, %d)"):format(self.num_embeddings, self.embedding_dim)
    check_input(short, idx)
    if idx.dtype ~= torch.int64 and idx.dtype ~= torch.int32 then
      raise("%s: expected an integer index tensor (int64 or int32), got %s; convert with idx:long()", short, idx.dtype)
    end
    check_device(short, idx, self.weight)
    return F.embedding(idx, self.weight, self.padding_idx)
  end
  -- nn.Embedding.from_pretrained(weight, {freeze = true, padding_idx =})
  function Embedding.from_pretrained(embeddings, opts)
    if not is_tensor(embeddings) or embeddings:dim() ~= 2 then
      raise("Embedding.from_pretrained: embeddings must be a 2-D tensor")
    end
    opts = opts or {}
    local freeze = opts.freeze
    if freeze == nil then freeze = true end
    return Embedding(embeddings.shape[0], embeddings.shape[1],
      {_weight = embeddings, _freeze = freeze, padding_idx = opts.padding_idx})
  end

  -- ---- containers ----------------------------------------------------------------------------

  -- indexing from 0, negative from the end, for the list-like containers
  local function position(self, k)
    local keys = rawget(self, "_modules").keys
    local n = #keys
    if math.type(k) ~= "integer" then raise("%s: index must be an integer, got %s", self:_get_name(), tostring(k)) end
    if k < -n or k >= n then
      raise("%s: index %d is out of range for %d modules (indices count from 0; iterate with pairs())",
        self:_get_name(), k, n)
    end
    if k < 0 then k = k + n end
    return keys[k + 1]
  end
  local function getitem(self, k) return rawget(self, "_modules").vals[position(self, k)] end
  local function setitem(self, k, v)
    if not nn.is_module(v) then raise("%s: only modules can be stored, got %s", self:_get_name(), type(v)) end
    self:_check_no_cycle(tostring(k), v, self:_get_name() .. "[" .. tostring(k) .. "]")
    rawget(self, "_modules").vals[position(self, k)] = v
  end
  local function len(self) return #rawget(self, "_modules").keys end
  -- for i, m in pairs(seq): 0-based positions in order
  local function list_pairs(self)
    local od = rawget(self, "_modules")
    return function(_, i)
      i = i + 1
      local k = od.keys[i + 1]
      if k ~= nil then return i, od.vals[k] end
    end, self, -1
  end
  local function append(self, m)
    if not nn.is_module(m) then raise("%s:append: expected a module, got %s", self:_get_name(), type(m)) end
    self:add_module(tostring(len(self)), m)
    return self
  end
  local function extend(self, list)
    if type(list) ~= "table" then raise("%s:extend: expected a list of modules, got %s", self:_get_name(), type(list)) end
    local items = {}
    if nn.is_module(list) then for _, m in pairs(list) do items[#items + 1] = m end
    else for i, m in ipairs(list) do items[i] = m end end
    for _, m in ipairs(items) do append(self, m) end
    return self
  end
  -- inserts before position index, renumbering the names that follow ("0", "1", ...)
  local function insert(self, index, m)
    if not nn.is_module(m) then raise("%s:insert: expected a module, got %s", self:_get_name(), type(m)) end
    self:_check_no_cycle(tostring(index), m, self:_get_name() .. ":insert")
    local od = rawget(self, "_modules")
    local n = #od.keys
    index = check_int(self:_get_name() .. ":insert", "index", index)
    if index < -n or index > n then raise("%s:insert: index %d is out of range for %d modules", self:_get_name(), index, n) end
    if index < 0 then index = index + n end
    local mods = {}
    for i, k in ipairs(od.keys) do
      if tostring(i - 1) ~= k then raise("%s:insert: needs modules named 0, 1, ... (found '%s')", self:_get_name(), k) end
      mods[i] = od.vals[k]
    end
    table.insert(mods, index + 1, m)
    for i, mm in ipairs(mods) do C.od_set(od, tostring(i - 1), mm) end
    return self
  end

  local function add_from_table(self, name, t)
    if #t > 0 then
      for i, e in ipairs(t) do
        if nn.is_module(e) then
          self:add_module(tostring(i - 1), e)
        elseif type(e) == "table" and type(e[1]) == "string" and nn.is_module(e[2]) then
          self:add_module(e[1], e[2])
        else
          raise("%s: element %d must be a module or a {name, module} pair, got %s", name, i, type(e))
        end
      end
    else
      -- a keyed table has no order: names sorted, so the order is at least stable
      local keys = {}
      for k, v in pairs(t) do
        if type(k) ~= "string" then raise("%s: keys must be strings, got %s", name, type(k)) end
        if not nn.is_module(v) then raise("%s: '%s' must be a module, got %s", name, k, type(v)) end
        keys[#keys + 1] = k
      end
      table.sort(keys)
      for _, k in ipairs(keys) do self:add_module(k, t[k]) end
    end
  end

  local function list_like(name)
    local cls = Module:extend(name)
    nn[name] = cls
    cls.__getitem, cls.__setitem, cls.__len, cls.__pairs = getitem, setitem, len, list_pairs
    cls.append, cls.extend, cls.insert = append, extend, insert
    return cls
  end

  -- Sequential(m1, m2, ...), Sequential({m1, m2}), Sequential({{"fc", m1}, {"act", m2}}), Sequential({fc = m1})
  local Sequential = list_like("Sequential")
  function Sequential:init(...)
    local n = select("#", ...)
    local first = ...
    if n == 1 and type(first) == "table" and not nn.is_module(first) then
      add_from_table(self, "Sequential", first)
      return
    end
    for i = 1, n do
      local m = select(i, ...)
      if not nn.is_module(m) then raise("Sequential: argument %d must be a module, got %s", i, type(m)) end
      self:add_module(tostring(i - 1), m)
    end
  end
  function Sequential:forward(x, ...)
    local od = rawget(self, "_modules")
    local keys, vals = od.keys, od.vals
    if #keys == 0 then return x, ... end
    x = vals[keys[1]](x, ...)
    for i = 2, #keys do x = vals[keys[i]](x) end
    return x
  end

  local ModuleList = list_like("ModuleList")
  function ModuleList:init(modules)
    if modules == nil then return end
    if type(modules) ~= "table" then
      raise("ModuleList: expected a list of modules, got %s", type(modules))
    end
    extend(self, modules)
  end
  function ModuleList:forward()
    raise("ModuleList has no forward(); iterate over it: for i, m in pairs(list) do x = m(x) end")
  end
  -- repeated blocks printed once, as (0-2): 3 x Linear(...) (PyTorch 2's compact form)
  function ModuleList:__tostring()
    local od = rawget(self, "_modules")
    if #od.keys == 0 then return self:_get_name() .. "()" end
    local blocks = {}
    for i, k in ipairs(od.keys) do
      local r = tostring(od.vals[k])
      local last = blocks[#blocks]
      if last and last.repr == r then last.stop = i - 1
      else blocks[#blocks + 1] = {start = i - 1, stop = i - 1, repr = r} end
    end
    local lines = {}
    for _, b in ipairs(blocks) do
      local s
      if b.start == b.stop then s = ("(%d): %s"):format(b.start, b.repr)
      else s = ("(%d-%d): %d x %s"):format(b.start, b.stop, b.stop - b.start + 1, b.repr) end
      lines[#lines + 1] = C.addindent(s, 2)
    end
    return self:_get_name() .. "(\n  " .. table.concat(lines, "\n  ") .. "\n)"
  end

  local ModuleDict = Module:extend("ModuleDict")
  nn.ModuleDict = ModuleDict
  -- ModuleDict({a = m1, b = m2}) (keys sorted) or ModuleDict({{"a", m1}, {"b", m2}}) (in order)
  function ModuleDict:init(modules)
    if modules == nil then return end
    if type(modules) ~= "table" or nn.is_module(modules) then
      raise("ModuleDict: expected a table of name -> module, got %s", type(modules))
    end
    add_from_table(self, "ModuleDict", modules)
  end
  function ModuleDict:update(modules) add_from_table(self, "ModuleDict:update", modules) return self end
  function ModuleDict:keys()
    local out = {}
    for i, k in ipairs(rawget(self, "_modules").keys) do out[i] = k end
    return out
  end
  function ModuleDict:values()
    local od, out = rawget(self, "_modules"), {}
    for i, k in ipairs(od.keys) do out[i] = od.vals[k] end
    return out
  end
  function ModuleDict:items() return pairs(self) end
  function ModuleDict:contains(k) return rawget(self, "_modules").pos[k] ~= nil end
  function ModuleDict:pop(k)
    local od = rawget(self, "_modules")
    if od.pos[k] == nil then raise("ModuleDict:pop: no module named '%s'", tostring(k)) end
    local m = od.vals[k]
    C.od_del(od, k)
    return m
  end
  ModuleDict.__len = len
  ModuleDict.__pairs = function(self)
    local od, i = rawget(self, "_modules"), 0
    return function()
      i = i + 1
      local k = od.keys[i]
      if k ~= nil then return k, od.vals[k] end
    end, self, nil
  end
  function ModuleDict:forward() raise("ModuleDict has no forward(); call its modules: d.name(x) or d[\"name\"](x)") end

  -- ---- losses: thin wrappers over nn.functional's losses (tensh.losses) -------------------------

  local function loss_class(name, fname)
    local cls = Module:extend(name)
    nn[name] = cls
    -- Loss({reduction = "mean", weight =, ...}) or Loss(weight, {...}); tensor options are buffers
    function cls:init(first, opts)
      if is_tensor(first) then
        local o = {weight = first}
        for k, v in pairs(opts or {}) do o[k] = v end
        opts = o
      elseif first ~= nil then
        if type(first) ~= "table" then raise("%s: expected an options table, got %s", name, type(first)) end
        opts = first
      end
      local o = {}
      for k, v in pairs(opts or {}) do
        if is_tensor(v) then self:register_buffer(k, v) else o[k] = v end
      end
      self.reduction = o.reduction or "mean"
      self._options = o
    end
    function cls:forward(input, target)
      local f = F[fname]
      if f == nil then
        raise("%s: nn.functional.%s is not available (tensh.losses is not in this build)", name, fname)
      end
      local o = {}
      for k, v in pairs(self._options) do o[k] = v end
      for k, v in self:named_buffers({recurse = false}) do o[k] = v end
      return f(input, target, o)
    end
  end
  loss_class("CrossEntropyLoss", "cross_entropy")
  loss_class("NLLLoss", "nll_loss")
  loss_class("MSELoss", "mse_loss")
  loss_class("L1Loss", "l1_loss")
  loss_class("SmoothL1Loss", "smooth_l1_loss")
  loss_class("BCELoss", "binary_cross_entropy")
  loss_class("BCEWithLogitsLoss", "binary_cross_entropy_with_logits")
end
