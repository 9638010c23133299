-- The tutorial ports (tests/seeds/seed_*.lua): one case per file, each run
-- by its own build/tensh process, so a seed's globals, environment changes
-- (os.setenv) and CUDA state never reach another. A seed passes when its
-- script exits 0; on failure the case shows the end of what it printed.
-- Each seed picks its device itself (cuda when available), so the second,
-- cuda pass of tests/run.sh skips them.
local T = require "harness"

local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
local build = os.getenv("TENSH_BUILD") or (here .. "/../../build")
local seeds_dir = here .. "/../seeds"

local function sh_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function seed_files()
  local p = assert(io.popen("ls " .. sh_quote(seeds_dir) .. " 2>/dev/null"))
  local files = {}
  for name in p:lines() do
    if name:match("^seed_%d+%.lua$") then files[#files + 1] = name end
  end
  p:close()
  table.sort(files)
  return files
end

local files = seed_files()
T.test("the seeds directory holds the ports", function()
  T.ok(#files > 0, "no tests/seeds/seed_*.lua files in " .. seeds_dir)
end)

for _, name in ipairs(files) do
  T.test(name, function()
    if T.device ~= "cpu" then T.skip("the seeds choose their device themselves; they ran in the first pass") end
    local cmd = ("%s%s %s 2>&1; echo \"exit=$?\""):format(T.MPI_ASAN_ENV, sh_quote(build .. "/tensh"), -- (DDP: MPI)
      sh_quote(seeds_dir .. "/" .. name))
    local p = assert(io.popen(cmd))
    local out = p:read("a")
    p:close()
    local code = tonumber(out:match("exit=(%d+)%s*$"))
    if code ~= 0 then
      local tail = out:gsub("exit=%d+%s*$", "")
      if #tail > 3000 then tail = "..." .. tail:sub(-3000) end
      error(("%s exited with %s:\n%s"):format(name, tostring(code), tail), 0)
    end
  end)
end

T.run()
