-- An AMP training step against float32: seed 003's MLP (1024-2048-512-10,
-- ReLU, batch 128, Adam, cross-entropy), one step = zero_grad, forward,
-- loss, backward, step. "float32" is the plain step; "amp" runs the forward
-- under torch.autocast (bfloat16 on the CPU, float16 on CUDA) with a
-- GradScaler around backward and step, as seed 003 advises. Milliseconds
-- per step, the median of `iters` after 5 warm-up steps; one JSON line per
-- mode on stdout.
-- Run: build/tensh scripts/bench/amp_step.lua [--device cpu|cuda] [--iters N] [--dtype bfloat16|float16]
local bench = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")
local device = bench.device(arg)
local iters, low = 20, device == "cpu" and "bfloat16" or "float16"
for i = 1, #arg do
  if arg[i] == "--iters" then iters = assert(tonumber(arg[i + 1]), "--iters needs a number") end
  if arg[i] == "--dtype" then low = assert(arg[i + 1], "--dtype needs a value") end
end

local function setup()
  torch.manual_seed(0)
  local model = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 512), nn.ReLU(),
    nn.Linear(512, 10)):to(device)
  local data = torch.randn(128, 1024, {device = device})
  local target = torch.randint(0, 10, {128}, {device = device})
  return model, data, target, optim.Adam(model:parameters()), nn.CrossEntropyLoss()
end

local modes = {}

function modes.float32()
  local model, data, target, opt, crit = setup()
  local loss
  return function()
    opt:zero_grad()
    loss = crit(model(data), target)
    loss:backward()
    opt:step()
  end, function() return loss:item() end
end

function modes.amp()
  local model, data, target, opt, crit = setup()
  local scaler = amp.GradScaler(device)
  local loss
  return function()
    opt:zero_grad()
    do
      local _ <close> = torch.autocast(device, {dtype = "torch." .. low})
      loss = crit(model(data), target)
    end
    scaler:scale(loss):backward()
    scaler:step(opt)
    scaler:update()
  end, function() return loss:item() end
end

local threads = tonumber(os.getenv("OMP_NUM_THREADS") or "") or 0
for _, mode in ipairs({"float32", "amp"}) do
  local step, last_loss = modes[mode]()
  local ms = bench.time_ms(step, 5, iters, device)
  print(('{"bench": "amp_step", "impl": "tensh", "device": %q, "mode": %q, "dtype": %q, "ms_per_step": %.3f, '
    .. '"loss_after": %.4g, "iters": %d, "threads": %d}'):format(device, mode, mode == "amp" and low or "float32", ms,
    last_loss(), iters, threads))
  io.stdout:flush()
end
