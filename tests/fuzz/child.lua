-- One fuzzing process, started by tests/fuzz/run.sh:
--   tensh child.lua SEED FIRST DEADLINE PROGRESS MESSAGES
-- Makes calls FIRST, FIRST+1, ... until the unix time DEADLINE, or past call
-- number FUZZ_CALLS (environment) when that is set. Before each
-- call it writes "<index> <ok> <errors> <devices> <counts> <call>" at the start
-- of PROGRESS, so a crash or a hang is reported with the call that caused it;
-- at the end it writes "end <index> <ok> <errors> <functions> <counts>".
-- <devices> is where the call's arguments are (values.lua's devices_of: cpu,
-- cuda, mixed or none); <counts> is "cpu:calls/ok/errors,cuda:...,..." of
-- this process so far, the current call among the calls. PROGRESS.reached
-- gets "<devices>\t<function>" for each function the first time it is called
-- with arguments on those devices. Each distinct error message (digits
-- folded) is appended to MESSAGES as "<where>\t<kind>\t<side>\t<function>\t<message>\t<devices>":
-- <where> is "inside" for messages that come from inside the library (Lua's
-- own words, or a position in lua/tensh/) rather than naming the user's call,
-- <kind> says how the function was called (catalog.lua), <side> is the frame
-- that raised it ("c", "lua" or "user").
local seed, first, deadline, progress_path, messages_path = tonumber(arg[1]), tonumber(arg[2]),
  tonumber(arg[3]), arg[4], arg[5]
local dir = arg[0]:match("^(.*)/[^/]*$") or "."
package.path = dir .. "/?.lua;" .. package.path
local catalog, V = require("catalog"), require("values")

-- library code that ends the process would end the run: it raises instead
os.exit = function() error("fuzz: os.exit called", 2) end

math.randomseed(seed, 0)
local values = V.new()
local entries = catalog.build(values.objects)
local std = catalog.std_functions()
local std_names = {}
for _, lib in ipairs({"_G", "string", "table", "math", "utf8", "coroutine"}) do
  for k, v in pairs(_G[lib]) do
    if type(v) == "function" then std_names[k] = true end
  end
end
std_names["for iterator"] = true
std_names["?"] = true

