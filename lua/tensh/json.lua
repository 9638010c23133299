-- JSON for benchmark records and traces: encode Lua tables (a table with
-- [1] or empty and marked by json.array is an array, else an object with
-- sorted keys, so lines diff well) and decode one JSON text.
local json = {}
local raise = require("tensh.errors").raise

local array_mt = {__name = "json.array"}
-- json.array(t): t encodes as an array even when empty
function json.array(t)
  if t ~= nil and torch and getmetatable(t) == getmetatable(torch.Size({})) then t = t:totable() end -- (its list)
  if t ~= nil and (type(t) ~= "table" or (getmetatable(t) ~= nil and getmetatable(t) ~= array_mt)) then
    raise("json.array: expected a plain table (a list) or nil, got %s", type(t))
  end
  return setmetatable(t or {}, array_mt)
end

-- Deeper nesting is refused, in both directions: no benchmark record nests
-- more than a few levels, and a deep or cyclic table would otherwise end in
-- Lua's "stack overflow" (Python's json stops at its recursion limit too).
local MAX_DEPTH = 1000
json.MAX_DEPTH = MAX_DEPTH

local escapes = {['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f", ["\n"] = "\\n", ["\r"] = "\\r",
  ["\t"] = "\\t"}
local function quote(s)
  return '"' .. s:gsub('[%c"\\]', function(c) return escapes[c] or ("\\u%04x"):format(c:byte()) end) .. '"'
end

local size_mt -- torch.Size's, once torch is loaded

-- `open` holds the tables being encoded (the path from the root), so a
-- table that contains itself is reported rather than followed forever.
-- Tables are read raw (a metatable's __index may raise); a torch.Size
-- encodes as the list it holds.
local function encode(v, out, open, depth)
  local t = type(v)
  if v == nil then out[#out + 1] = "null"
  elseif t == "boolean" then out[#out + 1] = tostring(v)
  elseif t == "number" then
    if v ~= v or v == math.huge or v == -math.huge then out[#out + 1] = "null"
    elseif math.type(v) == "integer" then out[#out + 1] = tostring(v)
    else out[#out + 1] = ("%.17g"):format(v) end
  elseif t == "string" then out[#out + 1] = quote(v)
  elseif t == "table" then
    if open[v] then error("json.encode: the table contains itself (a cycle); JSON has no references", 0) end
    if depth >= MAX_DEPTH then
      error(("json.encode: tables nested deeper than %d levels; JSON records here are shallow"):format(MAX_DEPTH), 0)
    end
    open[v] = true
    size_mt = size_mt or (torch and torch.Size and getmetatable(torch.Size({})))
    local is_size = getmetatable(v) == size_mt
    local list = is_size and v:totable() or v
    if is_size or getmetatable(v) == array_mt or rawget(list, 1) ~= nil then
      out[#out + 1] = "["
      for i = 1, rawlen(list) do
        if i > 1 then out[#out + 1] = "," end
        encode(rawget(list, i), out, open, depth + 1)
      end
      out[#out + 1] = "]"
    else
      local keys = {}
      for k in next, v do
        if type(k) ~= "string" then error(("json.encode: object keys must be strings, got %s"):format(type(k)), 0) end
        keys[#keys + 1] = k
      end
      table.sort(keys)
      out[#out + 1] = "{"
      for i, k in ipairs(keys) do
        if i > 1 then out[#out + 1] = "," end
        out[#out + 1] = quote(k)
        out[#out + 1] = ":"
        encode(rawget(v, k), out, open, depth + 1)
      end
      out[#out + 1] = "}"
    end
    open[v] = nil
  else
    error(("json.encode: cannot encode a %s"):format(t), 0)
  end
end

function json.encode(v)
  local out = {}
  encode(v, out, {}, 0)
  return table.concat(out)
end

-- json.decode(s) -> value; raises "json.decode: <what> at position N"
function json.decode(s)
  if type(s) ~= "string" then raise("json.decode: expected a string (JSON text), got %s", type(s)) end
  local pos, depth = 1, 0
  local function fail(what) error(("json.decode: %s at position %d"):format(what, pos), 0) end
  local function ws() pos = s:find("[^ \t\r\n]", pos) or #s + 1 end
  local value
  local function str()
    local out, i = {}, pos + 1
    while true do
      local j = s:find('["\\]', i)
      if not j then pos = #s + 1 fail("unterminated string") end
      out[#out + 1] = s:sub(i, j - 1)
      if s:sub(j, j) == '"' then pos = j + 1 break end
      local c = s:sub(j + 1, j + 1)
      local simple = {b = "\b", f = "\f", n = "\n", r = "\r", t = "\t", ['"'] = '"', ["\\"] = "\\", ["/"] = "/"}
      if simple[c] then out[#out + 1] = simple[c] i = j + 2
      elseif c == "u" then
        local hex = s:sub(j + 2, j + 5)
        if not hex:match("^%x%x%x%x$") then pos = j fail("bad \\u escape") end
        out[#out + 1] = utf8.char(tonumber(hex, 16))
        i = j + 6
      else pos = j fail("bad escape") end
    end
    return table.concat(out)
  end
  local function nest()
    depth = depth + 1
    if depth > MAX_DEPTH then fail(("nesting deeper than %d levels"):format(MAX_DEPTH)) end
  end
  function value()
    ws()
    local c = s:sub(pos, pos)
    if c == "{" then
      nest()
      local t = {}
      pos = pos + 1
      ws()
      if s:sub(pos, pos) == "}" then pos, depth = pos + 1, depth - 1 return t end
      while true do
        ws()
        if s:sub(pos, pos) ~= '"' then fail("expected a string key") end
        local k = str()
        ws()
        if s:sub(pos, pos) ~= ":" then fail("expected ':'") end
        pos = pos + 1
        t[k] = value()
        ws()
        local d = s:sub(pos, pos)
        pos = pos + 1
        if d == "}" then depth = depth - 1 return t end
        if d ~= "," then pos = pos - 1 fail("expected ',' or '}'") end
      end
    elseif c == "[" then
      nest()
      local t = json.array()
      pos = pos + 1
      ws()
      if s:sub(pos, pos) == "]" then pos, depth = pos + 1, depth - 1 return t end
      while true do
        t[#t + 1] = value()
        ws()
        local d = s:sub(pos, pos)
        pos = pos + 1
        if d == "]" then depth = depth - 1 return t end
        if d ~= "," then pos = pos - 1 fail("expected ',' or ']'") end
      end
    elseif c == '"' then return str()
    elseif s:find("^true", pos) then pos = pos + 4 return true
    elseif s:find("^false", pos) then pos = pos + 5 return false
    elseif s:find("^null", pos) then pos = pos + 4 return nil
    else
      local num = s:match("^-?%d+%.?%d*[eE]?[-+]?%d*", pos)
      if not num or num == "" or num == "-" then fail(c == "" and "unexpected end" or ("unexpected '" .. c .. "'")) end
      pos = pos + #num
      return math.tointeger(tonumber(num)) or tonumber(num)
    end
  end
  local v = value()
  ws()
  if pos <= #s then fail("trailing characters") end
  return v
end

return json
