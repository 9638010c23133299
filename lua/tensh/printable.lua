-- Every printable tensh value joins with `..` as it prints, as Python's
-- "shape: " + str(x.shape): "Device: " .. x.device, "shape " .. x.shape,
-- "loss " .. loss, "model: " .. model. Lua's `..` takes only strings and
-- numbers, and a value takes part only through a __concat metamethod, so
-- each printable class carries one: M.give(cls) for a Lua class (the class
-- helpers Module.extend, Optimizer.extend, ... copy it to the classes they
-- make), and install() for the C metatables in the registry (tensors,
-- torch.Size, torch.device, streams, events, device properties, ...).
-- dtypes are strings already.
local M = {}

local typename = require("tensh.args").typename

-- a side of `..` as text: strings and numbers as Lua joins them, values
-- with __tostring as they print; anything else is Lua's own error
local function text(v)
  local tv = type(v)
  if tv == "string" or tv == "number" then return v end
  local mt = debug.getmetatable(v)
  if type(mt) == "table" and rawget(mt, "__tostring") ~= nil then return tostring(v) end
  error(("attempt to concatenate a %s value"):format(typename(v)), 3) -- 1 text, 2 concat, 3 the user's line
end

-- a value that joins through this __concat
local function joins(v)
  local mt = debug.getmetatable(v)
  return type(mt) == "table" and rawget(mt, "__concat") == M.concat
end

function M.concat(a, b)
  if not joins(a) and not joins(b) then -- called by hand (Lua calls it with one of ours)
    error(("bad argument #1 to '__concat' (a printable tensh value expected on one side, got %s and %s)")
      :format(typename(a), typename(b)), 2)
  end
  return text(a) .. text(b)
end

-- gives the class (or metatable) mt a __concat when it prints and has none
function M.give(mt)
  if type(mt) == "table" and rawget(mt, "__tostring") ~= nil and rawget(mt, "__concat") == nil then
    rawset(mt, "__concat", M.concat)
  end
  return mt
end

-- the C side's metatables: every named one in the registry that prints
function M.install()
  for k, mt in pairs(debug.getregistry()) do
    if type(k) == "string" and (k:find("^tensh%.") or k:find("^torch%.")) then M.give(mt) end
  end
end

return M
