-- Printing: tostring(t) against PyTorch's exact output (torch/_tensor_str.py)
-- for every layout rule, a plain-Lua reference formatter on random inputs,
-- set_printoptions, and the error paths.
local T = require "harness"
-- Exact printing of CPU tensors; on the cuda pass too (device printing: test_cuda_api.lua).
local test, eq, raises = T.cpu_test, T.eq, T.raises

local function str(t) return tostring(t) end

-- Every case that changes the options puts the defaults back, even on failure.
local function with_options(opts, fn)
  torch.set_printoptions(opts)
  local ok, err = pcall(fn)
  torch.set_printoptions({profile = "default"})
  if not ok then error(err, 0) end
end

test("1-D and 2-D floats: shared width, 4 decimals, aligned rows", function()
  eq(str(torch.tensor({{0.1234, -1.5}, {2, 3}})), "tensor([[ 0.1234, -1.5000],\n        [ 2.0000,  3.0000]])")
  eq(str(torch.tensor({0.5, -12.25, 100})), "tensor([  0.5000, -12.2500, 100.0000])")
  eq(str(torch.tensor({1.23456789})), "tensor([1.2346])")
  eq(print == nil, false, "print exists")
end)

test("integer-valued floats print as '1.', integers and negatives aligned", function()
  eq(str(torch.tensor({1, 2, 3})), "tensor([1, 2, 3])")
  eq(str(torch.tensor({-1, 20, 3})), "tensor([-1, 20,  3])")
  eq(str(torch.tensor({1.0, 2.0, 3.0})), "tensor([1., 2., 3.])")
  eq(str(torch.tensor({-1.0, 10.0})), "tensor([-1., 10.])")
  eq(str(torch.tensor({{1, -2}, {300, 4}})), "tensor([[  1,  -2],\n        [300,   4]])")
end)

test("dtype suffixes: named except float32, int64 and bool", function()
  eq(str(torch.tensor({1, 2, 3}, {dtype = "float64"})), "tensor([1., 2., 3.], dtype=torch.float64)")
  eq(str(torch.tensor({1, 2}, {dtype = "int32"})), "tensor([1, 2], dtype=torch.int32)")
  eq(str(torch.tensor({1, 200}, {dtype = "uint8"})), "tensor([  1, 200], dtype=torch.uint8)")
  eq(str(torch.tensor({0.1, 0.2}, {dtype = "float16"})), "tensor([0.1000, 0.2000], dtype=torch.float16)")
  eq(str(torch.tensor({1.5, 2}, {dtype = "bfloat16"})), "tensor([1.5000, 2.0000], dtype=torch.bfloat16)")
  -- float16 prints its stored value: 0.1 is 0.0999755859375 in half
  eq(str(torch.tensor({0.1, 3.14159}, {dtype = "float16"})), "tensor([0.1000, 3.1406], dtype=torch.float16)")
  eq(str(torch.tensor({1, 2}, {dtype = "int64"})), "tensor([1, 2])")
end)

test("bool tensors and 0-dim tensors", function()
  eq(str(torch.tensor({true, false})), "tensor([ True, False])")
  eq(str(torch.tensor({true, true})), "tensor([True, True])")
  eq(str(torch.tensor({{false}, {true}})), "tensor([[False],\n        [ True]])")
  eq(str(torch.tensor(true)), "tensor(True)")
  eq(str(torch.tensor(false)), "tensor(False)")
  eq(str(torch.tensor(3.5)), "tensor(3.5000)")
  eq(str(torch.tensor(2.0)), "tensor(2.)")
  eq(str(torch.tensor(-7)), "tensor(-7)")
  eq(str(torch.tensor(2.5, {dtype = "float64"})), "tensor(2.5000, dtype=torch.float64)")
  eq(str(torch.tensor(1e-9)), "tensor(1.0000e-09)")
  eq(str(torch.tensor(0 / 0)), "tensor(nan)")
end)

