-- Seed 003's training step, the twin of ../shared/peers/mlp_seed003.py: an
-- MLP 1024-2048-512-10 with ReLU, batch 128, Adam (default options),
-- cross-entropy; milliseconds per step (zero_grad, forward, loss, backward,
-- step), the median of 100 after 10 warm-up steps, and the median of each
-- phase: forward (zero_grad, forward, loss), backward, optimizer. One JSON
-- line on stdout.
-- Run: build/tensh scripts/bench/mlp_seed003.lua [--device cpu|cuda]
-- (threads: OMP_NUM_THREADS / OPENBLAS_NUM_THREADS, as run.sh sets them).
-- Where optim or the functional losses are not in the build, an Adam and a
-- cross-entropy written here with torch ops stand in (the "optimizer" and
-- "loss" fields say which ran).
local bench = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")
local device = bench.device(arg)

-- Adam with PyTorch's defaults (lr 1e-3, betas 0.9/0.999, eps 1e-8), used
-- only when optim is missing
local function inline_adam(params, lr)
  local state, t = {}, 0
  local b1, b2, eps = 0.9, 0.999, 1e-8
  local opt = {}
  function opt.zero_grad()
    for _, p in ipairs(params) do p.grad = nil end
  end
  function opt.step()
    t = t + 1
    local _ <close> = torch.no_grad()
    local c1, c2 = 1 - b1 ^ t, 1 - b2 ^ t
    for i, p in ipairs(params) do
      local g = p.grad
      if g then
        local s = state[i]
        if not s then
          s = {m = torch.zeros_like(p), v = torch.zeros_like(p)}
          state[i] = s
        end
        s.m:mul_(b1):add_(g, {alpha = 1 - b1})
        s.v:mul_(b2):add_(g * g, {alpha = 1 - b2})
        local denom = (s.v / c2):sqrt():add_(eps)
        p:sub_(s.m / denom * (lr / c1))
      end
    end
  end
  return opt
end

torch.manual_seed(0)
local model = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 512), nn.ReLU(),
  nn.Linear(512, 10)):to(device)
local data = torch.randn(128, 1024, {device = device})
local target = torch.randint(0, 10, {128}, {device = device})

local crit, loss_kind
if nn.functional.cross_entropy then
  crit, loss_kind = nn.CrossEntropyLoss(), "nn.CrossEntropyLoss"
else
  crit, loss_kind = function(logits, y)
    return -torch.log_softmax(logits, 1):gather(1, y:unsqueeze(1)):mean()
  end, "inline"
end

local opt, opt_kind
if optim and optim.Adam then
  local o = optim.Adam(model:parameters())
  opt = {zero_grad = function() o:zero_grad() end, step = function() o:step() end}
  opt_kind = "optim.Adam"
else
  opt, opt_kind = inline_adam(model:parameters(), 1e-3), "inline Adam"
end

local loss
local ms = bench.phases_ms({
  function()
    opt.zero_grad()
    loss = crit(model(data), target)
  end,
  function() loss:backward() end,
  function() opt.step() end,
}, 10, 100, device)
local function r4(x) return math.floor(x * 1e4 + 0.5) / 1e4 end
print(('{"bench": "mlp_seed003", "impl": "tensh", "device": %q, "ms_per_step": %.4f, "forward_ms": %.4f, '
  .. '"backward_ms": %.4f, "optimizer_ms": %.4f, "cpu_ms_per_step": %.4f, %s, "optimizer": %q, "loss": %q, '
  .. '"version": %q}'):format(device, r4(ms.total), r4(ms[1]), r4(ms[2]), r4(ms[3]), r4(ms.cpu), bench.run_fields(),
  opt_kind, loss_kind, torch.__version__))
io.stdout:flush()
