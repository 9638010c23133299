-- Argument checking and error wording for the Lua library, worded as the C
-- binding words them (luaL_typeerror): "bad argument #1 to 'matmul' (tensor
-- expected, got nil)", and "fn: unknown option 'x' (expected one of: a, b)",
-- as the C binding's lt_opts_check words options (src/lua/ltensor.c).
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

local tensor_mt
function M.check_tensor(fn, pos, v)
  if not torch.is_tensor(v) then
    tensor_mt = tensor_mt or debug.getmetatable(torch.empty(0))
    if debug.getmetatable(v) == tensor_mt then -- is_tensor is false for a freed one
      M.bad_argument(fn, pos, "tensor was already freed (closed by <close> or __close)")
    end
    M.type_error(fn, pos, "tensor", v)
  end
  return v
end

-- "fn: what must be <expected>, got <value>": the checks below, for
-- arguments that may come positionally or from an options table (so are
-- named rather than numbered).
local function must_be(fn, what, expected, v) raise("%s: %s must be %s, got %s", fn, what, expected, M.show(v)) end

local A_TYPE = {number = "a number", boolean = "a boolean", string = "a string", ["function"] = "a function",
  table = "a table"}
function M.check_type(fn, what, v, lua_type)
  if type(v) ~= lua_type then must_be(fn, what, A_TYPE[lua_type], v) end
  return v
end
function M.check_number(fn, what, v) return M.check_type(fn, what, v, "number") end
function M.check_boolean(fn, what, v) return M.check_type(fn, what, v, "boolean") end

function M.check_optional_tensor(fn, what, v)
  if v ~= nil and not torch.is_tensor(v) then must_be(fn, what, "a tensor or nil", v) end
  return v
end

-- A dtype (torch.float32, "float64", "half", ...), as the C side reads it.
function M.check_dtype(fn, what, v)
  if type(v) ~= "string" then must_be(fn, what, 'a dtype (torch.float32, "float64", ...)', v) end
  local ok, err = pcall(torch.empty, 0, {dtype = v})
  if not ok then raise("%s: %s: %s", fn, what, tostring(err):match("unknown dtype.*") or tostring(err)) end
  return v
end

function M.is_plain_table(v) return type(v) == "table" and debug.getmetatable(v) == nil end

-- Optimal string alignment distance (a transposition counts 1), case-blind.
local function distance(a, b)
  a, b = a:lower(), b:lower()
  local la, lb = #a, #b
  if math.abs(la - lb) > 2 then return 3 end
  local d = {}
  for i = 0, la do d[i] = {[0] = i} end
  for j = 0, lb do d[0][j] = j end
  for i = 1, la do
    for j = 1, lb do
      local cost = a:byte(i) == b:byte(j) and 0 or 1
      local v = math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
      if i > 1 and j > 1 and a:byte(i) == b:byte(j - 1) and a:byte(i - 1) == b:byte(j) then
        v = math.min(v, d[i - 2][j - 2] + 1)
      end
      d[i][j] = v
    end
  end
  return d[la][lb]
end
M.distance = distance

-- The public name in `names` nearest to k: at most 2 edits (1 for keys of up
-- to 4 bytes), case-blind, the first in sorted order on a tie; or nil. The
-- rule tensh.strict suggests field names by and the C side options by.
function M.nearest(k, names)
  local best, best_d = nil, #k <= 4 and 1 or 2
  for _, n in ipairs(names) do
    if n:sub(1, 1) ~= "_" then
      local dd = distance(k, n)
      if dd < best_d or (dd == best_d and best == nil) or (dd == best_d and n < best) then best, best_d = n, dd end
    end
  end
  return best
end

