-- Bad arguments that once failed inside the library (Lua's own words, a
-- lua/tensh position, a C binding's argument numbers): each now names the
-- function the user called and the argument, says what was expected and
-- what came, and points at the user's line. One case per family the API
-- fuzzer (tests/fuzz) found.
local T = require "harness"
local test, eq, raises, ok = T.test, T.eq, T.raises, T.ok

-- The error names `pattern` and comes from this file's line, not from
-- inside lua/tensh and not in Lua's own words.
local function user_error(fn, pattern)
  local err = raises(fn, pattern)
  ok(err:find("^[^\n]*test_messages%.lua:%d+: "), "raised at the user's line: " .. err)
  ok(not err:find("lua/tensh/"), "no library position: " .. err)
  ok(not err:find("attempt to ") and not err:find("stack overflow") and not err:find("'%?'"), "library words: " .. err)
  return err
end

test("bench and its JSON: wrong arguments, deep and cyclic tables are refused with what was expected", function()
  local J = torch.bench._json
  local cyclic = {}
  cyclic.a = {b = cyclic}
  raises(function() return J.encode(cyclic) end, "json.encode: the table contains itself (a cycle)")
  local deep = {}
  for _ = 1, J.MAX_DEPTH + 1 do deep = {deep} end
  raises(function() return J.encode(deep) end, "json.encode: tables nested deeper than 1000 levels")
  raises(function() return J.decode(("["):rep(J.MAX_DEPTH + 1)) end, "json.decode: nesting deeper than 1000 levels")
  user_error(function() local _ = J.decode(5) end, "json.decode: expected a string (JSON text), got number")
  user_error(function() local _ = J.array(5) end, "json.array: expected a plain table (a list) or nil, got number")
  -- (the fuzzer's find, issue 26): a torch.Size read as a list from 1 raised inside the encoder
  eq(J.encode({shape = torch.Size({2, 3}), empty = torch.Size({})}), '{"empty":[],"shape":[2,3]}', "a torch.Size is its list")
  local raising = setmetatable({1, x = 2}, {__index = function() error("no fields") end})
  eq(J.encode({raising}), "[[1]]", "tables are read raw")
  -- what stays legal: shared (not cyclic) tables, nesting up to the limit, re-marking an array
  local shared = {1}
  eq(J.encode({shared, shared}), "[[1],[1]]")
  local ok_deep = 1
  for _ = 1, J.MAX_DEPTH do ok_deep = {ok_deep} end
  eq(#J.encode(ok_deep), 2 * J.MAX_DEPTH + 1)
  eq(J.encode(J.array(J.array())), "[]")

  local B = torch.bench
  user_error(function() local _ = B.Measurement(5) end, "Measurement: expected a table {number_per_run =")
  user_error(function() local _ = B.Measurement({number_per_run = 1, raw_times = {1, "a"}}) end,
    "Measurement: raw_times[2] must be a number, got string")
  user_error(function() local _ = B.Measurement({number_per_run = 1, raw_times = {1}, task_spec = 5}) end,
    "Measurement: task_spec must be a table")
  user_error(function() local _ = B.Measurement.merge(5) end, "Measurement.merge: expected a list of Measurements, got number")
  user_error(function() local _ = B.Measurement.merge({5}) end, "Measurement.merge: element 1 is not a bench.Measurement")
  user_error(function() local _ = B.select_unit("a") end, "select_unit: t (a time in seconds) must be a number, got string")
  user_error(function() local _ = B.trim_sigfig({}, 2) end, "trim_sigfig: x must be a number, got table")
  user_error(function() local _ = B.trim_sigfig(3.14, 0) end, "trim_sigfig: n (the number of significant figures) must be")
  user_error(function() local _ = B.median(5) end, "median: expected a list of numbers, got number")
  user_error(function() local _ = B.median({1, "a"}) end, "median: xs[2] must be a number, got string")
  eq(B.median({3, 1, 2}), 2)
  eq(B.trim_sigfig(3.14159, 2), 3.1)
  eq(B.select_unit(2e-6), "us")
end)

test("data: samplers and transforms name the argument and what came", function()
  user_error(function() local _ = data.SubsetRandomSampler(5) end,
    "SubsetRandomSampler: indices must be a list or a tensor, got number")
  user_error(function() local _ = data.SubsetRandomSampler({1, "a"}) end,
    "SubsetRandomSampler: indices[2] must be an integer, got \"a\"")
  user_error(function() local _ = data.SubsetRandomSampler({1}, 5) end, "SubsetRandomSampler: options must be a table, got number")
  user_error(function() local _ = data.SubsetRandomSampler({1}, {sed = 1}) end, "SubsetRandomSampler: unknown option 'sed'")
  eq(#data.SubsetRandomSampler({3, 1}, {seed = 1}):indices():tolist(), 2)
  local T = data.transforms
  user_error(function() local _ = T.Compose({T.ToTensor(), {5}}) end,
    "transform: expected a data.transforms object, a list of them, or a function, got number")
  user_error(function() local _ = T.ToTensor()(5) end, "ToTensor: expected a (C, H, W) tensor, got number")
  user_error(function() local _ = T.ToTensor()(torch.zeros(2)) end, "ToTensor: expected a (C, H, W) tensor, got a 1-D tensor")
end)

test("nn.functional: arguments the C op would misread are checked in the user's terms", function()
  local F, x = nn.functional, torch.randn(2, 3)
  user_error(function() local _ = F.softmax(x, 1.5) end, "nn.functional.softmax: dim must be an integer, got 1.5")
  user_error(function() local _ = F.softmax(x, {dim = "max"}) end, "nn.functional.softmax: dim must be an integer, got string")
  user_error(function() local _ = F.log_softmax(x, 1, nil, "max") end,
    "nn.functional.log_softmax: dtype: unknown dtype 'max'")
  user_error(function() local _ = F.softmax(x, {dim = 1, dtype = 5}) end,
    "nn.functional.softmax: dtype must be a dtype (torch.float32, \"float64\", ...), got 5")
  T.close(F.log_softmax(x, 1, nil, "float64"), x:double():log_softmax(1), 1e-12, 1e-12)
  eq(F.softmax(x, {dim = 0, dtype = torch.float64}).dtype, "torch.float64")
  user_error(function() local _ = F.gelu(x, 5) end, "gelu: approximate must be 'none' or 'tanh', got 5")
  T.close(F.gelu(x, "tanh"), torch.gelu(x, {approximate = "tanh"}), 0, 0)
  user_error(function() local _ = F.one_hot(torch.tensor({0, 1}), "a") end,
    "nn.functional.one_hot: num_classes must be an integer, got string")
  eq(tostring(F.one_hot(torch.tensor({0, 1}), 3)), tostring(torch.tensor({{1, 0, 0}, {0, 1, 0}})))
  user_error(function() local _ = F.layer_norm(x, 1.5) end, "nn.functional.layer_norm: normalized_shape must be an integer, got 1.5")
  user_error(function() local _ = F.layer_norm(x, {3, "a"}) end,
    "nn.functional.layer_norm: normalized_shape[2] must be an integer, got string")
  user_error(function() local _ = F.layer_norm(x, "a") end,
    "nn.functional.layer_norm: normalized_shape must be an integer or a list of integers, got \"a\"")
  user_error(function() local _ = F.layer_norm(x, {3}, 5) end, "nn.functional.layer_norm: weight must be a tensor or nil, got 5")
  user_error(function() local _ = F.layer_norm(x, 3, nil, nil, "a") end, "nn.functional.layer_norm: eps must be a number, got \"a\"")
  T.close(F.layer_norm(x, x.shape:totable()), F.layer_norm(x, {2, 3}), 0, 0)
  user_error(function() local _ = F.batch_norm(x, 5) end, "nn.functional.batch_norm: running_mean must be a tensor or nil, got 5")
  user_error(function() local _ = F.batch_norm(x, nil, nil, {training = 1}) end,
    "nn.functional.batch_norm: training must be a boolean, got 1")
  user_error(function() local _ = F.batch_norm(x, nil, nil, {training = true, momentum = "a"}) end,
    "nn.functional.batch_norm: momentum must be a number")
  user_error(function() local _ = F.dropout(torch.tensor({true})) end,
    "nn.functional.dropout: expected a floating point input, got torch.bool")
  user_error(function() local _ = nn.init.normal_(torch.zeros(2), "a") end, "normal_: mean must be a number, got \"a\"")
  user_error(function() local _ = nn.init.uniform_(torch.zeros(2), 0, "x") end, "uniform_: b must be a number, got \"x\"")
end)

test("nn.Module:to / type / requires_grad_ say which argument was wrong", function()
  local m = nn.Linear(2, 2)
  user_error(function() local _ = m:type(5) end, "type: dst_type must be a dtype")
  user_error(function() local _ = m:type("x") end, "type: dst_type: unknown dtype 'x'")
  eq(m:type(torch.float64).weight.dtype, "torch.float64")
  user_error(function() local _ = m:to({device = 5.5}) end, "to: option 'device': expected a device")
  user_error(function() local _ = nn.Embedding.from_pretrained(torch.zeros(2, 2), 5) end,
    "Embedding.from_pretrained: options must be a table, got number")
  user_error(function() local _ = nn.Embedding.from_pretrained(torch.zeros(2, 2), {freeze = 1}) end,
    "Embedding.from_pretrained: freeze must be a boolean, got 1")
  user_error(function() local _ = nn.Flatten(1.5) end, "Flatten: start_dim must be an integer, got 1.5")
  user_error(function() local _ = m:requires_grad_(5) end, "requires_grad_: requires_grad must be a boolean, got 5")
  eq(m:requires_grad_(false).weight.requires_grad, false)
end)

test("optimizers and schedulers: classes, groups and state dicts from the wrong place are refused by name", function()
  local params = nn.Linear(2, 2):parameters()
  user_error(function() local _ = optim.Adam.new(5, params) end, "optim.Optimizer.new: cls must be an optimizer class")
  user_error(function() local _ = optim.Optimizer.new(optim.Optimizer, params) end,
    "optim.Optimizer.new: cls must be an optimizer class")
  user_error(function() local _ = optim.Adam.new(optim.Adam(params), params) end,
    "optim.Optimizer.new: cls must be an optimizer class")
  user_error(function() local _ = optim.Optimizer.extend(5, "X", {}, print, print) end,
    "optim.Optimizer.extend: base must be optim.Optimizer or an optimizer class")
  user_error(function() local _ = optim.Optimizer:extend("X", {}, 5, print) end,
    "optim.Optimizer.extend: validate must be a function, got 5")
  user_error(function() local _ = optim.SGD(torch.Size({2})) end, "SGD: params should be a list of tensors or a list of parameter groups, but got torch.Size")
  local sgd = optim.SGD(params, {lr = 0.1})
  -- the class's __call and the instances' __tostring called by hand
  user_error(function() local _ = getmetatable(optim.SGD).__call(5, params) end, "optim.Optimizer.new: cls must be an optimizer class")
  user_error(function() local _ = optim.SGD.__tostring(5) end, "optim.Optimizer.__tostring: expected an optimizer")
  user_error(function() local _ = optim.SGD.__tostring(optim.SGD) end, "optim.Optimizer.__tostring: expected an optimizer")
  ok(tostring(sgd):find("^SGD %("), tostring(sgd))
  user_error(function() local _ = getmetatable(optim.lr_scheduler.StepLR).__call(true, sgd, 1) end,
    "optim.lr_scheduler.LRScheduler.new: cls must be a scheduler class")
  user_error(function() local _ = optim.lr_scheduler.StepLR.__tostring({}) end,
    "optim.lr_scheduler.LRScheduler.__tostring: expected a scheduler")
  -- ReduceLROnPlateau has its own __call (the fuzz of 2026-11-28 12:36: a tensor as the class)
  for _, bad in ipairs({torch.ones(1), {}, optim.lr_scheduler.StepLR}) do
    user_error(function() local _ = getmetatable(optim.lr_scheduler.ReduceLROnPlateau).__call(bad, sgd) end,
      "ReduceLROnPlateau: cls must be ReduceLROnPlateau or a class made from it")
  end
  ok(tostring(optim.lr_scheduler.ReduceLROnPlateau(sgd)):find("^ReduceLROnPlateau%("), "the class itself still builds")
  local sd = sgd:state_dict()
  sd.param_groups[1].params[1] = 0 / 0
  user_error(function() sgd:load_state_dict(sd) end, "SGD:load_state_dict: param_groups[0].params[1] must be an integer")
  sd = sgd:state_dict()
  sd.state[0] = 5
  user_error(function() sgd:load_state_dict(sd) end, "SGD:load_state_dict: the state of parameter 0 must be a table, got number")

  local S = optim.lr_scheduler
  user_error(function() local _ = S.StepLR.new(5, sgd, 1) end, "optim.lr_scheduler.LRScheduler.new: cls must be a scheduler class")
  user_error(function() local _ = S.LRScheduler.extend(S.LRScheduler, "X", {math.huge}, print, print) end,
    "optim.lr_scheduler.LRScheduler.extend: params[1] must be a string, got inf")
  user_error(function() local _ = S.LRScheduler.extend(S.LRScheduler, "X", 5, print, print) end,
    "optim.lr_scheduler.LRScheduler.extend: params must be a table, got 5")
  -- a state dict is copied whole: shared tables stay shared, a cycle is copied, not followed forever
  local sched = S.StepLR(sgd, 2)
  local cyclic = {}
  cyclic.self = cyclic
  sched:load_state_dict({extra = cyclic, last_epoch = 3})
  local saved = sched:state_dict()
  eq(saved.last_epoch, 3)
  ok(saved.extra.self == saved.extra and saved.extra ~= cyclic, "the cycle copied as a cycle")
  local deep = {}
  for _ = 1, 200 do deep = {deep} end
  user_error(function() sched:load_state_dict({extra = deep}) end, "StepLR:load_state_dict: tables nested deeper than 100 levels")
end)

test("a C check failing inside a library call names the function the user called, at the user's line", function()
  local t = torch.ones(2)
  getmetatable(t).__close(t)
  -- the library's own checks see a freed tensor too
  user_error(function() local _ = nn.functional.linear(torch.ones(1, 2), torch.ones(2, 2), t) end,
    "bad argument #3 to 'linear' (tensor was already freed")
  -- calculate_gain prints its param, and printing checks it in C: the message names calculate_gain
  local err = user_error(function() local _ = nn.init.calculate_gain("leaky_relu", t) end, "tensor was already freed")
  ok(err:find("calculate_gain: tensor was already freed", 1, true), err)
  user_error(function() local _ = torch.amp.GradScaler(t) end, "GradScaler: unsupported device Tensor")
end)

-- The functions composed in Lua (tensor_extra.lua) re-raise an inner error at
-- the user's line; one already placed there was once placed twice
-- ("test_messages.lua:9: test_messages.lua:9: diff: ...").
test("errors from torch.diff & co carry the user's position once", function()
  local t = torch.arange(5)
  for what, f in pairs({
    ["torch.diff"] = function() local _ = torch.diff(t, -1) end,
    ["Tensor:median"] = function() local _ = t:median({dmi = 0}) end,
    ["torch.diagonal"] = function() local _ = torch.diagonal(t) end,
    ["cat inside torch.diff"] = function() local _ = torch.diff(torch.ones(2, 3), 1, 0, torch.ones(5)) end,
    ["torch.vdot"] = function() local _ = torch.vdot(t, 5) end,
  }) do
    local err = user_error(f, ": ")
    local _, positions = err:gsub("test_messages%.lua:%d+: ", "")
    eq(positions, 1, what .. ": positions in '" .. err .. "'")
  end
end)

test("a module option's repr (nn_common.pyval) of a cyclic or very deep table ends, with (...)", function()
  local pyval = require("tensh.nn.common").pyval
  eq(pyval({2, 3}), "(2, 3)")
  eq(pyval({5}), "(5,)")
  eq(pyval({}), "()")
  eq(pyval({1, {true, 0.5}, "x"}), "(1, (True, 0.5), x)")
  local c = {1}
  c[2] = c
  eq(pyval(c), "(1, (...))")
  local shared = {7}
  eq(pyval({shared, shared}), "((7,), (7,))", "a shared table is not a cycle")
  local deep = {}
  for _ = 1, 100000 do deep = {deep} end
  eq(pyval(deep), ("("):rep(100) .. "(...)" .. (",)"):rep(100))
  local m = nn.AdaptiveAvgPool2d({3, 4})
  eq(m:extra_repr(), "output_size=(3, 4)")
end)

test("torch.Size and torch.device: == against other values, metamethods called by hand on other values", function()
  local s = torch.zeros(2, 3).shape
  ok(s == {2, 3}, "a Size equals the plain list of its dims, as PyTorch's Size equals a tuple")
  ok(s ~= {2, 3, 1} and s ~= {3, 2} and s ~= setmetatable({}, {}), "and nothing else")
  ok(s == torch.Size({2, 3}) and s ~= torch.Size({2}))
  local smt, dmt = getmetatable(s), getmetatable(torch.device("cpu"))
  eq(smt.__eq(5, "x"), false)
  eq(dmt.__eq(torch.device("cpu"), {}), false)
  ok(torch.device("cpu") == torch.device("cpu") and torch.device("cpu") ~= torch.device("cuda"))
  user_error(function() local _ = smt.__len(5) end, "torch.Size.__len: expected a torch.Size, got number")
  user_error(function() local _ = smt.__tostring({}) end, "torch.Size.__tostring: expected a torch.Size, got table")
  user_error(function() local _ = smt.__index(nil, 0) end, "torch.Size.__index: expected a torch.Size, got nil")
  user_error(function() local _ = dmt.__tostring(5) end, "torch.device.__tostring: expected a torch.device, got number")
  eq(tostring(s), "torch.Size([2, 3])")
  eq(#s, 2)
end)

test("nn.Module's metamethods called by hand on other values name what they expected", function()
  local m = nn.Linear(2, 2)
  local mt = getmetatable(m)
  user_error(function() local _ = mt.__call(5, torch.zeros(2)) end, "Module.__call: expected a module (such as nn.Linear(2, 2)), got 5")
  user_error(function() local _ = mt.__call(nn.Linear, torch.zeros(2)) end,
    "Module.__call: expected a module, got the class Linear (create one with Linear(...))")
  user_error(function() local _ = mt.__tostring({}) end, "Module.__tostring: expected a module")
  user_error(function() mt.__newindex(true, "x", 1) end, "Module.__newindex: expected a module")
  user_error(function() local _ = getmetatable(nn.Linear).__call(5, 2, 2) end, "nn.Module constructor: expected a module class")
  user_error(function() local _ = getmetatable(nn.Linear).__tostring(5) end, "nn.Module class __tostring: expected a module class")
  local seq = nn.Sequential(nn.ReLU())
  local smt = getmetatable(seq)
  user_error(function() local _ = smt.__len(5) end, "container __len: expected a module")
  user_error(function() local _ = smt.__getitem("x", 0) end, "container __getitem: expected a module")
  user_error(function() smt.__setitem(nil, 0, nn.ReLU()) end, "container __setitem: expected a module")
  user_error(function() local _ = smt.__pairs(true) end, "container __pairs: expected a module")
  user_error(function() local _ = nn.ModuleList.__tostring(5) end, "ModuleList.__tostring: expected a module")
  user_error(function() local _ = nn.ModuleDict.__pairs(5) end, "ModuleDict.__pairs: expected a module")
  user_error(function() local _ = nn.utils.rnn.PackedSequence.__tostring(5) end,
    "PackedSequence.__tostring: expected a PackedSequence, got 5")
  eq(#seq, 1)
  ok(seq[0] ~= nil)
  local n = 0
  for _ in pairs(seq) do n = n + 1 end
  eq(n, 1)
  -- an RNN's methods called on the class table rather than an instance
  user_error(function() local _ = nn.GRU:forward(torch.zeros(2, 3)) end,
    "forward: expected a module, got the class GRU (create one with GRU(...))")
  user_error(function() local _ = nn.GRUCell:forward(torch.zeros(2, 3)) end, "forward: expected a module, got the class GRUCell")
  user_error(function() nn.LSTM:reset_parameters() end, "reset_parameters: expected a module, got the class LSTM")
  user_error(function() local _ = nn.GRU:extra_repr() end, "extra_repr: expected a module, got the class GRU")
  ok(tostring(nn.GRU(2, 3)):find("GRU(2, 3)", 1, true))
  eq(tostring(nn.Linear), "<class Linear>")
  eq(m(torch.zeros(1, 2)).shape, torch.Size({1, 2}))
  ok(tostring(m):find("^Linear%(in_features=2"), tostring(m))
end)

T.run()
