-- Assertions for the seed ports (tests/seeds/seed_*.lua): each port is a
-- plain tensh script that raises on the first wrong value, so it runs alone
-- (build/tensh tests/seeds/seed_000.lua) as well as under tests/lua/test_seeds.lua.
local M = {}

local function fmt(v)
  if type(v) == "table" and getmetatable(v) == nil then
    local parts = {}
    for i, x in ipairs(v) do parts[i] = fmt(x) end
    return "{" .. table.concat(parts, ", ") .. "}"
  end
  return tostring(v)
end

function M.eq(actual, expected, what)
  if actual ~= expected then
    error(("%s: expected %s, got %s"):format(what or "value", fmt(expected), fmt(actual)), 2)
  end
end

function M.ok(cond, what) if not cond then error(what or "assertion failed", 2) end end

-- numbers, lists or tensors, elementwise within atol + rtol * |expected|
local function flat(v, out)
  out = out or {}
  if torch.is_tensor(v) then v = v:cpu():tolist() end
  if type(v) ~= "table" then out[#out + 1] = v return out end
  for _, x in ipairs(v) do flat(x, out) end
  return out
end
function M.close(actual, expected, rtol, atol, what)
  rtol, atol = rtol or 1e-5, atol or 1e-6
  local a, e = flat(actual), flat(expected)
  if #a ~= #e then error(("%s: expected %d values, got %d"):format(what or "tensor", #e, #a), 2) end
  for i = 1, #a do
    if math.abs(a[i] - e[i]) > atol + rtol * math.abs(e[i]) then
      error(("%s: value %d: expected %.9g, got %.9g"):format(what or "tensor", i - 1, e[i], a[i]), 2)
    end
  end
end

-- fn must raise an error whose message contains `pattern` (plain text); returns the message
function M.raises(fn, pattern, what)
  local ok, err = pcall(fn)
  if ok then error(("%s: expected an error containing '%s', got none"):format(what or "call", pattern), 2) end
  err = tostring(err)
  if not err:find(pattern, 1, true) then
    error(("%s: expected an error containing '%s', got '%s'"):format(what or "call", pattern, err), 2)
  end
  return err
end

-- A GPU line run on a machine without one: a Lua error that names the call
-- and says CUDA is not available (never a crash, never a silent CPU result).
function M.no_cuda(fn, name)
  local ok, err = pcall(fn)
  if ok then error(("%s: expected 'CUDA is not available' without a GPU, got no error"):format(name), 2) end
  err = tostring(err)
  if not err:find("CUDA is not available", 1, true) or not err:find(name, 1, true) then
    error(("%s: expected an error naming '%s' and saying 'CUDA is not available', got '%s'"):format(name, name, err), 2)
  end
  return err
end

-- a scratch directory; M.rmdir(d) removes it
function M.tmpdir()
  local d = os.tmpname()
  os.remove(d)
  assert(os.execute("mkdir -p '" .. d .. "'"))
  return d
end
function M.rmdir(d) os.execute("rm -rf '" .. d .. "'") end

return M
