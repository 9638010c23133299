-- Issue 21's added ops beyond their oracle cases (tests/fixtures/ops/
-- cases_more21.py holds PyTorch's values and gradients): gradients against
-- finite differences (in float64, through every path of einsum's
-- contraction), as_strided's and tensor_split's sharing of storage, and the
-- messages bad input gets, raised at the user's line.
local T = require "harness"
local G = require "gradcheck"
local test, eq, ok, close = T.test, T.eq, T.ok, T.close

-- the message of fn's error, checked to be positioned at this file's line
local function message(fn)
  local okc, err = pcall(fn)
  ok(not okc, "expected an error")
  err = tostring(err)
  ok(err:find("^[^:]*test_more21%.lua:%d+: "), "raised at the user's line: " .. err)
  return (err:gsub("^[^:]*:%d+: ", ""))
end

local function says(fn, text)
  local m = message(fn)
  ok(m:find(text, 1, true), ("expected '%s' in '%s'"):format(text, m))
end

local list = T.rand_list -- nested lists of values in [-2, 2)

test("einsum's gradients match finite differences on every contraction path", function()
  local cases = {
    {"ij,jk->ik", {2, 3}, {3, 4}},          -- one bmm
    {"bij,bjk->bik", {2, 2, 3}, {2, 3, 2}}, -- batch dims
    {"ii->i", {3, 3}},                      -- a diagonal
    {"iij->j", {2, 2, 3}},                  -- a diagonal summed
    {"ij->", {2, 3}},                       -- everything summed
    {"i,j->ij", {3}, {2}},                  -- a product without sum
    {"...ij,...jk->...ik", {2, 2, 3}, {3, 2}},
    {"ij,jk,kl->il", {2, 3}, {3, 2}, {2, 2}},
    {"bn,anm,bm->ba", {2, 3}, {2, 3, 2}, {2, 2}},
    {"ij,ij->ij", {2, 1}, {1, 3}},          -- size-1 dims broadcast
    {"ij,jk", {2, 1}, {3, 2}},              -- a broadcast dim summed
  }
  for _, c in ipairs(cases) do
    local lists = {}
    for k = 2, #c do lists[k - 1] = list(c[k]) end
    G.check("einsum " .. c[1], function(...) return torch.einsum(c[1], ...) end, lists)
  end
end)

test("tensordot, kron, cummax, cummin, kthvalue and quantile: gradients by finite differences", function()
  G.check("tensordot", function(a, b) return torch.tensordot(a, b, {{0, 2}, {1, 0}}) end,
    {list({2, 3, 2}), list({2, 2, 3})})
  G.check("kron", function(a, b) return torch.kron(a, b) end, {list({2, 3}), list({2, 1})})
  G.check("cummax", function(a) return (a:cummax(1)) end, {list({2, 7})})
  G.check("cummin", function(a) return (torch.cummin(a, 0)) end, {list({7, 2})})
  G.check("kthvalue", function(a) return (a:kthvalue(2, 0)) end, {list({4, 3})})
  for _, mode in ipairs({"linear", "lower", "higher", "midpoint", "nearest"}) do
    G.check("quantile " .. mode, function(a) return a:quantile(0.3, 1, {interpolation = mode}) end, {list({2, 6})})
  end
  G.check("quantile in q", function(a, q) return torch.quantile(a, q, 0) end, {list({5, 2}), {0.1, 0.55, 0.8}})
  G.check("nanquantile", function(a) return a:nanquantile(0.4) end, {list({3, 3})})
end)

test("as_strided is a view of the storage, with PyTorch's gradient where elements overlap", function()
  local x = torch.arange(12, {dtype = torch.float64})
  local v = x:as_strided({3, 3}, {1, 2})
  eq(v:storage_offset(), 0, "offset")
  eq(v:stride(0), 1, "stride 0")
  eq(v:stride(1), 2, "stride 1")
  x[3] = 40
  close(v[{1, 1}], 40, 0, 0, "a write to the input shows in the view")
  v[{2, 2}]:fill_(-1)
  eq(x[6]:item(), -1, "a write to the view shows in the input")
  local n = torch.arange(12, {dtype = torch.float64}):narrow(0, 2, 5)
  close(n:as_strided({2}, {1}), {2, 3}, 0, 0, "the default offset is the input's")
  close(n:as_strided({2}, {1}, 0), {0, 1}, 0, 0, "an offset counts from the storage's start")
  close(n:as_strided({2}, {1}, {storage_offset = 1}), {1, 2}, 0, 0, "the offset as an option")
  -- overlapping outputs sum, an expanded input shares: against finite differences
  G.check("as_strided overlap", function(a) return a:as_strided({2, 3}, {1, 1}, 0) end, {list({6})})
  G.check("as_strided of a view", function(a) return a:t():as_strided({2, 2}, {1, 3}, 1) end, {list({2, 3})})
  G.check("as_strided of an expand", function(a) return a:expand(2, 6):as_strided({3}, {2}, 1) end, {list({6})})
end)