test("empty tensors: [] with size unless 1-D, dtype unless float32", function()
  eq(str(torch.zeros(0)), "tensor([])")
  eq(str(torch.zeros(0, 3)), "tensor([], size=(0, 3))")
  eq(str(torch.zeros(3, 0)), "tensor([], size=(3, 0))")
  eq(str(torch.zeros(0, {dtype = "int64"})), "tensor([], dtype=torch.int64)")
  eq(str(torch.zeros(2, 0, 3, {dtype = "bool"})), "tensor([], size=(2, 0, 3), dtype=torch.bool)")
  eq(str(torch.zeros(0, {dtype = "float64"})), "tensor([], dtype=torch.float64)")
end)

test("scientific notation: wide range, huge or tiny values", function()
  eq(str(torch.tensor({1e-8, 1e5})), "tensor([1.0000e-08, 1.0000e+05])")
  eq(str(torch.tensor({1e9, 1})), "tensor([1.0000e+09, 1.0000e+00])")       -- max > 1e8
  eq(str(torch.tensor({1.0, 2000.0})), "tensor([1.0000e+00, 2.0000e+03])")     -- integers, ratio > 1000
  eq(str(torch.tensor({1.0, 1000.0})), "tensor([   1., 1000.])")                -- ratio exactly 1000: not sci
  eq(str(torch.tensor({-1e-5, 1})), "tensor([-1.0000e-05,  1.0000e+00])")  -- min < 1e-4
  eq(str(torch.tensor({0.0001, 0.05})), "tensor([1.0000e-04, 5.0000e-02])") -- float32 0.0001 is just below 1e-4
  eq(str(torch.tensor({0.0001, 0.05}, {dtype = "float64"})), "tensor([0.0001, 0.0500], dtype=torch.float64)") -- not below
  eq(str(torch.tensor({0.001, 0.5})), "tensor([0.0010, 0.5000])")
  eq(str(torch.tensor({123456789.0, 1})), "tensor([1.2346e+08, 1.0000e+00])") -- float32 value 123456792
  -- zeros do not count in the range: still 4 decimals
  eq(str(torch.tensor({0, 0.5, 2})), "tensor([0.0000, 0.5000, 2.0000])")
end)

test("nan, inf and negative zero", function()
  local nan, inf = 0 / 0, math.huge
  eq(str(torch.tensor({1.5, nan, inf, -inf})), "tensor([1.5000,    nan,    inf,   -inf])")
  eq(str(torch.tensor({1, inf})), "tensor([1., inf])")
  eq(str(torch.tensor({0, nan})), "tensor([0., nan])")
  eq(str(torch.tensor({nan, nan})), "tensor([nan, nan])")
  eq(str(torch.tensor({-nan, 1})), "tensor([nan, 1.])")
  eq(str(torch.tensor({-0.0, 1.0})), "tensor([-0., 1.])")
  eq(str(torch.tensor({-0.0, 1.5})), "tensor([-0.0000, 1.5000])") -- zeros do not widen the format
  eq(str(torch.tensor({-1.0, 1.5})), "tensor([-1.0000,  1.5000])")
  eq(str(torch.tensor({1e-8, inf, -inf, nan})), "tensor([1.0000e-08,        inf,       -inf,        nan])")
end)

test("3-D tensors: a blank line between matrices", function()
  eq(str(torch.arange(24):reshape(2, 3, 4)),
     "tensor([[[ 0,  1,  2,  3],\n" ..
     "         [ 4,  5,  6,  7],\n" ..
     "         [ 8,  9, 10, 11]],\n" ..
     "\n" ..
     "        [[12, 13, 14, 15],\n" ..
     "         [16, 17, 18, 19],\n" ..
     "         [20, 21, 22, 23]]])")
  -- 4-D: two blank lines between 3-D blocks
  eq(str(torch.arange(4.):reshape(2, 1, 1, 2)),
     "tensor([[[[0., 1.]]],\n\n\n        [[[2., 3.]]]])")
end)

