-- Splitting and picking along a dim, composed from narrow, sort, gather,
-- where and lerp: tensor_split, cummax/cummin, kthvalue,
-- quantile/nanquantile. The values are gathered from the input at the
-- indices found, so their gradient is PyTorch's (the output's gradient
-- scattered back to where each value came from). Installed by
-- tensor_extra.lua, which passes its helpers.
local A = require "tensh.args"
local raise = require("tensh.errors").raise

return function(H)
local both, wrap_dim = H.both, H.wrap_dim

local function is_float(t) return A.is_floating_dtype(t.dtype) end

-- ---- tensor_split -------------------------------------------------------------

-- Python's slice bounds: a negative index counts from the end, then both clamp to [0, n]
local function clamp_index(i, n)
  if i < 0 then i = i + n end
  return math.max(0, math.min(i, n))
end

both("tensor_split", function(t, spec, ...)
  local o = A.bind("tensor_split", {"dim"}, ...)
  local dim = o.dim or 0
  if t:dim() == 0 then
    raise("tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims")
  end
  local d = wrap_dim("tensor_split", dim, t:dim())
  if torch.is_tensor(spec) then
    if spec.dtype ~= torch.int64 then
      raise("tensor_split expected tensor_indices_or_sections to have dtype of long, but got %s", spec.dtype)
    end
    if spec:dim() > 1 then
      raise("tensor_split expected tensor_indices_or_sections to be a zero-dimensional or one-dimensional tensor, but got a tensor with %d dims",
        spec:dim())
    end
    spec = spec:dim() == 0 and spec:item() or spec:tolist()
  end
  local n, out = t.shape[d], {}
  if math.type(spec) == "integer" then -- sections: the first n % sections one longer
    if spec <= 0 then raise("tensor_split: number of sections must be larger than 0, got %d", spec) end
    local size, extra, start = n // spec, n % spec, 0
    for k = 1, spec do
      local len = size + (k <= extra and 1 or 0)
      out[k], start = t:narrow(d, start, len), start + len
    end
  elseif A.is_plain_table(spec) then -- indices: the pieces between them
    local start = 0
    for k = 1, #spec + 1 do
      local stop = n
      if k <= #spec then
        if math.type(spec[k]) ~= "integer" then
          raise("tensor_split: indices must be integers, got %s at position %d", A.show(spec[k]), k)
        end
        stop = clamp_index(spec[k], n)
      end
      out[k] = t:narrow(d, start, math.max(stop - start, 0))
      start = stop
    end
  else
    raise("tensor_split: indices_or_sections must be an integer, a list of integers or an int64 tensor, got %s",
      A.show(spec))
  end
  return A.list(out, "tensor_split")
end)

-- ---- cummax, cummin ------------------------------------------------------------

-- An inclusive scan along dim of (value, index) pairs in log2(n) whole-tensor
-- steps (Hillis and Steele). Of two runs, the later one's pick wins when it
-- is NaN, or when the earlier one's is not NaN and the later is >= (<= for
-- cummin) it: PyTorch's order, in which the last of equal values and the
-- last NaN are kept. That rule is associative, so the steps can merge runs.
local function running_pick(name, later_wins)
  both(name, function(t, dim)
    if dim == nil then raise("%s: missing argument 'dim'", name) end
    local d = wrap_dim(name, dim, t:dim())
    local x = t:dim() == 0 and t:reshape(1) or t
    local n = x.shape[d]
    local shape = {}
    for k = 0, x:dim() - 1 do shape[k + 1] = k == d and n or 1 end
    local idx = torch.arange(n, {device = t.device}):reshape(shape):expand(x.shape)
    local v = x:detach()
    if v.dtype == torch.bool then v = v:to(torch.uint8) end -- compared as 0 and 1
    local s = 1
    while s < n do
      local lv, ev = v:narrow(d, s, n - s), v:narrow(d, 0, n - s)
      local take = later_wins(lv, ev)
      if is_float(v) then take = take:logical_and(ev:eq(ev)):logical_or(lv:ne(lv)) end
      v = torch.cat({v:narrow(d, 0, s), torch.where(take, lv, ev)}, d)
      idx = torch.cat({idx:narrow(d, 0, s), torch.where(take, idx:narrow(d, s, n - s), idx:narrow(d, 0, n - s))}, d)
      s = s * 2
    end
    idx = idx:contiguous()
    local values = x:gather(d, idx)
    if t:dim() == 0 then return values:reshape({}), idx:reshape({}) end
    return values, idx
  end)
end
running_pick("cummax", function(later, earlier) return later:ge(earlier) end)
running_pick("cummin", function(later, earlier) return later:le(earlier) end)

-- ---- kthvalue ------------------------------------------------------------------

