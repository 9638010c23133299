-- torch.save / torch.load: safetensors checkpoints. Round trips of every
-- dtype and of nested tables, the file's bytes against a header written out
-- by hand, every kind of corrupt file (written here with io.open), atomic
-- replacement, and PyTorch reading the files where python3 has torch.
local T = require("harness")
local test, eq, raises = T.test, T.eq, T.raises

local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p '" .. dir .. "'"))
local function P(name) return dir .. "/" .. name end

local function read_bytes(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function write_bytes(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

local function ls(d)
  local p = io.popen("ls -A '" .. d .. "'")
  local names = {}
  for line in p:lines() do names[#names + 1] = line end
  p:close()
  table.sort(names)
  return names
end

-- a safetensors file from a header string and data bytes, the way any writer lays it out
local function st_file(header, data) return string.pack("<I8", #header) .. header .. (data or "") end

-- exact equality of two tensors: dtype, shape, and every value (NaN = NaN, signs of zeros)
local function same_tensor(a, b, what)
  T.ok(torch.is_tensor(a), (what or "value") .. ": expected a tensor, got " .. type(a))
  eq(tostring(a.dtype), tostring(b.dtype), (what or "") .. " dtype")
  eq(tostring(a.shape), tostring(b.shape), (what or "") .. " shape")
  local x, y = T.flat(a), T.flat(b)
  for i = 1, #y do
    local u, v = x[i], y[i]
    local ok = u == v or (u ~= u and v ~= v)
    if ok and u == 0 and type(u) == "number" and math.type(u) == "float" then ok = 1 / u == 1 / v end
    if not ok or math.type(u) ~= math.type(v) then
      error(("%s: element %d: expected %s (%s), got %s (%s)"):format(what or "tensor", i - 1, tostring(v),
        math.type(v) or type(v), tostring(u), math.type(u) or type(u)), 2)
    end
  end
end

-- deep equality of saved and loaded values: same Lua types, integer vs float, same keys
local function same(a, b, path)
  path = path or "root"
  if torch.is_tensor(b) then return same_tensor(a, b, path) end
  eq(type(a), type(b), path .. " type")
  if type(b) == "number" then
    eq(math.type(a), math.type(b), path .. " number kind")
    if b ~= b then T.ok(a ~= a, path .. ": expected nan") return end
    eq(a, b, path)
    if b == 0 and math.type(b) == "float" then eq(1 / a, 1 / b, path .. " sign of zero") end
  elseif type(b) == "table" then
    for k, v in pairs(b) do
      T.ok(a[k] ~= nil, path .. ": key " .. tostring(k) .. " (" .. (math.type(k) or type(k)) .. ") missing")
      same(a[k], v, path .. "." .. tostring(k))
    end
    for k in pairs(a) do T.ok(b[k] ~= nil, path .. ": unexpected key " .. tostring(k)) end
  else
    eq(a, b, path)
  end
end

local function roundtrip(obj, name)
  local path = P(name or "rt.safetensors")
  torch.save(obj, path)
  local r = torch.load(path)
  os.remove(path)
  return r
end

local dtypes = {"float32", "float64", "float16", "bfloat16", "int64", "int32", "uint8", "bool"}

local function random_tensor(shape, dtype)
  if dtype == "bool" then
    return torch.tensor(T.map(T.rand_list(shape, 0, 1, true), function(v) return v == 1 end), {dtype = dtype})
  elseif dtype == "uint8" then
    return torch.tensor(T.rand_list(shape, 0, 255, true), {dtype = dtype})
  elseif dtype == "int64" or dtype == "int32" then
    return torch.tensor(T.rand_list(shape, -100000, 100000, true), {dtype = dtype})
  end
  return torch.tensor(T.rand_list(shape, -1e3, 1e3), {dtype = dtype})
end

test("every dtype round-trips exactly, with shapes, 0-dim and empty tensors", function()
  for _, dt in ipairs(dtypes) do
    for _, shape in ipairs({{3, 4}, {5}, {2, 1, 3}, {0}, {0, 3}, {2, 0, 4}}) do
      local x = random_tensor(shape, dt)
      same_tensor(roundtrip(x), x, dt .. " " .. T.fmt(shape))
    end
    local s = torch.tensor(dt == "bool" and true or 7, {dtype = dt})
    local r = roundtrip(s)
    eq(r:dim(), 0, dt .. " 0-dim rank")
    same_tensor(r, s, dt .. " 0-dim")
  end
end)

test("float16 and bfloat16 bytes are written bit for bit, and read back so", function()
  -- hand-computed bit patterns: 1, -2, 65504 (f16 max), inf, 2^-24 (f16 smallest subnormal), -0
  local h = torch.tensor({1, -2, 65504, math.huge, 2 ^ -24, -0.0}, {dtype = "float16"})
  local b = torch.tensor({1, -2, 2 ^ 127, -math.huge, 2 ^ -133, -0.0}, {dtype = "bfloat16"})
  local path = P("half.safetensors")
  torch.save({h = h, b = b}, path)
  local s = read_bytes(path)
  local n = string.unpack("<I8", s)
  local data = s:sub(9 + n)
  eq(#data, 24, "data bytes")
  -- both are 2-byte items: laid out by name, b then h
  local bits = {string.unpack("<I2I2I2I2I2I2I2I2I2I2I2I2", data)}
  local want = {0x3F80, 0xC000, 0x7F00, 0xFF80, 0x0001, 0x8000, 0x3C00, 0xC000, 0x7BFF, 0x7C00, 0x0001, 0x8000}
  for i = 1, 12 do eq(("0x%04X"):format(bits[i]), ("0x%04X"):format(want[i]), "bits of element " .. i) end
  local r = torch.load(path)
  same_tensor(r.h, h, "float16")
  same_tensor(r.b, b, "bfloat16")
  -- a NaN survives as a NaN
  local nan = roundtrip(torch.tensor({0 / 0}, {dtype = "float16"}))
  T.ok(nan:tolist()[1] ~= nan:tolist()[1], "float16 nan")
  os.remove(path)
end)

test("int64 beyond 2^53 and the int64 limits are exact", function()
  local vals = {math.maxinteger, math.mininteger, (1 << 53) + 1, -(1 << 53) - 3, (1 << 62) + 12345}
  local x = torch.tensor(vals, {dtype = "int64"})
  local r = roundtrip(x)
  local got = r:tolist()
  for i, v in ipairs(vals) do
    eq(math.type(got[i]), "integer", "kind " .. i)
    eq(got[i], v, "value " .. i)
  end
end)

test("non-contiguous tensors are saved as their logical values", function()
  local base = T.rand_list({4, 6})
  local x = torch.tensor(base, {dtype = "float64"})
  local cases = {
    {x:t(), function(i, j) return base[j][i] end, {6, 4}},
    {x[{{0, 4, 2}, {1, 6, 2}}], function(i, j) return base[2 * i - 1][2 * j] end, {2, 3}},
    {x:select(1, 5), function(i) return base[i][6] end, {4}},
    {torch.tensor({1.5}, {dtype = "float64"}):expand(3, 2), function() return 1.5 end, {3, 2}},
  }
  for k, c in ipairs(cases) do
    local r = roundtrip(c[1])
    eq(tostring(r.shape), tostring(torch.zeros(table.unpack(c[3])).shape), "case " .. k .. " shape")
    T.ok(r:is_contiguous(), "case " .. k .. " loads contiguous")
    local got = r:tolist()
    for i = 1, c[3][1] do
      for j = 1, (c[3][2] or 1) do
        local v = c[3][2] and got[i][j] or got[i]
        eq(v, c[2](i, j), ("case %d [%d][%d]"):format(k, i - 1, j - 1))
      end
    end
  end
end)

test("nested state_dict-like tables round-trip with numbers, strings, booleans and integer keys", function()
  local w = torch.randn(4, 3)
  local obj = {
    model = {fc1 = {weight = w, bias = torch.zeros(4)}, ["fc2.weight"] = torch.ones(2, 4, {dtype = "float64"})},
    optimizer = {
      state = {[0] = {step = 10, exp_avg = torch.randn(4, 3)}, [1] = {step = 10, exp_avg = torch.randn(4)}},
      param_groups = {{lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0, amsgrad = false,
                       params = {0, 1}}},
    },
    epoch = 3, best = 0.25, one_float = 1.0, neg_zero = -0.0, inf = math.huge, ninf = -math.huge, nan = 0 / 0,
    tiny = 5e-324, third = 1 / 3, big = math.maxinteger, small = math.mininteger, [-7] = "negative key",
    [1 << 60] = "big key", name = "résumé \"quoted\" \\ \n\t\0 nul", bytes = "\255\254\0\1", [""] = "empty key",
    ["\255key"] = true, flags = {true, false}, empty = {},
  }
  local r = roundtrip(obj)
  same(r, obj)
  eq(math.type(r.one_float), "float", "1.0 stays a float")
  eq(math.type(r.model.fc1.weight:size(0)), "integer", "sizes")
end)

test("a tensor saved alone loads as a tensor; other roots load as themselves", function()
  local x = torch.randn(2, 3)
  same_tensor(roundtrip(x), x, "single tensor")
  local path = P("single.safetensors")
  torch.save(x, path)
  local flat = torch.load(path, {flat = true})
  same_tensor(flat.tensor, x, "flat form of a single tensor")
  os.remove(path)
  for _, v in ipairs({42, 2.5, "text", true, false}) do same(roundtrip(v), v, tostring(v)) end
  same(roundtrip({}), {}, "empty table")
  -- a torch.Size, as PyTorch saves x.shape: nested, alone and empty
  local r = roundtrip({shape = torch.zeros(2, 3).shape, none = torch.Size({}), list = {torch.Size({7})}})
  eq(r.shape, torch.Size({2, 3}), "a nested Size")
  eq(tostring(r.none), "torch.Size([])", "an empty Size")
  eq(r.list[1], torch.Size({7}), "a Size in a list")
  eq(roundtrip(torch.Size({4, 5})), torch.Size({4, 5}), "a Size alone")
  same(roundtrip({{}, {{}}}), {{}, {{}}}, "nested empty tables")
end)

test("a tensor reached twice is written once and loads as one tensor", function()
  local w = torch.randn(3)
  local path = P("tied.safetensors")
  torch.save({encoder = {emb = w}, decoder = {emb = w}, other = w:clone()}, path)
  local r = torch.load(path)
  T.ok(rawequal(r.encoder.emb, r.decoder.emb), "tied weights stay one tensor")
  T.ok(not rawequal(r.encoder.emb, r.other), "a clone stays separate")
  local names = {}
  for k in pairs(torch.load(path, {flat = true})) do names[#names + 1] = k end
  table.sort(names)
  eq(table.concat(names, " "), "decoder.emb other", "names in the file")
  os.remove(path)
end)

-- CPU tensors: a tensor from another device also has its device recorded (metadata "tensh.devices")
T.cpu_test("the bytes of a small file match a header written out by hand", function()
  local path = P("layout.safetensors")
  torch.save({b = torch.tensor({1, 2}, {dtype = "int32"}), a = torch.tensor({1.5}, {dtype = "float64"}),
              [3] = torch.tensor(true)}, path)
  local doc = '{"format":"tensh/1","root":{"table":[[{"int":"3"},{"tensor":"3"}],' ..
              '["a",{"tensor":"a"}],["b",{"tensor":"b"}]]}}'
  local header = '{"__metadata__":{"tensh":"' .. doc:gsub('"', '\\"') .. '"},' ..
                 '"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]},' ..
                 '"b":{"dtype":"I32","shape":[2],"data_offsets":[8,16]},' ..
                 '"3":{"dtype":"BOOL","shape":[],"data_offsets":[16,17]}}'
  header = header .. (" "):rep((8 - #header % 8) % 8)
  local data = "\0\0\0\0\0\0\248\63" .. "\1\0\0\0\2\0\0\0" .. "\1"
  local want = string.pack("<I8", #header) .. header .. data
  local got = read_bytes(path)
  eq(#got, #want, "file length")
  for i = 1, #want do
    if got:byte(i) ~= want:byte(i) then
      error(("byte %d: expected %q, got %q (context %q)"):format(i - 1, want:sub(i, i), got:sub(i, i),
        got:sub(math.max(1, i - 20), i + 20)))
    end
  end
  os.remove(path)
end)

test("a file from another writer (no tensh metadata) loads as a flat table", function()
  local path = P("foreign.safetensors")
  local header = '{"fc1.weight":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},' ..
                 '"fc1.bias":{"dtype":"I64","shape":[],"data_offsets":[8,16]},' ..
                 '"__metadata__":{"format":"pt","note":"caf\\u00e9 \\ud83d\\ude00"}}'
  write_bytes(path, st_file(header, string.pack("<ffi8", 1.5, -2, -5)))
  local r, meta = torch.load(path, {metadata = true})
  same_tensor(r["fc1.weight"], torch.tensor({1.5, -2}), "weight")
  same_tensor(r["fc1.bias"], torch.tensor(-5), "bias")
  eq(meta.format, "pt", "metadata")
  eq(meta.note, "café \u{1F600}", "metadata with \\u escapes and a surrogate pair")
  local n = 0
  for _ in pairs(r) do n = n + 1 end
  eq(n, 2, "entries")
  -- {flat = true} gives the same form for a tensh file, and the raw metadata
  local p2 = P("nested.safetensors")
  local w = torch.randn(2, 2)
  torch.save({fc1 = {weight = w}, [2] = {w2 = torch.ones(1)}, lr = 0.5}, p2)
  local f, m = torch.load(p2, {flat = true, metadata = true})
  same_tensor(f["fc1.weight"], w, "flat nested name")
  same_tensor(f["2.w2"], torch.ones(1), "flat integer-key name")
  eq(f.lr, nil, "numbers are not in the flat form")
  eq(type(m.tensh), "string", "tensh metadata is visible")
  os.remove(path)
  os.remove(p2)
end)

test("torch.load returns the object alone: model:load_state_dict(torch.load(path)) works", function()
  local path = P("one_value.safetensors")
  local m, m2 = nn.Linear(2, 3), nn.Linear(2, 3)
  torch.save(m:state_dict(), path)
  eq(select("#", torch.load(path)), 1, "one value (PyTorch's)")
  eq(select("#", torch.load(path, "cpu", {flat = true})), 1, "one value with map_location and flat")
  m2:load_state_dict(torch.load(path))
  same_tensor(m2.weight, m.weight, "weight loaded")
  local opt = optim.SGD(m:parameters(), {lr = 0.1, momentum = 0.9})
  torch.save(opt:state_dict(), path)
  optim.SGD(m2:parameters(), {lr = 0.5}):load_state_dict(torch.load(path))
  eq(select("#", torch.load(path, {metadata = true})), 2, "with {metadata = true}: and the metadata")
  raises(function() torch.load(path, {metadata = 1}) end, "metadata")
  os.remove(path)
end)

test("map_location and options", function()
  local path = P("map.safetensors")
  local x = torch.randn(3)
  torch.save({x = x}, path)
  same_tensor(torch.load(path, {map_location = "cpu"}).x, x, "cpu")
  same_tensor(torch.load(path, {map_location = torch.device and torch.device("cpu") or "cpu"}).x, x, "device object")
  -- a CUDA map_location does what t:to("cuda") does: the move, or the same error
  local moved, to_res = pcall(function() return x:to("cuda") end)
  if moved then
    local r = torch.load(path, {map_location = "cuda"})
    T.ok(r.x.is_cuda, "loaded onto the GPU")
    same_tensor(r.x:cpu(), x, "values on the GPU")
  else
    local msg = tostring(to_res):match("to: (.*)$")
    T.ok(msg, "t:to('cuda') message: " .. tostring(to_res))
    raises(function() torch.load(path, {map_location = "cuda"}) end, "torch.load: " .. msg)
    if not (cuda and cuda.is_available()) then
      raises(function() torch.load(path, {map_location = "cuda:1"}) end,
        "torch.load: " .. msg)
    end
  end
  raises(function() torch.load(path, {map_location = "tpu"}) end, "torch.load: map_location:")
  raises(function() torch.load(path, {map_locaton = "cpu"}) end, "unknown option 'map_locaton'")
  raises(function() torch.load(path, {flat = 1}) end, "option 'flat' must be a boolean")
  raises(function() torch.load(path, 5) end, "bad argument #2 to 'load'")
  raises(function() torch.load() end, "bad argument #1 to 'load'")
  raises(function() torch.save({}) end, "bad argument #2 to 'save'")
  os.remove(path)
end)

test("values that cannot be saved give a clear error and write nothing", function()
  local path = P("bad.safetensors")
  local cyc = {}
  cyc.self = cyc
  local deep = {}
  local t = deep
  for _ = 1, 250 do t.x = {} t = t.x end
  local cases = {
    {{f = print}, "cannot save a function at 'f'"},
    {{a = {b = coroutine.create(print)}}, "cannot save a thread at 'a.b'"},
    {{a = cyc}, "the table at 'a.self' is one of its own ancestors (a cycle)"},
    {{d = torch.device("cpu")}, "cannot save a table with a metatable at 'd'"},
    {{[1.5] = 1}, "table keys must be strings or integers, got a number key"},
    {{[true] = 1}, "got a boolean key"},
    {{["a.b"] = torch.zeros(1), a = {b = torch.ones(1)}}, "two tensors would both be named 'a.b'"},
    {{["__metadata__"] = torch.zeros(1)}, "'__metadata__' is reserved"},
    {{["x\0y"] = torch.zeros(1)}, "NUL byte in its name"},
    {{["\255"] = torch.zeros(1)}, "not valid UTF-8"},
    {deep, "nested deeper than 200 levels"},
    {nil, "cannot save a nil at the top level"},
  }
  for i, c in ipairs(cases) do
    raises(function() torch.save(c[1], path) end, c[2], "case " .. i)
    T.ok(io.open(path) == nil, "case " .. i .. ": no file written")
  end
  eq(#ls(dir), 0, "no temp files left")
end)

test("saving replaces a file whole, atomically; failures leave the old file and no temp file", function()
  local path = P("ckpt.safetensors")
  torch.save({w = torch.randn(1000)}, path)
  local big = #read_bytes(path)
  local small = {w = torch.tensor({1.0, 2.0})}
  torch.save(small, path)
  local after = read_bytes(path)
  local n = string.unpack("<I8", after)
  eq(#after, 8 + n + 8, "the new file has exactly the new header and data")
  T.ok(#after < big, "smaller than the old file")
  same(torch.load(path), small, "new content")
  -- an error while encoding leaves the old file as it was
  raises(function() torch.save({w = torch.zeros(3), f = print}, path) end, "cannot save a function")
  eq(read_bytes(path), after, "old file untouched")
  -- the target is a directory: the temp file is written, the rename fails, the temp file goes
  local sub = P("adir")
  assert(os.execute("mkdir -p '" .. sub .. "/inner'"))
  raises(function() torch.save(small, sub) end, "torch.save: cannot replace '" .. sub .. "'")
  eq(table.concat(ls(dir), " "), "adir ckpt.safetensors", "no temp file beside it")
  -- a directory that does not exist: clean failure, nothing created
  raises(function() torch.save(small, P("nodir/x.safetensors")) end,
    "torch.save: cannot write '" .. P("nodir/x.safetensors") .. "': No such file or directory")
  eq(table.concat(ls(dir), " "), "adir ckpt.safetensors", "nothing created")
  assert(os.execute("rm -r '" .. sub .. "'"))
  os.remove(path)
end)

-- a valid file's parts, to corrupt one at a time
local good_header = '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
local good_data = string.pack("<ff", 1, 2)

test("corrupt files give an error naming the file and the problem, and the session goes on", function()
  local path = P("corrupt.safetensors")
  local function entry(name, dt, shape, b, e)
    return ('"%s":{"dtype":"%s","shape":[%s],"data_offsets":[%d,%d]}'):format(name, dt, shape, b, e)
  end
  local cases = {
    {"", "the file is empty"},
    {"\1\0\0\0", "file too short (4 bytes)"},
    {string.pack("<I8", 1000) .. "{}", "header length 1000 is larger than the rest of the file (2 bytes)"},
    {string.pack("<I8", 1 << 40) .. "{}", "header length 1099511627776 is absurd"},
    {string.pack("<i8", -1) .. "{}", "is absurd"},
    {st_file("[1,2]"), "does not start with '{'"},
    {st_file('{"a":'), "not valid JSON"},
    {st_file('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}}', good_data), "bytes after its JSON object"},
    {st_file('{' .. entry("a", "F8_E4M3", "2", 0, 2) .. '}', "\0\0"), "unsupported dtype 'F8_E4M3'"},
    {st_file('{' .. entry("a", "F32", "4294967296,4294967296", 0, 8) .. '}', good_data), "overflows int64"},
    {st_file('{' .. entry("a", "F32", "1,1,1,1,1,1,1,1,1", 0, 4) .. '}', "\0\0\0\0"), "has 9 dims"},
    {st_file('{' .. entry("a", "F32", "-2", 0, 8) .. '}', good_data), "shape entries must be non-negative integers"},
    {st_file('{' .. entry("a", "F32", "4", 0, 16) .. '}', good_data), "file is truncated: tensor 'a' ends at data byte 16"},
    {st_file('{' .. entry("a", "F32", "2", 8, 0) .. '}', good_data), "end before they begin"},
    {st_file('{' .. entry("a", "F32", "3", 0, 8) .. '}', good_data), "hold 8 bytes, but a F32 tensor of 3 elements needs 12"},
    {st_file('{' .. entry("a", "F32", "2", 0, 8) .. ',' .. entry("b", "F32", "1", 4, 8) .. '}', good_data),
     "overlaps"},
    {st_file('{' .. entry("a", "F32", "1", 4, 8) .. '}', good_data), "data bytes [0, 4) belong to no tensor"},
    {st_file(good_header, good_data .. "xyz"), "3 bytes after the last tensor's data belong to no tensor"},
    {st_file('{' .. entry("a", "F32", "1", 0, 4) .. ',' .. entry("a", "F32", "1", 4, 8) .. '}', good_data),
     "names tensor 'a' twice"},
    {st_file('{"__metadata__":{"k":5}}'), "__metadata__ value 'k' is not a string"},
    {st_file('{"__metadata__":{"tensh":"{\\"format\\":\\"tensh/1\\",\\"root\\":{\\"tensor\\":\\"zz\\"}}"}}'),
     "it names tensor 'zz', which is not in the file"},
    {st_file('{"__metadata__":{"tensh":"{\\"format\\":\\"tensh/9\\",\\"root\\":1}"}}'), "tensh format 'tensh/9'"},
    {st_file('{"__metadata__":{"tensh":"not json"}}'), "corrupt tensh metadata"},
    {st_file('{"__metadata__":{"tensh":"{\\"format\\":\\"tensh/1\\",\\"root\\":{\\"int\\":\\"12x\\"}}"}}'),
     "corrupt tensh metadata (bad integer)"},
    {st_file('{"__metadata__":{"tensh":"{\\"format\\":\\"tensh/1\\",\\"root\\":{\\"table\\":[[1,2]]}}"}}'),
     "a table key is not a string or an integer"},
    {st_file('{"__metadata__":{"tensh":"{\\"format\\":\\"tensh/1\\",\\"root\\":{\\"code\\":\\"os.exit()\\"}}"}}'),
     "unknown node type"},
    {st_file('{"__metadata__":{"tensh":"{\\"format\\":\\"tensh/1\\",\\"root\\":{\\"size\\":\\"2,\\"}}"}}'),
     "corrupt tensh metadata (bad torch.Size)"},
    {st_file('{"__metadata__":{"tensh":"{\\"format\\":\\"tensh/1\\",\\"root\\":{\\"size\\":\\"2,-1\\"}}"}}'),
     "bad torch.Size"},
    {st_file('{"__metadata__":{"tensh":"{\\"format\\":\\"tensh/1\\",\\"root\\":{\\"size\\":\\"x\\"}}"}}'),
     "bad torch.Size"},
  }
  for i, c in ipairs(cases) do
    write_bytes(path, c[1])
    local err = raises(function() torch.load(path) end, c[2], "case " .. i)
    T.ok(err:find("torch.load: '" .. path .. "'", 1, true), "case " .. i .. " names the file: " .. err)
  end
  -- a real file cut short, at several points
  torch.save({a = torch.randn(100), b = torch.randn(10)}, path)
  local whole = read_bytes(path)
  for _, keep in ipairs({3, 8, 20, #whole - 100, #whole - 1}) do
    write_bytes(path, whole:sub(1, keep))
    local err = select(2, pcall(torch.load, path))
    T.ok(err:find("truncated", 1, true) or err:find("too short", 1, true), "cut at " .. keep .. ": " .. err)
  end
  -- {flat = true} does not read the tensh metadata, so a file with a broken one still gives its tensors
  write_bytes(path, st_file('{"__metadata__":{"tensh":"not json"},' .. good_header:sub(2), good_data))
  same_tensor(torch.load(path, {flat = true}).a, torch.tensor({1.0, 2.0}), "flat load of a broken tree")
  raises(function() torch.load(P("missing.safetensors")) end,
    "torch.load: cannot open '" .. P("missing.safetensors") .. "': No such file or directory")
  raises(function() torch.load(dir) end, "torch.load: cannot open '" .. dir .. "': it is a directory")
  -- and the session goes on
  local x = torch.randn(4)
  same_tensor(roundtrip(x), x, "after the errors")
  os.remove(path)
end)

test("random damage to a file loads or errors naming the file, never crashes", function()
  local path = P("fuzz.safetensors")
  torch.save({a = torch.randn(3, 2), b = {c = torch.tensor({1, 2}, {dtype = "int32"}), n = 5, s = "x"}}, path)
  local whole = read_bytes(path)
  local hlen = string.unpack("<I8", whole)
  for i = 1, 300 do
    local bytes = {whole:byte(1, -1)}
    for _ = 1, math.random(1, 3) do
      -- most damage lands in the header, where the parser works
      local at = math.random() < 0.8 and math.random(1, 8 + hlen) or math.random(1, #bytes)
      bytes[at] = math.random(0, 255)
    end
    local cut = math.random() < 0.2 and math.random(0, #bytes) or #bytes
    write_bytes(path, string.char(table.unpack(bytes, 1, cut)))
    local ok, err = pcall(torch.load, path)
    T.ok(ok or tostring(err):find("torch.load: '" .. path .. "'", 1, true), "mutation " .. i .. ": " .. tostring(err))
  end
  os.remove(path)
end)

T.cpu_test("bool bytes other than 0 and 1 load as true", function()
  local path = P("bool.safetensors")
  write_bytes(path, st_file('{"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}}     ', "\0\7\1"))
  eq(T.fmt(torch.load(path).m:tolist()), "{false, true, true}", "values")
  T.ok(torch.load(path).m:eq(torch.tensor({false, true, true})):all():item(), "compares as true")
  os.remove(path)
end)

-- the first python3 that imports torch (pyenv shims often hide Debian's python3-torch)
local function find_python()
  for _, p in ipairs({os.getenv("PYTHON") or "", "python3", "/usr/bin/python3"}) do
    if p ~= "" and os.execute(p .. " -c 'import torch' >/dev/null 2>&1") then return p end
  end
end

-- Reads a file the way safetensors.torch.load_file does, with the package
-- when it is installed, else with the same checks written out over json and
-- torch.frombuffer. Prints one line per tensor: name, dtype, shape, values in hex.
local py_reader = [==[
import json, struct, sys, torch
path = sys.argv[1]
try:
    from safetensors.torch import load_file
    tensors = load_file(path)
    meta = None
except ImportError:
    codes = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
             "I64": torch.int64, "I32": torch.int32, "U8": torch.uint8, "BOOL": torch.bool}
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = raw[8:8 + n]
    assert header.startswith(b"{") and n % 8 == 0
    hdr = json.loads(header.decode("utf-8"))
    data = raw[8 + n:]
    meta = hdr.pop("__metadata__", None)
    assert meta is None or all(isinstance(v, str) for v in meta.values())
    tensors, pos = {}, 0
    for name, info in sorted(hdr.items(), key=lambda kv: kv[1]["data_offsets"]):
        b, e = info["data_offsets"]
        assert b == pos, "gap or overlap"
        dt = codes[info["dtype"]]
        numel = 1
        for s in info["shape"]:
            numel *= s
        assert e - b == numel * torch.tensor([], dtype=dt).element_size(), "size"
        buf = bytearray(data[b:e])
        t = torch.frombuffer(buf, dtype=dt) if e > b else torch.empty(0, dtype=dt)
        tensors[name] = t.reshape(info["shape"])
        pos = e
    assert pos == len(data), "trailing bytes"
for name in sorted(tensors):
    t = tensors[name]
    vals = t.flatten().double().tolist() if t.dtype != torch.int64 else t.flatten().tolist()
    out = [float(v).hex() if isinstance(v, float) else str(v) for v in vals]
    print(name, str(t.dtype).replace("torch.", ""), list(t.shape), " ".join(out))
]==]

test("PyTorch reads the tensors of a tensh file", function()
  local py = find_python()
  if not py then T.skip("no python3 with torch") end
  local path = P("for_torch.safetensors")
  local tensors = {
    w = random_tensor({3, 2}, "float32"):t(), d = random_tensor({2}, "float64"), h = random_tensor({2, 2}, "float16"),
    bf = random_tensor({3}, "bfloat16"), i = torch.tensor({math.maxinteger, -(1 << 53) - 1}, {dtype = "int64"}),
    i32 = random_tensor({2}, "int32"), u = random_tensor({4}, "uint8"), flag = random_tensor({2}, "bool"),
    e = torch.zeros(0, 3), s = torch.tensor(2.5),
  }
  torch.save({model = tensors, step = 7}, path)
  local script = P("reader.py")
  write_bytes(script, py_reader)
  local p = io.popen(py .. " '" .. script .. "' '" .. path .. "' 2>&1")
  local out = p:read("a")
  local ok = p:close()
  T.ok(ok, "python failed:\n" .. out)
  local seen = 0
  for line in out:gmatch("[^\n]+") do
    local name, dtype, shape, vals = line:match("^model%.(%S+) (%S+) (%b[]) ?(.*)$")
    T.ok(name and tensors[name], "unexpected line: " .. line)
    local t = tensors[name]
    eq(dtype, tostring(t.dtype):gsub("torch%.", ""), name .. " dtype")
    eq(shape:gsub(" ", ""), "[" .. table.concat(t.shape:totable(), ",") .. "]", name .. " shape")
    local want = T.flat(t)
    local k = 0
    for v in vals:gmatch("%S+") do
      k = k + 1
      local x = want[k]
      if type(x) == "boolean" then x = x and 1 or 0 end
      eq(math.tointeger(x) and math.type(x) == "integer" and tonumber(v) or tonumber(v), x, name .. " value " .. k)
    end
    eq(k, #want, name .. " count")
    seen = seen + 1
  end
  eq(seen, 10, "tensors PyTorch saw")
  os.remove(script)
  os.remove(path)
end)

-- Writes a file as safetensors.torch.save_file does (with the package when
-- it is installed, else in the reference layout written out over json).
local py_writer = [==[
import json, struct, sys, torch
path = sys.argv[1]
ts = {"layer.0.weight": torch.arange(6, dtype=torch.float32).reshape(2, 3) / 4,
      "layer.0.bias": torch.tensor([-1.5, 2.25], dtype=torch.float16),
      "emb": torch.tensor([0.5, -3.0], dtype=torch.bfloat16),
      "ids": torch.tensor([2**62 + 1, -3], dtype=torch.int64),
      "mask": torch.tensor([True, False, True])}
try:
    from safetensors.torch import save_file
    save_file(ts, path, metadata={"format": "pt"})
except ImportError:
    codes = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
             torch.int64: "I64", torch.int32: "I32", torch.uint8: "U8", torch.bool: "BOOL"}
    hdr, pos, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for k in sorted(ts, key=lambda k: (-ts[k].element_size(), k)):
        t = ts[k].contiguous()
        b = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()
        hdr[k] = {"dtype": codes[t.dtype], "shape": list(t.shape), "data_offsets": [pos, pos + len(b)]}
        blobs.append(b)
        pos += len(b)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
]==]

test("tensh reads a file PyTorch wrote", function()
  local py = find_python()
  if not py then T.skip("no python3 with torch") end
  local path, script = P("from_torch.safetensors"), P("writer.py")
  write_bytes(script, py_writer)
  local p = io.popen(py .. " '" .. script .. "' '" .. path .. "' 2>&1")
  local out = p:read("a")
  T.ok(p:close(), "python failed:\n" .. out)
  local r, meta = torch.load(path, {metadata = true})
  eq(meta.format, "pt", "metadata")
  eq(meta.tensh, nil, "no tensh metadata")
  same_tensor(r["layer.0.weight"], torch.tensor({{0, 0.25, 0.5}, {0.75, 1, 1.25}}), "weight")
  same_tensor(r["layer.0.bias"], torch.tensor({-1.5, 2.25}, {dtype = "float16"}), "bias")
  same_tensor(r.emb, torch.tensor({0.5, -3}, {dtype = "bfloat16"}), "emb")
  same_tensor(r.ids, torch.tensor({(1 << 62) + 1, -3}), "ids")
  same_tensor(r.mask, torch.tensor({true, false, true}), "mask")
  local n = 0
  for _ in pairs(r) do n = n + 1 end
  eq(n, 5, "entries")
  os.remove(script)
  os.remove(path)
end)

test("cleanup", function() assert(os.execute("rm -rf '" .. dir .. "'")) end)

T.run()
