-- The Lua test harness: cases registered with test(), run by run(), one
-- closing line "lua:<file>: N passed, N failed, N skipped". References are
-- computed here in plain Lua doubles, independent of the ops under test.
local T = {}
local cases = {}

function T.test(name, fn) cases[#cases + 1] = {name = name, fn = fn} end

local SKIP = setmetatable({}, {__tostring = function() return "skip" end})
function T.skip(reason) error({[SKIP] = true, reason = reason}, 0) end

local function fmt(v)
  if type(v) == "table" then
    local parts = {}
    for i, x in ipairs(v) do
      if i > 8 then parts[#parts + 1] = "..." break end
      parts[#parts + 1] = fmt(x)
    end
    return "{" .. table.concat(parts, ", ") .. "}"
  end
  return tostring(v)
end
T.fmt = fmt

function T.eq(actual, expected, what)
  if actual ~= expected then
    error(("%s: expected %s, got %s"):format(what or "value", fmt(expected), fmt(actual)), 2)
  end
end

function T.ok(cond, what) if not cond then error(what or "assertion failed", 2) end end

-- Flattens nested lists (or a tensor, through tolist) into a Lua array.
local function flat(v, out)
  out = out or {}
  if torch.is_tensor(v) then v = v:cpu():tolist() end
  if type(v) ~= "table" then out[#out + 1] = v return out end
  for _, x in ipairs(v) do flat(x, out) end
  return out
end
T.flat = flat

local function isnan(x) return x ~= x end

-- Elementwise closeness: |a - e| <= atol + rtol * |e|; NaN equals NaN, inf equals inf.
function T.close(actual, expected, rtol, atol, what)
  rtol, atol = rtol or 1e-5, atol or 1e-6
  local a, e = flat(actual), flat(expected)
  if #a ~= #e then error(("%s: expected %d elements, got %d"):format(what or "tensor", #e, #a), 2) end
  for i = 1, #a do
    local x, y = a[i], e[i]
    if type(x) == "boolean" or type(y) == "boolean" then
      if x ~= y then error(("%s: element %d: expected %s, got %s"):format(what or "tensor", i - 1, fmt(y), fmt(x)), 2) end
    elseif not ((isnan(x) and isnan(y)) or x == y or math.abs(x - y) <= atol + rtol * math.abs(y)) then
      error(("%s: element %d: expected %.9g, got %.9g (rtol %g, atol %g)"):format(what or "tensor", i - 1, y, x, rtol, atol), 2)
    end
  end
end

-- Runs fn and checks it raises an error whose message contains `pattern` (plain text).
function T.raises(fn, pattern, what)
  local ok, err = pcall(fn)
  if ok then error((what or "call") .. ": expected an error matching '" .. pattern .. "', got none", 2) end
  err = tostring(err)
  if not err:find(pattern, 1, true) then
    error(("%s: expected an error containing '%s', got '%s'"):format(what or "call", pattern, err), 2)
  end
  return err
end

-- Nested Lua lists of random values, from Lua's own generator (seeded per case).
function T.rand_list(shape, lo, hi, ints)
  lo, hi = lo or -2, hi or 2
  local function build(d)
    if d > #shape then
      if ints then return math.random(lo, hi) end
      return lo + (hi - lo) * math.random()
    end
    local t = {}
    for i = 1, shape[d] do t[i] = build(d + 1) end
    return t
  end
  return build(1)
end

-- Applies f elementwise over nested lists.
function T.map(v, f)
  if type(v) ~= "table" then return f(v) end
  local t = {}
  for i, x in ipairs(v) do t[i] = T.map(x, f) end
  return t
end

-- The names of the op registry's unary ops (src/ops/ops.def, through
-- torch._ops), sorted, and the registry's lines by name: tests that cover
-- every unary op list them from here, so a new op joins them without an edit
-- (each test keeps its own references and says what it lacks for a new op).
function T.unary_ops()
  local ops, names = torch._ops(), {}
  for name, op in pairs(ops) do
    if op.kind == "unary" or op.kind == "unary_float" or op.kind == "unary_bool" then names[#names + 1] = name end
  end
  table.sort(names)
  return names, ops
end

-- A file's bytes, and writing them.
function T.read_file(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end
function T.write_file(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

-- The first python3 (on PATH, or the system's) that imports every module
-- in the comma-separated list, or nil: tests against Python's libraries
-- skip, saying which, where they are missing.
function T.python_with(modules)
  for _, py in ipairs({"python3", "/usr/bin/python3"}) do
    if os.execute(py .. " -c 'import " .. modules .. "' >/dev/null 2>&1") == true then return py end
  end
end

-- A shell prefix for a child tensh that starts MPI (tensh --nproc, a script
-- with DistributedDataParallel): under `make asan` it records full stacks for
-- its allocations. Open MPI unloads its components at MPI_Finalize and the
-- frame-pointer unwinder stops in them, so LeakSanitizer saw their memory at
-- exit as "<unknown module>" leaks that tests/lsan.supp's libmpi lines miss.
T.MPI_ASAN_ENV = os.getenv("ASAN_OPTIONS") and "ASAN_OPTIONS=$ASAN_OPTIONS:fast_unwind_on_malloc=0 " or ""

-- TENSH_TEST_DEVICE=cuda (tests/run.sh's second pass on a GPU machine):
-- creation functions default to that device, so the whole suite runs there;
-- values are read back through tolist/item, which copy to the host.
T.device = os.getenv("TENSH_TEST_DEVICE") or "cpu"
if T.device ~= "cpu" then
  -- the suite's float32 tolerances are for full float32 products: no TF32 in cuDNN's
  -- convolutions (PyTorch's default allows it)
  torch.backends.cudnn.allow_tf32 = false
  local function is_opts(v)
    return type(v) == "table" and getmetatable(v) == nil and rawget(v, 1) == nil
  end
  local function with_device(opts)
    local o = {}
    for k, v in pairs(opts or {}) do o[k] = v end
    if o.device == nil then o.device = T.cpu_pinned and "cpu" or T.device end
    return o
  end
  local function wrap(name, opts_at) -- opts_at: fixed position, or nil for "the last argument"
    local f = torch[name]
    if not f then return end
    torch[name] = function(...)
      local args, n = {...}, select("#", ...)
      if opts_at then
        args[opts_at] = with_device(args[opts_at])
        n = math.max(n, opts_at)
      elseif is_opts(args[n]) then
        args[n] = with_device(args[n])
      else
        n = n + 1
        args[n] = with_device(nil)
      end
      -- an error positioned at this wrapper is moved to its caller's line, as without it
      local r = table.pack(pcall(function() return f(table.unpack(args, 1, n)) end))
      if r[1] then return table.unpack(r, 2, r.n) end
      local rest = type(r[2]) == "string" and r[2]:match("^[^:]*harness%.lua:%d+: (.*)$")
      if rest then error(rest, 2) end
      error(r[2], 0)
    end
  end
  wrap("tensor", 2)
  for _, name in ipairs({"zeros", "ones", "empty", "full", "arange", "linspace", "eye", "rand", "randn",
                         "randint", "randperm"}) do
    wrap(name)
  end
end

-- A case about the CPU itself (exact printing of CPU tensors, oneDNN, the
-- data loader's host batches): on the cuda pass it still runs, on the CPU,
-- with the backends' settings at their defaults.
function T.cpu_test(name, fn)
  T.test(name, function()
    local tf32 = torch.backends.cudnn.allow_tf32
    T.cpu_pinned, torch.backends.cudnn.allow_tf32 = true, true
    local ok, err = pcall(fn)
    T.cpu_pinned, torch.backends.cudnn.allow_tf32 = false, tf32
    if not ok then error(err, 0) end
  end)
end

-- The devices the suite runs on: the CPU, and CUDA when one is usable.
function T.devices()
  local d = {"cpu"}
  if cuda and cuda.is_available() then d[#d + 1] = "cuda" end
  return d
end

function T.run()
  local filter = os.getenv("TEST_FILTER")
  local passed, failed, skipped = 0, 0, 0
  local file = (arg and arg[0] or "?"):match("[^/]*$")
  for _, c in ipairs(cases) do
    if not filter or c.name:find(filter, 1, true) then
      math.randomseed(#c.name * 7919 + 17)
      torch.manual_seed(0)
      local ok, err = xpcall(c.fn, function(e)
        if type(e) == "table" and e[SKIP] then return e end
        return debug.traceback(tostring(e), 2)
      end)
      if ok then
        passed = passed + 1
      elseif type(err) == "table" and err[SKIP] then
        skipped = skipped + 1
        print(("SKIP %s: %s: %s"):format(file, c.name, err.reason))
      else
        failed = failed + 1
        print(("FAIL %s: %s: %s"):format(file, c.name, err))
      end
    end
  end
  print(("lua:%s: %d passed, %d failed, %d skipped"):format(file, passed, failed, skipped))
  os.exit(failed == 0 and 0 or 1)
end

return T
