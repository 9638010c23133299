-- Assertions for the seed ports (tests/seeds/seed_*.lua): each port is a
-- plain tensh script that raises on the first wrong value, so it runs alone
-- (build/tensh tests/seeds/seed_000.lua) as well as under tests/lua/test_seeds.lua.
-- The suite's own assertions (tests/lua/harness.lua: loading it runs nothing).
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
package.path = here .. "/../lua/?.lua;" .. package.path
local T = require "harness"
local M = {eq = T.eq, ok = T.ok, close = T.close, raises = T.raises}

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
