-- PyTorch functions that tensh composes from its kernel ops, as PyTorch
-- composes many of them too: each is both torch.X(t, ...) and t:X(...), and
-- differentiates through the ops it is built from (where, index_select,
-- cat, mul ...). Loaded once by luaopen_tensh, before the namespace turns
-- strict.
local A = require "tensh.args"
local raise = require("tensh.errors").raise

local methods = torch._methods

-- Runs fn; an error raised by an op it calls (which names that op's
-- position here) is raised again at the user's line, without our position.
-- An error that already has a position outside the library (tensh.errors and
-- the C bindings place theirs at the user's line) passes as it is: raising it
-- again would print that position twice.
local function user_level(fn, ...)
  local r = table.pack(pcall(fn, ...))
  if r[1] then return table.unpack(r, 2, r.n) end
  local err = r[2]
  if type(err) == "string" then
    local inner = err:gsub("^lua/tensh/[^:\n]*:%d+: ", "")
    if inner == err and err:find("^[^:\n]+:%d+: ") then error(err, 0) end
    err = inner
  end
  raise("%s", tostring(err))
end

-- torch.X and Tensor:X from one function whose first argument is the tensor
-- (checked for both, so t:X on another value names X); a torch.Size argument
-- is read as its list (x:flip(x.shape) as x:flip({...}))
local function both(name, fn)
  torch[name] = function(t, ...)
    A.check_tensor("torch." .. name, 1, t)
    return user_level(fn, t, A.unsize(...))
  end
  methods[name] = function(t, ...)
    A.check_tensor(name, 1, t)
    return user_level(fn, t, A.unsize(...))
  end
end

-- a number argument (nil when optional and absent)
local function check_number(fn, what, v, optional)
  if v == nil and optional then return end
  if type(v) ~= "number" then raise("%s: %s must be a number, got %s", fn, what, A.show(v)) end
end

-- a tensor or a number (for the second operand of elementwise functions)
local function check_operand(fn, pos, v)
  if not torch.is_tensor(v) and type(v) ~= "number" and type(v) ~= "boolean" then
    raise("%s: argument %d must be a tensor or a number, got %s", fn, pos, A.show(v))
  end
end

local function is_float(t) return A.is_floating_dtype(t.dtype) end
local function floatify(t) return is_float(t) and t or t:to(torch.get_default_dtype()) end

-- dim in [-n, n) -> [0, n), with PyTorch's message otherwise
local function wrap_dim(fn, d, n)
  if math.type(d) ~= "integer" then raise("%s: dim must be an integer, got %s", fn, A.show(d)) end
  local m = math.max(n, 1)
  if d < -m or d >= m then
    raise("%s: Dimension out of range (expected to be in range of [%d, %d], but got %d)", fn, -m, m - 1, d)
  end
  return d < 0 and d + m or d
end

-- a dim option passed on to a reduction: an integer or a list of integers (checked
-- here, so that a message names the function called, not the sum inside it)
local function check_dims(fn, dim)
  local list = A.plain(dim)
  local ok = math.type(list) == "integer"
  if A.is_plain_table(list) then
    ok = true
    for _, d in ipairs(list) do ok = ok and math.type(d) == "integer" end
  end
  if dim ~= nil and not ok then raise("%s: dim must be an integer or a list of integers, got %s", fn, A.show(dim)) end
  return dim
end

-- nil, a number or a tensor: the values an elementwise op takes for a scalar
local function check_scalar(fn, what, v)
  if v ~= nil and type(v) ~= "number" and not torch.is_tensor(v) then
    raise("%s: %s must be a number or a tensor, got %s", fn, what, A.show(v))
  end
  return v
end

-- ---- checks on values --------------------------------------------------------

both("isnan", function(t) return t:ne(t) end)

both("isinf", function(t)
  if not is_float(t) then return torch.zeros(t.shape, {dtype = torch.bool, device = t.device}) end
  return t:abs():eq(math.huge)
end)

both("isfinite", function(t)
  if not is_float(t) then return torch.ones(t.shape, {dtype = torch.bool, device = t.device}) end
  return t:abs():lt(math.huge) -- NaN compares false
end)

-- the largest finite value of each floating dtype (torch.finfo(dt).max)
local FLOAT_MAX = {
  ["torch.float32"] = 3.4028234663852886e38, ["torch.float64"] = 1.7976931348623157e308,
  ["torch.float16"] = 65504.0, ["torch.bfloat16"] = 3.3895313892515355e38,
}

both("nan_to_num", function(t, ...)
  local o = A.bind("nan_to_num", {"nan", "posinf", "neginf"}, ...)
  for _, k in ipairs({"nan", "posinf", "neginf"}) do
    if o[k] ~= nil then A.check_number("nan_to_num", k, o[k]) end
  end
  if not is_float(t) then return t:clone() end
  local big = FLOAT_MAX[t.dtype]
  local r = torch.where(t:ne(t), o.nan or 0, t)
  r = torch.where(r:eq(math.huge), o.posinf or big, r)
  return torch.where(r:eq(-math.huge), o.neginf or -big, r)
end)

-- ---- elementwise composites --------------------------------------------------

both("square", function(t)
  if t.dtype == torch.bool then t = t:long() end -- as torch: bool squares to int64
  return t * t
end)

both("clamp_min", function(t, min) check_operand("clamp_min", 2, min) return t:clamp({min = min}) end)
both("clamp_max", function(t, max) check_operand("clamp_max", 2, max) return t:clamp({max = max}) end)

-- input + value * t1 * t2, input + value * t1 / t2
local function addc(name, combine)
  both(name, function(t, t1, t2, opts)
    A.check_tensor(name, 2, t1)
    A.check_tensor(name, 3, t2)
    local o = A.bind(name, {"value"}, opts)
    local v = o.value == nil and 1 or A.check_number(name, "value", o.value)
    local p = combine(t1, t2)
    if v ~= 1 then p = p * v end
    return t + p
  end)
end
addc("addcmul", function(a, b) return a * b end)
addc("addcdiv", function(a, b)
  if not is_float(a) and not is_float(b) then
    raise("addcdiv: integer division with addcdiv is no longer supported; convert tensor1 or tensor2 to a floating dtype")
  end
  return a / b
end)

-- ---- triangles and flips -----------------------------------------------------

-- mask (rows, cols) of col - row <= k (lower) or >= k (upper), on t's device
local function tri_mask(t, k, lower)
  local r, c = t.shape[t:dim() - 2], t.shape[t:dim() - 1]
  local rows = torch.arange(r, {device = t.device}):reshape(r, 1)
  local cols = torch.arange(c, {device = t.device}):reshape(1, c)
  local d = cols - rows
  return lower and d:le(k) or d:ge(k)
end

local function tri(name, lower)
  both(name, function(t, diagonal)
    local k = diagonal or 0
    if math.type(k) ~= "integer" then raise("%s: diagonal must be an integer, got %s", name, A.show(k)) end
    if t:dim() < 2 then raise("%s: input tensor must have at least 2 dimensions, got %d", name, t:dim()) end
    return torch.where(tri_mask(t, k, lower), t, torch.zeros({}, {dtype = t.dtype, device = t.device}))
  end)
end
tri("tril", true)
tri("triu", false)

local function dims_list(fn, dims, n)
  if type(dims) ~= "table" then dims = {dims} end
  local out, seen = {}, {}
  for i, d in ipairs(dims) do
    local w = wrap_dim(fn, d, n)
    if seen[w] then raise("%s: dim %d appears multiple times in the list of dims", fn, w) end
    seen[w], out[i] = true, w
  end
  return out
end

both("flip", function(t, dims, ...)
  if dims == nil then raise("flip: missing argument 'dims' (a dim or a list of dims)") end
  if select("#", ...) > 0 then dims = {dims, ...} end
  local r = t
  for _, d in ipairs(dims_list("flip", dims, t:dim())) do
    local n = t.shape[d]
    if n > 1 then r = r:index_select(d, torch.arange(n - 1, -1, -1, {device = t.device})) end
  end
  return rawequal(r, t) and t:clone() or r
end)

both("fliplr", function(t)
  if t:dim() < 2 then raise("fliplr: input must be >= 2-d, got %d-d", t:dim()) end
  return t:flip(1)
end)

both("flipud", function(t)
  if t:dim() < 1 then raise("flipud: input must be >= 1-d") end
  return t:flip(0)
end)

-- ---- splitting and repeating -------------------------------------------------

local select_all = methods.unbind -- C (lindex.c): the selects under one UnbindBackward0
both("unbind", function(t, dim)
  local d = wrap_dim("unbind", dim or 0, t:dim())
  if t:dim() == 0 then raise("unbind: dimension specified as 0 but tensor has no dimensions") end
  return A.list(select_all(t, d), "unbind")
end)

both("repeat_interleave", function(t, repeats, ...)
  local o = A.bind("repeat_interleave", {"dim", "output_size"}, ...)
  local x, d = t, o.dim
  if d == nil then x, d = t:reshape(-1), 0 else d = wrap_dim("repeat_interleave", d, t:dim()) end
  local n = x:dim() == 0 and 1 or x.shape[d]
  local counts = {}
  if math.type(repeats) == "integer" then
    for i = 1, n do counts[i] = repeats end
  elseif torch.is_tensor(repeats) then
    if repeats.dtype ~= "torch.int64" and repeats.dtype ~= "torch.int32" then -- PyTorch's two
      raise("repeat_interleave: repeats must be an int64 or int32 tensor, got %s", repeats.dtype)
    end
    local l = repeats:reshape(-1):tolist()
    if #l == 1 then for i = 1, n do counts[i] = l[1] end
    elseif #l ~= n then raise("repeat_interleave: repeats must have the same size as input along dim: %d vs %d", #l, n)
    else counts = l end
  else
    raise("repeat_interleave: repeats must be an integer or an integer tensor, got %s", A.show(repeats))
  end
  local idx = {}
  for i, c in ipairs(counts) do
    if c < 0 then raise("repeat_interleave: repeats can not be negative, got %d", c) end
    for _ = 1, c do idx[#idx + 1] = i - 1 end
  end
  if x:dim() == 0 then x = x:reshape(1) end
  return x:index_select(d, torch.tensor(idx, {dtype = torch.int64, device = t.device}))
end)

-- ---- scans -------------------------------------------------------------------

-- An inclusive scan along dim with an associative combine, in log2(n) steps
-- of whole-tensor ops (Hillis and Steele): exact for zeros and negatives,
-- differentiable through narrow, cat and combine.
local function scan(t, d, combine)
  local n, y, s = t.shape[d], t, 1
  while s < n do
    y = torch.cat({y:narrow(d, 0, s), combine(y:narrow(d, s, n - s), y:narrow(d, 0, n - s))}, d)
    s = s * 2
  end
  return y
end

both("cumprod", function(t, dim, opts)
  if dim == nil then raise("cumprod: missing argument 'dim'") end
  local o = A.bind("cumprod", {"dtype"}, opts)
  local x = t
  if o.dtype then x = x:to(o.dtype)
  elseif not is_float(x) then x = x:long() end -- integers and bool: int64, as torch
  if x:dim() == 0 then return x:clone() end
  return scan(x, wrap_dim("cumprod", dim, x:dim()), function(a, b) return a * b end)
end)

both("logcumsumexp", function(t, dim)
  if dim == nil then raise("logcumsumexp: missing argument 'dim'") end
  if not is_float(t) then raise("logcumsumexp: expected a floating-point tensor, got %s", t.dtype) end
  if t:dim() == 0 then return t:clone() end
  -- log(e^a + e^b) = m + log(e^(a-m) + e^(b-m)) with m the larger, finite
  return scan(t, wrap_dim("logcumsumexp", dim, t:dim()), function(a, b)
    local m = torch.maximum(a, b):detach()
    m = torch.where(m:abs():eq(math.huge), 0, m)
    return m + ((a - m):exp() + (b - m):exp()):log()
  end)
end)

-- ---- dtypes and new tensors --------------------------------------------------

methods.type_as = function(t, other)
  A.check_tensor("type_as", 1, t)
  A.check_tensor("type_as", 2, other)
  return t:to(other.dtype)
end

methods.is_floating_point = function(t)
  A.check_tensor("is_floating_point", 1, t)
  return is_float(t)
end
torch.is_floating_point = function(t)
  A.check_tensor("torch.is_floating_point", 1, t)
  return is_float(t)
end
torch.clone = function(t, ...) A.check_tensor("torch.clone", 1, t) return t:clone(...) end
torch.detach = function(t) A.check_tensor("torch.detach", 1, t) return t:detach() end
torch.numel = function(t) A.check_tensor("torch.numel", 1, t) return t:numel() end

-- options of new_*: the tensor's dtype and device unless given
local function like(fn, t, opts)
  local o = {}
  if opts ~= nil then
    if not A.is_plain_table(opts) then raise("%s: options must be a table, got %s", fn, A.typename(opts)) end
    A.check_opts(fn, opts, {dtype = true, device = true, requires_grad = true})
    for k, v in pairs(opts) do o[k] = v end
  end
  o.dtype = o.dtype or t.dtype
  o.device = o.device or t.device
  return o
end

-- the sizes of new_zeros(2, 3), new_zeros({2, 3}), new_zeros(torch.Size), and a trailing options table
local function sizes_and_opts(...)
  local n = select("#", ...)
  local last = n > 0 and select(n, ...) or nil
  local opts
  if A.is_opts(last) then opts, n = last, n - 1 end
  local sizes = {}
  for i = 1, n do
    local v = select(i, ...)
    if type(v) == "table" or type(v) == "userdata" then
      if n ~= 1 then raise("expected sizes as numbers or one list") end
      sizes = v
    else
      sizes[#sizes + 1] = v
    end
  end
  return sizes, opts
end

for _, name in ipairs({"zeros", "ones", "empty"}) do
  methods["new_" .. name] = function(t, ...)
    A.check_tensor("new_" .. name, 1, t)
    local sizes, opts = sizes_and_opts(...)
    return user_level(torch[name], sizes, like("new_" .. name, t, opts))
  end
end
methods.new_full = function(t, size, value, opts)
  A.check_tensor("new_full", 1, t)
  if type(size) ~= "table" and type(size) ~= "userdata" then raise("new_full: size must be a list or a torch.Size, got %s", A.show(size)) end
  check_operand("new_full", 3, value)
  return user_level(torch.full, size, value, like("new_full", t, opts))
end
methods.new_tensor = function(t, data, opts)
  A.check_tensor("new_tensor", 1, t)
  if torch.is_tensor(data) then data = data:detach():cpu():tolist() end
  return torch.tensor(data, like("new_tensor", t, opts))
end

torch.get_default_dtype = function() return torch.float32 end

-- ---- more shape functions ----------------------------------------------------

both("roll", function(t, shifts, dims)
  if shifts == nil then raise("roll: missing argument 'shifts'") end
  if type(shifts) ~= "table" then shifts = {shifts} end
  for i, s in ipairs(shifts) do
    if math.type(s) ~= "integer" then raise("roll: shifts must be integers, got %s at position %d", A.show(s), i) end
  end
  if dims == nil then -- over the flattened tensor, then the shape back
    if #shifts ~= 1 then raise("roll: with no dims, shifts must be one number, got %d", #shifts) end
    return t:reshape(-1):roll(shifts[1], 0):reshape(t.shape)
  end
  if type(dims) ~= "table" then dims = {dims} end
  if #dims ~= #shifts then raise("roll: shifts and dims must have the same length, got %d and %d", #shifts, #dims) end
  local r = t
  for i, d in ipairs(dims) do
    d = wrap_dim("roll", d, t:dim())
    local n = t.shape[d]
    local s = n > 0 and shifts[i] % n or 0
    if s ~= 0 then r = torch.cat({r:narrow(d, n - s, s), r:narrow(d, 0, n - s)}, d) end
  end
  return rawequal(r, t) and t:clone() or r
end)

both("rot90", function(t, k, dims)
  k, dims = k or 1, dims or {0, 1}
  if math.type(k) ~= "integer" then raise("rot90: k must be an integer, got %s", A.show(k)) end
  if type(dims) ~= "table" then raise("rot90: dims must be a list of two dims, got %s", A.show(dims)) end
  if #dims ~= 2 then raise("rot90: expected total rotation dims == 2, but got dims = %d", #dims) end
  if t:dim() < 2 then raise("rot90: expected total dims >= 2, but got total dims = %d", t:dim()) end
  local d0, d1 = wrap_dim("rot90", dims[1], t:dim()), wrap_dim("rot90", dims[2], t:dim())
  if d0 == d1 then raise("rot90: expected rotation dims to be different, but got dim0 = %d and dim1 = %d", d0, d1) end
  k = k % 4
  if k == 1 then return t:flip(d1):transpose(d0, d1) end
  if k == 2 then return t:flip({d0, d1}) end
  if k == 3 then return t:flip(d0):transpose(d0, d1) end
  return t:clone()
end)

both("movedim", function(t, source, destination)
  if type(source) ~= "table" then source = {source} end
  if type(destination) ~= "table" then destination = {destination} end
  if #source ~= #destination then
    raise("movedim: Invalid source or destination dims: source (%d dims) should contain the same number of dims as destination (%d dims)", #source, #destination)
  end
  local n = t:dim()
  local src, dst = dims_list("movedim", source, n), dims_list("movedim", destination, n)
  local order, used, taken = {}, {}, {}
  for i = 1, #src do order[dst[i]], used[src[i]] = src[i], true end
  local rest = {}
  for d = 0, n - 1 do if not used[d] then rest[#rest + 1] = d end end
  local j = 1
  for p = 0, n - 1 do
    if order[p] == nil then order[p], j = rest[j], j + 1 end
    taken[p + 1] = order[p]
  end
  if n == 0 then return t:view({}) end
  return t:permute(taken)
end)
torch.moveaxis, methods.moveaxis = torch.movedim, methods.movedim

both("tile", function(t, dims, ...)
  if select("#", ...) > 0 or type(dims) ~= "table" then dims = {dims, ...} end
  local reps = {}
  for i, v in ipairs(dims) do
    if math.type(v) ~= "integer" or v < 0 then raise("tile: repetitions must be non-negative integers, got %s", A.show(v)) end
    reps[i] = v
  end
  local x = t
  while #reps < x:dim() do table.insert(reps, 1, 1) end
  while x:dim() < #reps do x = x:unsqueeze(0) end
  local inter, big, final = {}, {}, {}
  for i = 1, #reps do
    local s = x.shape[i - 1]
    inter[#inter + 1], inter[#inter + 2] = 1, s
    big[#big + 1], big[#big + 2] = reps[i], s
    final[i] = reps[i] * s
  end
  if #reps == 0 then return t:clone() end
  return x:reshape(inter):expand(big):reshape(final)
end)

-- Tensor:repeat(sizes) as PyTorch's: `repeat` is a Lua keyword, so it is called as
-- x["repeat"](x, 2, 3) (or x:tile, which also takes fewer sizes than dims)
methods["repeat"] = function(t, dims, ...)
  A.check_tensor("repeat", 1, t)
  dims = A.plain(dims)
  local reps = (select("#", ...) > 0 or type(dims) ~= "table") and {dims, ...} or dims
  if #reps < t:dim() then
    raise("repeat: %d repeat sizes for a tensor of %d dims; give at least one per dim (or use tile)", #reps, t:dim())
  end
  for _, v in ipairs(reps) do
    if math.type(v) ~= "integer" or v < 0 then raise("repeat: sizes must be non-negative integers, got %s", A.show(v)) end
  end
  return user_level(methods.tile, t, reps)
end

both("diff", function(t, ...)
  local o = A.bind("diff", {"n", "dim", "prepend", "append"}, ...)
  local n, dim = o.n or 1, o.dim or -1
  local prepend, append = check_scalar("diff", "prepend", o.prepend), check_scalar("diff", "append", o.append)
  if math.type(n) ~= "integer" or n < 0 then raise("diff: n must be a non-negative integer, got %s", A.show(n)) end
  if t:dim() == 0 then raise("diff: expects input to be at least one-dimensional") end
  local d = wrap_dim("diff", dim, t:dim())
  local x = t
  if prepend ~= nil or append ~= nil then
    local parts = {}
    if prepend ~= nil then parts[#parts + 1] = torch.is_tensor(prepend) and prepend or t:narrow(d, 0, 1):mul(0):add(prepend) end
    parts[#parts + 1] = x
    if append ~= nil then parts[#parts + 1] = torch.is_tensor(append) and append or t:narrow(d, 0, 1):mul(0):add(append) end
    x = torch.cat(parts, d)
  end
  for _ = 1, n do
    local m = x.shape[d]
    if m == 0 then break end
    local hi, lo = x:narrow(d, 1, m - 1), x:narrow(d, 0, m - 1)
    x = x.dtype == torch.bool and hi:ne(lo) or hi - lo
  end
  return x
end)

local function diag_index(fn, t, offset, d1, d2)
  local n = t:dim()
  d1, d2 = wrap_dim(fn, d1, n), wrap_dim(fn, d2, n)
  if d1 == d2 then raise("%s: diagonal dimensions cannot be identical %d, %d", fn, d1, d2) end
  return d1, d2
end

both("diagonal", function(t, ...)
  local o = A.bind("diagonal", {"offset", "dim1", "dim2"}, ...)
  local offset, dim1, dim2 = o.offset or 0, o.dim1 or 0, o.dim2 or 1
  if math.type(offset) ~= "integer" then raise("diagonal: offset must be an integer, got %s", A.show(offset)) end
  if t:dim() < 2 then raise("diagonal: expected a tensor of at least 2 dims, got %d", t:dim()) end
  local d1, d2 = diag_index("diagonal", t, offset, dim1, dim2)
  -- the two dims last, as one flattened dim; the diagonal's elements picked from it
  local perm = {}
  for d = 0, t:dim() - 1 do if d ~= d1 and d ~= d2 then perm[#perm + 1] = d end end
  perm[#perm + 1], perm[#perm + 2] = d1, d2
  local x = t:permute(perm)
  local r, c = t.shape[d1], t.shape[d2]
  local i0, j0 = offset >= 0 and 0 or -offset, offset >= 0 and offset or 0
  local len = math.max(0, math.min(r - i0, c - j0))
  local lead = {}
  for k = 1, #perm - 2 do lead[k] = t.shape[perm[k]] end
  lead[#lead + 1] = r * c
  local idx = torch.arange(len, {device = t.device}) * (c + 1) + (i0 * c + j0)
  return x:reshape(lead):index_select(#lead - 1, idx)
end)

both("diag", function(t, diagonal)
  local k = diagonal or 0
  if math.type(k) ~= "integer" then raise("diag: diagonal must be an integer, got %s", A.show(k)) end
  if t:dim() == 2 then return t:diagonal(k) end
  if t:dim() ~= 1 then raise("diag: expected a 1-d or 2-d tensor, got %d-d", t:dim()) end
  local n = t.shape[0]
  local m, a = n + math.abs(k), math.abs(k)
  local z = t:new_zeros(a)
  local v = a == 0 and t or k > 0 and torch.cat({z, t}) or torch.cat({t, z}) -- column j holds v[j]
  local rows = torch.arange(m, {device = t.device}):reshape(m, 1)
  local cols = torch.arange(m, {device = t.device}):reshape(1, m)
  return torch.where((cols - rows):eq(k), v:reshape(1, m), 0)
end)

both("trace", function(t)
  if t:dim() ~= 2 then raise("trace: expected a matrix, but got tensor with dim %d", t:dim()) end
  return t:diagonal():sum()
end)

-- ---- reductions --------------------------------------------------------------

both("count_nonzero", function(t, ...)
  local dim = check_dims("count_nonzero", A.bind("count_nonzero", {"dim"}, ...).dim)
  if dim == nil then return t:ne(0):sum() end
  return t:ne(0):sum(dim)
end)
both("argwhere", function(t) return t:nonzero() end)

both("aminmax", function(t, opts)
  local o = A.bind("aminmax", {"dim", "keepdim"}, opts)
  if o.dim == nil then return t:amin(), t:amax() end
  local dim = wrap_dim("aminmax", o.dim, t:dim())
  return t:amin(dim, {keepdim = o.keepdim}), t:amax(dim, {keepdim = o.keepdim})
end)

-- std (var) with all of its arguments, and mean with those it shares:
-- dim (first, unless a boolean) and keepdim (the boolean after unbiased)
local function stat_mean(name, stat)
  both(name, function(t, ...)
    local args, n = {...}, select("#", ...)
    local opts = n > 0 and A.is_opts(args[n]) and args[n] or nil
    if opts then n = n - 1 end
    local first = n > 0 and type(args[1]) ~= "boolean" and 2 or 1
    local dim, keepdim = first == 2 and args[1] or nil, args[first + 1]
    if opts and opts.dim ~= nil then dim = opts.dim end
    if opts and opts.keepdim ~= nil then keepdim = opts.keepdim end
    -- checked here, so that a message names this function rather than the std inside it
    check_dims(name, dim)
    if keepdim ~= nil then A.check_boolean(name, "keepdim", keepdim) end
    if opts and opts.correction ~= nil then A.check_number(name, "correction", opts.correction) end
    if opts and opts.unbiased ~= nil then A.check_boolean(name, "unbiased", opts.unbiased) end
    return t[stat](t, ...), t:mean(dim, {keepdim = keepdim or false})
  end)
end
stat_mean("std_mean", "std")
stat_mean("var_mean", "var")

both("nansum", function(t, ...)
  local o = A.bind_keywords("nansum", {"dim", "keepdim"}, {dtype = true}, ...)
  check_dims("nansum", o.dim)
  if o.dtype ~= nil then A.check_dtype("nansum", "dtype", o.dtype) end
  local x = is_float(t) and torch.where(t:ne(t), 0, t) or t
  return x:sum(o.dim, {keepdim = o.keepdim or false, dtype = o.dtype})
end)

both("nanmean", function(t, ...)
  if not is_float(t) then raise("nanmean: expected a floating-point tensor, got %s", t.dtype) end
  local o = A.bind_keywords("nanmean", {"dim", "keepdim"}, {dtype = true}, ...)
  check_dims("nanmean", o.dim)
  local x = o.dtype ~= nil and t:to(A.check_dtype("nanmean", "dtype", o.dtype)) or t
  local function total(v) return v:sum(o.dim, {keepdim = true}) end
  local keep = x:eq(x)
  local count = total(keep)
  local r = total(torch.where(keep, x, 0)) / count
  -- PyTorch's gradient over a slice of only NaN is NaN (its nansum's is the
  -- incoming inf times 0), where's is 0: a zero term whose derivative there
  -- is sqrt's at NaN (elsewhere it reads a constant)
  r = r + total(torch.where(count:eq(0), x, 1):sqrt() * 0)
  if o.keepdim then return r end
  return r:reshape(keep:sum(o.dim).shape)
end)

-- the lower median (torch's), with its index; NaN propagates as the largest value
both("median", function(t, dim, opts)
  if A.is_opts(dim) then opts, dim = dim, opts end
  local o = A.bind("median", {"dim", "keepdim"}, opts)
  dim = dim or o.dim
  if dim == nil then
    local f = t:reshape(-1)
    if f:numel() == 0 then raise("median: cannot compute the median of an empty tensor") end
    local v = f:sort()
    local has_nan = is_float(t) and f:ne(f):any():item()
    return v[has_nan and f:numel() - 1 or (f:numel() - 1) // 2]
  end
  local d = wrap_dim("median", dim, t:dim())
  local n = t:dim() == 0 and 1 or t.shape[d]
  if n == 0 then raise("median: cannot compute the median of an empty dim %d", d) end
  local x = t:dim() == 0 and t:reshape(1) or t
  local v, i = x:sort({dim = d, stable = true})
  local pos = torch.full(x:sum(d, {keepdim = true}).shape, (n - 1) // 2, {dtype = torch.int64, device = t.device})
  if is_float(t) then -- a NaN in the row: the median is NaN, at the first NaN's place
    local nans = x:ne(x):sum(d, {keepdim = true})
    pos = torch.where(nans:gt(0), n - nans, pos)
  end
  local mv, mi = v:gather(d, pos), i:gather(d, pos)
  if not o.keepdim then mv, mi = mv:squeeze(d), mi:squeeze(d) end
  if t:dim() == 0 then mv, mi = mv:reshape({}), mi:reshape({}) end
  return mv, mi
end)

-- ---- elementwise -------------------------------------------------------------

both("logical_xor", function(a, b)
  check_operand("logical_xor", 2, b)
  if not torch.is_tensor(b) then b = torch.tensor(b, {device = a.device}) end
  return a:ne(0):ne(b:ne(0))
end)

-- maximum/minimum that ignore a NaN unless both are NaN: a where b is NaN
-- or a wins (ties too), else b; the gradient goes where the value came
-- from, as PyTorch's formula sends it
local function fext(name, wins)
  both(name, function(a, b)
    A.check_tensor(name, 2, b)
    local dt = torch.result_type(a, b)
    local af, bf = a:to(dt), b:to(dt)
    return torch.where(wins(af, bf):logical_or(bf:ne(bf)), af, bf)
  end)
end
fext("fmax", function(a, b) return a:ge(b) end)
fext("fmin", function(a, b) return a:le(b) end)

both("xlogy", function(x, y)
  check_operand("xlogy", 2, y)
  if not torch.is_tensor(y) then y = torch.tensor(y, {dtype = is_float(x) and x.dtype or torch.float32, device = x.device}) end
  local dt = torch.result_type(x, y)
  if not A.is_floating_dtype(dt) then dt = torch.get_default_dtype() end
  y = y:to(dt)
  -- 0 * log(y) is 0 (y = 0 and inf too), but NaN y stays NaN; x's gradient there is 0
  local zero_x = x:eq(0):logical_and(y:eq(y))
  local r = x * torch.where(zero_x, 1, y):log()
  -- y's gradient is PyTorch's x / y, which is 0 / 0 = NaN at x = y = 0: a zero
  -- term whose derivative there is 0 * d sqrt(0) (elsewhere it reads a constant)
  local nan_slope = torch.where(zero_x:logical_and(y:eq(0)), y, 1):sqrt() * 0
  return r + nan_slope
end)

both("deg2rad", function(t) return t * (math.pi / 180) end)
both("rad2deg", function(t) return t * (180 / math.pi) end)

both("logit", function(t, eps)
  check_number("logit", "eps", eps, true)
  local x = floatify(t) -- integers in the default float dtype (1 - p in uint8 would wrap)
  if eps ~= nil then x = x:clamp(eps, 1 - eps) end
  -- log(p / (1 - p)) as 2 (log sqrt(p) - log sqrt(1 - p)), whose gradient is PyTorch's:
  -- 1 / (p (1 - p)), inf at 0 and 1 (a quotient's rule gives NaN there), NaN outside [0, 1]
  return (x:sqrt():log() - (1 - x):sqrt():log()) * 2
end)

both("signbit", function(t)
  if not is_float(t) then return t:lt(0) end
  -- -0.0 is signed: 1 / -0.0 = -inf
  return t:lt(0):logical_or(t:eq(0):logical_and((1 / t):lt(0)))
end)

-- ---- several tensors ---------------------------------------------------------

local function tensors_of(fn, first, ...)
  local list = (type(first) == "table" and not torch.is_tensor(first)) and first or {first, ...}
  for i, t in ipairs(list) do A.check_tensor(fn, i, t) end
  return list
end

torch.broadcast_tensors = function(...)
  local list = tensors_of("broadcast_tensors", ...)
  local shapes = {}
  for i, t in ipairs(list) do shapes[i] = t.shape end
  local s = torch.broadcast_shapes(table.unpack(shapes))
  local out = {}
  for i, t in ipairs(list) do out[i] = t:expand(s) end
  return table.unpack(out)
end

local function atleast(n)
  return function(...)
    local list = tensors_of("atleast_" .. n .. "d", ...)
    local out = {}
    for i, t in ipairs(list) do
      local x = t
      if n >= 1 and x:dim() == 0 then x = x:reshape(1) end
      if n >= 2 and x:dim() == 1 then x = x:unsqueeze(0) end
      if n >= 3 and x:dim() == 2 then x = x:unsqueeze(-1) end
      out[i] = x
    end
    return table.unpack(out)
  end
end
torch.atleast_1d, torch.atleast_2d, torch.atleast_3d = atleast(1), atleast(2), atleast(3)

local function stacker(name, prep, dim_of)
  torch[name] = function(tensors)
    if type(tensors) ~= "table" or torch.is_tensor(tensors) then raise("%s: expected a list of tensors", name) end
    local list = {}
    for i, t in ipairs(tensors) do
      A.check_tensor(name, i, t)
      list[i] = prep(t)
    end
    if #list == 0 then raise("%s: expected a non-empty list of tensors", name) end
    return torch.cat(list, dim_of(list))
  end
end
stacker("hstack", function(t) return (torch.atleast_1d(t)) end, function(l) return l[1]:dim() == 1 and 0 or 1 end)
stacker("vstack", function(t) return (torch.atleast_2d(t)) end, function() return 0 end)
stacker("dstack", function(t) return (torch.atleast_3d(t)) end, function() return 2 end)
stacker("column_stack", function(t)
  if t:dim() <= 1 then return t:reshape(t:numel(), 1) end
  return t
end, function() return 1 end)
torch.row_stack = torch.vstack

torch.meshgrid = function(...)
  local n = select("#", ...)
  local last = n > 0 and select(n, ...) or nil
  local opts = {}
  if A.is_opts(last) and rawget(last, "indexing") ~= nil or (A.is_plain_table(last) and next(last) ~= nil and rawget(last, 1) == nil) then
    opts, n = last, n - 1
  end
  A.check_opts("meshgrid", opts, {indexing = true})
  local list = tensors_of("meshgrid", table.unpack({...}, 1, n))
  local indexing = opts.indexing or "ij"
  if indexing ~= "ij" and indexing ~= "xy" then raise("meshgrid: indexing must be 'ij' or 'xy', got %s", A.show(indexing)) end
  local xs = {}
  for i, t in ipairs(list) do
    if t:dim() > 1 then raise("meshgrid: expects each tensor to be 0-d or 1-d, got %d-d", t:dim()) end
    xs[i] = t:reshape(-1)
  end
  if indexing == "xy" and #xs >= 2 then xs[1], xs[2] = xs[2], xs[1] end
  local shape = {}
  for i, t in ipairs(xs) do shape[i] = t.shape[0] end
  local out = {}
  for i, t in ipairs(xs) do
    local view = {}
    for j = 1, #xs do view[j] = j == i and shape[i] or 1 end
    out[i] = t:reshape(view):expand(shape)
  end
  if indexing == "xy" and #out >= 2 then out[1], out[2] = out[2], out[1] end -- the grids of (y, x, ...), handed back as (x, y, ...)
  return table.unpack(out)
end

both("take_along_dim", function(t, indices, dim)
  A.check_tensor("take_along_dim", 2, indices)
  if dim == nil then return t:reshape(-1):gather(0, indices:reshape(-1)) end
  local d = wrap_dim("take_along_dim", dim, t:dim())
  local ts, is = t.shape:totable(), indices.shape:totable()
  ts[d + 1], is[d + 1] = 1, 1
  local s = torch.broadcast_shapes(ts, is):totable()
  local tshape, ishape = {table.unpack(s)}, {table.unpack(s)}
  tshape[d + 1], ishape[d + 1] = t.shape[d], indices.shape[d]
  return t:expand(tshape):gather(d, indices:expand(ishape))
end)

-- ---- index_add, index_copy, index_fill ---------------------------------------

-- index (k) along dim, shaped and expanded over src for scatter
local function spread_index(fn, t, dim, index, src)
  A.check_tensor(fn, 3, index)
  if index:dim() > 1 then raise("%s: index should have dimension 1 or 0, got %d", fn, index:dim()) end
  local d = wrap_dim(fn, dim, t:dim())
  local view = {}
  for i = 0, math.max(src:dim(), 1) - 1 do view[i + 1] = i == d and index:numel() or 1 end
  return d, index:reshape(view):expand(src.shape)
end

both("index_add", function(t, dim, index, source, opts)
  A.check_tensor("index_add", 3, index)
  A.check_tensor("index_add", 4, source)
  if index.dtype == torch.int32 then index = index:long() -- as PyTorch, int32 or int64
  elseif index.dtype ~= torch.int64 then raise("index_add: expected dtype int32 or int64 for index, got %s", index.dtype) end
  local o = A.bind("index_add", {"alpha"}, opts)
  local d, idx = spread_index("index_add", t, dim, index, source)
  if o.alpha ~= nil and o.alpha ~= 1 then source = source * o.alpha end
  return t:scatter_add(d, idx, source)
end)

both("index_copy", function(t, dim, index, source)
  A.check_tensor("index_copy", 4, source)
  local d, idx = spread_index("index_copy", t, dim, index, source)
  return t:scatter(d, idx, source)
end)

both("index_fill", function(t, dim, index, value)
  A.check_tensor("index_fill", 3, index)
  local d = wrap_dim("index_fill", dim, t:dim())
  local n = t:dim() == 0 and 1 or t.shape[d]
  local hit = torch.zeros(n, {dtype = torch.bool, device = t.device}):scatter(0, index:reshape(-1), 1)
  local view = {}
  for i = 0, t:dim() - 1 do view[i + 1] = i == d and n or 1 end
  return torch.where(t:dim() == 0 and hit:reshape({}) or hit:reshape(view), value, t)
end)

-- ---- dtype rules -------------------------------------------------------------

local function check_dtype(fn, pos, d)
  if type(d) ~= "string" or rawget(torch, "_floating_dtypes")[d] == nil then
    raise("%s: argument %d must be a dtype (torch.float32, ...), got %s", fn, pos, A.show(d))
  end
end

-- the op layer's own promotion, read off an empty sum
torch.promote_types = function(a, b)
  check_dtype("promote_types", 1, a)
  check_dtype("promote_types", 2, b)
  return (torch.empty(0, {dtype = a, device = "cpu"}) + torch.empty(0, {dtype = b, device = "cpu"})).dtype
end

-- tensors stand in as empty tensors of their rank class (0-dim or not), numbers as themselves
torch.result_type = function(a, b)
  local function proxy(v, pos)
    if torch.is_tensor(v) then
      return v:dim() == 0 and torch.zeros({}, {dtype = v.dtype, device = "cpu"}) or torch.empty(0, {dtype = v.dtype, device = "cpu"})
    end
    if type(v) == "number" or type(v) == "boolean" then return v end
    raise("result_type: argument %d must be a tensor or a number, got %s", pos, A.show(v))
  end
  local pa, pb = proxy(a, 1), proxy(b, 2)
  if not torch.is_tensor(pa) and not torch.is_tensor(pb) then
    pa = torch.tensor(pa, {device = "cpu"})
  end
  return torch.add(pa, pb).dtype
end

-- torch.can_cast: no floating to integral, no non-bool to bool
torch.can_cast = function(from, to)
  check_dtype("can_cast", 1, from)
  check_dtype("can_cast", 2, to)
  if A.is_floating_dtype(from) and not A.is_floating_dtype(to) then return false end
  if from ~= torch.bool and to == torch.bool then return false end
  return true
end

-- ---- sorted search and counting ----------------------------------------------

-- PyTorch's binary search for each value in the sorted rows (the last dim),
-- all values at once in as many halving steps as a row's length has bits:
-- it moves past an entry when not (entry >= value) (not (entry > value)
-- with right), so a NaN value lands after every entry, as in PyTorch.
local function count_below(fn, sorted, values, right, side)
  if side ~= nil then
    if side ~= "left" and side ~= "right" then raise("%s: side must be 'left' or 'right', got %s", fn, A.show(side)) end
    right = side == "right"
  end
  local scalar = not torch.is_tensor(values)
  if scalar then values = torch.tensor(values, {device = sorted.device}) end
  local one_d = sorted:dim() <= 1
  local s = one_d and sorted:reshape(-1) or sorted
  if not one_d then
    local same = values:dim() == s:dim()
    for d = 0, s:dim() - 2 do same = same and values.shape[d] == s.shape[d] end
    if not same then
      raise("%s: boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries tensor and input value tensor must match, but got boundaries of shape %s and values of shape %s",
        fn, tostring(s.shape), tostring(values.shape))
    end
  end
  local n = s.shape[s:dim() - 1]
  local lo = torch.zeros(values.shape, {dtype = torch.int64, device = values.device})
  local hi = torch.full(values.shape, n, {dtype = torch.int64, device = values.device})
  local steps = 0 -- bisections: the bits of n (at most 63: 1 << 63 wraps negative, and n went on for ever)
  while steps < 63 and (1 << steps) <= n do steps = steps + 1 end
  for _ = 1, steps do
    local active = lo:lt(hi)
    local mid = lo + (hi - lo) // 2
    local at = mid:clamp({max = n - 1})
    local entry = one_d and s:index_select(0, at:reshape(-1)):reshape(at.shape) or s:gather(-1, at)
    local past = (right and entry:gt(values) or entry:ge(values)):logical_not()
    lo = torch.where(active:logical_and(past), mid + 1, lo)
    hi = torch.where(active:logical_and(past:logical_not()), mid, hi)
  end
  return scalar and lo:reshape({}) or lo
end

torch.searchsorted = function(sorted_sequence, values, opts)
  A.check_tensor("searchsorted", 1, sorted_sequence)
  local o = A.bind("searchsorted", {"right", "side", "out_int32"}, opts)
  local r = count_below("searchsorted", sorted_sequence, values, o.right, o.side)
  return o.out_int32 and r:int() or r
end

both("bucketize", function(input, boundaries, opts)
  A.check_tensor("bucketize", 2, boundaries)
  if boundaries:dim() ~= 1 then raise("bucketize: boundaries tensor must be 1 dimension, but got dim(%d)", boundaries:dim()) end
  local o = A.bind("bucketize", {"right", "out_int32"}, opts)
  local r = count_below("bucketize", boundaries, input, o.right)
  return o.out_int32 and r:int() or r
end)

both("bincount", function(t, opts)
  local o = A.bind("bincount", {"weights", "minlength"}, opts)
  if t:dim() ~= 1 or A.is_floating_dtype(t.dtype) or t.dtype == torch.bool then
    raise("bincount: expected a 1-d tensor of non-negative integers, got %d-d %s", t:dim(), t.dtype)
  end
  local n = t:numel()
  if n > 0 and t:min():item() < 0 then raise("bincount: input must be non-negative") end
  local len = math.max(o.minlength or 0, n > 0 and t:max():item() + 1 or 0)
  local idx = t:long()
  if o.weights ~= nil then
    A.check_tensor("bincount", 2, o.weights)
    local w = A.is_floating_dtype(o.weights.dtype) and o.weights or o.weights:double()
    return torch.zeros(len, {dtype = w.dtype, device = t.device}):scatter_add(0, idx, w)
  end
  return torch.zeros(len, {dtype = torch.int64, device = t.device}):scatter_add(0, idx, torch.ones(n, {dtype = torch.int64, device = t.device}))
end)

-- ---- random ------------------------------------------------------------------

both("bernoulli", function(p, opts)
  local o = A.bind("bernoulli", {"p"}, opts)
  if not is_float(p) then raise("bernoulli: expected a floating-point tensor of probabilities, got %s", p.dtype) end
  local prob = check_scalar("bernoulli", "p", o.p) or p
  return torch.rand(p.shape, {dtype = p.dtype, device = p.device}):lt(prob):to(p.dtype)
end)

-- num_samples draws per row: with replacement by inverse CDF, without by
-- the largest exponential keys u^(1/p) (Efraimidis and Spirakis), as torch
both("multinomial", function(p, ...)
  local o = A.bind("multinomial", {"num_samples", "replacement"}, ...)
  local num_samples, replacement = o.num_samples, o.replacement or false
  if p:dim() < 1 or p:dim() > 2 then raise("multinomial: prob_dist must be 1 or 2 dim, got %d", p:dim()) end
  if math.type(num_samples) ~= "integer" or num_samples <= 0 then
    raise("multinomial: num_samples must be a positive integer, got %s", A.show(num_samples))
  end
  local w = p:dim() == 1 and p:unsqueeze(0) or p
  w = is_float(w) and w or w:double()
  local n = w.shape[1]
  if w:lt(0):any():item() or w:ne(w):any():item() then raise("multinomial: probability tensor contains either inf, nan or element < 0") end
  if w:sum(1):le(0):any():item() then raise("multinomial: invalid multinomial distribution (sum of probabilities <= 0)") end
  if not replacement and num_samples > n then
    raise("multinomial: cannot sample n_sample > prob_dist.size(-1) samples without replacement")
  end
  local r
  if replacement then
    local cdf = w:double():cumsum(1)
    cdf = cdf / cdf:narrow(1, n - 1, 1)
    local u = torch.rand(w.shape[0], num_samples, {dtype = torch.float64, device = w.device})
    r = count_below("multinomial", cdf, u, true):clamp({max = n - 1})
  else
    local u = torch.rand(w.shape, {dtype = torch.float64, device = w.device})
    local keys = u:log() / w:double() -- log(u) / p: the largest keys win; p = 0 gives -inf
    local _, idx = keys:topk(num_samples, {dim = 1})
    r = idx
  end
  return p:dim() == 1 and r:reshape(num_samples) or r
end)

torch.normal = function(mean, std, size, opts)
  if A.is_opts(size) then opts, size = size, nil end
  local o = A.check_opts("normal", opts, {dtype = true, device = true})
  if torch.is_tensor(mean) or torch.is_tensor(std) then
    local m = torch.is_tensor(mean) and mean or nil
    local s = torch.is_tensor(std) and std or nil
    local like = m or s
    local shape = m and s and torch.broadcast_shapes(m.shape, s.shape) or like.shape
    local z = torch.randn(shape, {dtype = like.dtype, device = like.device})
    return z * (std or 1) + (mean or 0)
  end
  if size == nil then raise("normal: with numbers for mean and std, give the size: torch.normal(0, 1, {2, 3})") end
  return torch.randn(size, {dtype = o.dtype, device = o.device}) * std + mean
end

-- ---- distances and products --------------------------------------------------

-- compute_mode is accepted for ports; every mode computes the differences directly, as
-- PyTorch's "donot_use_mm_for_euclid_dist"
local CDIST_MODES = {use_mm_for_euclid_dist_if_necessary = true, use_mm_for_euclid_dist = true,
  donot_use_mm_for_euclid_dist = true}

torch.cdist = function(x1, x2, ...)
  A.check_tensor("cdist", 1, x1)
  A.check_tensor("cdist", 2, x2)
  local o = A.bind("cdist", {"p", "compute_mode"}, ...)
  local p = o.p == nil and 2 or A.check_number("cdist", "p", o.p)
  if o.compute_mode ~= nil and not CDIST_MODES[o.compute_mode] then
    raise("cdist: %s is not a valid value for compute_mode", A.show(o.compute_mode))
  end
  if x1:dim() < 2 or x2:dim() < 2 then raise("cdist only supports at least 2D tensors, X1 got: %dD", x1:dim()) end
  if x1.shape[x1:dim() - 1] ~= x2.shape[x2:dim() - 1] then
    raise("cdist: X1 and X2 must have the same number of columns. X1: %d X2: %d", x1.shape[x1:dim() - 1], x2.shape[x2:dim() - 1])
  end
  if not (p >= 0) then raise("cdist only supports non-negative p values, got %s", A.show(p)) end
  local d = x1:unsqueeze(-2) - x2:unsqueeze(-3) -- (..., P, R, M)
  if p == 0 then return d:ne(0):sum(-1):to(d.dtype) end
  if p == math.huge then return d:abs():amax(-1) end
  if p == 2 then -- the gradient at d = 0 is 0 (as torch), not NaN
    local s = (d * d):sum(-1)
    local zero = s:eq(0)
    return torch.where(zero, 0, torch.where(zero, 1, s):sqrt())
  end
  return d:abs():pow(p):sum(-1):pow(1 / p)
end

local function cosine_similarity(x1, x2, ...)
  A.check_tensor("cosine_similarity", 1, x1)
  A.check_tensor("cosine_similarity", 2, x2)
  local o = A.bind("cosine_similarity", {"dim", "eps"}, ...)
  local eps = o.eps == nil and 1e-8 or A.check_number("cosine_similarity", "eps", o.eps)
  -- PyTorch 1.13: both broadcast, each divided by its norm clamped to at least
  -- eps (a clamp it does not record: the gradient is the norm's), then summed
  local shape = torch.broadcast_shapes(x1.shape, x2.shape)
  local dim = wrap_dim("cosine_similarity", o.dim or 1, #shape)
  local function unit(x)
    x = floatify(x):expand(shape)
    local n = x:norm(2, dim, {keepdim = true})
    local held = n:detach()
    return x / (n + (held:clamp({min = eps}) - held))
  end
  return (unit(x1) * unit(x2)):sum(dim)
end
torch.cosine_similarity = cosine_similarity

torch.vdot = function(a, b)
  A.check_tensor("vdot", 1, a)
  A.check_tensor("vdot", 2, b)
  return a:dot(b)
end
methods.vdot = torch.vdot

-- baddbmm: beta * t + alpha * bmm(b1, b2); addbmm: the product summed over the batch
local function add_batched_product(name, sum_batch)
  both(name, function(t, b1, b2, opts)
    A.check_tensor(name, 2, b1)
    A.check_tensor(name, 3, b2)
    local o = A.bind(name, {"beta", "alpha"}, opts)
    local beta = o.beta == nil and 1 or A.check_number(name, "beta", o.beta)
    local alpha = o.alpha == nil and 1 or A.check_number(name, "alpha", o.alpha)
    local prod = b1:bmm(b2)
    if sum_batch then prod = prod:sum(0) end
    if alpha ~= 1 then prod = prod * alpha end
    if beta == 0 then return prod end -- beta 0: input ignored, NaN and inf too, as torch
    return (beta == 1 and t or t * beta) + prod
  end)
end
add_batched_product("baddbmm", false)
add_batched_product("addbmm", true)

-- ---- math composed from the kernel ops -----------------------------------------
-- (log2, log10, exp2, expm1, tan, sinh, cosh, asinh, acosh, atanh and trunc
-- are kernel ops now: src/ops/ops.def)


both("frac", function(t)
  if not is_float(t) then raise("frac: expected a floating-point tensor, got %s", t.dtype) end
  return t - t:trunc()
end)

-- sqrt(a^2 + b^2), scaled by the larger magnitude so neither overflows nor underflows
both("hypot", function(a, b)
  A.check_tensor("hypot", 2, b)
  local x, y = floatify(a):abs(), floatify(b):abs()
  local m = torch.maximum(x, y)
  local safe = torch.where(m:eq(0), 1, m):detach()
  local r = safe * ((x / safe) ^ 2 + (y / safe) ^ 2):sqrt()
  local inf = x:eq(math.huge):logical_or(y:eq(math.huge)) -- hypot(inf, NaN) is inf, as C's
  return torch.where(inf, math.huge, torch.where(m:eq(0), 0, r))
end)

-- the functions above that are not made by both(): errors of the ops they call at the user's line
for _, name in ipairs({"broadcast_tensors", "atleast_1d", "atleast_2d", "atleast_3d", "hstack", "vstack", "row_stack",
                       "dstack", "column_stack", "meshgrid", "promote_types", "result_type", "can_cast", "searchsorted",
                       "normal", "cdist", "cosine_similarity", "vdot", "clone", "detach", "numel", "is_floating_point"}) do
  local f = torch[name]
  torch[name] = function(...) return user_level(f, ...) end
end
for _, name in ipairs({"type_as", "vdot", "new_tensor"}) do
  local f = methods[name]
  methods[name] = function(...) return user_level(f, ...) end
end

-- more functions composed in Lua, in their own files, with the helpers above
local helpers = {both = both, user_level = user_level, wrap_dim = wrap_dim}
require("tensh.contract")(helpers)
require("tensh.tensor_select")(helpers)

-- the methods above check their tensor: x.flip(0) for x:flip(0) says so, as the C methods
require("tensh.classes").tensor_methods(methods)

return {}
