-- What the benchmark files of scripts/bench share. Each file registers its
-- cases with bench.case and builds its tensors in the case's setup, so that
-- `tensh bench --list scripts/bench` loads every file in a moment.
-- Loaded by the files with dofile from their own folder:
--   local common = dofile(debug.getinfo(1, "S").source:match("^@(.*)/") .. "/common.lua")
local M = {}

-- The device the cases run on: $BENCH_DEVICE (cpu, cuda, cuda:N), else the
-- CPU (issue 12's comparisons are on the CPU; run.sh passes the same device
-- to the PyTorch twins).
function M.device()
  return os.getenv("BENCH_DEVICE") or "cpu"
end

-- A case's name is its PyTorch twin's "bench" (plus "[dtype=...]" where the
-- twin prints a dtype), so that compare.py pairs the two.

-- one training step: zero_grad, forward, loss, backward, optimizer step
function M.train_step(model, opt, crit, x, y)
  return function()
    opt:zero_grad()
    crit(model(x), y):backward()
    opt:step()
  end
end

return M
