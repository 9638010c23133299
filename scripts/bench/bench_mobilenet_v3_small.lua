-- The twin of scripts/bench/twins/mobilenet_v3_small.py: one training step
-- (zero_grad, forward, cross-entropy, backward, SGD with momentum 0.9) of
-- MobileNetV3-small (models.mobilenet_v3_small, 10 classes) on random 32x32
-- images, batch 128.
local common = dofile(debug.getinfo(1, "S").source:match("^@(.*)/") .. "/common.lua")
local dev = common.device()
local B = 128

bench.case("mobilenet_v3_small_train", function(step) step() end, {device = dev, setup = function()
  torch.manual_seed(0)
  local model = models.mobilenet_v3_small({num_classes = 10}):to(dev)
  local x = torch.randn(B, 3, 32, 32, {device = dev})
  local y = torch.randint(0, 10, {B}, {device = dev})
  return common.train_step(model, optim.SGD(model:parameters(), {lr = 0.05, momentum = 0.9}), nn.CrossEntropyLoss(),
    x, y)
end})