test("long rows wrap at 80 columns under the first element", function()
  local want = "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
  for r = 14, 98, 14 do
    local row = {}
    for v = r, math.min(r + 13, 99) do row[#row + 1] = ("%2d."):format(v) end
    want = want .. "        " .. table.concat(row, ", ") .. (r + 14 <= 99 and ",\n" or "")
  end
  eq(str(torch.arange(100.)), want .. "])")
  eq(str(torch.arange(40.):reshape(2, 20)),
     "tensor([[ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n" ..
     "         14., 15., 16., 17., 18., 19.],\n" ..
     "        [20., 21., 22., 23., 24., 25., 26., 27., 28., 29., 30., 31., 32., 33.,\n" ..
     "         34., 35., 36., 37., 38., 39.]])")
end)

test("suffixes move to their own line when the last line is full", function()
  eq(str(torch.arange(14., {dtype = "float64"})),
     "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.],\n" ..
     "       dtype=torch.float64)")
  eq(str(torch.arange(10., {dtype = "float64"})),
     "tensor([0., 1., 2., 3., 4., 5., 6., 7., 8., 9.], dtype=torch.float64)")
  -- the boundary: PyTorch counts the last line 2 longer than it is (len - rfind("\n") + 1)
  eq(str(torch.ones(12, {dtype = "float64"})),
     "tensor([1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1.], dtype=torch.float64)")
  eq(str(torch.ones(13, {dtype = "float64"})),
     "tensor([1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1.],\n       dtype=torch.float64)")
  eq(str(torch.ones(2, 13, {dtype = "float64"})),
     "tensor([[1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1.],\n" ..
     "        [1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1.]],\n       dtype=torch.float64)")
  eq(str(torch.ones(2, 12, {dtype = "float64"})),
     "tensor([[1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1.],\n" ..
     "        [1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1.]], dtype=torch.float64)")
end)

test("requires_grad suffix", function()
  eq(str(torch.tensor({1.5, 2}, {requires_grad = true})), "tensor([1.5000, 2.0000], requires_grad=True)")
  eq(str(torch.tensor({1, 2}, {dtype = "float64", requires_grad = true})),
     "tensor([1., 2.], dtype=torch.float64, requires_grad=True)")
  eq(str(torch.zeros(0, {requires_grad = true})), "tensor([], requires_grad=True)")
end)

test("summarised 1-D: 3 items at each edge once numel > 1000", function()
  eq(str(torch.arange(10000)), "tensor([   0,    1,    2,  ..., 9997, 9998, 9999])")
  eq(str(torch.arange(1001)), "tensor([   0,    1,    2,  ...,  998,  999, 1000])")
  -- 1000 elements are not summarised: 80-column rows of 14 ints of width 3
  local s = str(torch.arange(1000))
  eq(select(2, s:gsub("\n", "")), 71, "lines of arange(1000)") -- 14 a line
  eq(s:sub(1, 30), "tensor([  0,   1,   2,   3,   ", "start of arange(1000)")
  eq(s:find("...", 1, true), nil, "no ... in arange(1000)")
  -- the format is chosen from the shown items only, and " ..." is an item when wrapping
  eq(str(torch.arange(2000.)),
     "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n" ..
     "        1.9990e+03])")
  local x = torch.ones(5000)
  x:narrow(0, 2500, 1):fill_(1e-9) -- hidden in the middle: does not switch to sci
  eq(str(x), "tensor([1., 1., 1.,  ..., 1., 1., 1.])")
end)

test("summarised 2-D and 3-D: '...' rows on their own line", function()
  eq(str(torch.arange(10000):reshape(100, 100)),
     "tensor([[   0,    1,    2,  ...,   97,   98,   99],\n" ..
     "        [ 100,  101,  102,  ...,  197,  198,  199],\n" ..
     "        [ 200,  201,  202,  ...,  297,  298,  299],\n" ..
     "        ...,\n" ..
     "        [9700, 9701, 9702,  ..., 9797, 9798, 9799],\n" ..
     "        [9800, 9801, 9802,  ..., 9897, 9898, 9899],\n" ..
     "        [9900, 9901, 9902,  ..., 9997, 9998, 9999]])")
  -- only the summarised dims are cut
  eq(str(torch.arange(2002.):reshape(1001, 2)),
     "tensor([[0.0000e+00, 1.0000e+00],\n" ..
     "        [2.0000e+00, 3.0000e+00],\n" ..
     "        [4.0000e+00, 5.0000e+00],\n" ..
     "        ...,\n" ..
     "        [1.9960e+03, 1.9970e+03],\n" ..
     "        [1.9980e+03, 1.9990e+03],\n" ..
     "        [2.0000e+03, 2.0010e+03]])")
  local s = str(torch.arange(8000):reshape(20, 20, 20))
  local want_head = "tensor([[[   0,    1,    2,  ...,   17,   18,   19],\n" ..
                    "         [  20,   21,   22,  ...,   37,   38,   39],\n" ..
                    "         [  40,   41,   42,  ...,   57,   58,   59],\n" ..
                    "         ...,\n" ..
                    "         [ 340,  341,  342,  ...,  357,  358,  359],\n"
  eq(s:sub(1, #want_head), want_head, "head of a summarised 3-D tensor")
  T.ok(s:find(", 1199]],\n\n        ...,\n\n        [[6800, 6801,", 1, true), "'...' between matrices: " .. s)
  local want_tail = "\n         [7980, 7981, 7982,  ..., 7997, 7998, 7999]]])"
  eq(s:sub(-#want_tail), want_tail, "tail")
end)

test("huge views print at once: only the shown items are read", function()
  local x = torch.zeros(1):expand(1000000, 1000000) -- 1e12 elements, 4 bytes of storage
  eq(str(x),
     "tensor([[0., 0., 0.,  ..., 0., 0., 0.],\n" ..
     "        [0., 0., 0.,  ..., 0., 0., 0.],\n" ..
     "        [0., 0., 0.,  ..., 0., 0., 0.],\n" ..
     "        ...,\n" ..
     "        [0., 0., 0.,  ..., 0., 0., 0.],\n" ..
     "        [0., 0., 0.,  ..., 0., 0., 0.],\n" ..
     "        [0., 0., 0.,  ..., 0., 0., 0.]])")
  eq(str(torch.tensor({true}):expand(100000000)), "tensor([True, True, True,  ..., True, True, True])")
end)

test("non-contiguous tensors print their logical values", function()
  local m = torch.arange(6):reshape(2, 3)
  eq(str(m:t()), "tensor([[0, 3],\n        [1, 4],\n        [2, 5]])")
  eq(str(torch.tensor({{1.5, 2}, {3, 4}}):t()), "tensor([[1.5000, 3.0000],\n        [2.0000, 4.0000]])")
  -- every other element (stride 2), a column (stride 3), an offset narrow, a broadcast row
  eq(str(torch.arange(10.):reshape(5, 2):select(1, 1)), "tensor([1., 3., 5., 7., 9.])")
  eq(str(m:select(1, 2)), "tensor([2, 5])")
  eq(str(torch.arange(10):narrow(0, 7, 3)), "tensor([7, 8, 9])")
  eq(str(torch.tensor({-1, 2}):expand(2, 2)), "tensor([[-1,  2],\n        [-1,  2]])")
  -- a transposed summarised matrix
  eq(str(torch.arange(2000):reshape(2, 1000):t()),
     "tensor([[   0, 1000],\n        [   1, 1001],\n        [   2, 1002],\n        ...,\n" ..
     "        [ 997, 1997],\n        [ 998, 1998],\n        [ 999, 1999]])")
end)

-- A plain-Lua reference of PyTorch's layout for 1-D and 2-D unsummarised
-- float tensors under the default options, from the values alone.
local function ref_str(vals, rows)
  local flat = T.flat(vals)
  local any, amin, amax, int_mode = false, 0, 0, true
  for _, v in ipairs(flat) do
    if v == v and v ~= math.huge and v ~= -math.huge and v ~= 0 then
      local a = math.abs(v)
      if not any or a < amin then amin = a end
      if not any or a > amax then amax = a end
      any = true
      if v ~= math.ceil(v) then int_mode = false end
    end
  end
  local sci = false
  if any then
    sci = amax / amin > 1000 or amax > 1e8 or (not int_mode and amin < 1e-4)
  end
  local function fmt(v)
    if v ~= v then return "nan" end
    if sci then return ("%.4e"):format(v) end
    if int_mode then return ("%.0f"):format(v) .. ((v == math.huge or v == -math.huge) and "" or ".") end
    return ("%.4f"):format(v)
  end
  local width = 1
  for _, v in ipairs(flat) do
    if v == v and v ~= math.huge and v ~= -math.huge and v ~= 0 then width = math.max(width, #fmt(v)) end
  end
  local function vec(list, indent)
    local per = math.max(1, (80 - indent) // (width + 2))
    local lines, line = {}, {}
    for i, v in ipairs(list) do
      local s = fmt(v)
      line[#line + 1] = (" "):rep(width - #s) .. s
      if #line == per or i == #list then lines[#lines + 1] = table.concat(line, ", ") line = {} end
    end
    return "[" .. table.concat(lines, ",\n" .. (" "):rep(indent + 1)) .. "]"
  end
  if not rows then return "tensor(" .. vec(vals, 7) .. ")" end
  local parts = {}
  for i, r in ipairs(vals) do parts[i] = vec(r, 8) end
  return "tensor([" .. table.concat(parts, ",\n        ") .. "])"
end

test("random tensors match a plain-Lua reference (1-D, 2-D, transposed)", function()
  for trial = 1, 40 do
    local n, m = math.random(1, 30), math.random(1, 12)
    local lo, hi = table.unpack(({{-2, 2}, {-500, 500}, {0, 1e-3}, {-1e9, 1e9}})[trial % 4 + 1])
    local x = torch.tensor(T.rand_list({n, m}, lo, hi))
    if trial % 5 == 0 then x = x:round() end
    local vals = x:tolist() -- the stored float32 values, as doubles
    eq(str(x), ref_str(vals, true), "2-D trial " .. trial)
    local xt, tv = x:t(), {}
    for j = 1, m do
      tv[j] = {}
      for i = 1, n do tv[j][i] = vals[i][j] end
    end
    eq(str(xt), ref_str(tv, true), "transposed trial " .. trial)
    local row = x:select(1, 0) -- a strided 1-D view (column 0)
    local rv = {}
    for i = 1, n do rv[i] = vals[i][1] end
    eq(str(row), ref_str(rv, false), "1-D trial " .. trial)
  end
end)

test("set_printoptions: precision, threshold, edgeitems, linewidth", function()
  with_options({precision = 2}, function()
    eq(str(torch.tensor({0.1234, -1.5})), "tensor([ 0.12, -1.50])")
    eq(str(torch.tensor({1e-8, 1})), "tensor([1.00e-08, 1.00e+00])")
    eq(str(torch.tensor({1, 2})), "tensor([1, 2])")
  end)
  with_options({precision = 0}, function() eq(str(torch.tensor({0.4, 2.5})), "tensor([0, 2])") end)
  with_options({threshold = 5}, function()
    eq(str(torch.arange(5)), "tensor([0, 1, 2, 3, 4])")
    eq(str(torch.arange(7)), "tensor([0, 1, 2,  ..., 4, 5, 6])")
    eq(str(torch.arange(6)), "tensor([0, 1, 2, 3, 4, 5])") -- summarised, but no dim longer than 2*edgeitems
  end)
  with_options({threshold = 5, edgeitems = 1}, function()
    eq(str(torch.arange(9):reshape(3, 3)), "tensor([[0,  ..., 2],\n        ...,\n        [6,  ..., 8]])")
  end)
  with_options({threshold = 5, edgeitems = 0}, function()
    eq(str(torch.arange(10)), "tensor([...], size=(10,))")
    eq(str(torch.arange(9):reshape(3, 3)), "tensor([...], size=(3, 3))")
    eq(str(torch.arange(3)), "tensor([0, 1, 2], size=(3,))")
    eq(str(torch.tensor(5)), "tensor(5, size=())")
  end)
  with_options({threshold = math.huge}, function()
    local s = str(torch.arange(1500))
    eq(s:find("...", 1, true), nil, "threshold inf prints everything")
    eq(s:sub(-12), "1498, 1499])", "last items")
  end)
  with_options({profile = "full"}, function()
    eq(torch.get_printoptions().threshold, math.huge, "full profile threshold")
    eq(str(torch.arange(1001)):find("...", 1, true), nil, "full profile")
  end)
  with_options({profile = "short"}, function()
    eq(str(torch.arange(2000.):reshape(1000, 2) / 3),
       "tensor([[0.00e+00, 3.33e-01],\n        [6.67e-01, 1.00e+00],\n        ...,\n" ..
       "        [6.65e+02, 6.66e+02],\n        [6.66e+02, 6.66e+02]])")
  end)
  with_options({linewidth = 20}, function()
    eq(str(torch.arange(6.)), "tensor([0., 1., 2.,\n        3., 4., 5.])")
    eq(str(torch.tensor({1, 2}, {dtype = "float64"})), "tensor([1., 2.],\n       dtype=torch.float64)")
  end)
  with_options({linewidth = 0}, function() eq(str(torch.arange(2)), "tensor([0,\n        1])") end)
end)

test("set_printoptions: sci_mode forces or forbids, and resets to automatic", function()
  with_options({sci_mode = true}, function()
    eq(str(torch.tensor({1.5, 2})), "tensor([1.5000e+00, 2.0000e+00])")
    eq(str(torch.tensor({1.0, 2.0})), "tensor([1.0000e+00, 2.0000e+00])") -- measured as "1.", printed in sci
    eq(str(torch.tensor({0.0, 0.0})), "tensor([0., 0.])")                 -- no nonzero value: PyTorch keeps "0."
    eq(str(torch.tensor({1, 2}, {dtype = "int32"})), "tensor([1, 2], dtype=torch.int32)")
  end)
  with_options({sci_mode = false}, function()
    eq(str(torch.tensor({1e-8, 1e5})), "tensor([    0.0000, 100000.0000])") -- width measured in sci, as PyTorch
    eq(str(torch.tensor({1.0, 1e9})), "tensor([        1., 1000000000.])")
  end)
  torch.set_printoptions({sci_mode = true})
  torch.set_printoptions({precision = 4}) -- sci_mode not given: back to automatic, as in PyTorch
  eq(torch.get_printoptions().sci_mode, nil, "sci_mode after a call without it")
  eq(str(torch.tensor({1.5, 2})), "tensor([1.5000, 2.0000])")
  torch.set_printoptions()
  local o = torch.get_printoptions()
  eq(o.precision, 4, "precision") eq(o.threshold, 1000, "threshold") eq(o.edgeitems, 3, "edgeitems")
  eq(o.linewidth, 80, "linewidth")
end)

test("set_printoptions errors leave the options unchanged", function()
  raises(function() torch.set_printoptions({precison = 2}) end, "set_printoptions: unknown option 'precison'")
  raises(function() torch.set_printoptions({2}) end, "set_printoptions: unknown option [1] (options are named; expected one of: ")
  raises(function() torch.set_printoptions(3) end, "bad argument #1 to 'set_printoptions' (table of options expected, got number)")
  raises(function() torch.set_printoptions({precision = 1.5}) end,
         "set_printoptions: option 'precision' must be an integer, got a non-integral number")
  raises(function() torch.set_printoptions({precision = -1}) end, "set_printoptions: precision must be in [0, 100], got -1")
  raises(function() torch.set_printoptions({precision = 101}) end, "set_printoptions: precision must be in [0, 100], got 101")
  raises(function() torch.set_printoptions({edgeitems = -1}) end, "set_printoptions: edgeitems must be >= 0, got -1")
  raises(function() torch.set_printoptions({linewidth = -5}) end, "set_printoptions: linewidth must be >= 0, got -5")
  raises(function() torch.set_printoptions({linewidth = "80"}) end,
         "set_printoptions: option 'linewidth' must be an integer, got string")
  raises(function() torch.set_printoptions({threshold = "big"}) end,
         "set_printoptions: option 'threshold' must be a number, got string")
  raises(function() torch.set_printoptions({threshold = 0 / 0}) end, "set_printoptions: threshold must be a number")
  raises(function() torch.set_printoptions({sci_mode = 1}) end,
         "set_printoptions: option 'sci_mode' must be a boolean or nil (automatic), got number")
  raises(function() torch.set_printoptions({profile = "long"}) end,
         "set_printoptions: profile must be \"default\", \"short\" or \"full\", got long")
  raises(function() torch.set_printoptions({precision = 2, edgeitems = -1}) end, "edgeitems must be >= 0")
  local o = torch.get_printoptions()
  eq(o.precision, 4, "precision unchanged") eq(o.edgeitems, 3, "edgeitems unchanged")
  eq(str(torch.tensor({0.5})), "tensor([0.5000])")
end)

test("__tostring checks its argument", function()
  local tostr = getmetatable(torch.zeros(1)).__tostring
  raises(function() tostr(5) end, "tensor expected, got number")
  raises(function() tostr(nil) end, "tensor expected, got nil")
  eq(tostr(torch.zeros(1)), "tensor([0.])")
end)

T.run()
