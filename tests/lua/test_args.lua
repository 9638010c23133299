-- The Lua library's argument checks (lua/tensh/args.lua) word errors as the
-- C binding does, raise them at the caller's line, and the library's module
-- layout (lua/tensh/nn/*, lua/tensh/optim/*) loads from the embedded copy.
local T = require "harness"
local test, eq, ok, raises = T.test, T.eq, T.ok, T.raises
local A = require "tensh.args"

-- the message without the "file:line: " prefix
local function msg_of(fn, ...)
  local okc, err = pcall(fn, ...)
  ok(not okc, "expected an error")
  return (tostring(err):gsub("^[^:]*:%d+: ", ""))
end

test("a wrong-type argument reads as the C binding's luaL_typeerror", function()
  -- the C binding's own words for a nil where a tensor goes
  local c_msg = msg_of(torch.matmul, nil, torch.zeros(2))
  eq(c_msg, "bad argument #1 to 'tensh.matmul' (tensor expected, got nil)", "C")
  eq(msg_of(A.check_tensor, "matmul", 1, nil), "bad argument #1 to 'matmul' (tensor expected, got nil)", "Lua")
  -- the type names are luaL_typeerror's: the metatable's __name, else the Lua type
  for _, v in ipairs({3, "s", {}, true, torch.Size({2}), nn.Linear(2, 2), torch.zeros(1)}) do
    local c = msg_of(torch.matmul, torch.zeros(2), v):match("got (.*)%)$")
    if torch.is_tensor(v) then c = "Tensor" end -- a tensor is accepted there: compare with the tensor's __name
    eq(A.typename(v), c, "typename of " .. tostring(v))
  end
  eq(A.typename(torch.zeros(1)), "Tensor", "tensor")
  eq(msg_of(A.type_error, "f", 2, "number", "x"), "bad argument #2 to 'f' (number expected, got string)", "type_error")
  eq(msg_of(A.option_type_error, "f", "weight", "tensor", 3), "f: option 'weight': tensor expected, got number",
    "option")
end)

test("the errors point at the caller's line, not the library", function()
  local line = debug.getinfo(1, "l").currentline + 1
  local okc, err = pcall(function() nn.functional.relu(3) end)
  ok(not okc, "raised")
  ok(tostring(err):find(("test_args.lua:%d: bad argument #1 to 'relu' (tensor expected, got number)"):format(line), 1, true),
    "message: " .. tostring(err))
end)

test("one wording for options across nn, losses, optim, nn.utils and data", function()
  local w = torch.zeros(2, {requires_grad = true})
  raises(function() optim.SGD({w}, {lr = 0.1, momentun = 0.9}) end,
    "SGD: unknown option 'momentun' (expected one of: dampening, ", "optim")
  raises(function() nn.functional.mse_loss(torch.zeros(2), torch.zeros(2), {reduce = "sum"}) end,
    "mse_loss: unknown option 'reduce' (expected one of: reduction)", "losses")
  raises(function() nn.utils.clip_grad_norm_({w}, 1, {norm = 2}) end,
    "clip_grad_norm_: unknown option 'norm' (expected one of: error_if_nonfinite, norm_type)", "nn.utils")
  raises(function() nn.Linear(2, 3, {bais = false}) end,
    "Linear: unknown option 'bais' (expected one of: bias, device, dtype; did you mean 'bias'?)", "layers")
  raises(function() data.DataLoader(data.TensorDataset(torch.zeros(4, 2)), {batchsize = 2}) end,
    "DataLoader: unknown option 'batchsize' (expected one of: batch_sampler, batch_size, ", "data")
  raises(function() optim.SGD({w}, 0.1, 0, 0, 0, false, 5) end, "SGD: expected at most 5 positional arguments, got 6",
    "positional extra")
  for _, fn in ipairs({function() optim.SGD({w}, "fast") end, function() nn.utils.clip_grad_norm_({w}, 1, "x") end}) do
    raises(fn, "options must be a table, got string", "not a table")
  end
end)

test("dtype constants come from the C enum", function()
  for _, d in ipairs({"float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"}) do
    eq(torch[d], "torch." .. d, d)
    eq(torch.zeros(1, {dtype = torch[d]}).dtype, torch[d], d .. " round trip")
    -- floating point: 0.5 survives the conversion
    eq(A.is_floating_dtype(torch[d]), torch.tensor(0.5, {dtype = torch[d]}):item() == 0.5, d .. " floating")
  end
end)

test("nn and optim are packaged one family a file, and load from the binary", function()
  for _, family in ipairs({"linear", "activation", "conv", "pooling", "normalization", "sparse", "container", "loss"}) do
    local mod = require("tensh.nn." .. family)
    for name, cls in pairs(mod) do ok(rawequal(nn[name], cls), ("nn.%s from tensh.nn.%s"):format(name, family)) end
  end
  ok(rawequal(require("tensh.nn.linear").Linear, nn.Linear), "Linear")
  ok(rawequal(require("tensh.optim.lr_scheduler"), optim.lr_scheduler), "lr_scheduler")
  ok(rawequal(require("tensh.nn.functional"), nn.functional), "functional")
  ok(rawequal(require("tensh.nn.initialization"), nn.init), "init")
  ok(rawequal(require("tensh.nn.utils"), nn.utils), "utils")
  -- tracebacks name the nested file
  local _, err = pcall(function() return nn.Linear(2, 3):forward(torch.zeros(3, 5)) end)
  ok(tostring(err):find("test_args.lua", 1, true), "error at the caller: " .. tostring(err))
  -- forward and init are checked by wrappers (classes.lua): the init they wrap
  local info = debug.getinfo(require("tensh.classes").unwrap_init(require("tensh.nn.linear").Linear.init), "S")
  eq(info.source, "@lua/tensh/nn/linear.lua", "chunk name")
end)

test("errors from inside the library name the call, the argument, what was expected and what came (issue 11)", function()
  eq(tostring(torch.Size()), "torch.Size([])", "torch.Size() is the 0-dim size, as PyTorch's")
  eq(#torch.Size(), 0, "rank 0")
  eq(torch.Size(torch.Size({2, 3})), torch.Size({2, 3}), "from a torch.Size")
  raises(function() return torch.Size(5) end, "bad argument #1 to 'torch.Size' (list of integers expected, got number)")
  raises(function() return data.default_collate(5) end,
    "bad argument #1 to 'default_collate' (list of samples expected, got number)")
  raises(function() return nn.NLLLoss(torch.zeros(3), 5) end, "bad argument #2 to 'NLLLoss' (options table expected, got number)")
  raises(function() return nn.init.xavier_uniform_(torch.zeros(3, 4), {1}) end,
    "bad argument #2 to 'xavier_uniform_' (number (gain) expected, got table)")
  raises(function() return nn.init.xavier_normal_(torch.zeros(3, 4), "x") end,
    "bad argument #2 to 'xavier_normal_' (number (gain) expected, got string)")
  raises(function() return nn.ModuleDict():update() end,
    "bad argument #1 to 'ModuleDict:update' (table of name -> module expected, got nil)")
  raises(function() return nn.Linear(2 ^ 63, 3) end,
    "Linear: in_features must be an integer, got 9.223372036854776e+18 (outside the 64-bit integer range)")
  raises(function() return data.transforms.RandomCrop(4, true) end,
    "bad argument #2 to 'RandomCrop' (options table ({padding = n}) expected, got boolean)")
  -- each at the caller's line
  local msg = raises(function() local _ = nn.ModuleDict():update(3) end, "got number")
  ok(msg:find("test_args.lua", 1, true), "caller's line: " .. msg)
  -- the working forms still work
  eq(nn.NLLLoss(torch.ones(3), {reduction = "sum"}).reduction, "sum", "NLLLoss(weight, opts)")
  eq(#nn.ModuleDict():update({a = nn.ReLU()}):keys(), 1, "update")
  eq(nn.init.xavier_uniform_(torch.zeros(3, 4), 2).shape, torch.Size({3, 4}), "xavier gain")
  eq(data.default_collate({1, 2}):tolist()[2], 2, "collate numbers")
  -- a torch.Size is a list of integers (PyTorch's is a tuple): it once errored from inside data.lua
  eq(data.default_collate(torch.Size({3, 4})):tolist()[2], 4, "collate a Size")
  raises(function() data.default_collate(torch.Size({})) end, "collate: empty batch")
  ok(data.transforms.RandomCrop(4, {padding = 1}) ~= nil, "RandomCrop with padding")
end)

T.run()
