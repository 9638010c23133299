-- Products over named dims, composed from permute, reshape, sum, mul and
-- bmm as PyTorch 1.13 composes them: torch.einsum (every equation form:
-- implicit and explicit output, '...', repeated subscripts, broadcasting
-- of size-1 dims, the sublist form), torch.tensordot and torch.kron. Their
-- gradients are those of the ops they are made of. Installed by
-- tensor_extra.lua, which passes its helpers.
local A = require "tensh.args"
local raise = require("tensh.errors").raise

return function(H)
local both, user_level, wrap_dim = H.both, H.user_level, H.wrap_dim

-- ---- einsum: the equation ----------------------------------------------------

-- A subscript letter's number, as PyTorch orders them (A-Z, then a-z): the
-- implicit output lists its subscripts in this order.
local function letter_rank(c)
  local b = c:byte()
  if b >= 65 and b <= 90 then return b - 65 end
  if b >= 97 and b <= 122 then return b - 97 + 26 end
end

local function is_letter(c) return letter_rank(c) ~= nil end

-- pos: the 1-based index into the equation (PyTorch counts from 0)
local function bad_subscript(pos)
  raise("einsum(): invalid subscript given at index %d in the equation string, subscripts must be in [a-zA-Z]", pos - 1)
end

-- The input side: one list of subscripts per operand ("..." stands for the
-- ellipsis), checked character by character as PyTorch checks them.
local function parse_inputs(eq, lhs_end, nops)
  local ops, cur, pos = {{}}, 1, 1
  while pos <= lhs_end do
    local c = eq:sub(pos, pos)
    if c == " " then
      pos = pos + 1
    elseif c == "." then
      for _, s in ipairs(ops[cur]) do
        if s == "..." then raise("einsum(): found '.' for operand %d for which an ellipsis was already found", cur - 1) end
      end
      if pos + 2 > lhs_end or eq:sub(pos, pos + 2) ~= "..." then
        raise("einsum(): found '.' for operand %d that is not part of any ellipsis", cur - 1)
      end
      ops[cur][#ops[cur] + 1] = "..."
      pos = pos + 3
    elseif c == "," then
      cur = cur + 1
      if cur > nops then raise("einsum(): fewer operands were provided than specified in the equation") end
      ops[cur] = {}
      pos = pos + 1
    elseif is_letter(c) then
      ops[cur][#ops[cur] + 1] = c
      pos = pos + 1
    else
      bad_subscript(pos)
    end
  end
  if cur ~= nops then raise("einsum(): more operands were provided than specified in the equation") end
  return ops
end

-- The output side after "->" (starting at index `from`): its subscripts,
-- each once and each from some operand.
local function parse_output(eq, from, seen_letters)
  local out, has, pos = {}, {}, from
  while pos <= #eq do
    local c = eq:sub(pos, pos)
    if c == " " then
      pos = pos + 1
    elseif c == "." then
      if has["..."] then raise("einsum(): found '.' for output but an ellipsis (...) was already found") end
      if eq:sub(pos, pos + 2) ~= "..." then raise("einsum(): found '.' for output that is not part of any ellipsis (...)") end
      has["..."], out[#out + 1] = true, "..."
      pos = pos + 3
    elseif is_letter(c) then
      if has[c] then raise("einsum(): output subscript %s appears more than once in the output", c) end
      if not seen_letters[c] then
        raise("einsum(): output subscript %s does not appear in the equation for any input operand", c)
      end
      has[c], out[#out + 1] = true, c
      pos = pos + 1
    else
      bad_subscript(pos)
    end
  end
  return out
end

-- The sublist form einsum(op1, {0, 1}, op2, {1, 2}, {0, 2}) as an equation:
-- subscripts 0..51 are A-Z then a-z, "..." the ellipsis.
local function sublist_equation(args, n)
  local function subs(list, what)
    if not A.is_plain_table(list) then raise("einsum(): %s must be a list of subscripts, got %s", what, A.show(list)) end
    local s = {}
    for i, v in ipairs(list) do
      if v == "..." then s[i] = "..."
      elseif math.type(v) == "integer" and v >= 0 and v < 52 then
        s[i] = string.char(v < 26 and 65 + v or 97 + v - 26)
      else
        raise("einsum(): subscript in subscript list is not within the valid range [0, 52), got %s", A.show(v))
      end
    end
    return table.concat(s)
  end
  local parts, ops = {}, {}
  local k = 1
  while k + 1 <= n do
    ops[#parts + 1] = args[k]
    parts[#parts + 1] = subs(args[k + 1], ("the subscripts of operand %d"):format(#parts))
    k = k + 2
  end
  local eq = table.concat(parts, ",")
  if k == n then eq = eq .. "->" .. subs(args[k], "the output subscripts") end
  return eq, ops, #parts
end

-- ---- einsum: the contraction -------------------------------------------------

-- Each operand with its subscripts as one label per dim ("...k" for the
-- ellipsis' dims, aligned right across operands), repeated subscripts
-- replaced by their diagonal.
local function label_dims(ops, subs)
  local ell = 0 -- the ellipsis' dims: the most any operand gives it
  for i, t in ipairs(ops) do
    local letters, has_ell = 0, false
    for _, s in ipairs(subs[i]) do
      if s == "..." then has_ell = true else letters = letters + 1 end
    end
    if not has_ell and letters ~= t:dim() then
      raise("einsum(): the number of subscripts in the equation (%d) does not match the number of dimensions (%d) for operand %d and no ellipsis was given",
        letters, t:dim(), i - 1)
    end
    if has_ell and letters > t:dim() then
      raise("einsum(): the number of subscripts in the equation (%d) is more than the number of dimensions (%d) for operand %d",
        letters, t:dim(), i - 1)
    end
    if has_ell then ell = math.max(ell, t:dim() - letters) end
  end
  local out = {}
  for i, t in ipairs(ops) do
    local labels, covered = {}, t:dim()
    for _, s in ipairs(subs[i]) do if s ~= "..." then covered = covered - 1 end end
    for _, s in ipairs(subs[i]) do
      if s == "..." then
        for k = ell - covered, ell - 1 do labels[#labels + 1] = "..." .. k end
      else
        labels[#labels + 1] = s
      end
    end
    -- a subscript repeated in one operand takes the diagonal of its dims (moved last)
    local x, again = t, true
    while again do
      again = false
      for p = 1, #labels do
        for q = p + 1, #labels do
          if labels[p] == labels[q] then
            local sp, sq = x.shape[p - 1], x.shape[q - 1]
            if sp ~= sq then
              raise("einsum(): subscript %s is repeated for operand %d but the sizes don't match, %d != %d",
                labels[p], i - 1, sq, sp)
            end
            x = x:diagonal(0, p - 1, q - 1)
            local l = labels[p]
            table.remove(labels, q)
            table.remove(labels, p)
            labels[#labels + 1] = l
            again = true
            break
          end
        end
        if again then break end
      end
    end
    out[i] = {t = x, labels = labels}
  end
  return out, ell
end

-- Each label has one size over the operands, or 1 (which broadcasts).
local function check_sizes(ops)
  local size = {}
  for i, o in ipairs(ops) do
    for d, l in ipairs(o.labels) do
      local s, prev = o.t.shape[d - 1], size[l]
      if prev == nil or prev == 1 then size[l] = s
      elseif s ~= 1 and s ~= prev then
        if l:sub(1, 3) == "..." then
          raise("einsum(): dimension %s covered by ellipsis in operand %d has size %d which does not broadcast with previously seen ellipsis with size %d for the respective dimension",
            l:sub(4), i - 1, s, prev)
        end
        raise("einsum(): subscript %s has size %d for operand %d which does not broadcast with previously seen size %d",
          l, s, i - 1, prev)
      end
    end
  end
  return size
end

-- o's tensor permuted to `order` (every label of the equation), with
-- size-1 dims for the labels it lacks.
local function align(o, order)
  local where = {}
  for d, l in ipairs(o.labels) do where[l] = d - 1 end
  local perm, shape = {}, {}
  for _, l in ipairs(order) do
    if where[l] then perm[#perm + 1] = where[l] end
  end
  local x = #perm > 0 and o.t:permute(perm) or o.t
  for k, l in ipairs(order) do shape[k] = where[l] and o.t.shape[where[l]] or 1 end
  return x:reshape(shape)
end

local function prod(list, idx)
  local n = 1
  for _, d in ipairs(idx) do n = n * list[d] end
  return n
end

-- sum over sum_dims of left * right, both of the same rank (aligned), as
-- one bmm: batch dims (in both), left-only, right-only, summed; the result
-- keeps every dim (size 1 where summed or in neither).
local function sumproduct(left, right, sum_dims)
  if left.dtype ~= right.dtype then
    raise("einsum(): expected the operands of a contraction to have the same dtype, but got %s and %s",
      left.dtype, right.dtype)
  end
  local ls, rs = left.shape:totable(), right.shape:totable()
  local summed = {}
  for _, d in ipairs(sum_dims) do summed[d] = true end
  local batch, lo, ro, sum = {}, {}, {}, {}
  for d = 1, #ls do
    if summed[d] then sum[#sum + 1] = d
    elseif ls[d] ~= 1 and rs[d] ~= 1 then batch[#batch + 1] = d
    elseif ls[d] ~= 1 then lo[#lo + 1] = d
    elseif rs[d] ~= 1 then ro[#ro + 1] = d end
  end
  local function dims0(list, ...)
    local out = {}
    for _, l in ipairs({list, ...}) do for _, d in ipairs(l) do out[#out + 1] = d - 1 end end
    return out
  end
  -- every dim appears once in a permutation: the size-1 ones go last
  local rest = {}
  local used = {}
  for _, l in ipairs({batch, lo, ro, sum}) do for _, d in ipairs(l) do used[d] = true end end
  for d = 1, #ls do if not used[d] then rest[#rest + 1] = d end end
  local B, Lo, Ro, S = prod(ls, batch), prod(ls, lo), prod(rs, ro), prod(ls, sum)
  local lp = left:permute(dims0(batch, lo, sum, ro, rest)):reshape(B, Lo, S)
  local rp = right:permute(dims0(batch, sum, ro, lo, rest)):reshape(B, S, Ro)
  local r = lp:bmm(rp)
  -- back to the aligned order: the kept dims (batch, lo, ro) in their places, 1 elsewhere
  local kept, kept_sizes = dims0(batch, lo, ro), {}
  for _, d in ipairs(batch) do kept_sizes[#kept_sizes + 1] = ls[d] end
  for _, d in ipairs(lo) do kept_sizes[#kept_sizes + 1] = ls[d] end
  for _, d in ipairs(ro) do kept_sizes[#kept_sizes + 1] = rs[d] end
  if #kept > 0 then
    r = r:reshape(kept_sizes)
    local inv, sorted = {}, {}
    for k, d in ipairs(kept) do sorted[k] = {d, k - 1} end
    table.sort(sorted, function(a, b) return a[1] < b[1] end)
    for k, e in ipairs(sorted) do inv[k] = e[2] end
    r = r:permute(inv)
  end
  local shape = {}
  for d = 1, #ls do shape[d] = 1 end
  for _, d in ipairs(batch) do shape[d] = ls[d] end
  for _, d in ipairs(lo) do shape[d] = ls[d] end
  for _, d in ipairs(ro) do shape[d] = rs[d] end
  return r:reshape(shape)
end

local function einsum(...)
  local n = select("#", ...)
  local args = {...}
  local eq, ops, nops
  if n == 0 then
    raise("einsum(): must specify the equation string and at least one operand, or at least one operand and its subscripts list")
  end
  if type(args[1]) == "string" then
    eq, ops, nops = args[1], {table.unpack(args, 2, n)}, n - 1
    if n == 2 and A.is_plain_table(args[2]) then ops, nops = args[2], #args[2] end -- einsum(eq, {a, b})
  elseif torch.is_tensor(args[1]) then
    eq, ops, nops = sublist_equation(args, n)
  else
    raise("einsum(): argument 1 must be the equation (a string) or an operand (a tensor), got %s", A.show(args[1]))
  end
  if nops == 0 then
    raise("einsum(): must specify the equation string and at least one operand, or at least one operand and its subscripts list")
  end
  for i = 1, nops do -- a nil among them too
    local t = ops[i]
    if not torch.is_tensor(t) then raise("einsum(): operand %d must be a tensor, got %s", i - 1, A.show(t)) end
    if tostring(t.device) ~= tostring(ops[1].device) then
      raise("einsum(): expected all operands on one device, got %s (operand 0) and %s (operand %d)", tostring(ops[1].device),
        tostring(t.device), i - 1)
    end
  end
  local arrow = eq:find("->", 1, true)
  local subs = parse_inputs(eq, arrow and arrow - 1 or #eq, nops)
  local aligned_ops, ell = label_dims(ops, subs)
  local seen, count = {}, {}
  for _, o in ipairs(subs) do
    for _, s in ipairs(o) do
      if s ~= "..." then seen[s], count[s] = true, (count[s] or 0) + 1 end
    end
  end
  local out_subs
  if arrow then
    out_subs = parse_output(eq, arrow + 2, seen)
  else -- implicit: the ellipsis, then the subscripts used once, in A-Z a-z order
    out_subs = {}
    local any_ell = false
    for _, o in ipairs(subs) do for _, s in ipairs(o) do any_ell = any_ell or s == "..." end end
    if any_ell then out_subs[1] = "..." end
    local once = {}
    for s, c in pairs(count) do if c == 1 then once[#once + 1] = s end end
    table.sort(once, function(a, b) return letter_rank(a) < letter_rank(b) end)
    for _, s in ipairs(once) do out_subs[#out_subs + 1] = s end
  end
  -- every label in one order: the output's, then those summed away
  local order, in_out = {}, {}
  for _, s in ipairs(out_subs) do
    if s == "..." then
      for k = 0, ell - 1 do order[#order + 1] = "..." .. k end
    else
      order[#order + 1] = s
    end
  end
  for _, l in ipairs(order) do in_out[l] = true end
  local nout = #order
  local last_op = {}
  for i, o in ipairs(aligned_ops) do
    for _, l in ipairs(o.labels) do
      if not in_out[l] and last_op[l] == nil then order[#order + 1] = l end
      last_op[l] = i
    end
  end
  check_sizes(aligned_ops)
  local xs = {}
  for i, o in ipairs(aligned_ops) do xs[i] = align(o, order) end
  -- left to right: each label not in the output is summed with the last operand that has it
  local result = xs[1]
  local function sum_out(t, d) return t:sum(d - 1, {keepdim = true}) end
  for d = nout + 1, #order do
    if last_op[order[d]] == 1 then result = sum_out(result, d) end
  end
  for i = 2, #xs do
    local x, sum_dims = xs[i], {}
    for d = nout + 1, #order do
      if last_op[order[d]] == i then
        if result.shape[d - 1] == 1 then x = sum_out(x, d)
        elseif x.shape[d - 1] == 1 then result = sum_out(result, d)
        else sum_dims[#sum_dims + 1] = d end
      end
    end
    if #sum_dims == 0 then result = result * x else result = sumproduct(result, x, sum_dims) end
  end
  -- every summed dim has size 1 now: the output's dims are what is left
  if #order == 0 then return result end
  local shape = {}
  for d = 1, nout do shape[d] = result.shape[d - 1] end
  return result:reshape(shape)
end
torch.einsum = function(...) return user_level(einsum, ...) end

-- ---- tensordot ---------------------------------------------------------------

-- dims: a count (the last n of a with the first n of b), a pair of lists,
-- or a tensor of either
local function tensordot_dims(a, b, dims)
  if torch.is_tensor(dims) then dims = dims:dim() == 0 and dims:item() or dims:tolist() end
  if math.type(dims) == "integer" then
    if dims < 0 then raise("tensordot expects dims >= 0, but got dims=%d", dims) end
    if dims > a:dim() or dims > b:dim() then
      raise("tensordot expects dims <= the rank of each operand, but got dims=%d for tensors of %d and %d dims",
        dims, a:dim(), b:dim())
    end
    local da, db = {}, {}
    for k = 1, dims do da[k], db[k] = a:dim() - dims + k - 1, k - 1 end
    return da, db
  end
  dims = A.plain(dims)
  if not (A.is_plain_table(dims) and #dims == 2 and type(dims[1]) == "table" and type(dims[2]) == "table") then
    raise("tensordot expects dims to be an integer or a list of two lists of dims, but got dims=%s", A.show(dims))
  end
  local da, db = A.plain(dims[1]), A.plain(dims[2])
  if #da ~= #db then raise("tensordot: both dimension lists should have same length, got %d and %d", #da, #db) end
  local function wrap(list, t)
    local out, seen = {}, {}
    for k, d in ipairs(list) do
      local w = wrap_dim("tensordot", d, t:dim())
      if seen[w] then raise("tensordot: dim %d appears multiple times in the list of dims", w) end
      seen[w], out[k] = true, w
    end
    return out
  end
  return wrap(da, a), wrap(db, b)
end

torch.tensordot = function(a, b, dims, opts)
  return user_level(function()
    A.check_tensor("tensordot", 1, a)
    A.check_tensor("tensordot", 2, b)
    if A.is_opts(dims) and next(dims) ~= nil then dims, opts = nil, dims end -- tensordot(a, b, {dims = 1})
    local o = A.check_opts("tensordot", opts, {dims = true})
    if dims == nil then dims = o.dims end
    if dims == nil then dims = 2 end
    local da, db = tensordot_dims(a, b, dims)
    for k = 1, #da do
      local sa, sb = a.shape[da[k]], b.shape[db[k]]
      if sa ~= sb then
        raise("tensordot: contracted dimensions need to match, but first has size %d in dim %d and second has size %d in dim %d",
          sa, da[k], sb, db[k])
      end
    end
    if a.dtype ~= b.dtype then
      raise("tensordot: expected both operands to have the same dtype, but got %s and %s", a.dtype, b.dtype)
    end
    -- a as (free, contracted), b as (contracted, free): one matrix product
    local ca, cb, pa, pb, fa, fb, out = {}, {}, {}, {}, {}, {}, {}
    for _, d in ipairs(da) do ca[d] = true end
    for _, d in ipairs(db) do cb[d] = true end
    local m, k, n = 1, 1, 1
    for d = 0, a:dim() - 1 do
      if not ca[d] then pa[#pa + 1], out[#out + 1], m = d, a.shape[d], m * a.shape[d] end
    end
    for _, d in ipairs(da) do pa[#pa + 1], k = d, k * a.shape[d] end
    for _, d in ipairs(db) do pb[#pb + 1] = d end
    for d = 0, b:dim() - 1 do
      if not cb[d] then pb[#pb + 1], out[#out + 1], n = d, b.shape[d], n * b.shape[d] end
    end
    local ma = (#pa > 0 and a:permute(pa) or a):reshape(m, k)
    local mb = (#pb > 0 and b:permute(pb) or b):reshape(k, n)
    return ma:mm(mb):reshape(out)
  end)
end

-- ---- kron ----------------------------------------------------------------------

-- a's dims interleaved with b's: (a0, 1, a1, 1, ...) * (1, b0, 1, b1, ...),
-- the pairs merged
both("kron", function(a, b)
  A.check_tensor("kron", 2, b)
  local n = math.max(a:dim(), b:dim())
  local as, bs = a.shape:totable(), b.shape:totable()
  while #as < n do table.insert(as, 1, 1) end
  while #bs < n do table.insert(bs, 1, 1) end
  local va, vb, out = {}, {}, {}
  for d = 1, n do
    va[2 * d - 1], va[2 * d] = as[d], 1
    vb[2 * d - 1], vb[2 * d] = 1, bs[d]
    out[d] = as[d] * bs[d]
  end
  return (a:reshape(va) * b:reshape(vb)):reshape(out)
end)
end
