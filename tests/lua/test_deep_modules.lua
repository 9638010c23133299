-- Module trees nested very deep (m = nn.Sequential(m) in a loop, issue 26):
-- the forward pass and the walks without names take any depth in time linear
-- in it; names and printing (whose text grows with the depth squared) raise
-- past 1000 levels (MAX_NAMED_DEPTH in nn.lua) at once, as PyTorch raises RecursionError.
-- Nothing hangs: each step runs under a CPU-time budget that stops it.
local T = require "harness"
local test, eq, raises, ok = T.test, T.eq, T.raises, T.ok

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"

-- fn's results; an error if it runs longer than budget seconds of CPU time
-- (the hook checks every 10^5 instructions, so a quadratic walk fails in
-- seconds instead of running for minutes)
local function within(budget, what, fn)
  local deadline = os.clock() + budget
  debug.sethook(function()
    if os.clock() > deadline then
      debug.sethook()
      error(("%s took more than %g s"):format(what, budget), 2)
    end
  end, "", 100000)
  local r = table.pack(pcall(fn))
  debug.sethook()
  if not r[1] then error(r[2], 0) end
  return table.unpack(r, 2, r.n)
end

local function chain(depth, leaf)
  local m = leaf or nn.Identity()
  for _ = 1, depth do m = nn.Sequential(m) end
  return m
end

local DEEP = 20000

test("a chain 20000 deep is built, called and walked without names in linear time", function()
  local leaf = nn.Linear(3, 3)
  local m = within(3, "building", function() return chain(DEEP, leaf) end)
  local x = torch.randn(2, 3)
  local y = within(3, "m(x)", function() return m(x) end)
  T.close(y:tolist(), leaf(x):tolist(), 0, 0, "the forward pass reaches the leaf")
  eq(within(3, "parameters()", function() return #m:parameters() end), 2, "parameters()")
  eq(within(3, "modules()", function() return #m:modules() end), DEEP + 1, "modules()")
  local order = {}
  within(3, "apply", function() m:apply(function(mod) order[#order + 1] = mod end) end)
  eq(#order, DEEP + 1, "apply visits every module")
  ok(order[1] == leaf and order[#order] == m, "apply: children first, then self")
  within(3, "to", function() m:to("float64") end)
  eq(m:parameters()[1].dtype, "torch.float64", "to() reached the leaf")
  within(3, "eval", function() m:eval() end)
  eq(leaf.training, false, "eval() reached the leaf")
  within(3, "zero_grad", function() m:zero_grad() end)
end)

test("names and printing of a tree deeper than 1000 levels raise at once, naming the limit", function()
  local m = chain(DEEP, nn.Linear(2, 2))
  local msg = "the module tree is nested more than 1000 levels deep"
  within(2, "tostring", function() raises(function() return tostring(m) end, "tostring: " .. msg) end)
  within(2, "named_modules", function() raises(function() return m:named_modules() end, "named_modules: " .. msg) end)
  within(2, "named_parameters", function()
    raises(function() return m:named_parameters() end, "named_parameters: " .. msg)
  end)
  within(2, "named_buffers", function() raises(function() return m:named_buffers() end, "named_buffers: " .. msg) end)
  within(2, "state_dict", function() raises(function() return m:state_dict() end, "state_dict: " .. msg) end)
  within(2, "load_state_dict", function()
    raises(function() return m:load_state_dict({}) end, "load_state_dict: " .. msg)
  end)
  -- the error left nothing behind: a small model prints afterwards
  eq(tostring(nn.Sequential(nn.ReLU())), "Sequential(\n  (0): ReLU()\n)", "printing after the error")
end)

test("at exactly 1000 levels names and printing work; one more level raises", function()
  local leaf = nn.Linear(2, 2)
  local m = chain(1000, leaf) -- leaf at depth 1000
  local deepest = string.rep("0.", 1000)
  local names = {}
  for name in m:named_parameters() do names[#names + 1] = name end
  eq(#names, 2, "named_parameters")
  ok(names[1] == deepest .. "weight" and names[2] == deepest .. "bias", "named_parameters: 1000 parts, then the name")
  ok(m:state_dict()[deepest .. "bias"] ~= nil, "state_dict keys")
  local n, last = 0, nil
  for name in m:named_modules() do n, last = n + 1, name end
  eq(n, 1001, "named_modules")
  ok(last == deepest:sub(1, -2), "named_modules: the leaf's name has 1000 parts")
  local lines = {}
  for line in (tostring(m) .. "\n"):gmatch("(.-)\n") do lines[#lines + 1] = line end
  eq(#lines, 2 * 1000 + 1, "one line to open and one to close each Sequential, one for the leaf")
  ok(lines[1001] == string.rep(" ", 2000) .. "(0): Linear(in_features=2, out_features=2, bias=True)",
    "the leaf's line, indented 2000 spaces")
  local deeper = nn.Sequential(m)
  raises(function() return tostring(deeper) end, "more than 1000 levels deep")
  raises(function() return deeper:state_dict() end, "more than 1000 levels deep")
  raises(function() return deeper:named_modules() end, "more than 1000 levels deep")
end)

test("printing gives PyTorch's text: two-line extra_repr, None child, ModuleList, a class's own __tostring", function()
  local expected = dofile(here .. "../fixtures/nn_repr/nn_repr_torch.lua") -- gen_nn_repr_fixture.py
  local Multi = nn.Module:extend("Multi")
  function Multi:extra_repr() return "first=1\nsecond=2" end
  local Own = nn.Module:extend("Own")
  Own.__tostring = function() return "Own<\n  inner\n>" end
  local mixed = nn.Sequential(nn.Linear(2, 3),
    nn.Sequential(nn.ReLU(), nn.ModuleList({nn.Tanh(), nn.Sequential(Multi(), nn.Identity()), Own()})), Multi())
  mixed:add_module("gap", nil)
  eq(tostring(mixed), expected.mixed, "mixed tree")
  eq(tostring(chain(6)), expected.chain, "chain")
  local Bad = nn.Module:extend("Bad")
  Bad.__tostring = function() return {} end
  raises(function() return tostring(nn.Sequential(Bad())) end, "Bad's __tostring returned table, not a string")
end)

test("the cycle check still refuses every cycle when modules are built fast", function()
  local fresh = nn.Sequential()
  raises(function() fresh:add_module("me", fresh) end, "it is the module itself")
  local a = nn.Sequential()
  local b = nn.Sequential(a) -- a now has a parent
  raises(function() a:add_module("up", b) end, "would contain itself")
  local c = nn.Sequential(b)
  raises(function() a.up = c end, "would contain itself")
  local l = nn.ModuleList({nn.ReLU()})
  local holder = nn.Sequential(l)
  raises(function() l:append(holder) end, "would contain itself")
  raises(function() l[0] = holder end, "would contain itself")
  -- modules made by copying (the Transformer's clones) are walked too
  local enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, {dim_feedforward = 8}), 2)
  local layer0 = enc.layers[0]
  raises(function() layer0:add_module("back", enc) end, "would contain itself")
  raises(function() layer0.linear1:add_module("back", enc) end, "would contain itself")
  -- a child removed and added elsewhere is still checked (the flag is conservative)
  local d = nn.Sequential()
  local e = nn.Sequential(d)
  e:add_module("0", nil)
  local f = nn.Sequential(d)
  raises(function() d:add_module("up", f) end, "would contain itself")
end)

T.run()
