-- Start-up time of the shell: one run = `tensh -e ''` through /bin/sh (the
-- twin run.sh gives PyTorch is `python3 -c 'import torch'` through /bin/sh).
-- The executable is the one running the benchmarks (arg[-1]) or $TENSH_EXE.
local exe = os.getenv("TENSH_EXE") or (arg and arg[-1]) or "tensh"
local cmd = ("'%s' -e '' >/dev/null"):format(exe:gsub("'", "'\\''"))

bench.case("startup", function()
  local ok = os.execute(cmd)
  if not ok then error("startup: '" .. cmd .. "' failed") end
end, {device = "cpu", min_run_time = 0.5})
