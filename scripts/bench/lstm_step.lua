-- The twin of ../shared/peers/lstm_step.py: one training step (zero_grad,
-- forward, cross-entropy, backward, Adam) of a 2-layer LSTM language model,
-- vocab 1000, embedding 256, hidden 256, sequence 64, batch 32, batch_first.
-- The median of 20 steps after 3 warm-up steps. One JSON line on stdout.
-- Run: build/tensh scripts/bench/lstm_step.lua [--device cpu|cuda] [--batch N] [--seq L]
-- (threads: OMP_NUM_THREADS / OPENBLAS_NUM_THREADS, as run.sh sets them).
local bench = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")
local device = bench.device(arg)
local function opt_int(name, dflt)
  for i = 1, #arg do
    if arg[i] == "--" .. name then return math.tointeger(tonumber(arg[i + 1])) end
  end
  return dflt
end
local B, L = opt_int("batch", 32), opt_int("seq", 64)
local V, E, H = 1000, 256, 256
torch.manual_seed(0)

local LM = nn.Module:extend("LM")
function LM:init()
  self.emb = nn.Embedding(V, E)
  self.lstm = nn.LSTM(E, H, {num_layers = 2, batch_first = true})
  self.out = nn.Linear(H, V)
end
function LM:forward(x)
  local h = self.lstm(self.emb(x))
  return self.out(h)
end

local model = LM():to(device)
local x = torch.randint(0, V, {B, L}, {device = device})
local y = torch.randint(0, V, {B, L}, {device = device})
local opt = optim.Adam(model:parameters(), {lr = 1e-3})
local crit = nn.CrossEntropyLoss()
local function step()
  opt:zero_grad()
  crit(model(x):reshape(-1, V), y:reshape(-1)):backward()
  opt:step()
end
local ms = bench.time_ms(step, 3, 20, device)
print(('{"bench": "lstm_lm_train", "impl": "tensh", "device": %q, "batch": %d, "seq": %d, "ms_per_step": %.3f, '
  .. '"tokens_per_s": %.1f, %s, "version": %q}'):format(device, B, L, ms, B * L / ms * 1e3, bench.run_fields(),
  torch.__version__))
io.stdout:flush()