-- "fn: unknown option 'dtyp' (expected one of: device, dtype; did you mean
-- 'dtype'?)", word for word what the C binding's lt_opts_check raises.
function M.unknown_option(fn, k, allowed)
  local names = {}
  for a in pairs(allowed) do names[#names + 1] = tostring(a) end
  table.sort(names)
  local shown = type(k) == "string" and ("'%s'"):format(k)
    or ("[%s]"):format((type(k) == "number" or type(k) == "boolean") and tostring(k) or type(k))
  if #names == 0 then raise("%s: unknown option %s (%s takes no options)", fn, shown, fn) end
  if type(k) ~= "string" then
    raise("%s: unknown option %s (options are named; expected one of: %s)", fn, shown, table.concat(names, ", "))
  end
  local near = M.nearest(k, names)
  raise("%s: unknown option %s (expected one of: %s%s)", fn, shown, table.concat(names, ", "),
    near and ("; did you mean '%s'?"):format(near) or "")
end

-- An options table: nil gives {}; a key not in `allowed` (a set, or a table
-- of defaults) is an error naming the keys the function takes, and the
-- nearest of them when one is close.
function M.check_opts(fn, opts, allowed)
  if opts == nil then return {} end
  if not M.is_plain_table(opts) then raise("%s: options must be a table, got %s", fn, M.typename(opts)) end
  for k in pairs(opts) do
    if allowed[k] == nil then M.unknown_option(fn, k, allowed) end
  end
  return opts
end

-- A table of options (string keys, or empty) rather than a list of sizes.
function M.is_opts(v)
  if type(v) ~= "table" or getmetatable(v) ~= nil then return false end
  local k = next(v)
  return k == nil or type(k) == "string"
end

-- Arguments as PyTorch takes them: positional values named by `names`, then
-- an optional options table; an option given both ways is an error.
-- Returns a table name -> value.
function M.bind(fn, names, ...) return M.bind_keywords(fn, names, nil, ...) end

-- arguments PyTorch types as bool: another value is a mistake to report, not
-- a truthy flag (F.relu(x, {inplace = 0}) would otherwise run in place)
local FLAGS = {"inplace", "training", "keepdim"}

-- The same, where the options table may also hold the names in the set
-- `keywords` (PyTorch's keyword-only arguments, after its `*`).
function M.bind_keywords(fn, names, keywords, ...)
  local n = select("#", ...)
  local out, opts = {}, nil
  local last = n > 0 and select(n, ...) or nil
  if n > 0 and M.is_opts(last) then opts, n = last, n - 1 end
  if n > #names then raise("%s: expected at most %d positional arguments, got %d", fn, #names, n) end
  for i = 1, n do out[names[i]] = (select(i, ...)) end
  if opts then
    local known = {}
    for _, k in ipairs(names) do known[k] = true end
    for k in pairs(keywords or {}) do known[k] = true end
    M.check_opts(fn, opts, known)
    for k, v in pairs(opts) do
      if out[k] ~= nil then raise("%s: '%s' given both as an argument and as an option", fn, k) end
      out[k] = v
    end
  end
  for _, k in ipairs(FLAGS) do
    local v = out[k]
    if v ~= nil and type(v) ~= "boolean" then raise("%s: %s must be a boolean, got %s", fn, k, M.show(v)) end
  end
  return out
end

-- A torch.Size given where a list is read ({2, 3}, a list of dims, of
-- sizes, of paddings) as that list: a Size counts from 0 (s[0]) and ipairs
-- over it would skip the first dim, so code that reads lists takes its
-- plain copy. M.unsize(...) returns the arguments with each Size so copied
-- (a call without one gets its arguments back untouched).
local size_mt
local function is_size(v)
  size_mt = size_mt or getmetatable(torch.Size({}))
  return type(v) == "table" and getmetatable(v) == size_mt
end
M.is_size = is_size
function M.plain(v) if is_size(v) then return v:totable() end return v end
function M.unsize(...)
  local n = select("#", ...)
  for i = 1, n do
    if is_size((select(i, ...))) then
      local a = table.pack(...)
      for j = i, n do a[j] = M.plain(a[j]) end
      return table.unpack(a, 1, n)
    end
  end
  return ...
end

-- Lists the library returns (parameters(), param_groups, get_last_lr(), ...)
-- stay Lua lists, counting from 1 (for ipairs, #, table functions); index 0,
-- a PyTorch habit, raises instead of giving a silent nil.
local list_mts = {}
function M.list(t, what)
  local mt = list_mts[what]
  if not mt then
    mt = {__index = function(_, k)
      if k == 0 then
        raise("%s: Lua lists count from 1: the first element is [1], the last [#list] (index 0 is nil)", what)
      end
    end}
    list_mts[what] = mt
  end
  return setmetatable(t, mt)
end

-- Floating-point dtypes ("torch.float32", ...), from the C enum (prelude.lua
-- records them in torch._floating_dtypes).
function M.is_floating_dtype(dtype) return rawget(torch, "_floating_dtypes")[dtype] == true end

return M
