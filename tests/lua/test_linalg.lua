-- Matrix products (matmul, mm, bmm, mv, dot, addmm, outer) against a triple
-- loop in Lua doubles: every matmul shape case with batch broadcasting,
-- transposed / strided / expanded operands, every dtype, empty K, M, N and
-- batch, and every error path with its message.
local T = require "harness"
local test, close, eq, raises = T.test, T.close, T.eq, T.raises

-- ---- the reference ---------------------------------------------------------

local function mat_ref(a, b, m, k, n) -- plain (m,k) @ (k,n) on nested lists
  local c = {}
  for i = 1, m do
    c[i] = {}
    for j = 1, n do
      local s = 0
      for p = 1, k do s = s + a[i][p] * b[p][j] end
      c[i][j] = s
    end
  end
  return c
end

local function slice(t, i, j) return {table.unpack(t, i, j)} end

-- torch.matmul's semantics on nested lists a (shape sa) and b (shape sb):
-- 1-D operands get a 1 prepended / appended, batch dims broadcast, and the
-- added dims are dropped from the result. Returns the list and its shape.
local function matmul_ref(a, sa, b, sb)
  local da, db = #sa, #sb
  if da == 1 then a, sa = {a}, {1, sa[1]} end
  if db == 1 then b, sb = T.map(b, function(x) return {x} end), {sb[1], 1} end
  local m, k, n = sa[#sa - 1], sa[#sa], sb[#sb]
  local ba, bb = slice(sa, 1, #sa - 2), slice(sb, 1, #sb - 2)
  local nb = math.max(#ba, #bb)
  local bs = {}
  for d = 1, nb do
    local x, y = ba[d - (nb - #ba)] or 1, bb[d - (nb - #bb)] or 1
    assert(x == y or x == 1 or y == 1, "reference: batch dims do not broadcast")
    bs[d] = x == 1 and y or x
  end
  local function rec(d, x, y)
    if d > nb then return mat_ref(x, y, m, k, n) end
    local out = {}
    local ox, oy = d - (nb - #ba), d - (nb - #bb) -- this dim in a's / b's batch dims (< 1: absent)
    for i = 1, bs[d] do
      local xi = ox < 1 and x or (ba[ox] == 1 and x[1] or x[i])
      local yi = oy < 1 and y or (bb[oy] == 1 and y[1] or y[i])
      out[i] = rec(d + 1, xi, yi)
    end
    return out
  end
  local r = rec(1, a, b)
  local function drop(v, depth) -- removes the added M (da == 1) or N (db == 1) dim
    if depth == nb then -- v is one (m, n) matrix
      if da == 1 and db == 1 then return v[1][1] end
      if da == 1 then return v[1] end
      if db == 1 then
        local col = {}
        for i = 1, #v do col[i] = v[i][1] end
        return col
      end
      return v
    end
    for i = 1, #v do v[i] = drop(v[i], depth + 1) end
    return v
  end
  r = drop(r, 0)
  local shape = slice(bs, 1, nb)
  if da > 1 then shape[#shape + 1] = m end
  if db > 1 then shape[#shape + 1] = n end
  return r, shape
end

local function transpose(l)
  local t = {}
  for j = 1, #l[1] do
    t[j] = {}
    for i = 1, #l do t[j][i] = l[i][j] end
  end
  return t
end

local function shape_str(s)
  local p = {}
  for i, v in ipairs(s) do p[i] = tostring(v) end
  return "torch.Size([" .. table.concat(p, ", ") .. "])"
end

local tol = {float32 = 1e-4, float64 = 1e-10, float16 = 1e-2, bfloat16 = 1e-2}

-- Random values exactly representable in float16 and bfloat16 (quarters in
-- [-2, 2]), so the low-precision reference needs no input rounding.
local function quarters(shape) return T.map(T.rand_list(shape, -8, 8, true), function(v) return v / 4 end) end

-- ---- matmul's shape cases ------------------------------------------------------

local cases = {
  {{5}, {5}},                 -- dot -> 0-dim
  {{3, 5}, {5}},              -- mv
  {{5}, {5, 4}},              -- vector @ matrix
  {{3, 5}, {5, 4}},           -- mm
  {{2, 3, 5}, {5}},           -- batched mv
  {{5}, {2, 5, 4}},           -- vector @ batch
  {{2, 3, 5}, {5, 4}},        -- folded into one GEMM
  {{3, 5}, {2, 5, 4}},        -- matrix broadcast over b's batch
  {{2, 3, 5}, {2, 5, 4}},     -- bmm
  {{2, 1, 3, 5}, {4, 5, 6}},  -- batch broadcasting (2,1) with (4)
  {{1, 3, 2, 5}, {4, 1, 5, 3}}, -- broadcasting on both sides
  {{2, 2, 3, 5}, {5}},        -- 4-D @ 1-D
  {{1, 1, 3, 5}, {5, 2}},     -- size-1 batch dims
}

test("matmul matches the reference on every shape case (float32, float64)", function()
  for _, dt in ipairs({"float64", "float32"}) do
    for _, c in ipairs(cases) do
      local sa, sb = c[1], c[2]
      local av, bv = T.rand_list(sa), T.rand_list(sb)
      local a, b = torch.tensor(av, {dtype = dt}), torch.tensor(bv, {dtype = dt})
      local ref, shape = matmul_ref(av, sa, bv, sb)
      local what = dt .. " " .. T.fmt(sa) .. " @ " .. T.fmt(sb)
      local r = torch.matmul(a, b)
      eq(tostring(r.shape), shape_str(shape), what .. " shape")
      eq(r.dtype, "torch." .. dt, what .. " dtype")
      close(r, ref, tol[dt], tol[dt], what)
      close(a:matmul(b), ref, tol[dt], tol[dt], what .. " (method)")
    end
  end
end)

test("matmul on float16, bfloat16 and integer dtypes", function()
  for _, dt in ipairs({"float16", "bfloat16", "int64", "int32", "uint8"}) do
    for _, c in ipairs(cases) do
      local sa, sb = c[1], c[2]
      local av, bv
      if dt == "uint8" then av, bv = T.rand_list(sa, 0, 9, true), T.rand_list(sb, 0, 9, true)
      elseif dt:match("int") then av, bv = T.rand_list(sa, -9, 9, true), T.rand_list(sb, -9, 9, true)
      else av, bv = quarters(sa), quarters(sb) end
      local ref, shape = matmul_ref(av, sa, bv, sb)
      if dt == "uint8" then ref = T.map(ref, function(x) return x % 256 end) end
      local r = torch.matmul(torch.tensor(av, {dtype = dt}), torch.tensor(bv, {dtype = dt}))
      local what = dt .. " " .. T.fmt(sa) .. " @ " .. T.fmt(sb)
      eq(tostring(r.shape), shape_str(shape), what .. " shape")
      eq(r.dtype, "torch." .. dt, what .. " dtype")
      if tol[dt] then close(r:double(), ref, tol[dt], 1e-2, what)
      else close(r, ref, 0, 0, what) end
    end
  end
end)

test("integer products wrap around like torch's", function()
  local a = torch.tensor({{200, 100}}, {dtype = "uint8"})
  local b = torch.tensor({{2}, {1}}, {dtype = "uint8"})
  close(a:mm(b), {{(400 + 100) % 256}}, 0, 0, "uint8 wraps mod 256")
  local big = torch.tensor({{1 << 62, 1 << 62}}, {dtype = "int64"})
  close(big:mm(torch.tensor({{2}, {0}})), {{math.mininteger}}, 0, 0, "int64 wraps mod 2^64")
end)

test("mm, bmm, mv, dot as functions and methods", function()
  for _, dt in ipairs({"float64", "float32", "int64"}) do
    local ints = dt == "int64"
    local function rl(s) return ints and T.rand_list(s, -5, 5, true) or T.rand_list(s) end
    local t = function(v) return torch.tensor(v, {dtype = dt}) end
    local av, bv, vv, wv = rl({4, 6}), rl({6, 3}), rl({6}), rl({6})
    local ba, bb = rl({3, 4, 6}), rl({3, 6, 2})
    local ta = tol[dt] or 0
    close(torch.mm(t(av), t(bv)), mat_ref(av, bv, 4, 6, 3), ta, ta, dt .. " mm")
    close(t(av):mm(t(bv)), mat_ref(av, bv, 4, 6, 3), ta, ta, dt .. " :mm")
    local bref = {}
    for i = 1, 3 do bref[i] = mat_ref(ba[i], bb[i], 4, 6, 2) end
    close(torch.bmm(t(ba), t(bb)), bref, ta, ta, dt .. " bmm")
    close(t(ba):bmm(t(bb)), bref, ta, ta, dt .. " :bmm")
    local mv = matmul_ref(av, {4, 6}, vv, {6})
    close(torch.mv(t(av), t(vv)), mv, ta, ta, dt .. " mv")
    close(t(av):mv(t(vv)), mv, ta, ta, dt .. " :mv")
    local d = 0
    for i = 1, 6 do d = d + vv[i] * wv[i] end
    local r = torch.dot(t(vv), t(wv))
    eq(r:dim(), 0, dt .. " dot is 0-dim")
    close(r, {d}, ta, ta, dt .. " dot")
    close(t(vv):dot(t(wv)), {d}, ta, ta, dt .. " :dot")
  end
end)

test("outer and ger promote like a broadcast multiply", function()
  local av, bv = T.rand_list({4}), T.rand_list({3})
  local ref = {}
  for i = 1, 4 do
    ref[i] = {}
    for j = 1, 3 do ref[i][j] = av[i] * bv[j] end
  end
  local a, b = torch.tensor(av, {dtype = "float64"}), torch.tensor(bv, {dtype = "float64"})
  close(torch.outer(a, b), ref, 1e-12, 1e-12, "outer")
  close(a:ger(b), ref, 1e-12, 1e-12, "ger")
  local r = torch.outer(torch.tensor({1, 2}), torch.tensor({0.5, 1.5}))
  eq(r.dtype, "torch.float32", "int outer float")
  close(r, {{0.5, 1.5}, {1, 3}}, 0, 0, "int outer float")
  local bo = torch.outer(torch.tensor({true, false}), torch.tensor({true}))
  eq(bo.dtype, "torch.bool", "bool outer")
  close(bo, {{true}, {false}}, 0, 0, "bool outer")
end)

-- ---- layouts ---------------------------------------------------------------

test("transposed, strided, expanded and permuted operands", function()
  for _, dt in ipairs({"float32", "float64", "float16", "int64"}) do
    local ints = dt == "int64"
    local function rl(s) return ints and T.rand_list(s, -5, 5, true) or quarters(s) end
    local t = function(v) return torch.tensor(v, {dtype = dt}) end
    local r = tol[dt] or 0
    local av, bv = rl({7, 5}), rl({4, 7})
    -- a:t() and b:t(): BLAS reads both through its trans flags
    local at, bt = t(av):t(), t(bv):t()
    eq(at:is_contiguous(), false, "a:t() is not contiguous")
    close(at:mm(bt), mat_ref(transpose(av), transpose(bv), 5, 7, 4), r, r, dt .. " a:t() @ b:t()")
    close(torch.matmul(at, t(av)), mat_ref(transpose(av), av, 5, 7, 5), r, r, dt .. " a:t() @ a")
    -- rows with step (row stride 2K: still BLAS-readable) and columns with step (a copy first)
    local big = rl({8, 10})
    local rows, cols = {}, {}
    for i = 1, 8, 2 do rows[#rows + 1] = big[i] end
    for i = 1, 8 do
      cols[i] = {}
      for j = 1, 10, 2 do cols[i][#cols[i] + 1] = big[i][j] end
    end
    local x = t(big)
    local xr, xc = x[{{0, 8, 2}}], x[{{}, {0, 10, 2}}]
    eq(xc:is_contiguous(), false, "column slice is not contiguous")
    local wv = rl({10, 3})
    close(xr:matmul(t(wv)), mat_ref(rows, wv, 4, 10, 3), r, r, dt .. " row-stepped @ b")
    close(xc:t():matmul(xc), mat_ref(transpose(cols), cols, 5, 8, 5), r, r, dt .. " col-stepped:t() @ col-stepped")
    -- a vector with a step, an expanded (stride 0) matrix
    local vs = x[{1, {0, 10, 2}}]
    local vref = {big[2][1], big[2][3], big[2][5], big[2][7], big[2][9]}
    close(torch.mv(xc, vs), matmul_ref(cols, {8, 5}, vref, {5}), r, r, dt .. " mv stepped")
    local row = rl({1, 7})
    local e = t(row):expand(3, 7)
    close(e:matmul(t(av)), mat_ref({row[1], row[1], row[1]}, av, 3, 7, 5), r, r, dt .. " expanded @ a")
    -- batched operands transposed in their matrix dims, and permuted batch dims
    local ba, bb = rl({3, 5, 4}), rl({3, 5, 2})
    local bat = t(ba):transpose(1, 2) -- (3, 4, 5)
    local ref = {}
    for i = 1, 3 do ref[i] = mat_ref(transpose(ba[i]), bb[i], 4, 5, 2) end
    close(torch.bmm(bat, t(bb)), ref, r, r, dt .. " bmm of transposed")
    local p = t(rl({4, 3, 2})) -- permute to (3, 2, 4): batch stride 4*... not mergeable with a contiguous b
    local pv = p:tolist()
    local perm = p:permute(1, 2, 0)
    local pl = {}
    for i = 1, 3 do
      pl[i] = {}
      for j = 1, 2 do
        pl[i][j] = {}
        for k = 1, 4 do pl[i][j][k] = pv[k][i][j] end
      end
    end
    local q = rl({2, 3, 4, 2})
    close(torch.matmul(perm, t(q)), matmul_ref(pl, {3, 2, 4}, q, {2, 3, 4, 2}), r, r, dt .. " permuted batch")
  end
end)

test("larger products: threads, the fold into one GEMM, and the blocked integer loop", function()
  local av, bv = T.rand_list({3, 33, 65}), T.rand_list({65, 17})
  local a, b = torch.tensor(av), torch.tensor(bv)
  local ref = {}
  for i = 1, 3 do ref[i] = mat_ref(av[i], bv, 33, 65, 17) end
  close(a:matmul(b), ref, 1e-4, 1e-4, "(3,33,65) @ (65,17) float32")
  close(a:transpose(1, 2):contiguous():transpose(1, 2):matmul(b), ref, 1e-4, 1e-4, "same with a transposed")
  local iv, jv = T.rand_list({130, 90}, -50, 50, true), T.rand_list({90, 100}, -50, 50, true)
  close(torch.mm(torch.tensor(iv), torch.tensor(jv)), mat_ref(iv, jv, 130, 90, 100), 0, 0, "int64 130x90 @ 90x100")
end)

-- dW = dY^T X's shape (a read transposed, M >= 2N, K >= 2M): the float32
-- kernel computes O^T into scratch and transposes it into O (src/cpu/linalg.c)
test("weight-gradient shapes, a:t() @ b with long K: float32 against the reference", function()
  for _, mnk in ipairs({{30, 12, 80}, {64, 8, 300}, {29, 14, 58}, {40, 21, 100}}) do
    local M, N, K = mnk[1], mnk[2], mnk[3]
    local av, bv = T.rand_list({K, M}), T.rand_list({K, N})
    local ref = mat_ref(transpose(av), bv, M, K, N)
    local what = ("(%d,%d):t() @ (%d,%d)"):format(K, M, K, N)
    close(torch.tensor(av):t():matmul(torch.tensor(bv)), ref, 1e-4, 1e-4, what)
    local twice = T.map(ref, function(x) return 2 * x end)
    close(torch.addmm(torch.full({M, N}, 0 / 0), torch.tensor(av):t(), torch.tensor(bv), {beta = 0, alpha = 2}), twice,
      1e-4, 1e-4, what .. " addmm alpha 2 beta 0")
    close(torch.addmm(torch.ones(M, N), torch.tensor(av):t(), torch.tensor(bv), {beta = 1}),
      T.map(ref, function(x) return x + 1 end), 1e-4, 1e-4, what .. " addmm beta 1 (not swapped)")
  end
  -- batched, and a Linear's weight gradient over 120 rows (40 x 10 from K = 120)
  local ba, bb = T.rand_list({3, 90, 40}), T.rand_list({3, 90, 15})
  local bref = {}
  for i = 1, 3 do bref[i] = mat_ref(transpose(ba[i]), bb[i], 40, 90, 15) end
  close(torch.bmm(torch.tensor(ba):transpose(1, 2), torch.tensor(bb)), bref, 1e-4, 1e-4, "bmm of (3,90,40)^T @ (3,90,15)")
  local x, gy = torch.randn(120, 10), torch.randn(120, 40)
  local lin = nn.Linear(10, 40)
  lin(x):backward(gy)
  close(lin.weight.grad, gy:double():t():matmul(x:double()), 1e-4, 1e-4, "Linear weight gradient")
end)

test("1024x1024 float32 spot checks", function()
  local a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
  local c = a:matmul(b)
  eq(tostring(c.shape), "torch.Size([1024, 1024])", "shape")
  local ct = a:t():matmul(b)
  for _, ij in ipairs({{0, 0}, {17, 1000}, {1023, 5}, {511, 511}}) do
    local i, j = ij[1], ij[2]
    local ar, bc, at = a[i]:tolist(), b[{{}, j}]:tolist(), a[{{}, i}]:tolist()
    local s, st = 0, 0
    for k = 1, 1024 do s, st = s + ar[k] * bc[k], st + at[k] * bc[k] end
    close(c[{i, j}], {s}, 1e-4, 1e-3, ("c[%d][%d]"):format(i, j))
    close(ct[{i, j}], {st}, 1e-4, 1e-3, ("(a:t() @ b)[%d][%d]"):format(i, j))
  end
end)

-- ---- addmm -------------------------------------------------------------------

test("addmm with alpha, beta and broadcast bias", function()
  local av, bv = T.rand_list({3, 4}), T.rand_list({4, 5})
  local a, b = torch.tensor(av, {dtype = "float64"}), torch.tensor(bv, {dtype = "float64"})
  local p = mat_ref(av, bv, 3, 4, 5)
  local biases = {
    {T.rand_list({3, 5}), function(v, i, j) return v[i][j] end, "(3, 5)"},
    {T.rand_list({5}), function(v, i, j) return v[j] end, "(5)"},
    {T.rand_list({1, 5}), function(v, i, j) return v[1][j] end, "(1, 5)"},
    {T.rand_list({3, 1}), function(v, i, j) return v[i][1] end, "(3, 1)"},
  }
  for _, bs in ipairs(biases) do
    local bias = torch.tensor(bs[1], {dtype = "float64"})
    for _, ab in ipairs({{1, 1}, {0.5, 2}, {-1.5, 0.25}, {0, 3}}) do
      local beta, alpha = ab[1], ab[2]
      local ref = {}
      for i = 1, 3 do
        ref[i] = {}
        for j = 1, 5 do ref[i][j] = beta * bs[2](bs[1], i, j) + alpha * p[i][j] end
      end
      local what = ("addmm bias %s beta %g alpha %g"):format(bs[3], beta, alpha)
      close(torch.addmm(bias, a, b, {beta = beta, alpha = alpha}), ref, 1e-10, 1e-10, what)
      close(bias:addmm(a, b, {beta = beta, alpha = alpha}), ref, 1e-10, 1e-10, what .. " (method)")
    end
  end
  local ref = {}
  for i = 1, 3 do
    ref[i] = {}
    for j = 1, 5 do ref[i][j] = 7 + p[i][j] end
  end
  close(torch.addmm(torch.tensor(7.0, {dtype = "float64"}), a, b), ref, 1e-10, 1e-10, "0-dim bias, defaults")
  -- transposed operands through BLAS, with beta reading the bias copy
  local at = torch.tensor(transpose(av), {dtype = "float32"}):t()
  local r = torch.addmm(torch.ones(5, {dtype = "float32"}), at, torch.tensor(bv, {dtype = "float32"}), {beta = 2})
  close(r, T.map(p, function(x) return x + 2 end), 1e-4, 1e-4, "addmm float32 transposed a")
end)

test("addmm with beta 0 ignores NaN and inf in the bias, as torch", function()
  local av, bv = T.rand_list({2, 3}), T.rand_list({3, 2})
  for _, dt in ipairs({"float32", "float64", "float16"}) do
    local bias = torch.tensor({{0 / 0, 1 / 0}, {-1 / 0, 0 / 0}}, {dtype = dt})
    local a, b = torch.tensor(quarters({2, 3}), {dtype = dt}), torch.tensor(quarters({3, 2}), {dtype = dt})
    local ref = mat_ref(a:double():tolist(), b:double():tolist(), 2, 3, 2)
    close(torch.addmm(bias, a, b, {beta = 0}):double(), ref, 1e-2, 1e-2, dt .. " beta 0")
  end
  local r = torch.addmm(torch.tensor({{0 / 0}}), torch.tensor(av), torch.tensor(bv), {beta = 0, alpha = 2})
  eq(r[{0, 0}]:item() == r[{0, 0}]:item(), true, "no NaN from the bias")
end)

test("addmm on integers", function()
  local av, bv, cv = T.rand_list({3, 4}, -5, 5, true), T.rand_list({4, 2}, -5, 5, true), T.rand_list({3, 2}, -5, 5, true)
  local p = mat_ref(av, bv, 3, 4, 2)
  local ref = {}
  for i = 1, 3 do
    ref[i] = {}
    for j = 1, 2 do ref[i][j] = 2 * cv[i][j] - 3 * p[i][j] end
  end
  local r = torch.addmm(torch.tensor(cv), torch.tensor(av), torch.tensor(bv), {beta = 2, alpha = -3})
  eq(r.dtype, "torch.int64", "int addmm dtype")
  close(r, ref, 0, 0, "int addmm")
  raises(function() return torch.addmm(torch.tensor(cv), torch.tensor(av), torch.tensor(bv), {alpha = 0.5}) end,
    "addmm: for integer tensors alpha and beta must be integers")
end)

-- ---- empty and degenerate ------------------------------------------------------

test("empty K gives zeros, empty M, N or batch give empty results", function()
  for _, dt in ipairs({"float32", "float64", "float16", "int64"}) do
    local z = torch.ones(3, 0, {dtype = dt}):matmul(torch.ones(0, 4, {dtype = dt}))
    eq(tostring(z.shape), "torch.Size([3, 4])", dt .. " K=0 shape")
    close(z:double(), T.map(T.rand_list({3, 4}), function() return 0 end), 0, 0, dt .. " K=0 zeros")
    close(torch.dot(torch.ones(0, {dtype = dt}), torch.ones(0, {dtype = dt})):double(), {0}, 0, 0, dt .. " empty dot")
    close(torch.mv(torch.ones(2, 0, {dtype = dt}), torch.ones(0, {dtype = dt})):double(), {0, 0}, 0, 0, dt .. " mv K=0")
    local bz = torch.bmm(torch.ones(2, 3, 0, {dtype = dt}), torch.ones(2, 0, 1, {dtype = dt}))
    close(bz:double(), {{{0}, {0}, {0}}, {{0}, {0}, {0}}}, 0, 0, dt .. " bmm K=0")
    local bias = torch.tensor({1, 2}, {dtype = dt})
    close(torch.addmm(bias, torch.ones(3, 0, {dtype = dt}), torch.ones(0, 2, {dtype = dt}), {beta = 3}):double(),
      {{3, 6}, {3, 6}, {3, 6}}, 0, 0, dt .. " addmm K=0 is beta*bias")
    local shapes = {
      {{0, 5}, {5, 4}, "torch.Size([0, 4])"}, {{3, 5}, {5, 0}, "torch.Size([3, 0])"},
      {{0, 3, 5}, {5, 2}, "torch.Size([0, 3, 2])"}, {{2, 0, 5}, {2, 5, 3}, "torch.Size([2, 0, 3])"},
      {{0, 1, 3, 5}, {4, 5, 2}, "torch.Size([0, 4, 3, 2])"}, {{5}, {5, 0}, "torch.Size([0])"},
      {{0, 5}, {5}, "torch.Size([0])"},
    }
    for _, s in ipairs(shapes) do
      local r = torch.matmul(torch.ones(s[1], {dtype = dt}), torch.ones(s[2], {dtype = dt}))
      eq(tostring(r.shape), s[3], dt .. " " .. T.fmt(s[1]) .. " @ " .. T.fmt(s[2]))
      eq(r:numel(), 0, "empty result")
    end
  end
end)

-- ---- errors ------------------------------------------------------------------------

test("shape mismatches name both shapes", function()
  local r = torch.rand
  raises(function() return torch.matmul(r(3, 4), r(5, 6)) end, "matmul: shapes (3, 4) and (5, 6) cannot be multiplied")
  raises(function() return r(3, 4):matmul(r(5, 6)) end, "matmul: shapes (3, 4) and (5, 6) cannot be multiplied")
  raises(function() return torch.matmul(r(3), r(4)) end, "matmul: shapes (3,) and (4,) cannot be multiplied")
  raises(function() return torch.matmul(r(2, 3, 4), r(3)) end, "matmul: shapes (2, 3, 4) and (3,) cannot be multiplied")
  raises(function() return torch.matmul(r(2, 3, 4), r(3, 4, 5)) end,
    "matmul: shapes (2, 3, 4) and (3, 4, 5) cannot be multiplied (their batch dims do not broadcast)")
  raises(function() return torch.mm(r(3, 4), r(5, 6)) end, "mm: shapes (3, 4) and (5, 6) cannot be multiplied")
  raises(function() return torch.bmm(r(2, 3, 4), r(2, 5, 6)) end, "bmm: shapes (2, 3, 4) and (2, 5, 6) cannot be multiplied")
  raises(function() return torch.bmm(r(2, 3, 4), r(3, 4, 6)) end, "bmm: shapes (2, 3, 4) and (3, 4, 6) cannot be multiplied")
  raises(function() return torch.mv(r(3, 4), r(5)) end, "mv: shapes (3, 4) and (5,) cannot be multiplied")
  raises(function() return torch.dot(r(3), r(4)) end,
    "dot: expected both vectors to have the same number of elements, but got 3 and 4")
  raises(function() return torch.addmm(r(3, 6), r(3, 4), r(5, 6)) end, "addmm: shapes (3, 4) and (5, 6) cannot be multiplied")
  raises(function() return torch.addmm(r(4), r(3, 4), r(4, 6)) end,
    "addmm: bias of shape (4,) cannot be broadcast to the product's shape (3, 6)")
  raises(function() return torch.addmm(r(2, 3, 6), r(3, 4), r(4, 6)) end,
    "addmm: bias of shape (2, 3, 6) cannot be broadcast to the product's shape (3, 6)")
end)

test("wrong ranks", function()
  local r = torch.rand
  raises(function() return torch.matmul(torch.tensor(2.0), r(3)) end,
    "matmul: both arguments need to be at least 1-D, but they are 0-D and 1-D")
  raises(function() return r(3, 2):matmul(torch.tensor(2.0)) end,
    "matmul: both arguments need to be at least 1-D, but they are 2-D and 0-D")
  raises(function() return torch.mm(r(2, 3, 4), r(4, 5)) end, "mm: expected 2-D matrices, but got 3-D and 2-D")
  raises(function() return torch.mm(r(3), r(3, 5)) end, "mm: expected 2-D matrices, but got 1-D and 2-D")
  raises(function() return torch.bmm(r(3, 4), r(2, 4, 5)) end, "bmm: expected 3-D tensors, but got 2-D and 3-D")
  raises(function() return torch.mv(r(3, 4), r(4, 1)) end, "mv: expected a 2-D matrix and a 1-D vector, but got 2-D and 2-D")
  raises(function() return torch.dot(r(3, 1), r(3)) end, "dot: expected 1-D tensors, but got 2-D and 1-D")
  raises(function() return torch.addmm(r(3, 5), r(3), r(3, 5)) end, "addmm: expected 2-D matrices, but got 1-D and 2-D")
  raises(function() return torch.outer(r(3, 1), r(3)) end, "outer: expected 1-D tensors, but got 2-D and 1-D")
end)

test("dtype mismatches and bool", function()
  local a, d = torch.rand(3, 4), torch.rand(4, 2, {dtype = "float64"})
  raises(function() return torch.matmul(a, d) end,
    "matmul: expected both operands to have the same dtype, but got: float32 != float64")
  raises(function() return a:mm(d) end, "mm: expected both operands to have the same dtype, but got: float32 != float64")
  raises(function() return torch.matmul(torch.tensor({1, 2}), torch.tensor({1.0, 2.0})) end,
    "matmul: expected both operands to have the same dtype, but got: int64 != float32")
  raises(function() return torch.dot(torch.rand(2, {dtype = "float16"}), torch.rand(2, {dtype = "bfloat16"})) end,
    "dot: expected both operands to have the same dtype, but got: float16 != bfloat16")
  raises(function() return torch.addmm(torch.rand(2, {dtype = "float64"}), a, torch.rand(4, 2)) end,
    "addmm: expected all operands to have the same dtype, but got: float32 != float64")
  local bt = torch.tensor({{true, false}, {false, true}})
  raises(function() return bt:matmul(bt) end, "matmul is not implemented for bool tensors")
  raises(function() return torch.mm(bt, bt) end, "mm is not implemented for bool tensors")
end)

test("wrong argument types", function()
  local a = torch.rand(2, 2)
  raises(function() return torch.matmul("x", a) end, "bad argument #1 to 'matmul' (tensor expected, got string)")
  raises(function() return torch.matmul(a, 3) end, "bad argument #2 to 'matmul' (tensor expected, got number)")
  raises(function() return a:matmul(nil) end, "bad argument #1 to 'matmul' (tensor expected, got nil)")
  raises(function() return torch.mm(a) end, "bad argument #2 to 'mm' (tensor expected, got no value)")
  raises(function() return torch.bmm({}, a) end, "bad argument #1 to 'bmm' (tensor expected, got table)")
  raises(function() return torch.dot(a, true) end, "bad argument #2 to 'dot' (tensor expected, got boolean)")
  raises(function() return torch.mv(1, a) end, "bad argument #1 to 'mv' (tensor expected, got number)")
  raises(function() return torch.outer(a, "y") end, "bad argument #2 to 'outer' (tensor expected, got string)")
  raises(function() return torch.addmm(a, a, "z") end, "bad argument #3 to 'addmm' (tensor expected, got string)")
  raises(function() return torch.addmm(a, a, a, 2) end, "bad argument #4 to 'addmm' (options table {beta=, alpha=} expected")
  raises(function() return torch.addmm(a, a, a, {beta = "x"}) end, "option 'beta' must be a number")
  -- the session goes on
  close(a:matmul(torch.eye(2)), a:tolist(), 0, 0, "usable after errors")
end)

test("(batch..., M, K) @ (K, N) folded into one GEMM: non-contiguous a, both gradients, finite differences", function()
  local G = require "gradcheck"
  -- a batch_first sequence as a transposed view (the fold copies it), b as w:t() (column-major)
  G.check("matmul (L,N,K)^T01 @ w:t()", function(a, w) return a:transpose(0, 1):matmul(w:t()) end,
    {T.rand_list({4, 3, 5}), T.rand_list({6, 5})}, {tol = 1e-7})
  G.check("matmul 4-D @ 2-D", function(a, b) return a:matmul(b) end,
    {T.rand_list({2, 3, 2, 4}), T.rand_list({4, 3})}, {tol = 1e-7})
  G.check("matmul permuted 4-D @ 2-D", function(a, b) return a:permute(2, 0, 1, 3):matmul(b) end,
    {T.rand_list({2, 3, 2, 4}), T.rand_list({4, 3})}, {tol = 1e-7})
  -- the weight gradient equals the per-batch products summed (float64 reference)
  local a = torch.randn(5, 7, 3, {dtype = "float64"}):transpose(0, 1)
  local w = torch.randn(4, 3, {dtype = "float64", requires_grad = true})
  local g = torch.randn(7, 5, 4, {dtype = "float64"})
  a:matmul(w:t()):backward(g)
  local want = torch.zeros(4, 3, {dtype = "float64"})
  for i = 0, 6 do want = want + g[i]:t():mm(a[i]) end
  close(w.grad, want, 1e-12, 1e-12, "weight gradient of a Linear over a sequence")
  T.ok(w.grad:is_contiguous(), "w:t()'s gradient comes back contiguous")
  -- empty batch and empty K
  local e = torch.zeros(0, 2, 3, {requires_grad = true})
  local b = torch.randn(3, 4, {requires_grad = true})
  e:matmul(b):sum():backward()
  eq(b.grad:abs():sum():item(), 0, "empty batch: zero gradient")
end)

T.run()
