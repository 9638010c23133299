-- Reductions, scans, softmax, equal/allclose against Lua double references:
-- every dim (negative too), keepdim, dim lists, dtypes, non-contiguous,
-- empty and 0-dim inputs, tie-breaking, the parallel paths, and every error.
local T = require "harness"
local test, close, eq, raises = T.test, T.close, T.eq, T.raises

-- ---- the Lua twin of a tensor: a flat row-major array and its shape ----

local function numel(shape)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  return n
end

local function strides_of(shape)
  local st, acc = {}, 1
  for d = #shape, 1, -1 do st[d] = acc acc = acc * shape[d] end
  return st
end

-- random values; `quant` rounds them to multiples of 1/8 (exact in float16 and bfloat16)
local function rand_flat(shape, lo, hi, quant)
  local data = {}
  for i = 1, numel(shape) do
    local v = lo + (hi - lo) * math.random()
    if quant then v = math.floor(v * 8 + 0.5) / 8 end
    data[i] = v
  end
  return {shape = shape, data = data}
end

local function rand_ints(shape, lo, hi)
  local data = {}
  for i = 1, numel(shape) do data[i] = math.random(lo, hi) end
  return {shape = shape, data = data}
end

local function nested(f)
  local pos = 0
  local function build(d)
    if d > #f.shape then pos = pos + 1 return f.data[pos] end
    local t = {}
    for i = 1, f.shape[d] do t[i] = build(d + 1) end
    return t
  end
  if #f.shape == 0 then return f.data[1] end
  return build(1)
end

local function tensor(f, dt) return torch.tensor(nested(f), {dtype = dt}) end

-- multi-index (0-based, table) of flat position p (1-based)
local function unravel(shape, p)
  local idx, rem = {}, p - 1
  for d = #shape, 1, -1 do idx[d] = rem % shape[d] rem = rem // shape[d] end
  return idx
end

local function ravel(shape, idx)
  local st, p = strides_of(shape), 1
  for d = 1, #shape do p = p + idx[d] * st[d] end
  return p
end

-- x:permute(perm) on the twin (perm 0-based)
local function permute(f, perm)
  local shape = {}
  for d = 1, #perm do shape[d] = f.shape[perm[d] + 1] end
  local data = {}
  for p = 1, numel(shape) do
    local idx, src = unravel(shape, p), {}
    for d = 1, #perm do src[perm[d] + 1] = idx[d] end
    data[p] = f.data[ravel(f.shape, src)]
  end
  return {shape = shape, data = data}
end

-- x[...{start, stop, step}...] on dim (0-based) of the twin
local function slice(f, dim, start, stop, step)
  local shape = {}
  for d = 1, #f.shape do shape[d] = f.shape[d] end
  shape[dim + 1] = (stop - start + step - 1) // step
  local data = {}
  for p = 1, numel(shape) do
    local idx = unravel(shape, p)
    idx[dim + 1] = start + idx[dim + 1] * step
    data[p] = f.data[ravel(f.shape, idx)]
  end
  return {shape = shape, data = data}
end

