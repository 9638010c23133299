-- Joining, indexing and sorting against plain-Lua references on random
-- inputs: dims (negative too), non-contiguous and empty inputs, several
-- dtypes, stable ties, and every error path (the session goes on after each).
local T = require "harness"
local test, close, eq, raises = T.test, T.close, T.eq, T.raises

-- ---- flat references: a tensor as {shape = {...}, data = {row-major}} ----

local function numel(shape) local n = 1 for _, s in ipairs(shape) do n = n * s end return n end
local function strides(shape)
  local st, s = {}, 1
  for d = #shape, 1, -1 do st[d] = s s = s * shape[d] end
  return st
end
local function unravel(i, shape) -- 0-based flat index -> 0-based multi-index
  local idx = {}
  for d = #shape, 1, -1 do idx[d] = i % shape[d] i = i // shape[d] end
  return idx
end
local function ravel(idx, shape)
  local st, i = strides(shape), 0
  for d = 1, #shape do i = i + idx[d] * st[d] end
  return i
end
local function F(shape, data) return {shape = shape, data = data} end
local function rand_F(shape, lo, hi, ints)
  local data = {}
  for i = 1, numel(shape) do data[i] = ints and math.random(lo, hi) or lo + (hi - lo) * math.random() end
  return F(shape, data)
end
-- nested lists for torch.tensor
local function nest(f)
  local function build(d, off)
    if d > #f.shape then return f.data[off + 1] end
    local t, st = {}, strides(f.shape)[d]
    for i = 1, f.shape[d] do t[i] = build(d + 1, off + (i - 1) * st) end
    return t
  end
  return build(1, 0)
end
local function tensor(f, dt) return torch.tensor(nest(f), {dtype = dt}) end
local function shape_of(t) local s = {} for i = 0, t:dim() - 1 do s[#s + 1] = t:size(i) end return s end
local function check_shape(t, shape, what) eq(table.concat(shape_of(t), ","), table.concat(shape, ","), what .. " shape") end
local function copy(t) local r = {} for i, v in ipairs(t) do r[i] = v end return r end
local function wrap(d, n) return d < 0 and d + n or d end
-- a non-contiguous tensor with the same values: built transposed, then transposed back
local function noncontig(f, dt)
  if #f.shape < 2 then return torch.tensor(nest(F({f.shape[1], 2}, (function()
    local d = {} for i, v in ipairs(f.data) do d[2 * i - 1] = v d[2 * i] = 0 end return d end)())), {dtype = dt})[{{}, 0}] end
  local n = #f.shape
  local tshape = copy(f.shape)
  tshape[n - 1], tshape[n] = f.shape[n], f.shape[n - 1]
  local td = {}
  for i = 0, numel(f.shape) - 1 do
    local idx = unravel(i, f.shape)
    idx[n - 1], idx[n] = idx[n], idx[n - 1]
    td[ravel(idx, tshape) + 1] = f.data[i + 1]
  end
  local t = torch.tensor(nest(F(tshape, td)), {dtype = dt}):transpose(n - 2, n - 1)
  T.ok(not t:is_contiguous() or numel(f.shape) <= 1, "noncontig helper gives a strided tensor")
  return t
end

test("cat joins along every dim, negative dims too, with non-contiguous inputs", function()
  for _, dim in ipairs({0, 1, 2, -1, -3}) do
    local d = wrap(dim, 3) + 1
    local shapes, fs, ts = {}, {}, {}
    for k = 1, 3 do
      local s = {2, 3, 4}
      s[d] = k -- sizes differ along the joined dim only
      fs[k] = rand_F(s, -5, 5)
      ts[k] = k == 2 and noncontig(fs[k], "float64") or tensor(fs[k], "float64")
      shapes[k] = s
    end
    local out = torch.cat(ts, dim)
    local oshape = {2, 3, 4}
    oshape[d] = 6
    local ref, base = {}, 0
    for k = 1, 3 do
      for i = 0, numel(shapes[k]) - 1 do
        local idx = unravel(i, shapes[k])
        idx[d] = idx[d] + base
        ref[ravel(idx, oshape) + 1] = fs[k].data[i + 1]
      end
      base = base + shapes[k][d]
    end
    check_shape(out, oshape, "cat dim " .. dim)
    close(out, ref, 0, 0, "cat dim " .. dim)
  end
  close(torch.cat({torch.tensor({1, 2}), torch.tensor({3})}), {1, 2, 3}, 0, 0, "1-D")
  close(torch.cat({torch.tensor({{1, 2}})}, {dim = 1}), {1, 2}, 0, 0, "dim as an option")
end)

