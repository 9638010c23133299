-- An AMP training step against float32: seed 003's MLP (1024-2048-512-10,
-- ReLU, batch 128, Adam, cross-entropy), one run = zero_grad, forward, loss,
-- backward, step. mode=float32 is the plain step; mode=amp runs the forward
-- under torch.autocast (bfloat16 on the CPU, float16 on CUDA) with a
-- GradScaler around backward and step, as seed 003 advises. No PyTorch twin.
local common = dofile(debug.getinfo(1, "S").source:match("^@(.*)/") .. "/common.lua")
local dev = common.device()
local low = dev == "cpu" and "bfloat16" or "float16"

bench.case("amp_step", function(step) step() end, {device = dev, params = {mode = {"float32", "amp"}},
  setup = function(p)
    torch.manual_seed(0)
    local model = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 512), nn.ReLU(),
      nn.Linear(512, 10)):to(dev)
    local data = torch.randn(128, 1024, {device = dev})
    local target = torch.randint(0, 10, {128}, {device = dev})
    local opt, crit = optim.Adam(model:parameters()), nn.CrossEntropyLoss()
    if p.mode == "float32" then return common.train_step(model, opt, crit, data, target) end
    local scaler = amp.GradScaler(dev)
    return function()
      opt:zero_grad()
      local loss
      do
        local _ <close> = torch.autocast(dev, {dtype = "torch." .. low})
        loss = crit(model(data), target)
      end
      scaler:scale(loss):backward()
      scaler:step(opt)
      scaler:update()
    end
  end})