local count_file = assert(io.open(progress_path .. ".functions", "w"))
count_file:write(#entries, "\n")
count_file:close()
local progress = assert(io.open(progress_path, "w"))
local reached_file = assert(io.open(progress_path .. ".reached", "a"))
reached_file:setvbuf("line")
local messages = assert(io.open(messages_path, "a"))
messages:setvbuf("line")

local function write_progress(line)
  progress:seek("set", 0)
  if #line > 1000 then line = line:sub(1, 1000) end
  progress:write(line, (" "):rep(1001 - #line), "\n")
  progress:flush()
end

local LUA_WORDS = {
  "attempt to ", "stack overflow", "table index is ", "bad argument #%-", "invalid key to 'next'",
  "string length overflow", "%(null%)", "^number has no integer representation", "invalid order function",
  "wrong number of arguments to 'insert'", "invalid value %(at index", "bad 'for'", "error in error handling",
  "lua/tensh/[%w_/]+%.lua:%d+:",
}

-- An operator's metamethod called by hand with an operand the operator refuses
-- says what Lua says for the operator ('x' .. {}, t < nil): Lua's words, and
-- the right ones there.
local OPERATOR_WORDS = {__concat = "^attempt to concatenate an? [%w%.%*]+ value$",
  __lt = "^attempt to compare a tensor with an? [%w%.%*]+ value$"}
OPERATOR_WORDS.__le, OPERATOR_WORDS.__eq = OPERATOR_WORDS.__lt, OPERATOR_WORDS.__lt

-- True when the message is Lua's or the library's own words rather than a
-- message about the call the user made.
local function from_inside(msg, key)
  if msg:find("attempt to yield") then return false end -- only this fuzzer's callbacks yield
  if OPERATOR_WORDS[key] and msg:find(OPERATOR_WORDS[key]) then return false end
  for _, p in ipairs(LUA_WORDS) do
    if msg:find(p) then return true end
  end
  local name = msg:match("bad argument #%d+ to '([^']*)'")
  if name and std_names[name] and name ~= key then return true end
  return false
end

-- The side an error comes from, between the raising frame and this
-- fuzzer's call site: "lua" if a frame of tensh's Lua library (lua/tensh/)
-- is on the way (its code made the failing call, so the fix is there), else
-- "c" if a C function other than Lua's own is, else "user" (raised in this
-- fuzzer's callbacks).
local function handler(e)
  local side = "user"
  for level = 2, 200 do
    local info = debug.getinfo(level, "Sf")
    if not info or info.source == "=caller" then break end
    if info.what == "C" then
      if not std[info.func] then side = "c" end
    elseif info.source:find("^@lua/tensh/") then
      side = "lua"
      break
    elseif side == "user" then -- raised in one of this fuzzer's callbacks
      break
    end
  end
  return {e, side}
end

local seen = {}
-- prefix: a "size" finding (a torch.Size twin's), the message after it
local function record(entry, kind, err, devices, prefix)
  local e, side = err[1], err[2]
  local msg = type(e) == "string" and e or ("<error object: " .. type(e) .. ">")
  msg = msg:gsub("^caller:%d+: ", ""):gsub("^[^\n]-tests/fuzz/[%w_]+%.lua:%d+: ", "")
  if prefix then msg = prefix .. msg end
  local folded = msg:gsub("0x%x+", "0x?"):gsub("%d+", "N"):gsub("%c", " "):sub(1, 300)
  if seen[kind .. devices .. folded] then return end
  seen[kind .. devices .. folded] = true
  local where = prefix and "size" or from_inside(msg, entry.key) and "inside" or "named"
  messages:write(where, "\t", kind, "\t", side, "\t", entry.path, "\t", folded, "\t", devices, "\n")
end

-- Calls go through a call site that names the function, as a user's does
-- (x:add(...), zeros(...)), so argument errors name it as users see them;
-- not a tail call, which would drop the call site (and the name) from the
-- stack. Errors raised at the user's line point at it ("caller:1:").
local KEYWORDS = {}
for w in ("and break do else elseif end false for function goto if in local nil not or repeat return " ..
          "then true until while"):gmatch("%a+") do KEYWORDS[w] = true end
local callers = {}
local function caller(entry, method)
  local cache = callers[entry] or {}
  callers[entry] = cache
  if cache[method] then return cache[method] end
  local key = entry.key
  if not (key and key:find("^[%a_][%w_]*$")) or KEYWORDS[key] then key = nil end
  local src
  if method and key then
    src = ("return function(self, ...) return (self:%s(...)) end"):format(key)
  else
    key = key or "f"
    src = ("local %s = ...\nreturn function(...) return (%s(...)) end"):format(key, key)
  end
  cache[method] = assert(load(src, "=caller"))(entry.fn)
  return cache[method]
end

-- ---- torch.Size twins -------------------------------------------------------
-- A call that took a list of integers ({2, 3}, as an argument or an option's
-- value) is made again with that list as a torch.Size, as PyTorch code passes
-- x.shape: the library must take it as the list, with the same answer. A
-- refusal, or a different result that the list itself gives again, is a
-- finding (messages' "size" lines). Not for internal helpers (_x).
local function int_list(v)
  if type(v) ~= "table" or getmetatable(v) ~= nil then return false end
  local n = rawlen(v)
  if n == 0 or n > 8 then return false end
  local count = 0
  for k, x in next, v do
    count = count + 1
    if count > n or math.type(k) ~= "integer" or math.type(x) ~= "integer" then return false end
  end
  return count == n
end

-- Where PyTorch gives a torch.Size another meaning than the list, by design:
-- torch.Tensor(torch.Size({2, 3})) is an uninitialised 2 x 3 tensor,
-- torch.Tensor({2, 3}) the values 2 and 3.
local SIZE_IS_A_SHAPE = {["torch.Tensor"] = true}

-- the arguments with each integer list (top level, or an option's value) as a
-- Size, or nil when there is none
local function size_twin(args, n)
  local twin, found = {}, false
  for i = 1, n do
    local v = args[i]
    if int_list(v) then
      twin[i], found = torch.Size(v), true
    elseif type(v) == "table" and getmetatable(v) == nil then
      local copy, changed, count = {}, false, 0
      for k, x in next, v do
        count = count + 1
        if count > 16 then changed = false break end -- (the long lists hold numbers, not sizes)
        if type(k) == "string" and int_list(x) then copy[k], changed = torch.Size(x), true else copy[k] = x end
      end
      if changed then twin[i], found = copy, true else twin[i] = v end
    else
      twin[i] = v
    end
  end
  return found and twin or nil
end

-- the results a twin must match: tensors by shape, dtype and values (NaN
-- equal to NaN), numbers, booleans and strings by value (addresses folded)
local function same_results(a, b)
  if a.n ~= b.n then return false end
  for i = 1, math.min(a.n, 3) do
    local x, y = a[i], b[i]
    if torch.is_tensor(x) and torch.is_tensor(y) then
      local ok, same = pcall(function()
        if x.shape ~= y.shape or x.dtype ~= y.dtype or x.device ~= y.device then return false end
        if x:numel() == 0 then return true end
        if x.dtype == torch.bool then return torch.equal(x, y) end
        local xd, yd = x:detach():double(), y:detach():double()
        return (xd:eq(yd):logical_or(xd:ne(xd):logical_and(yd:ne(yd)))):all()
      end)
      if not ok or not same then return false end
    elseif type(x) ~= type(y) then
      return false
    elseif type(x) == "number" or type(x) == "boolean" then
      if x ~= y and (x == x or y == y) then return false end
    elseif type(x) == "string" then
      if x:gsub("0x%x+", "0x?") ~= y:gsub("0x%x+", "0x?") then return false end
    end
  end
  return true
end

local function describe_call(entry, args, n)
  local parts = {}
  for i = 1, n do parts[i] = V.describe(args[i]) end
  return entry.path .. "(" .. table.concat(parts, ", ") .. ")"
end

-- FUZZ_SLOW=SECONDS lists the calls slower than that on stderr
local slow = tonumber(os.getenv("FUZZ_SLOW") or "")
-- FUZZ_CALLS=N stops after call N: call i draws from seed and i alone, so a
-- run that reaches N made the same calls on every machine
local max_calls = tonumber(os.getenv("FUZZ_CALLS") or "") or math.huge
local ok_count, err_count = 0, 0
local DEVICES = {"cpu", "cuda", "mixed", "none"}
local per_device, reached = {}, {}
for _, d in ipairs(DEVICES) do per_device[d], reached[d] = {calls = 0, ok = 0, errors = 0}, {} end
local function device_counts()
  local parts = {}
  for k, d in ipairs(DEVICES) do
    local c = per_device[d]
    parts[k] = ("%s:%d/%d/%d"):format(d, c.calls, c.ok, c.errors)
  end
  return table.concat(parts, ",")
end
local i = first
while os.time() < deadline and i <= max_calls do
  math.randomseed(seed, i)
  local entry = entries[math.random(#entries)]
  local args, n, has_self = values:args_for(entry)
  -- a method as obj:key(...); a metamethod by hand as __len(obj, ...), since
  -- obj.__len need not reach it (a tensor's __index has no __add)
  local call_site = caller(entry, has_self and entry.kind ~= "meta")
  local devices = V.devices_of(args, n)
  local counts = per_device[devices]
  counts.calls = counts.calls + 1
  if not reached[devices][entry] then
    reached[devices][entry] = true
    reached_file:write(devices, "\t", entry.path, "\n")
  end
  write_progress(("%d %d %d %s %s %s"):format(i, ok_count, err_count, devices, device_counts(),
    describe_call(entry, args, n)))
  local t0 = slow and torch._time()
  local results
  local twin = entry.kind ~= "internal" and not SIZE_IS_A_SHAPE[entry.path] and size_twin(args, n) -- (the library's helpers get its own lists)
  if twin then torch.manual_seed(i) end -- the twin draws the same random numbers
  if math.random(10) == 1 then -- inside a coroutine, where the callbacks' yields suspend the library mid-call
    local co = coroutine.create(function()
      return table.pack(xpcall(call_site, handler, table.unpack(args, 1, n)))
    end)
    local resumed, r = coroutine.resume(co)
    if not resumed then results = table.pack(false, {r, "?"})
    elseif coroutine.status(co) == "dead" then results = r
    else results = table.pack(true) end -- suspended mid-call, and dropped: the collector gets it
  else
    results = table.pack(xpcall(call_site, handler, table.unpack(args, 1, n)))
  end
  if slow and torch._time() - t0 > slow then
    io.stderr:write(("slow %.2f s: %s\n"):format(torch._time() - t0, describe_call(entry, args, n)))
  end
  if results[1] and twin and results.n > 0 then -- (an empty pack: a call suspended mid-way)
    write_progress(("%d %d %d %s %s %s"):format(i, ok_count, err_count, devices, device_counts(),
      "<torch.Size twin of> " .. describe_call(entry, args, n)))
    local function again(list)
      torch.manual_seed(i)
      local r = table.pack(xpcall(call_site, handler, table.unpack(list, 1, n)))
      return r, table.pack(table.unpack(r, 2, r.n))
    end
    local got, got_values = again(twin)
    local want_values = table.pack(table.unpack(results, 2, results.n))
    if not got[1] and again(args)[1] then -- (a list refused the second time: the first call's doing)
      record(entry, "size", got[2], devices, "a torch.Size refused where the list was taken: ")
    elseif not same_results(want_values, got_values) and same_results(want_values, select(2, again(args))) then
      record(entry, "size", {"a torch.Size gave another answer than the list", "?"}, devices, "")
    end
  end
  if results[1] then
    ok_count, counts.ok = ok_count + 1, counts.ok + 1
    values:keep(entry, table.unpack(results, 2, results.n))
  else
    err_count, counts.errors = err_count + 1, counts.errors + 1
    local kind = entry.kind == "method" and has_self and "api" or entry.kind
    record(entry, kind, type(results[2]) == "table" and results[2] or {results[2], "?"}, devices)
  end
  results, args = nil, nil
  if i % 200 == 0 then
    write_progress(("%d %d %d - %s <full garbage collection after call %d>"):format(i, ok_count, err_count,
      device_counts(), i))
    collectgarbage()
  end
  i = i + 1
end
write_progress(("end %d %d %d %d %s"):format(i, ok_count, err_count, #entries, device_counts()))