test("cat promotes dtypes as torch and skips 1-D empty inputs", function()
  local i32 = torch.tensor({1, 2}, {dtype = "int32"})
  eq(torch.cat({i32, torch.tensor({3.5})}).dtype, "torch.float32", "int32 + float32")
  eq(torch.cat({i32, torch.tensor({3})}).dtype, "torch.int64", "int32 + int64")
  eq(torch.cat({torch.tensor({true}), i32}).dtype, "torch.int32", "bool + int32")
  close(torch.cat({i32, torch.tensor({3.5})}), {1, 2, 3.5}, 0, 0, "promoted values")
  local h = torch.cat({torch.tensor({0.5}, {dtype = "float16"}), torch.tensor({0.25}, {dtype = "bfloat16"})})
  eq(h.dtype, "torch.float32", "float16 + bfloat16")
  close(h, {0.5, 0.25}, 0, 0, "half values")
  local a = torch.tensor({{1, 2}, {3, 4}})
  local r = torch.cat({torch.zeros(0, {dtype = "int64"}), a, torch.zeros(0, {dtype = "int64"})}, 1)
  check_shape(r, {2, 2}, "empty (0,) skipped")
  close(r, {1, 2, 3, 4}, 0, 0, "empty skipped values")
  check_shape(torch.cat({torch.zeros(2, 0), torch.zeros(2, 3)}, 1), {2, 3}, "size-0 dim joined")
  check_shape(torch.cat({torch.zeros(0), torch.zeros(0)}), {0}, "only empty inputs")
  check_shape(torch.cat({torch.zeros(0, 3), torch.zeros(2, 3)}), {2, 3}, "(0, 3) joins along dim 0")
end)

test("cat errors name the problem and the session continues", function()
  local a, b = torch.zeros(2, 3), torch.zeros(2, 4)
  raises(function() return torch.cat({a, b}, 0) end,
    "cat: sizes of tensors must match except in dimension 0. Expected size 3 but got size 4 for tensor number 1 in the list")
  raises(function() return torch.cat({a, torch.zeros(3)}) end, "tensors must have the same number of dimensions")
  raises(function() return torch.cat({a, a}, 2) end, "cat: dimension out of range (expected to be in range of [-2, 1], but got 2)")
  raises(function() return torch.cat({torch.tensor(1.0)}) end, "zero-dimensional tensor (at position 0) cannot be concatenated")
  raises(function() return torch.cat({}) end, "cat: expected a non-empty list of tensors")
  raises(function() return torch.cat({a, 3}) end, "cat: expected a list of tensors, but element 2 is a number")
  raises(function() return torch.cat(a) end, "table expected")
  check_shape(torch.cat({a, b}, 1), {2, 7}, "still works after errors")
end)

test("stack inserts a new dim at every position", function()
  for _, dim in ipairs({0, 1, 2, -1, -2}) do
    local fs, ts = {}, {}
    for k = 1, 3 do fs[k] = rand_F({2, 3}, 0, 9, true) ts[k] = k == 3 and noncontig(fs[k], "int64") or tensor(fs[k], "int64") end
    local out = torch.stack(ts, dim)
    local d = wrap(dim, 3) + 1
    local oshape = {2, 3}
    table.insert(oshape, d, 3)
    local ref = {}
    for k = 1, 3 do
      for i = 0, 5 do
        local idx = unravel(i, {2, 3})
        table.insert(idx, d, k - 1)
        ref[ravel(idx, oshape) + 1] = fs[k].data[i + 1]
      end
    end
    check_shape(out, oshape, "stack dim " .. dim)
    close(out, ref, 0, 0, "stack dim " .. dim)
  end
  check_shape(torch.stack({torch.tensor(1.0), torch.tensor(2.0)}), {2}, "0-dim inputs")
  raises(function() return torch.stack({torch.zeros(3), torch.zeros(4)}) end,
    "stack: expects each tensor to be equal size, but got (3,) at entry 0 and (4,) at entry 1")
  raises(function() return torch.stack({torch.zeros(3)}, 2) end, "stack: dimension out of range")
  raises(function() return torch.stack({}) end, "non-empty list")
end)

