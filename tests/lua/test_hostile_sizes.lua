-- A torch.Size is taken wherever a list of integers is (issue 26): PyTorch
-- code passes x.shape on as sizes, dims, paddings and index tuples. A Size
-- counts from 0 (s[0]) and keeps its dims in a field, so code reading lists
-- raw (the C bindings) or with ipairs/[1] (lua/tensh) once refused it ("got
-- table"), raised out of range, or silently read nothing (torch.tensor(Size)
-- was empty, x[Size] the whole tensor). Each case here gives the same answer
-- for the Size as for the list, which the suite's other files check against
-- PyTorch; torch.tensor's and indexing's answers are written out.
local T = require "harness"
local test, eq, ok = T.test, T.eq, T.ok
local S = torch.Size

-- f(list) and f(Size): both succeed with equal tensors (shape, dtype, values)
local function same(what, f, list)
  local a, b = f(list), f(S(list))
  local ta, tb = type(a) == "table" and not torch.is_tensor(a) and a or {a}, type(b) == "table" and not torch.is_tensor(b) and b or {b}
  eq(#tb, #ta, what .. ": results")
  for i = 1, #ta do
    ok(torch.is_tensor(tb[i]), what .. ": a tensor")
    eq(T.fmt(tb[i].shape:totable()), T.fmt(ta[i].shape:totable()), what .. ": shape")
    eq(tb[i].dtype, ta[i].dtype, what .. ": dtype")
    ok(torch.equal(tb[i], ta[i]), what .. ": values")
  end
end

test("the C bindings read a Size as its list: pooling, convolution options, reduction dims, split sizes", function()
  local x = torch.randn(2, 3, 8, 8)
  local w = torch.randn(4, 3, 3, 3)
  same("adaptive_avg_pool2d", function(s) return torch.adaptive_avg_pool2d(x, s) end, {2, 3})
  same("max_pool2d kernel", function(s) return torch.max_pool2d(x, s) end, {2, 3})
  same("max_pool2d stride", function(s) return torch.max_pool2d(x, 2, {stride = s}) end, {2, 1})
  same("avg_pool2d padding", function(s) return torch.avg_pool2d(x, 3, {padding = s}) end, {1, 0})
  same("conv2d stride", function(s) return torch.conv2d(x, w, nil, {stride = s}) end, {2, 1})
  same("conv2d padding", function(s) return torch.conv2d(x, w, nil, {padding = s}) end, {1, 2})
  for _, name in ipairs({"sum", "mean", "amax", "amin", "std", "var", "logsumexp"}) do
    same(name .. " dims", function(s) return x[name](x, s) end, {1, 3})
  end
  same("sum dims keepdim", function(s) return x:sum(s, true) end, {0, 2})
  same("norm dims", function(s) return torch.norm(x, 2, s) end, {2, 3})
  same("split sizes", function(s) return x:split(s, 1) end, {1, 2})
  same("interpolate size", function(s) return nn.functional.interpolate(x, {size = s}) end, {4, 5})
end)

test("the Lua functions read a Size as its list: flip, roll, tile, repeat, movedim, tensordot, pad, count_nonzero", function()
  local x = torch.arange(24):view(2, 3, 4)
  same("flip", function(s) return x:flip(s) end, {0, 2})
  same("torch.flip", function(s) return torch.flip(x, s) end, {1})
  same("roll", function(s) return x:roll(s, {0, 1}) end, {1, 2})
  same("roll dims", function(s) return x:roll({1, 2}, s) end, {2, 1})
  same("tile", function(s) return x:tile(s) end, {2, 1, 2})
  same("repeat", function(s) return x["repeat"](x, s) end, {1, 2, 1})
  same("movedim", function(s) return x:movedim(s, {2, 0}) end, {0, 2})
  same("permute", function(s) return x:permute(s) end, {2, 0, 1})
  same("count_nonzero", function(s) return x:count_nonzero(s) end, {0, 2})
  same("tensor_split", function(s) return x:tensor_split(s, {dim = 2}) end, {1, 3})
  local y = torch.randn(3, 4)
  same("tensordot", function(s) return torch.tensordot(y, y, {s, s}) end, {0, 1})
  same("pad", function(s) return nn.functional.pad(y, s) end, {1, 2, 0, 1})
  same("layer_norm", function(s) return nn.functional.layer_norm(y, s) end, {4})
  same("unflatten", function(s) return y:unflatten(1, s) end, {2, 2})
  same("view", function(s) return y:view(s) end, {4, 3})
  same("new_zeros", function(s) return y:new_zeros(s) end, {2, 5})
end)

test("modules and transforms made with a Size hold its list", function()
  local x = torch.randn(2, 4)
  torch.manual_seed(3)
  local a = nn.LayerNorm({4})
  torch.manual_seed(3)
  local b = nn.LayerNorm(S({4}))
  eq(T.fmt(b.normalized_shape), T.fmt({4}), "LayerNorm's normalized_shape")
  ok(torch.equal(a(x), b(x)), "LayerNorm forward")
  local u = nn.Unflatten(1, S({2, 2}))
  eq(T.fmt(u.unflattened_size), T.fmt({2, 2}), "Unflatten's unflattened_size")
  eq(T.fmt(u(x).shape:totable()), T.fmt({2, 2, 2}), "Unflatten forward")
  local img = torch.rand(3, 5, 5, {device = "cpu"}) -- (transforms run on the CPU)
  local n1, n2 = data.transforms.Normalize({1, 2, 3}, {2, 2, 2}), data.transforms.Normalize(S({1, 2, 3}), S({2, 2, 2}))
  ok(torch.equal(n1(img), n2(img)), "Normalize's mean and std")
end)

test("torch.tensor(Size) is its dims and x[Size] indexes as x[{...}], as PyTorch's tuple", function()
  local t = torch.tensor(S({2, 3}))
  eq(T.fmt(t:tolist()), T.fmt({2, 3}), "torch.tensor(torch.Size{2, 3})")
  eq(t.dtype, torch.int64, "its dtype")
  eq(T.fmt(torch.tensor({S({1, 2}), S({3, 4})}):tolist()), T.fmt({{1, 2}, {3, 4}}), "a list of Sizes")
  eq(torch.tensor(S({})):numel(), 0, "torch.tensor(torch.Size{}) is empty, as tensor([])")
  local y = torch.arange(12):view(3, 4)
  eq(y[S({1, 2})]:item(), 6, "y[Size{1, 2}] is y[1][2]")
  eq(T.fmt(y[S({2})]:tolist()), T.fmt({8, 9, 10, 11}), "y[Size{2}] is the row")
  y[S({0, 3})] = -1
  eq(y[0][3]:item(), -1, "y[Size{0, 3}] = -1")
  ok(y.shape == S({3, 4}), "the shape is unchanged")
end)

-- (the 30-minute fuzz's finds: a scale_factor given as a Size, json.array of one)
test("Upsample's scale_factor and json.array take a Size as its list", function()
  local u = nn.Upsample({scale_factor = S({2, 3})})
  eq(T.fmt(u.scale_factor), T.fmt({2.0, 3.0}), "scale_factor kept as floats")
  eq(tostring(u), "Upsample(scale_factor=(2.0, 3.0), mode='nearest')", "printed as PyTorch's")
  local x = torch.randn(1, 1, 2, 2)
  same("Upsample forward", function(s) return nn.Upsample({scale_factor = s})(x) end, {2, 3})
  local json = torch.bench._json
  eq(json.encode(json.array(S({2, 3}))), "[2,3]", "json.array(Size)")
  eq(json.encode(json.array(S({}))), "[]", "json.array(Size{}) is an empty array")
end)

test("pad_sequence given a Size for its list of tensors names it", function()
  T.raises(function() return nn.utils.rnn.pad_sequence(S({2, 3})) end,
    "pad_sequence: expected a non-empty list of tensors, got torch.Size")
  T.raises(function() return nn.utils.rnn.pad_sequence({}) end,
    "pad_sequence: expected a non-empty list of tensors, got an empty list")
end)

test("bench.median, data.enumerate and default_collate take a Size as its list", function()
  eq(torch.bench.median(S({3, 1, 2})), torch.bench.median({3, 1, 2}), "bench.median")
  local seen = {}
  for i, v in data.enumerate(S({5, 7})) do seen[#seen + 1] = i .. ":" .. v end
  eq(table.concat(seen, " "), "0:5 1:7", "data.enumerate")
  T.close(data.default_collate(S({2, 3})):tolist(), data.default_collate({2, 3}):tolist(), 0, 0, "default_collate")
end)

T.run()
