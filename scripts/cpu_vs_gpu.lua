-- Seed 003's comparison: the same MLP (1024-2048-512-10, batch 128, Adam,
-- cross-entropy) trained for some steps on the CPU, then on the GPU when
-- there is one, with the speed-up.
local cli = require "tensh.cli"
local args = cli.parse(arg, "Time an MLP's training steps on the CPU and, when available, on the GPU.", {
  {"steps", 100, "training steps per device"},
  {"batch-size", 128, "samples per step"},
})

local function run(device)
  torch.manual_seed(0)
  local model = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 512), nn.ReLU(),
    nn.Linear(512, 10)):to(device)
  local x = torch.randn(args.batch_size, 1024, {device = device})
  local y = torch.randint(0, 10, {args.batch_size}, {device = device})
  local criterion, opt = nn.CrossEntropyLoss(), optim.Adam(model:parameters())
  local function step()
    opt:zero_grad()
    local loss = criterion(model(x), y)
    loss:backward()
    opt:step()
    return loss
  end
  step() -- warm-up: first-touch allocations, BLAS threads
  if device ~= "cpu" then cuda.synchronize() end
  local t0 = torch._clock()
  local loss
  for _ = 1, args.steps do loss = step() end
  local l = loss:item() -- waits for the device
  local secs = torch._clock() - t0
  print(("%-5s %d steps: %.2f s (%.2f ms/step), final loss %.4f"):format(device, args.steps, secs,
    1000 * secs / args.steps, l))
  return secs
end

local cpu_time = run("cpu")
if cuda.is_available() then
  local gpu_time = run("cuda")
  print(("speed-up: %.2fx"):format(cpu_time / gpu_time))
else
  print("no GPU available (cuda.is_available() is false): CPU only")
end
