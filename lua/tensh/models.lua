-- The global `models`: torchvision.models' architectures, built as torchvision
-- builds them (module names, state_dict keys and shapes, initialisation), so a
-- torchvision checkpoint converted to safetensors loads as it is. Also the
-- reusable blocks they are made of (torchvision.ops' Conv2dNormActivation and
-- SqueezeExcitation; MobileNetV3's InvertedResidual), and models.gpt, nanoGPT's
-- GPT-2 style decoder. No weights are downloaded.
local models = require("tensh.lazy").claim("models") -- the table the global models holds from start-up

for _, file in ipairs({"tensh.models.ops", "tensh.models.mobilenetv3"}) do
  for k, v in pairs(require(file)) do models[k] = v end
end
-- nanoGPT's GPT (GPT, GPTConfig and its blocks) as a namespace of its own: models.gpt.GPT
models.gpt = require "tensh.models.gpt"

return models