test("tensor_split gives views in a Lua list", function()
  local x = torch.arange(7)
  local parts = torch.tensor_split(x, {2, 5})
  eq(#parts, 3, "three pieces")
  parts[2][0] = 100
  eq(x[2]:item(), 100, "a piece is a view")
  ok(not pcall(function() return parts[0] end), "index 0 of a Lua list raises")
end)

test("sums in an asked dtype wrap around as PyTorch's", function()
  local x = torch.tensor({2147483647, 5}, {dtype = torch.int32})
  local s = x:sum({dtype = torch.int32})
  eq(s.dtype, torch.int32, "dtype")
  eq(s:item(), -2147483644, "wrapped")
  eq(x:sum().dtype, torch.int64, "without dtype, int64")
  eq(x:sum():item(), 2147483652, "int64 does not wrap")
end)

test("bad input raises a message that says what is wrong, at the user's line", function()
  local a, b = torch.randn(2, 3), torch.randn(3, 4)
  says(function() return torch.einsum("ij,jk->ii", a, b) end, "einsum(): output subscript i appears more than once in the output")
  says(function() return torch.einsum("ij,kl", a, b, a) end, "einsum(): more operands were provided than specified in the equation")
  says(function() return torch.einsum("ij,jk,kl", a, b) end, "einsum(): fewer operands were provided")
  says(function() return torch.einsum("i$", a) end, "einsum(): invalid subscript given at index 1 in the equation string, subscripts must be in [a-zA-Z]")
  says(function() return torch.einsum("ij,jk", a, torch.randn(4, 4)) end,
    "einsum(): subscript j has size 4 for operand 1 which does not broadcast with previously seen size 3")
  says(function() return torch.einsum("ijk", a) end,
    "the number of subscripts in the equation (3) does not match the number of dimensions (2) for operand 0")
  says(function() return torch.einsum("ii", a) end, "subscript i is repeated for operand 0 but the sizes don't match, 3 != 2")
  says(function() return torch.einsum("i,i", torch.randn(2), torch.randn(2, {dtype = torch.float64})) end,
    "einsum(): expected the operands of a contraction to have the same dtype, but got torch.float32 and torch.float64")
  says(function() return torch.einsum("ij", "x") end, "einsum(): operand 0 must be a tensor, got \"x\"")
  says(function() return torch.einsum("ij,jk", nil, b) end, "einsum(): operand 0 must be a tensor, got nil")
  says(function() return torch.einsum(a, {0, 1}, nil, {1, 2}) end, "einsum(): operand 1 must be a tensor, got nil")
  says(function() return torch.einsum(3) end, "einsum(): argument 1 must be the equation (a string) or an operand")
  says(function() return torch.einsum() end, "einsum(): must specify the equation string and at least one operand")
  says(function() return torch.einsum(a, {0, 60}) end, "einsum(): subscript in subscript list is not within the valid range [0, 52), got 60")
  says(function() return torch.tensordot(a, b, 2) end,
    "tensordot: contracted dimensions need to match, but first has size 2 in dim 0 and second has size 3 in dim 0")
  says(function() return torch.tensordot(a, b, -1) end, "tensordot expects dims >= 0, but got dims=-1")
  says(function() return torch.tensordot(a, b, 5) end, "tensordot expects dims <= the rank of each operand")
  says(function() return torch.tensordot(a, b, "x") end, "tensordot expects dims to be an integer or a list of two lists")
  says(function() return torch.tensordot(a, b, {{1}, {0, 1}}) end, "both dimension lists should have same length")
  says(function() return torch.tensordot(a, b, {{7}, {0}}) end, "Dimension out of range")
  says(function() return torch.kron(a, 2) end, "bad argument #2 to 'kron' (tensor expected, got number)")
  says(function() return torch.tensor_split(a, 0) end, "tensor_split: number of sections must be larger than 0, got 0")
  says(function() return a:tensor_split("x") end, "indices_or_sections must be an integer, a list of integers or an int64 tensor")
  says(function() return a:tensor_split({1, 1.5}) end, "tensor_split: indices must be integers, got 1.5 at position 2")
  says(function() return torch.tensor_split(torch.tensor(1.0), 2) end, "tensor_split expected at least a 1-dimensional tensor")
  says(function() return a:tensor_split(torch.tensor({1}, {dtype = torch.int32})) end,
    "tensor_split expected tensor_indices_or_sections to have dtype of long, but got torch.int32")
  says(function() return a:cummax() end, "cummax: missing argument 'dim'")
  says(function() return a:cummin(5) end, "Dimension out of range (expected to be in range of [-2, 1], but got 5)")
  says(function() return a:kthvalue(4, 1) end, "kthvalue(): selected number k out of range for dimension 1")
  says(function() return a:kthvalue(1.5) end, "kthvalue: k must be an integer, got 1.5")
  says(function() return torch.zeros(0, 3):kthvalue(1, 0) end, "kthvalue(): Expected reduction dim 0 to have non-zero size.")
  says(function() return torch.ones(3, {dtype = torch.bool}):kthvalue(1) end, "kthvalue: not implemented for bool tensors")
  says(function() return a:quantile(1.5) end, "quantile() q must be in the range [0, 1] but got 1.5")
  says(function() return a:quantile("x") end, "quantile() q must be a number or a tensor, got \"x\"")
  says(function() return a:quantile(torch.tensor({0.5, 2.0})) end, "quantile() q values must be in the range [0, 1]")
  says(function() return a:quantile(torch.tensor({0.5}, {dtype = torch.float64})) end,
    "quantile() q tensor must be same dtype as the input tensor")
  says(function() return torch.arange(3):quantile(0.5) end, "quantile() input tensor must be either float or double dtype")
  says(function() return a:nanquantile(0.5, {interpolation = "cubic"}) end,
    "nanquantile() interpolation must be one of linear, lower, higher, midpoint or nearest, but got \"cubic\"")
  says(function() return torch.zeros(0):quantile(0.5) end, "quantile() input tensor must be non-empty")
  says(function() return a:quantile(0.5, {interpolaton = "lower"}) end, "quantile: unknown option 'interpolaton'")
  says(function() return a:as_strided({3, 3}, {4, 2}, 1) end,
    "as_strided: sizes [3, 3], strides [4, 2] and storage offset 1 need a storage of 14 elements, but the tensor's storage has 6 (out of bounds)")
  says(function() return a:as_strided({3}, {-1}) end, "as_strided: negative strides are not supported, got strides [-1]")
  says(function() return a:as_strided({-3}, {1}) end, "as_strided: sizes must be non-negative, got [-3]")
  says(function() return a:as_strided({3}, {1}, -1) end, "as_strided: invalid storage offset -1")
  says(function() return a:as_strided({3, 3}, {1}) end, "as_strided: mismatch in length of strides and shape (2 sizes, 1 strides)")
  says(function() return a:as_strided({2 ^ 40 // 1, 2 ^ 40 // 1}, {0, 0}) end, "as_strided: sizes [1099511627776, 1099511627776] hold more than 2^63 elements")
  says(function() return a:as_strided({2}, {1}, {storage_ofset = 1}) end, "as_strided: unknown option 'storage_ofset'")
  says(function() return a:as_strided("x", {1}) end, "bad argument #1 to 'as_strided' (size (a list of integers or a torch.Size) expected, got string)")
  says(function() return torch.as_strided(a, {1}, 2) end, "bad argument #3 to 'as_strided' (stride (a list of integers or a torch.Size) expected, got number)")
  says(function() return a:index_select(0, torch.tensor({0.0})) end,
    "index_select: expected dtype int64 for index, got float32 (int32 works too")
  says(function() return a:index_add(0, torch.tensor({0}, {dtype = torch.int16}), torch.ones(1, 3)) end,
    "index_add: expected dtype int32 or int64 for index, got torch.int16")
  says(function() return a:gather(0, torch.tensor({{0}}, {dtype = torch.int32})) end, "gather: expected dtype int64 for index, got int32")
end)

T.run()
