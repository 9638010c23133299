-- Argument checking and error wording for the Lua library, worded as the C
-- binding words them (luaL_typeerror): "bad argument #1 to 'matmul' (tensor
-- expected, got nil)", and "fn: unknown option 'x' (expected one of: a, b)".
-- Every error is raised at the user's line (tensh.errors), not inside the
-- library.
local M = {}

local raise = require("tensh.errors").raise
M.raise = raise

-- The name luaL_typeerror gives a value: its metatable's __name (Tensor,
-- torch.Size, Linear, ...) or its Lua type.
function M.typename(v)
  local mt = debug.getmetatable(v)
  local name = type(mt) == "table" and rawget(mt, "__name")
  if type(name) == "string" then return name end
  if torch.is_tensor(v) then return "Tensor" end
  return type(v)
end

-- A value as a message shows it: numbers and short strings by value, the
-- rest by type name.
function M.show(v)
  if math.type(v) == "float" then
    if v == math.floor(v) and v > -2 ^ 63 and v < 2 ^ 63 then return ("%.1f"):format(v) end
    return ("%.17g"):format(v)
  end
  if type(v) == "number" or type(v) == "boolean" then return tostring(v) end
  if type(v) == "string" and #v <= 40 then return ("%q"):format(v) end
  return M.typename(v)
end

-- bad argument #pos to 'fn' (msg)
function M.bad_argument(fn, pos, msg, ...)
  if select("#", ...) > 0 then msg = msg:format(...) end
  raise("bad argument #%d to '%s' (%s)", pos, fn, msg)
end

-- bad argument #pos to 'fn' (expected expected, got <type of v>)
function M.type_error(fn, pos, expected, v)
  raise("bad argument #%d to '%s' (%s expected, got %s)", pos, fn, expected, M.typename(v))
end

-- fn: option 'name': tensor expected, got number (as C words options)
function M.option_type_error(fn, name, expected, v)
  raise("%s: option '%s': %s expected, got %s", fn, name, expected, M.typename(v))
end

function M.check_tensor(fn, pos, v)
  if not torch.is_tensor(v) then M.type_error(fn, pos, "tensor", v) end
  return v
end

function M.is_plain_table(v) return type(v) == "table" and debug.getmetatable(v) == nil end

-- An options table: nil gives {}; a key not in `allowed` (a set, or a table
-- of defaults) is an error naming the keys the function takes.
function M.check_opts(fn, opts, allowed)
  if opts == nil then return {} end
  if not M.is_plain_table(opts) then raise("%s: options must be a table, got %s", fn, M.typename(opts)) end
  for k in pairs(opts) do
    if allowed[k] == nil then
      local names = {}
      for a in pairs(allowed) do names[#names + 1] = tostring(a) end
      table.sort(names)
      raise("%s: unknown option '%s' (expected one of: %s)", fn, tostring(k), table.concat(names, ", "))
    end
  end
  return opts
end

-- Floating-point dtypes ("torch.float32", ...), from the C enum (prelude.lua
-- records them in torch._floating_dtypes).
function M.is_floating_dtype(dtype) return rawget(torch, "_floating_dtypes")[dtype] == true end

return M