-- the k-th smallest along dim (NaN counts as the largest), and its index
both("kthvalue", function(t, k, ...)
  local o = A.bind("kthvalue", {"dim", "keepdim"}, ...)
  if math.type(k) ~= "integer" then raise("kthvalue: k must be an integer, got %s", A.show(k)) end
  if t.dtype == torch.bool then raise("kthvalue: not implemented for bool tensors; convert first, e.g. t:long()") end
  local d = wrap_dim("kthvalue", o.dim or -1, t:dim())
  local x = t:dim() == 0 and t:reshape(1) or t
  local n = x.shape[d]
  if n == 0 then
    raise("kthvalue(): Expected reduction dim %d to have non-zero size.", d)
  end
  if k < 1 or k > n then raise("kthvalue(): selected number k out of range for dimension %d", d) end
  local _, order = x:detach():sort({dim = d, stable = true})
  local idx = order:narrow(d, k - 1, 1):contiguous()
  local values = x:gather(d, idx)
  if t:dim() == 0 then return values:reshape({}), idx:reshape({}) end
  if not o.keepdim then return values:squeeze(d), idx:squeeze(d) end
  return values, idx
end)

-- ---- quantile, nanquantile -----------------------------------------------------

local MODES = {linear = true, lower = true, higher = true, midpoint = true, nearest = true}

-- PyTorch's algorithm (aten's quantile_compute): the sorted values, a
-- fractional rank q * (count - 1) per row (the last place where the row has
-- a NaN, for quantile; counting only the numbers, for nanquantile), and the
-- values either side of it, interpolated.
local function quantile(name, ignore_nan)
  both(name, function(t, q, ...)
    local o = A.bind_keywords(name, {"dim", "keepdim"}, {interpolation = true}, ...)
    local fn = name .. "()"
    local mode = o.interpolation or "linear"
    if t.dtype ~= torch.float32 and t.dtype ~= torch.float64 then
      raise("%s input tensor must be either float or double dtype, got %s", fn, t.dtype)
    end
    if not MODES[mode] then
      raise("%s interpolation must be one of linear, lower, higher, midpoint or nearest, but got %s", fn, A.show(mode))
    end
    local qt
    if type(q) == "number" then
      if not (q >= 0 and q <= 1) then raise("%s q must be in the range [0, 1] but got %s", fn, A.show(q)) end
      qt = torch.tensor(q, {dtype = t.dtype, device = t.device})
    elseif torch.is_tensor(q) then
      if q:dim() > 1 then raise("%s q must be a scalar or 1D tensor, got %d dims", fn, q:dim()) end
      if q.dtype ~= t.dtype then raise("%s q tensor must be same dtype as the input tensor, got %s and %s", fn, q.dtype, t.dtype) end
      if q:numel() > 0 and (q:lt(0):any() or q:gt(1):any() or q:ne(q):any()) then
        raise("%s q values must be in the range [0, 1]", fn)
      end
      qt = q -- its gradient is that of the weights (linear mode)
    else
      raise("%s q must be a number or a tensor, got %s", fn, A.show(q))
    end
    if t:numel() == 0 then raise("%s input tensor must be non-empty", fn) end
    -- the values to reduce as the last dim of `sorted`, the rest of its shape the result's
    local x, out_shape
    if o.dim == nil then
      x = t:reshape(-1)
      out_shape = {}
      if o.keepdim then for k = 1, t:dim() do out_shape[k] = 1 end end
    else
      local d = wrap_dim(name, o.dim, t:dim())
      local xt = t:dim() == 0 and t:reshape(1) or t
      x = xt:unsqueeze(-1):transpose(d, -1)
      out_shape = x.shape:totable()
      table.remove(out_shape) -- the reduced dim, at the end now
      if t:dim() == 0 then out_shape = {}
      elseif not o.keepdim then table.remove(out_shape, d + 1) end
    end
    local n = x.shape[x:dim() - 1]
    local sorted = x:sort({dim = -1}):reshape(-1, n) -- (rows, n), NaN last
    local qrow = qt:reshape(1, -1)                     -- (1, Q)
    local ranks
    if ignore_nan then
      local count = sorted:eq(sorted):sum(1, {keepdim = true}):to(t.dtype) -- the numbers in each row
      ranks = (qrow * (count - 1)):clamp({min = 0})    -- 0 for a row of NaN: its quantile is NaN
    else
      local has_nan = sorted:ne(sorted):any(1, {keepdim = true})
      ranks = torch.where(has_nan, n - 1, qrow * (n - 1))
    end
    if mode == "lower" then ranks = ranks:floor()
    elseif mode == "higher" then ranks = ranks:ceil()
    elseif mode == "nearest" then ranks = ranks:round() end -- half to even, as torch
    ranks = ranks:expand(sorted.shape[0], qrow.shape[1])
    local below = ranks:long()
    local r = sorted:gather(1, below)
    if mode == "linear" or mode == "midpoint" then
      local weight = mode == "midpoint" and torch.full_like(ranks, 0.5) or ranks - below:to(ranks.dtype)
      r = r:lerp(sorted:gather(1, ranks:ceil():long()), weight)
    end
    -- (rows, Q) -> (Q, result's shape), or the result's shape for a number or 0-dim q
    if torch.is_tensor(q) and q:dim() == 1 then
      local shape = {qt:numel()}
      for _, s in ipairs(out_shape) do shape[#shape + 1] = s end
      return r:t():reshape(shape)
    end
    return r:reshape(out_shape)
  end)
end
quantile("quantile", false)
quantile("nanquantile", true)
end
