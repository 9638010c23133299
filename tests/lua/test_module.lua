-- `require "tensh"` from plain lua5.4 with build/tensh.so on package.cpath.
-- This file runs under build/tensh, so each case spawns lua5.4 (skipped when
-- it is not installed) and checks what it prints. The build dir comes from
-- TENSH_BUILD (set by tests/run.sh), else ../../build from this file.
local T = require "harness"
local test, eq = T.test, T.eq

local function build_dir()
  local d = os.getenv("TENSH_BUILD")
  if d and d ~= "" then return d end
  local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
  return here .. "/../../build"
end

local function quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- Runs `code` under lua5.4 after pointing package.cpath at the build dir;
-- returns its stdout+stderr and its exit code.
local function lua54(code)
  if not os.execute("command -v lua5.4 >/dev/null 2>&1") then T.skip("lua5.4 is not installed") end
  local dir = build_dir()
  local so = io.open(dir .. "/tensh.so", "rb")
  if not so then error("no " .. dir .. "/tensh.so: run make first") end
  local sanitized = so:read("a"):find("__asan_init", 1, true)
  so:close()
  if sanitized then T.skip("an ASan build cannot load into an uninstrumented lua5.4") end
  local prefix = ("package.cpath = %q .. ';' .. package.cpath\n"):format(dir .. "/?.so")
  local p = assert(io.popen("LUA_INIT= LUA_INIT_5_4= lua5.4 -e " .. quote(prefix .. code) .. " 2>&1"))
  local out = p:read("a")
  local _, _, rc = p:close()
  return out, rc
end

-- a Lua literal for nested lists of numbers
local function literal(v)
  if type(v) ~= "table" then return ("%.17g"):format(v) end
  local parts = {}
  for i, x in ipairs(v) do parts[i] = literal(x) end
  return "{" .. table.concat(parts, ", ") .. "}"
end

test("require returns the torch table and sets the global", function()
  local out, rc = lua54([[
    local t = require "tensh"
    print(t == torch, rawequal(require "tensh", t), type(t.zeros), type(t._methods), t.__version__)
    print(t.float32, type(cuda), type(cuda.is_available()))]])
  eq(rc, 0, "exit code (output: " .. out .. ")")
  eq(out, ("true\ttrue\tfunction\ttable\t%s\ntorch.float32\ttable\tboolean\n"):format(torch.__version__), "output")
end)

test("ops run in the module and match a plain Lua reference", function()
  local a = T.rand_list({3, 4}, -9, 9, true)
  local b = T.rand_list({4}, -9, 9, true)
  local out, rc = lua54(([[
    require "tensh"
    local a = torch.tensor(%s, {dtype = torch.float64})
    local b = torch.tensor(%s, {dtype = torch.float64})
    local r = (a * 2 + b):t():contiguous():tolist()
    for _, row in ipairs(r) do
      local s = {}
      for j, v in ipairs(row) do s[j] = ("%%.17g"):format(v) end
      print(table.concat(s, " "))
    end]]):format(literal(a), literal(b)))
  eq(rc, 0, "exit code (output: " .. out .. ")")
  local want = {}
  for j = 1, 4 do -- transposed: row j holds column j of a * 2 + b
    local s = {}
    for i = 1, 3 do s[i] = ("%.17g"):format(a[i][j] * 2.0 + b[j]) end
    want[j] = table.concat(s, " ")
  end
  eq(out, table.concat(want, "\n") .. "\n", "a * 2 + b, transposed")
end)

test("errors are Lua errors with the op's message", function()
  local out, rc = lua54([[
    require "tensh"
    print(pcall(function() return torch.ones(2, 2) + torch.ones(3) end))
    print(pcall(function() return torch.zeros("a") end))
    print(select("#", pcall(error)))]])
  eq(rc, 0, "exit code (output: " .. out .. ")")
  local l1, l2 = out:match("^([^\n]*)\n([^\n]*)\n")
  T.ok(l1 and l1:find("false", 1, true) == 1 and l1:find("add: shapes (2, 2) and (3,) cannot be broadcast", 1, true),
    "broadcast error: " .. tostring(l1))
  T.ok(l2 and l2:find("false", 1, true) == 1 and l2:find("bad argument #1 to", 1, true) and
    l2:find("got string", 1, true), "bad argument error: " .. tostring(l2))
end)

test("an uncaught error ends lua5.4 with a non-zero exit", function()
  local out, rc = lua54([[require "tensh"; local x = torch.ones(2) + torch.ones(3)]])
  T.ok(rc ~= 0, "exit code should be non-zero, got " .. tostring(rc))
  T.ok(out:find("cannot be broadcast", 1, true), "message: " .. out)
end)

test("tensors made in a loop are collected", function()
  local out, rc = lua54([[
    require "tensh"
    local s = 0
    for i = 1, 300 do local x = torch.full({1000}, i / 4, {dtype = torch.float64}); s = s + x:tolist()[1000] end
    collectgarbage()
    print(("%.17g"):format(s))]])
  eq(rc, 0, "exit code (output: " .. out .. ")")
  eq(out, ("%.17g\n"):format(300 * 301 / 8), "sum of the last elements")
end)

T.run()