-- Reduces the twin over dims (0-based list; nil: all) with fn(list) -> value[, index].
-- Returns the nested result (and nested indices when fn gives them).
local function reduce_ref(f, dims, keepdim, fn)
  local nd = #f.shape
  local red = {}
  if dims == nil then for d = 1, nd do red[d] = true end
  else for _, d in ipairs(dims) do red[(d % math.max(nd, 1)) + 1] = true end end
  local oshape, kshape = {}, {}
  for d = 1, nd do
    kshape[d] = red[d] and 1 or f.shape[d]
    if not red[d] then oshape[#oshape + 1] = f.shape[d] elseif keepdim then oshape[#oshape + 1] = 1 end
  end
  local rshape = {}
  for d = 1, nd do if red[d] then rshape[#rshape + 1] = f.shape[d] end end
  local vals, idxs = {}, {}
  for q = 1, numel(kshape) do
    local base = unravel(kshape, q)
    local list = {}
    for r = 1, numel(rshape) do
      local ridx, k, idx = unravel(rshape, r), 0, {}
      for d = 1, nd do
        if red[d] then k = k + 1 idx[d] = ridx[k] else idx[d] = base[d] end
      end
      list[r] = f.data[ravel(f.shape, idx)]
    end
    vals[q], idxs[q] = fn(list)
  end
  return nested({shape = oshape, data = vals}), nested({shape = oshape, data = idxs})
end

-- Scans the twin along dim (0-based) with fn(list) -> list; returns the nested result.
local function scan_ref(f, dim, fn)
  local nd = #f.shape
  local d1 = dim % math.max(nd, 1) + 1
  local out = {}
  local kshape = {}
  for d = 1, nd do kshape[d] = d == d1 and 1 or f.shape[d] end
  for q = 1, numel(kshape) do
    local base, list, pos = unravel(kshape, q), {}, {}
    for r = 1, (nd > 0 and f.shape[d1] or 1) do
      local idx = {}
      for d = 1, nd do idx[d] = base[d] end
      if nd > 0 then idx[d1] = r - 1 end
      pos[r] = ravel(f.shape, idx)
      list[r] = f.data[pos[r]]
    end
    local res = fn(list)
    for r = 1, #list do out[pos[r]] = res[r] end
  end
  return nested({shape = f.shape, data = out})
end

-- ---- reference reductions over a list of doubles ----

local R = {}
function R.sum(l) local s = 0 for _, v in ipairs(l) do s = s + v end return s end
function R.prod(l) local s = 1 for _, v in ipairs(l) do s = s * v end return s end
function R.mean(l) return R.sum(l) / #l end
local function var_c(c)
  return function(l)
    local m = R.mean(l)
    local s = 0
    for _, v in ipairs(l) do s = s + (v - m) ^ 2 end
    return s / math.max(#l - c, 0)
  end
end
R.var = var_c(1)
function R.std(l) return math.sqrt(R.var(l)) end
function R.amax(l) local m = -math.huge for _, v in ipairs(l) do if v > m then m = v end end return m end
function R.amin(l) local m = math.huge for _, v in ipairs(l) do if v < m then m = v end end return m end
function R.all(l) for _, v in ipairs(l) do if v == 0 then return false end end return true end
function R.any(l) for _, v in ipairs(l) do if v ~= 0 then return true end end return false end
function R.logsumexp(l)
  local m = R.amax(l)
  local s = 0
  for _, v in ipairs(l) do s = s + math.exp(v - m) end
  return m + math.log(s)
end
local function norm_p(p)
  return function(l)
    if p == math.huge then local m = 0 for _, v in ipairs(l) do m = math.max(m, math.abs(v)) end return m end
    if p == 0 then local c = 0 for _, v in ipairs(l) do if v ~= 0 then c = c + 1 end end return c end
    local s = 0
    for _, v in ipairs(l) do s = s + math.abs(v) ^ p end
    return s ^ (1 / p)
  end
end
R.norm = norm_p(2)
-- first index of the extreme, as torch
local function argext(better)
  return function(l)
    local b, bi = l[1], 0
    for i = 2, #l do if better(l[i], b) then b, bi = l[i], i - 1 end end
    return b, bi
  end
end
local argmax_ref = argext(function(a, b) return a > b end)
local argmin_ref = argext(function(a, b) return a < b end)

local function cumsum_ref(l) local s, o = 0, {} for i, v in ipairs(l) do s = s + v o[i] = s end return o end
local function softmax_ref(l)
  local m, s, o = R.amax(l), 0, {}
  for i, v in ipairs(l) do o[i] = math.exp(v - m) s = s + o[i] end
  for i = 1, #o do o[i] = o[i] / s end
  return o
end
local function log_softmax_ref(l)
  local lse, o = R.logsumexp(l), {}
  for i, v in ipairs(l) do o[i] = v - lse end
  return o
end

local float_ops = {"sum", "mean", "prod", "var", "std", "amax", "amin", "logsumexp", "norm"}
local bool_ops = {"all", "any"}

-- every single dim (both signs), dim lists, and everything, with and without keepdim
local function dim_cases(nd)
  local cases = {{dims = nil}}
  for d = -nd, nd - 1 do cases[#cases + 1] = {dims = {d}, single = true} end
  if nd >= 2 then cases[#cases + 1] = {dims = {0, nd - 1}} cases[#cases + 1] = {dims = {-1, 0}} end
  if nd >= 3 then cases[#cases + 1] = {dims = {2, 0, 1}} end
  return cases
end

-- x:name(dim) or x:name({dims}) or x:name(), keepdim as an option (norm takes p first)
local function call_reduce(x, name, c, keepdim)
  local dim = c.dims and (c.single and c.dims[1] or c.dims)
  local opts = keepdim and {keepdim = true} or nil
  if name == "norm" then return x:norm(2, dim, opts) end
  if dim == nil then return opts and x[name](x, opts) or x[name](x) end
  return x[name](x, dim, opts)
end

-- Checks every float op over every dim case of twin f stored as x (its values already in dtype dt).
local function check_float_ops(f, x, dt, rtol, atol, what)
  for _, name in ipairs(float_ops) do
    for _, c in ipairs(dim_cases(#f.shape)) do
      for _, keepdim in ipairs({false, true}) do
        local label = ("%s %s %s dims=%s keepdim=%s"):format(what, dt, name, T.fmt(c.dims), tostring(keepdim))
        local r = call_reduce(x, name, c, keepdim)
        local ref = reduce_ref(f, c.dims, keepdim, R[name])
        eq(r.dtype, "torch." .. dt, label .. " dtype")
        close(r, ref, rtol, atol, label)
        local shape = reduce_ref(f, c.dims, keepdim, function() return 0 end)
        eq(tostring(r.shape), tostring(torch.tensor(shape).shape), label .. " shape")
      end
    end
  end
end

test("float reductions over every dim, dim lists and keepdim (float64, tight)", function()
  local f = rand_flat({3, 4, 5}, -2, 2)
  check_float_ops(f, tensor(f, "float64"), "float64", 1e-12, 1e-12, "contiguous")
end)

test("float reductions in float32 (accumulated in double)", function()
  local f = rand_flat({4, 3, 6}, -2, 2)
  check_float_ops(f, tensor(f, "float32"), "float32", 1e-5, 1e-5, "contiguous")
end)

test("float16 and bfloat16 reductions keep their dtype", function()
  for _, dt in ipairs({"float16", "bfloat16"}) do
    local f = rand_flat({3, 5}, -2, 2, true) -- exact in both dtypes
    check_float_ops(f, tensor(f, dt), dt, 1e-2, 1e-2, "half")
  end
end)

test("non-contiguous inputs: permuted and sliced with a step", function()
  local f = rand_flat({4, 5, 6}, -2, 2)
  local x = tensor(f, "float64")
  local xp = x:permute(2, 0, 1)
  T.ok(not xp:is_contiguous(), "permuted view is not contiguous")
  check_float_ops(permute(f, {2, 0, 1}), xp, "float64", 1e-12, 1e-12, "permuted")
  local xs = x[{ {}, {0, 5, 2}, {1, 6, 2} }]
  T.ok(not xs:is_contiguous(), "stepped slice is not contiguous")
  check_float_ops(slice(slice(f, 1, 0, 5, 2), 2, 1, 6, 2), xs, "float64", 1e-12, 1e-12, "sliced")
  local xt = x:transpose(0, 2)
  check_float_ops(permute(f, {2, 1, 0}), xt, "float64", 1e-12, 1e-12, "transposed")
  -- one strided line (every other dim of size 1)
  local g = rand_flat({20}, -2, 2)
  local s = tensor(g, "float64")[{ {1, 20, 3} }]
  local gs = slice(g, 0, 1, 20, 3)
  close(s:unsqueeze(1):sum(0), {R.sum(gs.data)}, 1e-12, 1e-12, "strided line sum")
  close(s:unsqueeze(0):amax(1), {R.amax(gs.data)}, 1e-12, 1e-12, "strided line amax")
  close(s:softmax(0), softmax_ref(gs.data), 1e-12, 1e-12, "strided line softmax")
  close(s:cumsum(0), cumsum_ref(gs.data), 1e-12, 1e-12, "strided line cumsum")
end)

test("all and any: bool results from any dtype but uint8 (uint8, as PyTorch 1.13), NaN counts as true", function()
  local f = rand_ints({3, 4}, 0, 2)
  for _, dt in ipairs({"int64", "int32", "uint8", "bool", "float32", "float64"}) do
    local x = tensor(f, "int64"):to(dt)
    local g = f
    if dt == "bool" then g = {shape = f.shape, data = T.map(f.data, function(v) return v ~= 0 and 1 or 0 end)} end
    for _, name in ipairs(bool_ops) do
      for _, c in ipairs(dim_cases(2)) do
        local r = call_reduce(x, name, c, false)
        local want = reduce_ref(g, c.dims, false, R[name])
        if c.dims == nil then -- over everything: a Lua boolean, for `if x:any() then`
          eq(r, want, dt .. " " .. name .. " over everything")
          r = call_reduce(x, name, c, true) -- keepdim: still a tensor (shape 1, 1)
          want = reduce_ref(g, c.dims, true, R[name])
        end
        eq(r.dtype, dt == "uint8" and "torch.uint8" or "torch.bool", dt .. " " .. name .. " dtype")
        close(r:bool(), want, 0, 0, dt .. " " .. name .. " " .. T.fmt(c.dims))
      end
    end
  end
  eq(torch.tensor({0 / 0, 1}):all():item(), true, "NaN is nonzero")
  eq(torch.tensor({0.0, 0.0}):any():item(), false, "zeros")
  eq(torch.tensor({{1, 0}, {1, 1}}):all(1, true).shape[1], 1, "keepdim positional")
  eq(torch.any(torch.zeros(2)), false, "torch.any over everything: a Lua boolean")
  eq(torch.all(torch.tensor({1, 2})), true, "torch.all over everything: a Lua boolean")
  local seen = false
  if torch.zeros(3):any() then seen = true end
  eq(seen, false, "if x:any() takes the branch only when some element is nonzero")
end)

test("integer sums, products and cumsum are exact int64; max/min keep the dtype", function()
  local f = rand_ints({3, 4}, -9, 9)
  for _, dt in ipairs({"int64", "int32", "uint8"}) do
    local g = f
    if dt == "uint8" then g = {shape = f.shape, data = T.map(f.data, function(v) return v % 256 end)} end
    local x = tensor(g, "int64"):to(dt)
    for _, c in ipairs(dim_cases(2)) do
      local lbl = dt .. " " .. T.fmt(c.dims)
      local s = call_reduce(x, "sum", c, false)
      eq(s.dtype, "torch.int64", lbl .. " sum dtype")
      close(s, reduce_ref(g, c.dims, false, R.sum), 0, 0, lbl .. " sum")
      eq(call_reduce(x, "amax", c, false).dtype, "torch." .. dt, lbl .. " amax dtype")
      close(call_reduce(x, "amax", c, false), reduce_ref(g, c.dims, false, R.amax), 0, 0, lbl .. " amax")
      close(call_reduce(x, "amin", c, false), reduce_ref(g, c.dims, false, R.amin), 0, 0, lbl .. " amin")
    end
    for d = -2, 1 do
      local pr = x:prod(d)
      eq(pr.dtype, "torch.int64", dt .. " prod dtype")
      close(pr, reduce_ref(g, {d}, false, R.prod), 0, 0, dt .. " prod")
      local cs = x:cumsum(d)
      eq(cs.dtype, "torch.int64", dt .. " cumsum dtype")
      close(cs, scan_ref(g, d, cumsum_ref), 0, 0, dt .. " cumsum " .. d)
    end
  end
  -- beyond 2^53: doubles would round, int64 does not
  local big = torch.tensor({1 << 53, 1, 1}) -- int64
  eq(big:sum():item(), 9007199254740994, "int64 sum is exact")
  eq(big:cumsum(0)[1]:item(), 9007199254740993, "int64 cumsum is exact")
  local b = torch.tensor({true, false, true, true})
  eq(b:sum().dtype, "torch.int64", "bool sum dtype")
  eq(b:sum():item(), 3, "bool sum")
  close(b:cumsum(0), {1, 1, 2, 3})
  eq(b:max():item(), true, "bool max")
  eq(b:max().dtype, "torch.bool", "bool max dtype")
end)

test("max/min with a dim return values and int64 indices; first index on ties", function()
  local f = rand_ints({4, 5, 3}, 0, 3) -- many ties
  local x = tensor(f, "float32")
  for _, name in ipairs({"max", "min"}) do
    local ref = name == "max" and argmax_ref or argmin_ref
    for d = -3, 2 do
      for _, keepdim in ipairs({false, true}) do
        local v, i = x[name](x, d, keepdim and {keepdim = true} or nil)
        local rv, ri = reduce_ref(f, {d}, keepdim, ref)
        eq(i.dtype, "torch.int64", "indices dtype")
        close(v, rv, 0, 0, name .. " values dim " .. d)
        close(i, ri, 0, 0, name .. " indices dim " .. d)
        local ai = torch["arg" .. name](x, d, keepdim)
        close(ai, ri, 0, 0, "arg" .. name .. " dim " .. d)
        eq(tostring(ai.shape), tostring(i.shape), "arg" .. name .. " keepdim shape")
      end
    end
    -- without a dim: one 0-dim value; argmax indexes the flattened tensor
    local v = x[name](x)
    eq(v:dim(), 0, name .. "() is 0-dim")
    local rv, ri = ref(f.data)
    eq(v:item(), rv, name .. "()")
    eq(x["arg" .. name](x):item(), ri, "arg" .. name .. "()")
    eq(tostring(x["arg" .. name](x, nil, true).shape), "torch.Size([1, 1, 1])", "arg" .. name .. " keepdim all")
  end
  -- explicit ties: the first occurrence wins, along rows and columns, in ints too
  local t = torch.tensor({{3, 1, 3}, {2, 2, 0}})
  local _, i1 = t:max(1)
  close(i1, {0, 0})
  local _, i0 = t:min(0)
  close(i0, {1, 0, 1})
  eq(torch.tensor({5, 7, 7, 1}):argmax():item(), 1, "argmax tie")
  eq(torch.tensor({1, 0, 0}):argmin():item(), 1, "argmin tie")
end)

test("max/min: NaN propagates with its index; non-contiguous argmax counts in logical order", function()
  local x = torch.tensor({{1, 0 / 0, 5}, {2, 3, 4}})
  local v, i = x:max(1)
  T.ok(v[0]:item() ~= v[0]:item(), "max with NaN is NaN")
  eq(i[0]:item(), 1, "index of the NaN")
  eq(v[1]:item(), 4, "row without NaN")
  T.ok(x:min():item() ~= x:min():item(), "min() with NaN is NaN")
  eq(x:argmin():item(), 1, "argmin() picks the NaN")
  local f = rand_flat({5, 7}, -3, 3)
  local xt = tensor(f, "float64"):t()
  local ft = permute(f, {1, 0})
  local _, ri = argmax_ref(ft.data)
  eq(xt:argmax():item(), ri, "argmax of a transposed view")
  local _, ri2 = argmin_ref(ft.data)
  eq(xt:argmin():item(), ri2, "argmin of a transposed view")
end)

test("max/min with a tensor argument are elementwise", function()
  local a, b = torch.tensor({1, 5, 3}), torch.tensor({4, 2, 3})
  close(a:max(b), {4, 5, 3})
  close(torch.min(a, b), {1, 2, 3})
  close(torch.max(a, torch.tensor(2)), {2, 5, 3})
end)

test("var and std: correction, unbiased, positional forms", function()
  local f = rand_flat({4, 6}, -2, 2)
  local x = tensor(f, "float64")
  for _, c in ipairs({0, 1, 2}) do
    local rv = reduce_ref(f, {1}, false, var_c(c))
    close(x:var(1, {correction = c}), rv, 1e-12, 1e-12, "var correction " .. c)
    close(x:std(1, {correction = c}), T.map(rv, math.sqrt), 1e-12, 1e-12, "std correction " .. c)
  end
  local pop = reduce_ref(f, nil, false, var_c(0))
  close(x:var({unbiased = false}), pop, 1e-12, 1e-12, "unbiased = false")
  close(x:var(false), pop, 1e-12, 1e-12, "var(false)")
  close(torch.var(x, 0, false, true), reduce_ref(f, {0}, true, var_c(0)), 1e-12, 1e-12, "var(dim, unbiased, keepdim)")
  close(x:std(0, true, true), reduce_ref(f, {0}, true, function(l) return math.sqrt(var_c(1)(l)) end), 1e-12, 1e-12)
  -- one element: no degrees of freedom left, NaN as torch
  T.ok(torch.tensor({3.0}):var():item() ~= torch.tensor({3.0}):var():item(), "var of one element is NaN")
  eq(torch.tensor({3.0}):var({correction = 0}):item(), 0, "population var of one element")
  -- large offset: the two-pass/Chan formula does not cancel catastrophically
  local y = torch.tensor({1e9 + 1, 1e9 + 2, 1e9 + 3}, {dtype = "float64"})
  close(y:var(), 1, 1e-9, 0, "var with a large mean")
end)

test("norm: p = 2 default, 1, inf, 0, any positive p, over dims, 'fro'", function()
  local f = rand_flat({3, 5}, -2, 2)
  local x = tensor(f, "float64")
  for _, p in ipairs({1, 2, 3, 0.5, math.huge, 0}) do
    close(x:norm(p), reduce_ref(f, nil, false, norm_p(p)), 1e-12, 1e-12, "norm p=" .. p)
    for d = -2, 1 do
      close(x:norm(p, d), reduce_ref(f, {d}, false, norm_p(p)), 1e-12, 1e-12, "norm p=" .. p .. " dim " .. d)
    end
    close(torch.norm(x, p, 1, true), reduce_ref(f, {1}, true, norm_p(p)), 1e-12, 1e-12, "keepdim")
  end
  close(x:norm("fro"), reduce_ref(f, nil, false, norm_p(2)), 1e-12, 1e-12, "fro")
  close(x:norm({p = 1, dim = 0}), reduce_ref(f, {0}, false, norm_p(1)), 1e-12, 1e-12, "options")
  close(x:norm(nil, {0, 1}), reduce_ref(f, nil, false, norm_p(2)), 1e-12, 1e-12, "dim list")
  close(torch.tensor({-3.0, 4.0}):norm(-math.huge), 3, 0, 0, "-inf norm is min |x|")
end)

test("logsumexp and softmax are stable for large inputs", function()
  local x = torch.tensor({{1000, 1001, 1002}, {-1000, -1001, -1002}}, {dtype = "float32"})
  close(x:logsumexp(1), {R.logsumexp({1000, 1001, 1002}), R.logsumexp({-1000, -1001, -1002})}, 1e-6, 0)
  close(x:softmax(1), {softmax_ref({1000, 1001, 1002}), softmax_ref({-1000, -1001, -1002})}, 1e-5, 1e-7)
  close(x:log_softmax(1), {log_softmax_ref({1000, 1001, 1002}), log_softmax_ref({-1000, -1001, -1002})}, 1e-5, 1e-5)
  local ninf = torch.tensor({-math.huge, -math.huge})
  eq(ninf:logsumexp(0):item(), -math.huge, "logsumexp of all -inf is -inf")
  close(torch.tensor({-math.huge, 0.0}):softmax(0), {0, 1})
  eq(torch.tensor({math.huge, 1.0}):logsumexp(0):item(), math.huge, "logsumexp with +inf")
  close(torch.tensor({1, 2, 3}):logsumexp(0), R.logsumexp({1, 2, 3}), 1e-6, 0, "logsumexp of ints")
  eq(torch.tensor({1, 2, 3}):logsumexp(0).dtype, "torch.float32", "logsumexp of ints is float32")
end)

test("softmax and log_softmax over every dim match exp(x - max) / sum", function()
  local f = rand_flat({3, 4, 5}, -4, 4)
  for _, dt in ipairs({"float64", "float32"}) do
    local tol = dt == "float64" and 1e-12 or 1e-5
    local x = tensor(f, dt)
    for d = -3, 2 do
      local s = x:softmax(d)
      eq(s.dtype, "torch." .. dt, "softmax dtype")
      close(s, scan_ref(f, d, softmax_ref), tol, tol, dt .. " softmax dim " .. d)
      close(torch.log_softmax(x, d), scan_ref(f, d, log_softmax_ref), tol, tol, dt .. " log_softmax dim " .. d)
      -- rows sum to 1 (checked in Lua, not with our sum)
      local sums = reduce_ref({shape = f.shape, data = T.flat(s)}, {d}, false, R.sum)
      close(sums, T.map(sums, function() return 1 end), tol, tol, "softmax sums to 1")
    end
    local xp = x:permute(1, 2, 0)
    close(xp:softmax(1), scan_ref(permute(f, {1, 2, 0}), 1, softmax_ref), tol, tol, "permuted softmax")
    close(torch.softmax(xp, -1), scan_ref(permute(f, {1, 2, 0}), 2, softmax_ref), tol, tol, "permuted softmax last")
  end
  local h = rand_flat({2, 6}, -2, 2, true)
  for _, dt in ipairs({"float16", "bfloat16"}) do
    close(tensor(h, dt):softmax(1):float(), scan_ref(h, 1, softmax_ref), 1e-2, 1e-2, dt .. " softmax")
  end
  -- integer inputs: torch errors unless a dtype is given
  local xi = torch.tensor({{1, 2}, {3, 5}})
  close(xi:softmax(1, {dtype = "float64"}), {softmax_ref({1, 2}), softmax_ref({3, 5})}, 1e-12, 1e-12)
  close(torch.softmax(xi, 1, "float64"), {softmax_ref({1, 2}), softmax_ref({3, 5})}, 1e-12, 1e-12)
end)

test("float32 softmax rows of the vectorised kernel's lengths: tails, flushed exps, -inf, +inf, NaN", function()
  -- rows of 16 and more run the eight-lane kernel (src/cpu/softmax_row.c); a spread of
  -- 200 puts some exps below float32's smallest normal, where the kernel gives 0
  for _, n in ipairs({15, 16, 17, 31, 48, 1000}) do
    local l = {}
    for i = 1, n do l[i] = (math.random() - 0.5) * 200 end
    local x = torch.tensor({l, l}, {dtype = "float32"})
    local lf = x[0]:double():tolist() -- the float32 values the kernel sees, in double
    close(x:softmax(1), {softmax_ref(lf), softmax_ref(lf)}, 1e-5, 1e-30, "softmax of " .. n)
    close(x:log_softmax(1), {log_softmax_ref(lf), log_softmax_ref(lf)}, 1e-6, 1e-5, "log_softmax of " .. n)
  end
  -- at x = 1000 log_softmax is (x - max) - log sum, as PyTorch's (max + log sum first loses 3e-5;
  -- CUDA's kernel still does: tests/fixtures/ops/known_wrong.tsv, log_softmax/large@cuda)
  local big = {}
  for i = 1, 20 do big[i] = 1000 + i / 4 end
  close(torch.tensor(big, {device = "cpu"}):log_softmax(0), log_softmax_ref(big), 0, 2e-6, "log_softmax at 1000")
  local inf, nan = math.huge, 0 / 0
  local function row(v, at) -- 19 ones and v at position `at`
    local r = {}
    for i = 1, 20 do r[i] = i == at and v or 1.0 end
    return torch.tensor(r)
  end
  local function all(v) local r = {} for i = 1, 20 do r[i] = v end return r end
  for _, at in ipairs({1, 9, 20}) do -- in the vector body and in the tail
    local s, ls = row(-inf, at):softmax(0), row(-inf, at):log_softmax(0)
    eq(s[at - 1]:item(), 0.0, "softmax of -inf")
    eq(ls[at - 1]:item(), -inf, "log_softmax of -inf")
    close(s[at == 1 and 1 or 0], 1 / 19, 1e-6, 0, "the others share it")
    close(row(inf, at):softmax(0), all(nan), 0, 0, "+inf makes the row NaN, as torch")
    close(row(inf, at):log_softmax(0), all(nan), 0, 0, "+inf makes the log_softmax row NaN")
    close(row(nan, at):softmax(0), all(nan), 0, 0, "NaN makes the row NaN")
    close(row(nan, at):log_softmax(0), all(nan), 0, 0, "NaN makes the log_softmax row NaN")
  end
  close(torch.tensor(all(-inf)):softmax(0), all(nan), 0, 0, "an all -inf row is NaN, as torch")
  close(torch.tensor(all(-inf)):log_softmax(0), all(nan), 0, 0, "an all -inf log_softmax row is NaN")
end)

test("cumsum over every dim, float dtypes and non-contiguous", function()
  local f = rand_flat({3, 4, 5}, -2, 2)
  for _, dt in ipairs({"float64", "float32"}) do
    local tol = dt == "float64" and 1e-12 or 1e-5
    local x = tensor(f, dt)
    for d = -3, 2 do
      local c = torch.cumsum(x, d)
      eq(c.dtype, "torch." .. dt, "cumsum dtype")
      close(c, scan_ref(f, d, cumsum_ref), tol, tol, dt .. " cumsum dim " .. d)
    end
    close(x:transpose(0, 2):cumsum(1), scan_ref(permute(f, {2, 1, 0}), 1, cumsum_ref), tol, tol, "transposed cumsum")
  end
  local h = rand_flat({7}, -2, 2, true)
  close(tensor(h, "float16"):cumsum(0):float(), scan_ref(h, 0, cumsum_ref), 1e-2, 1e-2, "float16 cumsum")
  close(torch.tensor({1, 2, 3}):cumsum(0, {dtype = "float32"}), {1, 3, 6})
  eq(torch.tensor({1, 2, 3}):cumsum(0, {dtype = "float32"}).dtype, "torch.float32", "cumsum dtype option")
end)

test("sum/mean/prod dtype option and torch.* forms", function()
  local x = torch.tensor({{1, 2}, {3, 4}})
  eq(x:sum({dtype = "float64"}).dtype, "torch.float64", "sum dtype option")
  close(x:mean({dtype = "float32"}), 2.5)
  close(torch.mean(x, 0, {dtype = "float64"}), {2, 3})
  close(torch.sum(x, 1), {3, 7})
  close(torch.prod(x, 0), {3, 8})
  close(torch.sum(x, {0, 1}), 10)
  close(x:sum({dim = 1, keepdim = true}), {{3}, {7}})
  close(torch.amax(x, {0, 1}), 4)
  close(torch.logsumexp(x:double(), {0, 1}), R.logsumexp({1, 2, 3, 4}), 1e-12)
  close(torch.any(x:gt(3), 0), {false, true})
end)

test("empty inputs: identities for sum/prod/all/any, NaN mean, errors for max", function()
  local e = torch.zeros(0, 3)
  close(e:sum(0), {0, 0, 0})
  close(e:prod(0), {1, 1, 1})
  eq(e:sum():item(), 0, "sum of nothing")
  eq(e:sum(1):numel(), 0, "reduce a non-empty dim of an empty tensor")
  eq(tostring(e:sum(1).shape), "torch.Size([0])", "shape")
  T.ok(e:mean():item() ~= e:mean():item(), "mean of nothing is NaN")
  eq(e:all():item(), true, "all of nothing")
  eq(e:any():item(), false, "any of nothing")
  eq(e:logsumexp(0)[0]:item(), -math.huge, "logsumexp of nothing")
  eq(e:norm():item(), 0, "norm of nothing")
  close(e:cumsum(0), {})
  eq(tostring(e:softmax(0).shape), "torch.Size([0, 3])", "softmax of empty")
  eq(torch.zeros(3, 0):max(0):numel(), 0, "max over a non-empty dim of an empty tensor")
  raises(function() return e:max(0) end, "max: expected reduction dim 0 to have non-zero size")
  raises(function() return e:argmin(0) end, "argmin: expected reduction dim 0 to have non-zero size")
  raises(function() return e:amax({1, 0}) end, "expected reduction dim 0 to have non-zero size")
  raises(function() return e:max() end, "max: expected reduction dim to be specified for input.numel() == 0")
  raises(function() return e:argmax() end, "argmax: expected reduction dim to be specified")
  raises(function() return e:norm(math.huge) end, "cannot compute the inf norm on an empty tensor")
end)

test("0-dim inputs reduce with dim 0 or -1 and stay 0-dim", function()
  local s = torch.tensor(2.5, {dtype = "float64"})
  for _, d in ipairs({0, -1}) do
    eq(s:sum(d):dim(), 0, "sum 0-dim")
    eq(s:sum(d):item(), 2.5, "sum value")
    eq(s:sum(d, true):dim(), 0, "keepdim stays 0-dim")
    local v, i = s:max(d)
    eq(v:item(), 2.5, "max value")
    eq(i:item(), 0, "max index")
    eq(s:cumsum(d):item(), 2.5, "cumsum")
    eq(s:cumsum(d):dim(), 0, "cumsum 0-dim")
    eq(s:softmax(d):item(), 1, "softmax")
    eq(s:log_softmax(d):item(), 0, "log_softmax")
  end
  eq(s:mean():item(), 2.5, "mean")
  eq(s:argmax():item(), 0, "argmax")
  eq(s:norm():item(), 2.5, "norm")
  raises(function() return s:sum(1) end, "sum: dimension out of range (expected to be in range of [-1, 0], but got 1)")
  raises(function() return s:softmax(1) end, "softmax: dimension out of range")
end)

test("large inputs: parallel chunks and tiles agree with Lua sums", function()
  -- reduce-all over many chunks (the chunked path), with a planted max and a tie in a later chunk
  local n = 200003
  local data = {}
  for i = 1, n do data[i] = (i * 7919 % 1000) / 1000 - 0.5 end
  data[150001], data[190001] = 10, 10
  local f = {shape = {n}, data = data}
  local x = tensor(f, "float64")
  close(x:sum(), R.sum(data), 1e-12, 1e-9, "sum")
  close(x:mean(), R.mean(data), 1e-12, 1e-12, "mean")
  close(x:var(), R.var(data), 1e-10, 1e-12, "var")
  close(x:norm(), norm_p(2)(data), 1e-12, 1e-12, "norm")
  close(x:logsumexp(0), R.logsumexp(data), 1e-12, 1e-12, "logsumexp")
  eq(x:argmax():item(), 150000, "argmax: first of the planted maxima")
  eq(x:float():sum().dtype, "torch.float32", "float32 dtype")
  close(x:float():sum(), R.sum(data), 1e-6, 1e-3, "float32 sum of 2e5 elements")
  -- many rows and many columns (the tiled paths) on a 2-d view of the same data
  local m = x[{ {0, 200000} }]:view(400, 500)
  local g = {shape = {400, 500}, data = {}}
  for i = 1, 200000 do g.data[i] = data[i] end
  close(m:sum(1), reduce_ref(g, {1}, false, R.sum), 1e-12, 1e-12, "row sums")
  close(m:sum(0), reduce_ref(g, {0}, false, R.sum), 1e-12, 1e-12, "column sums")
  local _, ri = reduce_ref(g, {0}, false, argmax_ref)
  local _, i0 = m:max(0)
  close(i0, ri, 0, 0, "column argmax")
  local sm = m:softmax(0)
  local sums = reduce_ref({shape = {400, 500}, data = T.flat(sm)}, {0}, false, R.sum)
  close(sums, T.map(sums, function() return 1 end), 1e-12, 1e-12, "column softmax sums to 1")
  close(m:cumsum(1)[{ {}, -1 }], reduce_ref(g, {1}, false, R.sum), 1e-12, 1e-12, "cumsum last column")
  -- float32 column sums and means (the column-block path): whole rows, a column slice whose
  -- rows are strided (row stride 500, 437 columns from column 3), and few columns
  -- The CPU accumulates them in float64 (errors of the inputs' rounding only); CUDA in
  -- float32, as PyTorch's does (400 terms of up to 10: ~1e-5 of rounding)
  local mf = m:float()
  local col_atol = T.device == "cpu" and 1e-5 or 1e-4
  close(mf:sum(0), reduce_ref(g, {0}, false, R.sum), 1e-6, col_atol, "float32 column sums")
  close(mf:mean(0), reduce_ref(g, {0}, false, R.mean), 1e-6, 1e-6, "float32 column means")
  local cut = {shape = {400, 437}, data = {}}
  for r = 0, 399 do for c = 0, 436 do cut.data[r * 437 + c + 1] = data[r * 500 + c + 4] end end
  close(mf[{ {}, {3, 440} }]:sum(0), reduce_ref(cut, {0}, false, R.sum), 1e-6, col_atol, "float32 sliced column sums")
  close(mf[{ {}, {0, 17} }]:sum(0, {keepdim = true}), reduce_ref({shape = {400, 17}, data = (function()
    local d = {}
    for r = 0, 399 do for c = 0, 16 do d[#d + 1] = data[r * 500 + c + 1] end end
    return d
  end)()}, {0}, false, R.sum), 1e-6, col_atol, "float32 17 column sums, keepdim")
end)

test("equal, isclose and allclose", function()
  local a = torch.tensor({{1.0, 2.0}, {3.0, 4.0}})
  eq(a:equal(a:clone()), true, "equal")
  eq(torch.equal(a, a:t():t()), true, "equal views")
  eq(a:equal(a:t()), false, "different values")
  eq(a:equal(a:view(4)), false, "different shapes")
  eq(torch.tensor({0 / 0}):equal(torch.tensor({0 / 0})), false, "NaN is not equal to NaN")
  eq(torch.tensor({1, 2}):equal(torch.tensor({1.0, 2.0})), true, "values compare across dtypes")
  eq(torch.allclose(a, a + 1e-6), true, "within rtol")
  eq(a:allclose(a + 1e-3), false, "outside the default tolerance")
  eq(a:allclose(a + 1e-3, {atol = 1e-2}), true, "atol option")
  eq(a:allclose(a * 1.01, {rtol = 0.02}), true, "rtol option")
  eq(a:allclose(a * 1.01, 0.02), true, "positional rtol")
  eq(a:allclose(torch.tensor({1.0, 2.0})), false, "broadcast, different values")
  eq(torch.tensor({{1.0, 2.0}, {1.0, 2.0}}):allclose(torch.tensor({1.0, 2.0})), true, "broadcast")
  local n = torch.tensor({0 / 0, 1.0})
  eq(n:allclose(n), false, "NaN is not close")
  eq(n:allclose(n, {equal_nan = true}), true, "equal_nan")
  eq(torch.tensor({math.huge}):allclose(torch.tensor({math.huge})), true, "inf is close to inf")
  local f64 = {dtype = "float64"}
  eq(torch.tensor({math.huge}, f64):allclose(torch.tensor({1e308}, f64)), false, "inf is not close to a number")
  close(torch.isclose(a, a + torch.tensor({0.0, 1.0})), {{true, false}, {true, false}})
  raises(function() return a:allclose(a, {rtol = -1}) end, "rtol must be greater than or equal to zero")
  raises(function() return a:equal(1) end, "tensor expected")
end)

test("errors: dims out of range, wrong types, dtypes the op refuses", function()
  local x = torch.randn(2, 3)
  for _, name in ipairs({"sum", "mean", "prod", "max", "min", "argmax", "argmin", "amax", "var", "std", "all",
                         "any", "logsumexp", "cumsum", "softmax", "log_softmax"}) do
    raises(function() return x[name](x, 2) end,
      name .. ": dimension out of range (expected to be in range of [-2, 1], but got 2)", name)
    raises(function() return x[name](x, -3) end, "but got -3", name)
  end
  raises(function() return x:norm(2, 5) end, "norm: dimension out of range")
  raises(function() return x:sum({0, 0}) end, "sum: dim 0 appears multiple times in the list of dims")
  raises(function() return x:sum({0, -2}) end, "appears multiple times")
  raises(function() return x:sum("a") end, "dim (integer or list of integers) expected, got string")
  raises(function() return x:sum({0, "a"}) end, "dims must be integers")
  raises(function() return x:sum(0.5) end, "number has no integer representation")
  raises(function() return torch.sum("x") end, "tensor expected")
  raises(function() return torch.sum(nil) end, "tensor expected")
  raises(function() return x:max({0, 1}) end, "max: expected one dim")
  raises(function() return x:argmax({0, 1}) end, "argmax: expected one dim")
  raises(function() return x:softmax() end, "softmax: missing the dim")
  raises(function() return x:cumsum() end, "cumsum: missing the dim")
  raises(function() return x:norm("nuc") end, "not supported")
  raises(function() return x:sum(0, {keepdim = 1}) end, "option 'keepdim' must be a boolean")
  local i = torch.tensor({1, 2, 3})
  raises(function() return i:mean() end,
    "mean: could not infer output dtype. Input dtype must be a floating point dtype, got int64")
  raises(function() return i:mean() end, "x:float()")
  raises(function() return i:var() end, "var: expected a floating point tensor, got int64")
  raises(function() return i:std(0) end, "std: expected a floating point tensor, got int64")
  raises(function() return i:norm() end, "norm: expected a floating point tensor, got int64")
  raises(function() return i:softmax(0) end, "softmax: expected a floating point tensor, got int64")
  raises(function() return i:log_softmax(0) end, "log_softmax: expected a floating point tensor")
  raises(function() return torch.tensor({true}):mean() end, "got bool")
  -- the session goes on: a good call after the errors works
  close(x:sum(), R.sum(T.flat(x:double())), 1e-5, 1e-5, "after errors")
end)

T.test("float32 row softmax (vectorised path) matches a double reference and the general path", function()
  local rows, cols = 37, 301
  local vals = T.rand_list({rows, cols}, -30, 30)
  local x = torch.tensor(vals)
  local sm, lsm = x:softmax(-1), x:log_softmax(1)
  local ref_sm, ref_lsm = {}, {}
  for i = 1, rows do
    local m, s = -math.huge, 0
    for j = 1, cols do m = math.max(m, vals[i][j]) end
    for j = 1, cols do s = s + math.exp(vals[i][j] - m) end
    ref_sm[i], ref_lsm[i] = {}, {}
    for j = 1, cols do
      ref_sm[i][j] = math.exp(vals[i][j] - m) / s
      ref_lsm[i][j] = vals[i][j] - m - math.log(s)
    end
  end
  T.close(sm, ref_sm, 1e-5, 1e-7, "softmax")
  T.close(lsm, ref_lsm, 1e-5, 1e-5, "log_softmax")
  -- the same values through the general engine: a transposed input
  T.close(x:t():contiguous():t():softmax(1), ref_sm, 1e-5, 1e-7, "softmax of a column-major view")
  -- infinities: a +inf makes the row NaN, as torch; -inf entries give 0
  local inf = math.huge
  for _, dt in ipairs({"float32", "float64"}) do
    local y = torch.tensor({{inf, 1}, {-inf, -inf}, {-inf, 2}}, {dtype = dt})
    local nan = 0 / 0
    T.close(y:softmax(1), {{nan, nan}, {nan, nan}, {0, 1}}, 0, 0, dt .. " softmax with infinities")
    T.close(y:log_softmax(1), {{nan, nan}, {nan, nan}, {-inf, 0}}, 0, 0, dt .. " log_softmax with infinities")
  end
end)

T.run()
