-- What the prompt adds to Lua: how values print (show), help(), dir(),
-- exit(), quit(), plot() and imshow(). Loaded by the REPL (src/shell/repl.c),
-- which makes help, dir, exit, quit, plot and imshow globals. Everything here reads tables raw
-- (rawget, next) or through __index *tables* only, so it works on the
-- library's strict tables and never runs a user's __index function.
local M = {}

local MAX_ITEMS = 20 -- entries shown per table, then "... (N more)"
local MAX_PLAIN = 100 -- entries shown of a list of numbers, strings or booleans
local MAX_DEPTH = 4  -- nesting shown, then {...}
local WIDTH = 78     -- a table longer than this on one line takes one line per entry

local function is_tensor(v) return torch.is_tensor(v) end

-- raw read, then the __index table chain (never an __index function)
local function get(t, k)
  for _ = 1, 8 do
    if type(t) ~= "table" then return nil end
    local v = rawget(t, k)
    if v ~= nil then return v end
    local mt = getmetatable(t)
    local idx = type(mt) == "table" and rawget(mt, "__index") or nil
    if type(idx) ~= "table" then return nil end
    t = idx
  end
end

-- ---- printing values ------------------------------------------------------------

-- A tensor inside a table: its values when it is small, else shape and dtype.
local function tensor_summary(t)
  if t:dim() <= 1 and t:numel() <= 6 then
    local s = tostring(t):gsub("%s*\n%s*", " ")
    if #s <= 60 then return s end
  end
  local s = ("tensor(shape=[%s], dtype=%s"):format(table.concat(t.shape:totable(), ", "),
    (tostring(t.dtype):gsub("^torch%.", "")))
  if tostring(t.device) ~= "cpu" then s = s .. ", device=" .. tostring(t.device) end
  if t.requires_grad then s = s .. ", requires_grad=True" end -- as the tensor prints it (PyTorch's word)
  return s .. ")"
end

local function key_order(a, b)
  local ta, tb = type(a), type(b)
  if ta ~= tb then return ta == "number" end
  if ta == "number" or ta == "string" then return a < b end
  return tostring(a) < tostring(b)
end

local function indent_lines(s, pad) return (s:gsub("\n", "\n" .. pad)) end

local format_value

local function format_table(t, depth, seen, pad)
  if seen[t] then return "<cycle>" end
  if depth > MAX_DEPTH then return "{...}" end
  seen[t] = true
  local n = rawlen(t)
  local keys = {}
  for k in next, t do
    if not (math.type(k) == "integer" and k >= 1 and k <= n) then keys[#keys + 1] = k end
  end
  table.sort(keys, key_order)
  local items, total = {}, n + #keys
  local inner = pad .. "  "
  -- a list of plain values (dir's names, tolist()'s numbers) shows more
  local plain, limit = true, MAX_ITEMS
  for i = 1, math.min(n, MAX_PLAIN) do
    local tv = type(rawget(t, i))
    if tv ~= "number" and tv ~= "string" and tv ~= "boolean" then plain = false break end
  end
  if plain and #keys == 0 then limit = MAX_PLAIN end
  for i = 1, n do
    if #items >= limit then break end
    items[#items + 1] = format_value(rawget(t, i), depth + 1, seen, inner)
  end
  for _, k in ipairs(keys) do
    if #items >= limit then break end
    local ks = type(k) == "string" and k:match("^[%a_][%w_]*$") and k or ("[" .. format_value(k, depth + 1, seen, inner) .. "]")
    items[#items + 1] = ks .. " = " .. format_value(rawget(t, k), depth + 1, seen, inner)
  end
  if total > #items then items[#items + 1] = ("... (%d more)"):format(total - #items) end
  seen[t] = nil
  local mt = getmetatable(t)
  local name = type(mt) == "table" and rawget(mt, "__name")
  local prefix = type(name) == "string" and name or ""
  if #items == 0 then return prefix .. "{}" end
  local one = prefix .. "{" .. table.concat(items, ", ") .. "}"
  if #one + #pad <= WIDTH and not one:find("\n", 1, true) then return one end
  if plain and #keys == 0 then -- as many to a line as fit
    local lines, line = {}, ""
    for i, it in ipairs(items) do
      local piece = it .. (i < #items and "," or "")
      if #line > 0 and #inner + #line + 1 + #piece > WIDTH then
        lines[#lines + 1] = line
        line = piece
      else
        line = #line > 0 and line .. " " .. piece or piece
      end
    end
    lines[#lines + 1] = line
    return prefix .. "{\n" .. inner .. table.concat(lines, "\n" .. inner) .. "\n" .. pad .. "}"
  end
  return prefix .. "{\n" .. inner .. table.concat(items, ",\n" .. inner) .. "\n" .. pad .. "}"
end

function format_value(v, depth, seen, pad)
  local tv = type(v)
  if tv == "string" then return (("%q"):format(v):gsub("\\\n", "\\n")) end
  if is_tensor(v) then return tensor_summary(v) end
  if tv == "table" then
    local mt = getmetatable(v)
    if type(mt) == "table" and rawget(mt, "__tostring") then return indent_lines(tostring(v), pad) end
    return format_table(v, depth, seen, pad)
  end
  if tv == "function" then
    local name = M.name_of(v)
    if name then return "function " .. name end
  end
  return tostring(v)
end

-- A value as the prompt prints it: a table readably (keys sorted, tensors
-- summarised, cut past MAX_ITEMS entries and MAX_DEPTH levels), the rest as
-- print shows it.
function M.format(v)
  if type(v) == "table" then
    local mt = getmetatable(v)
    if not (type(mt) == "table" and rawget(mt, "__tostring")) then return format_table(v, 1, {}, "") end
  elseif type(v) == "function" then
    return format_value(v, 1, {}, "")
  end
  return tostring(v)
end

-- The REPL's printer for the values of a line.
function M.show(...)
  local parts = {}
  for i = 1, select("#", ...) do parts[i] = M.format((select(i, ...))) end
  io.write(table.concat(parts, "\t"), "\n")
end

-- ---- the reference in docs/api.md ----------------------------------------------

-- Tensor:x, Module:x, ... in the reference name methods of these
local CLASSES = {
  Tensor = function() return torch._methods end,
  Module = function() return nn.Module end,
  Optimizer = function() return optim.Optimizer end,
  LRScheduler = function() return optim.lr_scheduler.LRScheduler end,
  DataLoader = function() return data.DataLoader end,
  SummaryWriter = function() -- a C class: its methods are its metatable's __index
    local mt = debug.getregistry()["tensh.tb.SummaryWriter"]
    return type(mt) == "table" and rawget(mt, "__index") or nil
  end,
  Stream = function() return cuda.Stream end,
  Event = function() return cuda.Event end,
}

-- a tensor's properties are read through its __index function, on a tensor
-- that has them all
local property_probe
local function tensor_property(k)
  if not property_probe then
    local x = torch.ones(2, {requires_grad = true})
    local y = x * 2
    y:sum():backward()
    property_probe = y
    property_probe = {x = x, y = y}
  end
  local ok, v = pcall(function() return property_probe.y[k] end)
  if ok and v ~= nil then return v end
  ok, v = pcall(function() return property_probe.x[k] end)
  return ok and v or nil
end

-- The value a name in the reference denotes ("torch.matmul", "Tensor:sum",
-- "Tensor.shape", "nn.Linear", "Module:train"), or nil where tensh has none.
function M.resolve(name)
  local head, rest = name:match("^([%a_][%w_]*)(.*)$")
  if not head then return nil end
  local v
  if CLASSES[head] and rest:match("^[:.]") then
    v = CLASSES[head]()
    if head == "Tensor" and rest:match("^%.[%a_][%w_]*$") then return tensor_property(rest:sub(2)) end
  elseif head == "Tensor" and rest == "" then
    return torch.Tensor
  else
    v = get(_G, head)
  end
  if v == nil and rest == "" and M[head] and head:match("^[a-z]+$") then return M[head] end -- help, dir, ...
  for _, part in rest:gmatch("([:.])([%a_][%w_]*)") do
    if v == nil then return nil end
    local raw = get(v, part)
    if raw == nil and type(v) == "table" then
      -- a library table may compute a field (torch.backends.cudnn.enabled)
      -- or load it lazily; a strict one raises for a missing name
      local okr, val = pcall(function() return v[part] end)
      if okr then raw = val end
    end
    v = raw
  end
  return v
end

local doc -- {entries = {...}, by_name = {name -> entry}}

-- Reads the embedded docs/api.md: each "### `sig` · `sig`" heading is an
-- entry, its first paragraph the text; entries under "## Planned" are
-- marked planned.
function M.reference()
  if doc then return doc end
  local ok, text = pcall(require, "tensh.api_doc")
  doc = {entries = {}, by_name = {}}
  if not ok or type(text) ~= "string" then return doc end
  local planned, cur, in_code = false, nil, false
  for line in (text .. "\n"):gmatch("(.-)\n") do
    if line:match("^```") then in_code = not in_code end
    if in_code then
      if cur and cur.para == nil then cur.example = (cur.example or "") .. line .. "\n" end
    elseif line:match("^## ") then
      planned = line:match("^## Planned") ~= nil
      cur = nil
    elseif line:match("^### ") then
      cur = {sigs = {}, names = {}, planned = planned, heading = line:sub(5)}
      for sig in line:gmatch("`([^`]+)`") do
        cur.sigs[#cur.sigs + 1] = sig
        local nm = sig:match("^([%w_.:]+)")
        if nm then
          cur.names[#cur.names + 1] = nm
          doc.by_name[nm] = doc.by_name[nm] or cur
        end
      end
      doc.entries[#doc.entries + 1] = cur
    elseif cur and not line:match("^```") then
      if line:match("^%s*$") then
        if cur.para then cur.done = true end
      elseif not cur.done then
        cur.para = (cur.para and cur.para .. "\n" or "") .. line
      end
    end
  end
  return doc
end

-- namespaces searched for a value's name, in this order (the names the
-- reference documents them by)
local NAMESPACES = {"torch", "nn.functional", "nn.init", "nn.utils.rnn", "nn.utils", "nn", "optim.lr_scheduler",
  "optim", "data.transforms", "data", "cuda", "tb", "amp", "dist", "bench", "torch.profiler", "torch.cpu", "models",
  "torch.autograd"}

local names_by_value
function M.name_of(v)
  if not names_by_value then
    names_by_value = {}
    for i = #NAMESPACES, 1, -1 do -- the first namespace wins
      local ns = M.resolve(NAMESPACES[i])
      if type(ns) == "table" then
        for k, x in next, ns do
          if type(k) == "string" and not k:match("^_") and (type(x) == "function" or type(x) == "table") then
            names_by_value[x] = NAMESPACES[i] .. "." .. k
          end
        end
      end
    end
    for k, x in next, torch._methods do
      if type(k) == "string" and names_by_value[x] == nil then names_by_value[x] = "Tensor:" .. k end
    end
    -- a tensor method that is also torch.x is documented under either name
  end
  return names_by_value[v]
end

-- The reference read the other way: a value -> the entry (and the name) of
-- the first documented name that denotes it. name_of gives a value one name,
-- from the namespaces it searches; this finds an entry under any documented
-- name: an alias (Tensor:clip_ is Tensor:clamp_), a class's method
-- (Module:train), a name that starts with "_". Tensor.x names are skipped:
-- they denote a tensor's property values, not functions.
local entries_by_value
local function documented_entry(v)
  if not entries_by_value then
    entries_by_value = {}
    for _, e in ipairs(M.reference().entries) do
      for _, name in ipairs(e.planned and {} or e.names) do
        if not name:match("^Tensor%.") then
          local ok, x = pcall(M.resolve, name)
          if ok and (type(x) == "function" or type(x) == "table") and entries_by_value[x] == nil then
            entries_by_value[x] = {e, name}
          end
        end
      end
    end
  end
  local hit = entries_by_value[v]
  if hit then return hit[1], hit[2] end
end

-- the reference's entry for a value or a name; the name it was found under
local function entry_for(x)
  local ref = M.reference()
  local candidates = {}
  if type(x) == "string" then
    candidates = {x, "torch." .. x, "nn." .. x, "optim." .. x, "data." .. x, "cuda." .. x, "Tensor:" .. x,
      "Tensor." .. x, "nn.functional." .. x}
  elseif is_tensor(x) then
    candidates = {"torch.Tensor"}
  elseif type(x) == "table" then
    local mt = getmetatable(x)
    local cls_name = rawget(x, "__name") or (type(mt) == "table" and rawget(mt, "__name"))
    if type(cls_name) == "string" then
      for _, ns in ipairs({"nn", "optim", "optim.lr_scheduler", "data", "tb", "cuda"}) do
        candidates[#candidates + 1] = ns .. "." .. cls_name
      end
      candidates[#candidates + 1] = cls_name
    end
    local n = M.name_of(x)
    if n then table.insert(candidates, 1, n) end
  else
    local n = M.name_of(x)
    if n then
      candidates = {n}
      local short = n:match("^Tensor:(.*)$") or n:match("^torch%.(.*)$")
      if short then
        candidates[#candidates + 1] = "torch." .. short
        candidates[#candidates + 1] = "Tensor:" .. short
      end
    end
  end
  for _, c in ipairs(candidates) do
    if ref.by_name[c] then return ref.by_name[c], c end
  end
  if type(x) == "function" or (type(x) == "table" and not is_tensor(x)) then
    local e, name = documented_entry(x)
    if e then return e, name end
  end
  return nil, candidates[1]
end

local GETTING_STARTED = [[
tensh: PyTorch's API in Lua. Some first lines:
  x = torch.randn(3, 4)                      -- tensors, as torch.* in PyTorch
  model = nn.Linear(4, 2); y = model(x)      -- layers in nn, optimizers in optim
  loss = y:sum(); loss:backward(); model.weight.grad
help(torch.matmul), help(nn.Linear), help(t)  the reference entry of a function, class or value
dir(x)                                        the methods and fields of a tensor, module, table
Tab completes names (torch.ze<TAB>, t:<TAB>); a trailing ';' hides a value; exit() or Ctrl-D leaves.
The whole reference: docs/api.md; porting a PyTorch script: docs/porting.md.]]

-- help(), help(x), help("name"): the reference's signature and paragraph
function M.help(...)
  if select("#", ...) == 0 then
    print(GETTING_STARTED)
    return
  end
  local x = ...
  if x == nil then
    print('help: got nil, as a name that does not exist gives; help("nn.LSTM") looks a name up')
    return
  end
  local e, name = entry_for(x)
  if not e then
    local what = name or (type(x) == "string" and x) or type(x)
    print(("help: no entry for %s in docs/api.md; dir(x) lists what a value has."):format(what))
    return
  end
  local out = {table.concat(e.sigs, "\n")}
  if e.planned then out[#out + 1] = "(planned: not in tensh yet)" end
  if e.para then out[#out + 1] = e.para end
  if e.example then out[#out + 1] = "Example:\n" .. e.example:gsub("\n$", "") end
  print(table.concat(out, "\n"))
end

-- ---- dir --------------------------------------------------------------------

local names_mt
local TENSOR_PROPERTIES = {"shape", "dtype", "device", "ndim", "is_cuda", "is_leaf", "requires_grad", "grad", "grad_fn",
  "T", "data"}

local function add_keys(set, t, with_private)
  if type(t) ~= "table" then return end
  for k in next, t do
    if type(k) == "string" and k:match("^[%a_][%w_]*$") and (with_private or not k:match("^_")) then set[k] = true end
  end
end

-- dir's list prints whole, in columns (the printer would cut it at MAX_PLAIN)
names_mt = {__tostring = function(list)
  local w = 0
  for _, n in ipairs(list) do w = math.max(w, #n) end
  local cols = math.max(1, (WIDTH + 2) // (w + 2))
  local lines = {}
  for i = 1, #list, cols do
    local row = {}
    for j = i, math.min(i + cols - 1, #list) do row[#row + 1] = list[j] .. string.rep(" ", w - #list[j]) end
    lines[#lines + 1] = (table.concat(row, "  "):gsub("%s+$", ""))
  end
  return table.concat(lines, "\n")
end}

-- dir(x): the names x answers to, sorted: a tensor's methods and
-- properties; a module's children, parameters, buffers and attributes and
-- its class's methods; a table's keys and those of its __index tables.
function M.dir(x)
  local set = {}
  if is_tensor(x) then
    add_keys(set, torch._methods)
    for _, p in ipairs(TENSOR_PROPERTIES) do set[p] = true end
  elseif type(x) == "table" then
    add_keys(set, x)
    -- nn.Module's fields live in its registries
    for _, reg in ipairs({"_modules", "_parameters", "_buffers"}) do
      local r = rawget(x, reg)
      if type(r) == "table" then add_keys(set, rawget(r, "vals") or r) end
    end
    add_keys(set, rawget(x, "_attrs"))
    -- the class chain: a metatable's own keys when its __index is a function
    -- (nn.Module), the __index tables otherwise
    local mt, guard = getmetatable(x), 0
    while type(mt) == "table" and guard < 8 do
      guard = guard + 1
      local idx = rawget(mt, "__index")
      if type(idx) == "table" then
        add_keys(set, idx)
        mt = getmetatable(idx)
        if mt == nil and idx ~= x then break end
      elseif type(idx) == "function" then
        add_keys(set, mt)
        local up = getmetatable(mt)
        local nxt = type(up) == "table" and rawget(up, "__index")
        if type(nxt) ~= "table" then break end
        add_keys(set, nxt)
        mt = {__index = getmetatable(nxt) and rawget(getmetatable(nxt), "__index") or nil}
      else
        break
      end
    end
  elseif type(x) == "string" then
    add_keys(set, string)
  end
  local out = {}
  for k in pairs(set) do if not k:match("^__") then out[#out + 1] = k end end
  table.sort(out)
  return setmetatable(out, names_mt)
end

-- exit() and quit() leave as in Python; typed without the call they say how
local function leaver(name)
  return setmetatable({}, {
    __call = function(_, code) os.exit(code == nil and 0 or code, true) end,
    __tostring = function() return ("Use %s() or Ctrl-D to exit"):format(name) end,
  })
end
M.exit, M.quit = leaver("exit"), leaver("quit")

-- plot() and imshow() (lua/tensh/plot.lua): globals at the prompt
local pictures = require "tensh.plot"
M.plot, M.imshow = pictures.plot, pictures.imshow

return M