test("split and chunk return views covering the dim", function()
  local x = torch.arange(10)
  local parts = x:split(3)
  eq(#parts, 4, "split(3) pieces")
  close(parts[4], {9}, 0, 0, "last piece smaller")
  close(torch.split(x, 3)[2], {3, 4, 5}, 0, 0, "torch.split")
  parts[2][0] = 100 -- views: writes reach x
  eq(x[3]:item(), 100, "split pieces are views")
  local m = torch.arange(12):reshape(3, 4)
  local cols = m:split({1, 3}, 1)
  close(cols[1], {0, 4, 8}, 0, 0, "split sizes along dim 1")
  close(cols[2], {1, 2, 3, 5, 6, 7, 9, 10, 11}, 0, 0, "second piece")
  local rows = m:split(2, -2)
  eq(#rows, 2, "negative dim")
  check_shape(rows[2], {1, 4}, "negative dim piece")
  local ch = torch.arange(10):chunk(4)
  eq(#ch, 4, "chunk(4) of 10")
  close(ch[4], {9}, 0, 0, "chunk tail")
  eq(#torch.arange(6):chunk(4), 3, "chunk(4) of 6 gives 3, as torch")
  eq(#torch.chunk(m, 2, 1), 2, "torch.chunk")
  local e = torch.zeros(0, 3):chunk(3)
  eq(#e, 3, "chunk of an empty dim")
  check_shape(e[1], {0, 3}, "empty chunk")
  eq(#torch.zeros(0):split(2), 1, "split of an empty dim")
  raises(function() return m:split({1, 2}, 1) end, "split: split_sizes must sum exactly to 4")
  raises(function() return m:split(0) end, "split_size can only be 0 if dimension size is 0")
  raises(function() return m:chunk(0) end, "chunk: expects `chunks` to be greater than 0, got: 0")
  raises(function() return m:split(2, 2) end, "split: dimension out of range")
  raises(function() return torch.tensor(1):split(1) end, "cannot split a 0-dim tensor")
  eq(#m:split(2), 2, "still works")
end)

-- ---- gather / scatter / index_select --------------------------------------

local function ref_gather(xf, d, idxf)
  local out = {}
  for i = 0, numel(idxf.shape) - 1 do
    local idx = unravel(i, idxf.shape)
    idx[d] = idxf.data[i + 1]
    out[i + 1] = xf.data[ravel(idx, xf.shape) + 1]
  end
  return out
end

test("gather picks along every dim, for several dtypes and strided inputs", function()
  local xs = {3, 4, 5}
  for _, dim in ipairs({0, 1, 2, -1, -2}) do
    local d = wrap(dim, 3) + 1
    local is = {2, 3, 4}
    is[d] = 6 -- any size along dim; no larger elsewhere
    local idxf = rand_F(is, 0, xs[d] - 1, true)
    for _, dt in ipairs({"float64", "float32", "int32", "float16"}) do
      local xf = rand_F(xs, -8, 8, true)
      local x = dt == "float32" and noncontig(xf, dt) or tensor(xf, dt)
      local out = x:gather(dim, tensor(idxf, "int64"))
      eq(out.dtype, "torch." .. dt, "gather keeps dtype")
      check_shape(out, is, "gather")
      close(out, ref_gather(xf, d, idxf), 0, 0, dt .. " gather dim " .. dim)
    end
  end
  local b = torch.tensor({{true, false}, {false, true}})
  close(torch.gather(b, 1, torch.tensor({{1, 1}, {0, 1}})), {false, false, false, true}, 0, 0, "bool gather")
  check_shape(torch.zeros(3, 4):gather(1, torch.zeros(3, 0, {dtype = "int64"})), {3, 0}, "empty index")
  eq(torch.tensor({5, 6, 7}):gather(0, torch.tensor(2)):item(), 7, "0-dim index")
end)

test("gather errors: bounds, dtype, rank, sizes, dim", function()
  local x = torch.zeros(2, 3)
  raises(function() return x:gather(1, torch.tensor({{3}, {0}})) end,
    "gather: index 3 is out of bounds for dimension 1 with size 3")
  raises(function() return x:gather(0, torch.tensor({{-1}, {0}})) end,
    "gather: index -1 is out of bounds for dimension 0 with size 2")
  raises(function() return x:gather(1, torch.tensor({{0.0}})) end, "gather: expected dtype int64 for index, got float32")
  raises(function() return x:gather(1, torch.tensor({0})) end, "index tensor must have the same number of dimensions")
  raises(function() return x:gather(1, torch.zeros(3, 1, {dtype = "int64"})) end, "gather: size does not match at dimension 0")
  raises(function() return x:gather(2, torch.zeros(2, 1, {dtype = "int64"})) end, "gather: dimension out of range")
  raises(function() return x:gather(1, "a") end, "tensor expected")
  close(x:gather(1, torch.tensor({{2}, {0}})), {0, 0}, 0, 0, "still works")
end)

local function ref_scatter(xf, d, idxf, srcf, add)
  local out = copy(xf.data)
  for i = 0, numel(idxf.shape) - 1 do
    local idx = unravel(i, idxf.shape)
    local v = srcf and srcf.data[ravel(idx, srcf.shape) + 1] or add
    idx[d] = idxf.data[i + 1]
    local at = ravel(idx, xf.shape) + 1
    if add and srcf then out[at] = out[at] + v else out[at] = v end
  end
  return out
end

-- an index whose rows along dim are distinct (scatter with duplicates has no defined winner)
local function perm_index(shape, d, n)
  local f = F(shape, {})
  for i = 0, numel(shape) - 1 do
    local idx = unravel(i, shape)
    local lane = 0
    for k = 1, #shape do if k ~= d then lane = lane * 7 + idx[k] end end
    f.data[i + 1] = (idx[d] + lane) % n
  end
  return f
end

test("scatter, scatter_, scatter_add and scatter_add_ match references", function()
  local xs = {4, 5, 3}
  for _, dim in ipairs({0, 1, 2, -1}) do
    local d = wrap(dim, 3) + 1
    local is = {3, 4, 2}
    is[d] = math.min(3, xs[d])
    local xf, srcf = rand_F(xs, -9, 9, true), rand_F({4, 5, 3}, -9, 9, true)
    local pidx = perm_index(is, d, xs[d])
    local x, src = tensor(xf, "float64"), noncontig(srcf, "float64")
    close(x:scatter(dim, tensor(pidx, "int64"), src), ref_scatter(xf, d, pidx, srcf), 0, 0, "scatter dim " .. dim)
    close(x, xf.data, 0, 0, "scatter leaves x alone")
    close(x:scatter(dim, tensor(pidx, "int64"), 2.5), ref_scatter(xf, d, pidx, nil, 2.5), 0, 0, "scatter value")
    local didx = rand_F(is, 0, xs[d] - 1, true) -- duplicates are fine for add
    close(torch.scatter_add(x, dim, tensor(didx, "int64"), src), ref_scatter(xf, d, didx, srcf, true), 1e-12, 1e-12,
      "scatter_add dim " .. dim)
    local y = noncontig(xf, "float64")
    eq(y:scatter_add_(dim, tensor(didx, "int64"), src), y, "scatter_add_ returns self")
    close(y, ref_scatter(xf, d, didx, srcf, true), 1e-12, 1e-12, "scatter_add_ in place on a strided tensor")
    local z = tensor(xf, "int32")
    z:scatter_(dim, tensor(pidx, "int64"), tensor(srcf, "int32"))
    close(z, ref_scatter(xf, d, pidx, srcf), 0, 0, "int32 scatter_")
    local w = tensor(xf, "float64")
    w:scatter_(dim, tensor(didx, "int64"), src, {reduce = "add"})
    close(w, ref_scatter(xf, d, didx, srcf, true), 1e-12, 1e-12, "reduce = add")
  end
  local h = torch.zeros(3, {dtype = "float16"}):scatter_add(0, torch.tensor({0, 0, 2}), torch.tensor({0.5, 0.25, 1}, {dtype = "float16"}))
  close(h:float(), {0.75, 0, 1}, 0, 0, "float16 scatter_add")
end)

test("scatter errors: bounds, dtypes, shapes", function()
  local x = torch.zeros(2, 3)
  raises(function() return x:scatter(1, torch.tensor({{3}}), torch.ones(1, 1)) end,
    "scatter: index 3 is out of bounds for dimension 1 with size 3")
  raises(function() return x:scatter_add(0, torch.tensor({{-1}}), torch.ones(1, 1)) end,
    "scatter_add: index -1 is out of bounds for dimension 0 with size 2")
  raises(function() return x:scatter(1, torch.tensor({{0}}), torch.ones(1, 1, {dtype = "float64"})) end,
    "expected self.dtype to be equal to src.dtype, got float32 and float64")
  raises(function() return x:scatter(1, torch.tensor({{0.0}}), 1) end, "expected dtype int64 for index")
  raises(function() return x:scatter(1, torch.tensor({{0, 1}}), torch.ones(1, 1)) end, "scatter: size does not match at dimension 1")
  raises(function() return torch.zeros(2, {dtype = "int64"}):scatter(0, torch.tensor({0}), 1.5) end,
    "a fractional value can't be scattered into a int64 tensor")
  raises(function() return x:scatter(1, torch.tensor({{0}}), 1, {reduce = "multiply"}) end, "reduce must be \"add\"")
  raises(function() return x:scatter(3, torch.tensor({{0}}), 1) end, "scatter: dimension out of range")
  close(x:scatter(1, torch.tensor({{2}}), 7), {0, 0, 7, 0, 0, 0}, 0, 0, "still works")
  close(x, {0, 0, 0, 0, 0, 0}, 0, 0, "out-of-place scatter never writes x")
end)

test("index_select along dims, with repeats, empty and strided inputs", function()
  local xs = {3, 4, 5}
  for _, dim in ipairs({0, 1, 2, -1, -3}) do
    local d = wrap(dim, 3) + 1
    local xf = rand_F(xs, -9, 9, true)
    local idx = {}
    for i = 1, 7 do idx[i] = math.random(0, xs[d] - 1) end
    for _, dt in ipairs({"float64", "int64", "bfloat16"}) do
      local x = dt == "int64" and noncontig(xf, dt) or tensor(xf, dt)
      local out = x:index_select(dim, torch.tensor(idx))
      local oshape = copy(xs)
      oshape[d] = 7
      check_shape(out, oshape, "index_select")
      local ref = {}
      for i = 0, numel(oshape) - 1 do
        local m = unravel(i, oshape)
        m[d] = idx[m[d] + 1]
        ref[i + 1] = xf.data[ravel(m, xs) + 1]
      end
      close(out, ref, 0, 0, dt .. " index_select dim " .. dim)
    end
  end
  local x = torch.tensor({{1, 2, 3}, {4, 5, 6}})
  check_shape(x:index_select(1, torch.zeros(0, {dtype = "int64"})), {2, 0}, "empty index")
  close(torch.index_select(x, 1, torch.tensor({2, 0, 2})[{{0, 3, 2}}]), {3, 3, 6, 6}, 0, 0, "strided index")
  close(x:index_select(0, torch.tensor(1)), {4, 5, 6}, 0, 0, "0-dim index")
  raises(function() return x:index_select(1, torch.tensor({3})) end,
    "index_select: index 3 is out of bounds for dimension 1 with size 3")
  raises(function() return x:index_select(0, torch.tensor({-1})) end, "index -1 is out of bounds for dimension 0 with size 2")
  raises(function() return x:index_select(0, torch.tensor({0.0})) end, "expected dtype int64 for index, got float32")
  raises(function() return x:index_select(0, torch.tensor({{0}})) end, "index must be a 0-dim or 1-D tensor, got 2 dims")
  raises(function() return x:index_select(2, torch.tensor({0})) end, "index_select: dimension out of range")
  close(x:index_select(0, torch.tensor({1})), {4, 5, 6}, 0, 0, "still works")
end)

-- ---- masks and nonzero -----------------------------------------------------

test("masked_select broadcasts the mask and the input", function()
  local xf = rand_F({3, 4}, -5, 5, true)
  local mf = rand_F({3, 1}, 0, 1, true)
  local x = noncontig(xf, "float32")
  local mask = tensor(mf, "int64"):eq(1)
  local ref = {}
  for i = 0, 11 do if mf.data[i // 4 + 1] == 1 then ref[#ref + 1] = xf.data[i + 1] end end
  local out = x:masked_select(mask)
  check_shape(out, {#ref}, "masked_select")
  close(out, ref, 0, 0, "masked_select (3,1) mask")
  -- the input broadcast: x (4) against a (3, 4) mask
  local m2 = rand_F({3, 4}, 0, 1, true)
  local ref2 = {}
  for i = 0, 11 do if m2.data[i + 1] == 1 then ref2[#ref2 + 1] = xf.data[i % 4 + 1] end end
  close(torch.masked_select(tensor(F({4}, {xf.data[1], xf.data[2], xf.data[3], xf.data[4]}), "float32"),
    tensor(m2, "int64"):eq(1)), ref2, 0, 0, "input broadcast")
  check_shape(x:masked_select(x:gt(100)), {0}, "nothing selected")
  check_shape(torch.zeros(0, 4):masked_select(torch.zeros(0, 4):gt(0)), {0}, "empty input")
  raises(function() return x:masked_select(torch.ones(3, 4)) end, "masked_select: expected a bool mask, got float32")
  raises(function() return x:masked_select(torch.ones(2, 4):bool()) end, "masked_select")
  close(x:masked_select(x:gt(100)), {}, 0, 0, "still works")
end)

test("nonzero gives row-major coordinates; -0.0 is zero, NaN is not", function()
  for _, dt in ipairs({"float32", "int32", "uint8", "bool", "float16"}) do
    local f = rand_F({3, 2, 4}, 0, 2, true)
    local x = dt == "int32" and noncontig(f, dt) or tensor(f, dt == "bool" and "int64" or dt)
    if dt == "bool" then x = x:bool() end
    local ref = {}
    for i = 0, numel(f.shape) - 1 do
      if f.data[i + 1] ~= 0 then for _, c in ipairs(unravel(i, f.shape)) do ref[#ref + 1] = c end end
    end
    local nz = x:nonzero()
    eq(nz.dtype, "torch.int64", "nonzero dtype")
    check_shape(nz, {#ref // 3, 3}, dt .. " nonzero")
    close(nz, ref, 0, 0, dt .. " nonzero")
    local cols = x:nonzero({as_tuple = true})
    eq(#cols, 3, "as_tuple gives one tensor per dim")
    for d = 1, 3 do
      local want = {}
      for r = 0, #ref // 3 - 1 do want[#want + 1] = ref[r * 3 + d] end
      close(cols[d], want, 0, 0, "as_tuple column " .. d)
    end
  end
  close(torch.tensor({0.0, -0.0, 0 / 0, 1}):nonzero(), {2, 3}, 0, 0, "-0.0 and NaN")
  check_shape(torch.zeros(0, 3):nonzero(), {0, 2}, "empty input")
  check_shape(torch.tensor(5):nonzero(), {1, 0}, "0-dim non-zero")
  check_shape(torch.tensor(0):nonzero(), {0, 0}, "0-dim zero")
  check_shape(torch.nonzero(torch.tensor(5), {as_tuple = true})[1], {1}, "0-dim as_tuple")
end)

-- ---- sort, argsort, topk, unique --------------------------------------------

-- Sorts the rows of f along dim d: a stable reference with NaN largest.
local function ref_sort(f, d, desc, k)
  local n = f.shape[d]
  k = k or n
  local oshape = copy(f.shape)
  oshape[d] = k
  local vals, inds = {}, {}
  for i = 0, numel(f.shape) - 1 do
    local idx = unravel(i, f.shape)
    if idx[d] == 0 then
      local row = {}
      for j = 0, n - 1 do
        idx[d] = j
        row[#row + 1] = {v = f.data[ravel(idx, f.shape) + 1], i = j}
      end
      local function key_lt(a, b) -- NaN largest
        if a ~= a then return false end
        if b ~= b then return true end
        return a < b
      end
      table.sort(row, function(a, b)
        local x, y = a.v, b.v
        if desc then x, y = y, x end
        if key_lt(x, y) then return true end
        if key_lt(y, x) then return false end
        return a.i < b.i -- ties keep their original order (stable)
      end)
      for j = 0, k - 1 do
        idx[d] = j
        local at = ravel(idx, oshape) + 1
        vals[at], inds[at] = row[j + 1].v, row[j + 1].i
      end
    end
  end
  return vals, inds, oshape
end

test("sort is stable over dims and dtypes, ascending and descending", function()
  for _, dim in ipairs({0, 1, 2, -1}) do
    local d = wrap(dim, 3) + 1
    local f = rand_F({4, 5, 6}, -3, 3, true) -- small range: many ties
    for _, dt in ipairs({"float32", "int64", "int32", "float16", "uint8"}) do
      local g = f
      if dt == "uint8" then g = F(f.shape, T.map(f.data, function(v) return v + 3 end)) end
      for _, desc in ipairs({false, true}) do
        local x = dt == "float32" and noncontig(g, dt) or tensor(g, dt)
        local v, i = x:sort({dim = dim, descending = desc})
        local rv, ri, oshape = ref_sort(g, d, desc)
        check_shape(v, oshape, "sort values")
        eq(v.dtype, "torch." .. dt, "sort keeps dtype")
        eq(i.dtype, "torch.int64", "sort indices dtype")
        close(v, rv, 0, 0, dt .. " sort values dim " .. dim .. (desc and " desc" or ""))
        close(i, ri, 0, 0, dt .. " sort indices dim " .. dim .. (desc and " desc" or ""))
        close(x:argsort({dim = dim, descending = desc}), ri, 0, 0, "argsort")
      end
    end
  end
  local v, i = torch.tensor({2.0, 0 / 0, -1.0, 0 / 0, 5.0}):sort()
  close(v, {-1, 2, 5, 0 / 0, 0 / 0}, 0, 0, "NaN sorts last")
  close(i, {2, 0, 4, 1, 3}, 0, 0, "NaN indices stable")
  v, i = torch.tensor({2.0, 0 / 0, -1.0}):sort(0, true)
  close(v, {0 / 0, 2, -1}, 0, 0, "NaN first descending (positional dim, descending)")
  v, i = torch.tensor({true, false, true}):sort()
  close(i, {1, 0, 2}, 0, 0, "bool sort")
  v = torch.sort(torch.zeros(3, 0), {dim = 1})
  check_shape(v, {3, 0}, "empty rows")
  v, i = torch.tensor(3.5):sort()
  eq(i:item(), 0, "0-dim sort index")
  close(v, {3.5}, 0, 0, "0-dim sort value")
  raises(function() return torch.zeros(2, 3):sort(2) end, "sort: dimension out of range (expected to be in range of [-2, 1], but got 2)")
  raises(function() return torch.zeros(2):sort({descending = 1}) end, "option 'descending' must be a boolean")
  close(torch.tensor({3, 1, 2}):argsort(), {1, 2, 0}, 0, 0, "still works")
end)

test("large inputs (the parallel paths) sort and gather consistently", function()
  local f = rand_F({40, 1000}, -50, 50, true)
  local x = tensor(f, "float64")
  local v, i = x:sort({dim = 1, descending = true})
  local rv, ri = ref_sort(f, 2, true)
  close(v, rv, 0, 0, "large sort values")
  close(i, ri, 0, 0, "large sort indices")
  close(x:gather(1, i), rv, 0, 0, "gather by the sort indices")
  local perm = {}
  for k = 1, 40 do perm[k] = 40 - k end
  close(x:index_select(0, torch.tensor(perm)):index_select(0, torch.tensor(perm)), f.data, 0, 0, "index_select twice")
end)

test("topk: largest and smallest k, stable ties, every dim", function()
  for _, dim in ipairs({0, 1, -1}) do
    local d = wrap(dim, 2) + 1
    local f = rand_F({5, 6}, -2, 2, true)
    for _, largest in ipairs({true, false}) do
      for _, k in ipairs({0, 1, 3, f.shape[d]}) do
        local x = noncontig(f, "float64")
        local v, i = x:topk(k, {dim = dim, largest = largest})
        local rv, ri, oshape = ref_sort(f, d, largest, k)
        check_shape(v, oshape, "topk")
        close(v, rv, 0, 0, ("topk k=%d dim=%d largest=%s"):format(k, dim, tostring(largest)))
        close(i, ri, 0, 0, "topk indices")
      end
    end
  end
  local v, i = torch.topk(torch.tensor({1, 5, 3, 5}), 2)
  close(v, {5, 5}, 0, 0, "torch.topk")
  close(i, {1, 3}, 0, 0, "ties keep order")
  v = torch.tensor({{1, 9}, {8, 2}}):topk(1, 0, false)
  close(v, {1, 2}, 0, 0, "positional dim and largest")
  raises(function() return torch.zeros(3):topk(4) end, "topk: k (4) is out of range for dimension 0 of size 3")
  raises(function() return torch.zeros(3):topk(-1) end, "topk: k (-1) is out of range")
  raises(function() return torch.zeros(3):topk(1, 1) end, "topk: dimension out of range")
  close(torch.zeros(3):topk(1), {0}, 0, 0, "still works")
end)

test("unique: sorted values, inverse and counts of the flattened input", function()
  for _, dt in ipairs({"int64", "float32", "int32"}) do
    local f = rand_F({4, 5}, -3, 3, true)
    local x = dt == "float32" and noncontig(f, dt) or tensor(f, dt)
    local seen, vals = {}, {}
    for _, v in ipairs(f.data) do if not seen[v] then seen[v] = true vals[#vals + 1] = v end end
    table.sort(vals)
    local pos, counts = {}, {}
    for j, v in ipairs(vals) do pos[v] = j - 1 counts[j] = 0 end
    local inv = {}
    for k, v in ipairs(f.data) do inv[k] = pos[v] counts[pos[v] + 1] = counts[pos[v] + 1] + 1 end
    local u, i, c = torch.unique(x, {return_inverse = true, return_counts = true})
    eq(u.dtype, "torch." .. dt, "unique dtype")
    close(u, vals, 0, 0, dt .. " unique values")
    check_shape(i, {4, 5}, "inverse has the input's shape")
    close(i, inv, 0, 0, dt .. " inverse")
    close(c, counts, 0, 0, dt .. " counts")
    local u2, c2 = x:unique({return_counts = true})
    close(c2, counts, 0, 0, "counts without inverse")
    eq(select("#", torch.unique(x)), 1, "plain unique returns one value")
    close(u2, vals, 0, 0, "method form")
  end
  local u, i, c = torch.unique(torch.zeros(0), {return_inverse = true, return_counts = true})
  check_shape(u, {0}, "empty unique")
  check_shape(i, {0}, "empty inverse")
  check_shape(c, {0}, "empty counts")
  u, i = torch.unique(torch.tensor(7), {return_inverse = true})
  close(u, {7}, 0, 0, "0-dim unique")
  check_shape(i, {}, "0-dim inverse")
  close(torch.unique(torch.tensor({0.0, -0.0, 1.0})), {0, 1}, 0, 0, "-0.0 equals 0.0")
  raises(function() return torch.unique(torch.zeros(3), {dim = 0}) end, "unique: the dim option is not supported")
  raises(function() return torch.unique(torch.zeros(3), {return_counts = 1}) end, "option 'return_counts' must be a boolean")
end)

test("one_hot: int64 in and out, inferred or given class count", function()
  local vals = {}
  for i = 1, 12 do vals[i] = math.random(0, 4) end
  local f = F({3, 4}, vals)
  local mx = 0
  for _, v in ipairs(vals) do mx = math.max(mx, v) end
  for _, C in ipairs({-1, 7}) do
    local n = C == -1 and mx + 1 or C
    local out = torch.one_hot(noncontig(f, "int64"), C)
    eq(out.dtype, "torch.int64", "one_hot dtype")
    check_shape(out, {3, 4, n}, "one_hot shape")
    local ref = {}
    for k, v in ipairs(vals) do for j = 0, n - 1 do ref[(k - 1) * n + j + 1] = j == v and 1 or 0 end end
    close(out, ref, 0, 0, "one_hot C=" .. C)
  end
  check_shape(torch.one_hot(torch.zeros(0, {dtype = "int64"}), 3), {0, 3}, "empty with num_classes")
  close(torch.one_hot(torch.tensor(2), 3), {0, 0, 1}, 0, 0, "0-dim")
  raises(function() return torch.one_hot(torch.tensor({0, 3}), 3) end, "class values must be smaller than num_classes (3), got 3")
  raises(function() return torch.one_hot(torch.tensor({-1, 0})) end, "class values must be non-negative, got -1")
  raises(function() return torch.one_hot(torch.tensor({0.0})) end, "one_hot: expected an int64 tensor")
  raises(function() return torch.one_hot(torch.zeros(0, {dtype = "int64"})) end, "can not infer the number of classes from an empty tensor")
  close(torch.one_hot(torch.tensor({1}), 2), {0, 1}, 0, 0, "still works")
end)

-- ---- advanced indexing through x[...] ---------------------------------------

test("x[idx] with an int64 tensor selects along dim 0 (result idx.shape + x.shape[1:])", function()
  local xf = rand_F({5, 3}, -9, 9, true)
  for _, contiguous in ipairs({true, false}) do
    local x = contiguous and tensor(xf, "float64") or noncontig(xf, "float64")
    local idxf = rand_F({2, 4}, -5, 4, true) -- negative indices count from the end
    local out = x[tensor(idxf, "int64")]
    check_shape(out, {2, 4, 3}, "x[idx] shape")
    local ref = {}
    for k, j in ipairs(idxf.data) do
      local r = j < 0 and j + 5 or j
      for c = 0, 2 do ref[(k - 1) * 3 + c + 1] = xf.data[r * 3 + c + 1] end
    end
    close(out, ref, 0, 0, "x[idx] values")
    close(x[torch.tensor({4, 0}, {dtype = "int32"})], {xf.data[13], xf.data[14], xf.data[15], xf.data[1], xf.data[2], xf.data[3]},
      0, 0, "int32 index")
  end
  local x = torch.tensor({10, 20, 30})
  eq(x[torch.tensor(2)]:item(), 30, "0-dim index gives x.shape[1:]")
  check_shape(x[torch.tensor(2)], {}, "0-dim index shape")
  check_shape(x[torch.zeros(0, {dtype = "int64"})], {0}, "empty index")
  raises(function() return x[torch.tensor({3})] end, "index 3 is out of bounds for dimension 0 with size 3")
  raises(function() return x[torch.tensor({-4})] end, "index -4 is out of bounds for dimension 0 with size 3")
  raises(function() return x[torch.tensor({1.0})] end, "tensors used as indices must be int64, int32 or bool tensors, got float32")
  raises(function() return torch.tensor(1)[torch.tensor({0})] end, "too many indices for tensor of dimension 0")
  eq(x[1]:item(), 20, "integer indexing still works")
  close(x[{{0, 3, 2}}], {10, 30}, 0, 0, "slice indexing still works")
end)

test("x[mask] selects like masked_select; a leading-dims mask keeps trailing dims", function()
  local xf = rand_F({3, 4}, -9, 9, true)
  local mf = rand_F({3, 4}, 0, 1, true)
  local x = noncontig(xf, "float32")
  local ref = {}
  for k, m in ipairs(mf.data) do if m == 1 then ref[#ref + 1] = xf.data[k] end end
  local out = x[tensor(mf, "int64"):eq(1)]
  check_shape(out, {#ref}, "x[mask] shape")
  close(out, ref, 0, 0, "x[mask]")
  local rows = torch.tensor({true, false, true})
  local r = x[rows]
  check_shape(r, {2, 4}, "row mask")
  local want = {}
  for _, row in ipairs({0, 2}) do for c = 1, 4 do want[#want + 1] = xf.data[row * 4 + c] end end
  close(r, want, 0, 0, "row mask values")
  check_shape(x[x:gt(1000)], {0}, "empty selection")
  raises(function() return x[torch.tensor({true, false})] end,
    "the shape of the mask (2) at index 0 does not match the shape of the indexed tensor (3) at index 0")
  raises(function() return x[torch.ones(3, 4, 1):bool()] end, "too many indices for tensor of dimension 2")
  raises(function() return x[torch.ones(3, 4, {dtype = "uint8"})] end, "got uint8")
  check_shape(x[rows], {2, 4}, "still works")
end)

test("x[mask] = v and x[idx] = v write in place, through strided views", function()
  local xf = rand_F({3, 4}, -9, 9, true)
  local x = tensor(xf, "float64")
  x[x:lt(0)] = 0 -- masked_fill
  close(x, T.map(xf.data, function(v) return v < 0 and 0 or v end), 0, 0, "x[mask] = number")
  local y = tensor(xf, "float64")
  local mask = y:gt(0)
  local n = #y:masked_select(mask):tolist()
  local vals = {}
  for i = 1, n do vals[i] = 100 + i end
  y[mask] = torch.tensor(vals)
  local ref, j = {}, 0
  for k, v in ipairs(xf.data) do
    if v > 0 then j = j + 1 ref[k] = vals[j] else ref[k] = v end
  end
  close(y, ref, 0, 0, "x[mask] = tensor, in row-major order")
  raises(function() y[y:gt(100)] = torch.tensor({1, 2}) end, "shape mismatch: value tensor of shape (2,) cannot be broadcast")
  local z = tensor(xf, "float64")
  z[torch.tensor({true, false, true})] = torch.tensor({1, 2, 3, 4}) -- broadcast over the selected rows
  close(z[0], {1, 2, 3, 4}, 0, 0, "row mask = row")
  close(z[1], {xf.data[5], xf.data[6], xf.data[7], xf.data[8]}, 0, 0, "unselected row kept")
  close(z[2], {1, 2, 3, 4}, 0, 0, "row mask = row (second)")

  local b = torch.zeros(4, 3)
  local bt = b:t() -- (3, 4) strided view: writes must reach b
  bt[torch.tensor({2, -3})] = torch.tensor({{1, 2, 3, 4}, {5, 6, 7, 8}})
  close(b, {5, 0, 1, 6, 0, 2, 7, 0, 3, 8, 0, 4}, 0, 0, "x[idx] = tensor through a transposed view")
  b[torch.tensor({0, 3})] = 9
  close(b[0], {9, 9, 9}, 0, 0, "x[idx] = number")
  close(b[3], {9, 9, 9}, 0, 0, "x[idx] = number (second)")
  local i64 = torch.zeros(3, {dtype = "int64"})
  i64[torch.tensor({1})] = torch.tensor({2.0}) -- cast to x's dtype
  close(i64, {0, 2, 0}, 0, 0, "value cast")
  local c = torch.zeros(3)
  c[torch.tensor({{0, 2}})] = torch.tensor({{1, 2}})
  close(c, {1, 0, 2}, 0, 0, "2-D index put")
  raises(function() c[torch.tensor({3})] = 1 end, "index 3 is out of bounds for dimension 0 with size 3")
  raises(function() c[torch.tensor({0, 1})] = torch.tensor({1, 2, 3}) end, "shape mismatch")
  raises(function() c[torch.tensor({0.0})] = 1 end, "tensors used as indices must be int64")
  raises(function() i64[torch.tensor({0})] = 1.5 end, "a fractional value can't be stored in a int64 tensor")
  raises(function() c[torch.tensor({0})] = "x" end, "tensor or number expected")
  close(c, {1, 0, 2}, 0, 0, "failed puts leave x unchanged")
  c[1] = 5
  close(c, {1, 5, 2}, 0, 0, "integer assignment still works")
end)

T.run()
