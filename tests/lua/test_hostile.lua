-- Hostile input that once crashed or hung the session: each must give a Lua
-- error that says what was wrong, and the session goes on.
local T = require "harness"
local test, eq, raises, ok = T.test, T.eq, T.raises, T.ok

test("a tensor's metamethods called by hand on something else raise instead of crashing", function()
  local mt = getmetatable(torch.zeros(1))
  raises(function() mt.__gc({}) end, "tensor expected, got table")
  raises(function() mt.__close(io.stdout) end, "tensor expected, got FILE*")
  raises(function() mt.__gc(5) end, "tensor expected, got number")
  raises(function() mt.__close(nil) end, "tensor expected, got nil")
  local t = torch.ones(2)
  mt.__close(t)
  mt.__gc(t) -- a finalizer may run twice
  raises(function() return t + 1 end, "tensor was already freed")
  eq(torch.ones(3):sum():item(), 3, "the session goes on")
end)

test("a module can't contain itself: every way in refuses the cycle, the tree stays walkable", function()
  local a, b = nn.Sequential(nn.Linear(2, 2)), nn.Sequential(nn.Linear(2, 2))
  a:add_module("b", b)
  raises(function() b:add_module("a", a) end, "add_module: module 'a' would contain itself")
  raises(function() b.back = a end, "module assignment: module 'back' would contain itself")
  raises(function() a.me = a end, "it is the module itself")
  local l = nn.ModuleList({nn.ReLU()})
  raises(function() l:append(l) end, "would contain itself")
  raises(function() l[0] = l end, "ModuleList[0]: module '0' would contain itself")
  raises(function() l:insert(0, l) end, "ModuleList:insert")
  local d = nn.ModuleDict()
  raises(function() d:update({x = d}) end, "would contain itself")
  -- a shared child (a DAG) is allowed, as in PyTorch
  local shared = nn.Linear(2, 2)
  local c = nn.Sequential(shared, shared)
  eq(#c:parameters(), 2, "shared parameters counted once")
  local n = 0
  for _ in pairs(a:state_dict()) do n = n + 1 end
  eq(n, 4, "a's state_dict after the refused cycles")
  ok(tostring(a):find("(b): Sequential", 1, true), "printing still works")
end)

T.run()
