-- Gradient accumulation as the tutorials teach it: K micro-batches, each
-- loss divided by K, backward after each, one optimizer step. Checks that
-- the accumulated gradient equals the gradient of one batch K times larger.
local cli = require "tensh.cli"
local args = cli.parse(arg, "Gradient accumulation, checked against one large batch.", {
  {"accum", 4, "micro-batches per optimizer step"},
  {"micro-batch", 16, "samples per micro-batch"},
  {"steps", 20, "optimizer steps to train"},
  {"device", "auto", "auto, cpu, cuda or cuda:N"},
})
local device = cli.device(args.device)
torch.manual_seed(0)

local function make_model()
  torch.manual_seed(1)
  return nn.Sequential(nn.Linear(20, 64), nn.Tanh(), nn.Linear(64, 3)):to(device)
end
local K, B = args.accum, args.micro_batch
local X = torch.randn(K * B, 20, {device = device})
local Y = torch.randint(0, 3, {K * B}, {device = device})
local criterion = nn.CrossEntropyLoss()

-- 1) the check: accumulated micro-batch gradients == one large batch's gradient
local a, b = make_model(), make_model()
for k = 0, K - 1 do
  local xs, ys = X:narrow(0, k * B, B), Y:narrow(0, k * B, B)
  local loss = criterion(a(xs), ys) / K
  loss:backward()
end
local big = criterion(b(X), Y)
big:backward()
local worst = 0
local pb = b:parameters()
for i, p in ipairs(a:parameters()) do
  worst = math.max(worst, (p.grad - pb[i].grad):abs():max():item())
end
local match = worst < 1e-5
print(("accumulated vs large-batch gradients: max abs difference %.3g (%s)"):format(worst,
  match and "they match" or "MISMATCH"))

-- 2) training with accumulation
local model = make_model()
local opt = optim.SGD(model:parameters(), {lr = 0.5})
local first, last
for step = 1, args.steps do
  opt:zero_grad()
  local total = 0
  for k = 0, K - 1 do
    local loss = criterion(model(X:narrow(0, k * B, B)), Y:narrow(0, k * B, B)) / K
    loss:backward()
    total = total + loss:item()
  end
  opt:step()
  first, last = first or total, total
  if step == 1 or step % 5 == 0 then print(("step %3d: loss %.4f"):format(step, total)) end
end

-- the verdict: the check above, and whether training with it made progress
local learned = last < first
print(("verdict: %s; training with %d micro-batches of %d took the loss from %.4f to %.4f (%s)"):format(
  match and ("the accumulated gradient equals one batch of %d's"):format(K * B)
    or "the accumulated gradient DIFFERS from the large batch's",
  K, B, first, last, learned and "it learns" or "NO PROGRESS"))
if not (match and learned) then os.exit(1) end
