-- JSON for benchmark records and traces: encode Lua tables (a table with
-- [1] or empty and marked by json.array is an array, else an object with
-- sorted keys, so lines diff well) and decode one JSON text.
local json = {}

local array_mt = {__name = "json.array"}
-- json.array(t): t encodes as an array even when empty
function json.array(t) return setmetatable(t or {}, array_mt) end

local escapes = {['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f", ["\n"] = "\\n", ["\r"] = "\\r",
  ["\t"] = "\\t"}
local function quote(s)
  return '"' .. s:gsub('[%c"\\]', function(c) return escapes[c] or ("\\u%04x"):format(c:byte()) end) .. '"'
end

local function encode(v, out)
  local t = type(v)
  if v == nil then out[#out + 1] = "null"
  elseif t == "boolean" then out[#out + 1] = tostring(v)
  elseif t == "number" then
    if v ~= v or v == math.huge or v == -math.huge then out[#out + 1] = "null"
    elseif math.type(v) == "integer" then out[#out + 1] = tostring(v)
    else out[#out + 1] = ("%.17g"):format(v) end
  elseif t == "string" then out[#out + 1] = quote(v)
  elseif t == "table" then
    if getmetatable(v) == array_mt or v[1] ~= nil then
      out[#out + 1] = "["
      for i = 1, #v do
        if i > 1 then out[#out + 1] = "," end
        encode(v[i], out)
      end
      out[#out + 1] = "]"
    else
      local keys = {}
      for k in pairs(v) do
        if type(k) ~= "string" then error(("json.encode: object keys must be strings, got %s"):format(type(k)), 0) end
        keys[#keys + 1] = k
      end
      table.sort(keys)
      out[#out + 1] = "{"
      for i, k in ipairs(keys) do
        if i > 1 then out[#out + 1] = "," end
        out[#out + 1] = quote(k)
        out[#out + 1] = ":"
        encode(v[k], out)
      end
      out[#out + 1] = "}"
    end
  else
    error(("json.encode: cannot encode a %s"):format(t), 0)
  end
end

function json.encode(v)
  local out = {}
  encode(v, out)
  return table.concat(out)
end

-- json.decode(s) -> value; raises "json.decode: <what> at position N"
function json.decode(s)
  local pos = 1
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
  function value()
    ws()
    local c = s:sub(pos, pos)
    if c == "{" then
      local t = {}
      pos = pos + 1
      ws()
      if s:sub(pos, pos) == "}" then pos = pos + 1 return t end
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
        if d == "}" then return t end
        if d ~= "," then pos = pos - 1 fail("expected ',' or '}'") end
      end
    elseif c == "[" then
      local t = json.array()
      pos = pos + 1
      ws()
      if s:sub(pos, pos) == "]" then pos = pos + 1 return t end
      while true do
        t[#t + 1] = value()
        ws()
        local d = s:sub(pos, pos)
        pos = pos + 1
        if d == "]" then return t end
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
