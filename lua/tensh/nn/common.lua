-- Helpers shared by the nn files: errors raised at the user's line, shapes
-- and values written as PyTorch writes them (for messages and repr), and
-- PyTorch-style argument lists (positional values, then an options table).
local M = {}

local A = require "tensh.args"

-- error(msg) at the user's line, outside the library (lua/tensh/errors.lua)
M.raise = A.raise

-- Python's tuple text: (2, 3), (5,), ()
function M.tuple(list) return M.pyval(list) end

-- a tensor's shape as a tuple: (32, 784)
function M.shape_str(t) return M.tuple(t.shape:totable()) end

-- Python's repr of a float: the shortest text that reads back, 1.0 not 1,
-- 1e-05 not 1e-5, fixed notation for exponents in [-4, 16)
function M.pyfloat(x)
  if x ~= x then return "nan" end
  if x == math.huge then return "inf" end
  if x == -math.huge then return "-inf" end
  local s
  for p = 1, 17 do
    s = ("%." .. (p - 1) .. "e"):format(x)
    if tonumber(s) == x then break end
  end
  local sign, mant, exp = s:match("^(-?)([%d.]+)e([-+]%d+)$")
  exp = tonumber(exp)
  local digits = mant:gsub("%.", "")
  if exp >= -4 and exp < 16 then
    local out
    if exp < 0 then
      out = "0." .. string.rep("0", -exp - 1) .. digits
    elseif #digits <= exp + 1 then
      out = digits .. string.rep("0", exp + 1 - #digits) .. ".0"
    else
      out = digits:sub(1, exp + 1) .. "." .. digits:sub(exp + 2)
    end
    return sign .. out
  end
  local m = #digits > 1 and (digits:sub(1, 1) .. "." .. digits:sub(2)) or digits
  return ("%s%se%s%02d"):format(sign, m, exp < 0 and "-" or "+", math.abs(exp))
end

-- Python's repr of a Lua value as PyTorch's extra_repr prints it; a table
-- is a tuple. The text is built in one buffer (linear in its size, however
-- deep the nesting); a table inside itself prints as (...), as Python's
-- repr prints a list inside itself, and so does nesting past 100 levels
-- (Python's repr would stop at its recursion limit). An object (a table whose
-- metatable has __tostring: a dataset, a module) prints as it prints, and a
-- list is read raw, so a table that raises on indexing prints anyway.
local MAX_REPR_DEPTH = 100
local function pyval_into(v, out, open, depth)
  if type(v) ~= "table" then
    local s
    if v == nil then s = "None"
    elseif v == true then s = "True"
    elseif v == false then s = "False"
    elseif math.type(v) == "integer" then s = tostring(v)
    elseif type(v) == "number" then s = M.pyfloat(v)
    else s = tostring(v) end
    out[#out + 1] = s
    return
  end
  if open[v] or depth >= MAX_REPR_DEPTH then out[#out + 1] = "(...)" return end
  local mt = getmetatable(v)
  if type(mt) == "table" and rawget(mt, "__tostring") ~= nil then out[#out + 1] = tostring(v) return end
  open[v] = true
  out[#out + 1] = "("
  local i = 1
  while rawget(v, i) ~= nil do -- as ipairs, without __index
    if i > 1 then out[#out + 1] = ", " end
    pyval_into(rawget(v, i), out, open, depth + 1)
    i = i + 1
  end
  out[#out + 1] = i == 2 and ",)" or ")"
  open[v] = nil
end

function M.pyval(v)
  local out = {}
  pyval_into(v, out, {}, 0)
  return table.concat(out)
end

-- positional values, then an options table (lua/tensh/args.lua)
M.is_opts, M.args = A.is_opts, A.bind

function M.check_int(fn, what, v, min)
  if math.type(v) ~= "integer" then
    if type(v) == "number" and v == math.floor(v) and math.tointeger(v) then v = math.tointeger(v)
    elseif type(v) == "number" and v == math.floor(v) then
      M.raise("%s: %s must be an integer, got %s (outside the 64-bit integer range)", fn, what, M.pyfloat(v))
    else M.raise("%s: %s must be an integer, got %s", fn, what, type(v) == "number" and M.pyfloat(v) or type(v)) end
  end
  if min and v < min then M.raise("%s: %s must be at least %d, got %d", fn, what, min, v) end
  return v
end

-- an integer or a list of `n` integers -> a list of n integers
function M.ntuple(fn, what, v, n, min)
  v = A.plain(v) -- a torch.Size counts from 0
  if type(v) == "number" then
    local i = M.check_int(fn, what, v, min)
    local out = {}
    for k = 1, n do out[k] = i end
    return out
  end
  if type(v) == "table" and #v == n then
    local out = {}
    for k = 1, n do out[k] = M.check_int(fn, what, v[k], min) end
    return out
  end
  M.raise("%s: %s must be an integer or a list of %d integers, got %s", fn, what, n,
    type(v) == "table" and ("a list of %d"):format(#v) or type(v))
end

-- ---- for the layer files (lua/tensh/nn/*.lua) --------------------------------------

-- options for torch.empty & co from a layer's device/dtype arguments
function M.factory(a)
  return {device = a.device ~= nil and tostring(a.device) or nil, dtype = a.dtype}
end

function M.check_input(name, x)
  if not torch.is_tensor(x) then M.raise("%s: expected a tensor input, got %s", name, A.typename(x)) end
end

-- the layer's parameters and x must share a device: say both and how to fix it
function M.check_device(name, x, p)
  if p == nil then return end
  local xd, pd = tostring(x.device), tostring(p.device)
  if xd ~= pd then
    M.raise("%s: input is on %s but the layer's parameters are on %s; move the input (x:to(\"%s\")) or the model (model:to(\"%s\"))",
      name, xd, pd, pd, xd)
  end
end

-- PyTorch's default bias init: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
function M.uniform_bias(bias, fan_in)
  if bias == nil then return end
  local bound = fan_in > 0 and 1 / math.sqrt(fan_in) or 0
  require("tensh.nn").init.uniform_(bias, -bound, bound)
end

return M
