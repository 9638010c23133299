-- Train a character-level GPT (models.gpt, nanoGPT's model) on a text file and
-- sample from it: nanoGPT's train.py with its shakespeare_char preparation and
-- sample.py in one script. AdamW with decay on matrices, a cosine learning
-- rate after a linear warm-up, gradient clipping, autocast (bfloat16 on the
-- CPU, float16 with a GradScaler on CUDA), a checkpoint at each evaluation and
-- --resume, samples as it trains, and the loss curves plotted at the end.
--   tensh scripts/train_gpt.lua                  # the license texts every Debian system has
--   tensh scripts/train_gpt.lua --data input.txt --n-layer 6 --n-head 6 --n-embd 384 --block-size 256
local cli = require "tensh.cli"
local time = require "tensh.time"
local G = models.gpt

-- the default corpus: /usr/share/common-licenses (Debian's base-files package, on every
-- installation): the GPL, LGPL, GFDL, Apache, Artistic, MPL, BSD and CC0 texts, ~230 kB of English
local args = cli.parse(arg, "Train a character-level GPT on a text file (or a folder of them) and sample from it.", {
  {"data", "/usr/share/common-licenses", "a text file, or a folder whose files are joined (symbolic links skipped)"},
  {"device", "auto", "auto, cpu, cuda or cuda:N"},
  {"dtype", "float32", "autocast dtype: bfloat16 (CPU or CUDA) or float16 (CUDA, with a GradScaler)",
    {"float32", "bfloat16", "float16"}},
  {"steps", 2000, "training iterations (nanoGPT's max_iters)"},
  {"batch-size", 12, "sequences a step"},
  {"block-size", 64, "context length in characters"},
  {"n-layer", 4, "transformer blocks"},
  {"n-head", 4, "attention heads"},
  {"n-embd", 128, "width"},
  {"dropout", 0.0, "dropout probability while training"},
  {"lr", 1e-3, "peak learning rate"},
  {"min-lr", 1e-4, "learning rate at the end of the cosine decay"},
  {"warmup", 100, "warm-up iterations (linear)"},
  {"weight-decay", 0.1, "AdamW's weight decay on matrices"},
  {"beta2", 0.99, "AdamW's beta2"},
  {"grad-clip", 1.0, "clip the gradients' total norm (0: off)"},
  {"eval-interval", 250, "evaluate, sample and save a checkpoint every this many iterations"},
  {"eval-iters", 20, "batches per loss estimate"},
  {"log-interval", 10, "print the training loss every this many iterations"},
  {"sample", 200, "characters of each sample (0: none)"},
  {"prompt", "\\n", "the text samples start from (\\n: a newline)"},
  {"temperature", 0.8, "sampling temperature"},
  {"top-k", 0, "sample from the k most likely characters only (0: all)"},
  {"out", "out-gpt", "directory for the checkpoint (ckpt.safetensors)"},
  {"resume", false, "continue from the checkpoint in --out (its model size wins)"},
  {"stop-after", 0, "stop after this iteration's evaluation (0: run to --steps); --resume continues"},
  {"seed", 1337, "random seed"},
  {"plot", true, "plot the loss curves at the end (--plot=false: no)"},
})

local device = cli.device(args.device)
local device_type = device:match("^cuda") and "cuda" or "cpu"
if args.dtype == "float16" and device_type ~= "cuda" then
  error("--dtype float16 needs a CUDA device (on the CPU use --dtype bfloat16)", 0)
end
local ckpt_path = args.out .. "/ckpt.safetensors"
local prompt = args.prompt:gsub("\\n", "\n")

-- ---- the text ------------------------------------------------------------------------

local function read_corpus(path)
  local f = io.open(path, "rb")
  local text = f and f:read("a")
  if f then f:close() end
  if text then return text, path end -- a file (reading a folder gives nil)
  local list = io.popen(("find '%s' -maxdepth 1 -type f 2>/dev/null | LC_ALL=C sort"):format(path:gsub("'", "'\\''")))
  local parts = {}
  for name in list:lines() do
    local g = assert(io.open(name, "rb"))
    parts[#parts + 1] = g:read("a")
    g:close()
  end
  list:close()
  if #parts == 0 then error(("--data: %s is neither a readable file nor a folder of files"):format(path), 0) end
  return table.concat(parts, "\n"), ("%s (%d files)"):format(path, #parts)
end

-- the vocabulary: the distinct bytes of the text, sorted (nanoGPT's chars); a string to keep in the checkpoint
local function vocabulary(text)
  local seen, chars = {}, {}
  for i = 1, #text do seen[text:byte(i)] = true end
  for b = 0, 255 do if seen[b] then chars[#chars + 1] = string.char(b) end end
  return table.concat(chars)
end

local ck
if args.resume then
  local ok, loaded = pcall(torch.load, ckpt_path)
  if not ok then error(("--resume: no checkpoint to resume from (%s)"):format(loaded), 0) end
  ck = loaded
end

local text, source = read_corpus(args.data)
local chars = ck and ck.vocab or vocabulary(text)
local stoi = {}
for i = 1, #chars do stoi[chars:byte(i)] = i - 1 end
local vocab_of = ck and ckpt_path or source
local function encode(s, what)
  local ids = {}
  for i = 1, #s do
    local id = stoi[s:byte(i)]
    if id == nil then
      error(("%s: byte %d (%q) is not in the vocabulary of %s"):format(what, s:byte(i), s:sub(i, i), vocab_of), 0)
    end
    ids[i] = id
  end
  return ids
end
local function decode(ids)
  local out = {}
  for i, id in ipairs(ids) do out[i] = chars:sub(id + 1, id + 1) end
  return table.concat(out)
end

local all = torch.tensor(encode(text, "--data"), {dtype = torch.int64})
local prompt_ids = encode(prompt, "--prompt") -- checked before any training
if #prompt_ids == 0 and args.sample > 0 then error("--prompt: samples need at least one character to start from", 0) end
local n_train = math.floor(0.9 * all:numel())
local splits = {train = all:narrow(0, 0, n_train), val = all:narrow(0, n_train, all:numel() - n_train)}

-- the model's size: the options, or the checkpoint's
local config = ck and ck.config or {vocab_size = #chars, block_size = args.block_size, n_layer = args.n_layer,
  n_head = args.n_head, n_embd = args.n_embd, dropout = args.dropout, bias = true}
local T, B = config.block_size, args.batch_size
for name, d in pairs(splits) do
  if d:numel() <= T + 1 then
    error(("the %s split has %d characters, too few for a context of %d (a larger text, or a smaller "
      .. "--block-size)"):format(name, d:numel(), T), 0)
  end
end

-- a batch of B random windows: x the characters, y the same shifted by one (built on the CPU, then moved,
-- as nanoGPT does; pinned memory lets the copy overlap on CUDA)
local offsets = torch.arange(T):view(1, T)
local function get_batch(split)
  local d = splits[split]
  local ix = torch.randint(0, d:numel() - T - 1, {B, 1}) + offsets
  local x, y = d:index_select(0, ix:view(-1)):view(B, T), d:index_select(0, (ix + 1):view(-1)):view(B, T)
  if device_type == "cuda" then
    return x:pin_memory():to(device, {non_blocking = true}), y:pin_memory():to(device, {non_blocking = true})
  end
  return x, y
end

-- ---- the model, the optimizer, the schedule ------------------------------------------------

torch.manual_seed(args.seed)
local model = G.GPT(config):to(device)
local optimizer = model:configure_optimizers(args.weight_decay, args.lr, {0.9, args.beta2}, device_type)
local scaler = amp.GradScaler(device_type, {enabled = args.dtype == "float16"})
local autocast_dtype = args.dtype ~= "float32" and args.dtype or nil

-- nanoGPT's get_lr: linear warm-up, then a cosine down to min_lr at the last step
local function get_lr(it)
  if it < args.warmup then return args.lr * (it + 1) / (args.warmup + 1) end
  if it > args.steps then return args.min_lr end
  local ratio = (it - args.warmup) / math.max(1, args.steps - args.warmup)
  return args.min_lr + 0.5 * (1 + math.cos(math.pi * ratio)) * (args.lr - args.min_lr)
end

-- the loss of a batch, in the autocast dtype where one is asked for
local function forward(x, y)
  if not autocast_dtype then return select(2, model(x, y)) end
  local _ <close> = torch.autocast(device_type, {dtype = autocast_dtype})
  return select(2, model(x, y))
end

local history = {iters = {}, train = {}, val = {}, logged_iters = {}, logged = {}, best_val = math.huge}
local iter_num = 0
if ck then
  model:load_state_dict(ck.model)
  optimizer:load_state_dict(ck.optim)
  scaler:load_state_dict(ck.scaler)
  history = ck.history
  iter_num = ck.iter_num
  if iter_num >= args.steps then
    print(("%s: that run already finished its %d iterations (val loss %.4f); nothing to resume. Raise --steps to "
      .. "train further, or drop --resume to start afresh."):format(ckpt_path, iter_num, history.best_val))
    return
  end
  torch.set_rng_state(ck.rng)
  print(("resuming at iteration %d of %d from %s"):format(iter_num, args.steps, ckpt_path))
end

-- the mean loss over eval_iters batches of each split, without dropout
local function estimate_loss()
  local out = {}
  model:eval()
  torch.no_grad(function()
    for _, split in ipairs({"train", "val"}) do
      local sum = torch.zeros({}, {device = device})
      for _ = 1, args.eval_iters do sum = sum + forward(get_batch(split)):float() end
      out[split] = sum:item() / args.eval_iters
    end
  end)
  model:train()
  return out
end

local function sample(n)
  model:eval()
  local idx = torch.tensor({prompt_ids}, {dtype = torch.int64}):to(device)
  local out = model:generate(idx, n, {temperature = args.temperature, top_k = args.top_k > 0 and args.top_k or nil})
  model:train()
  return decode(out[0]:tolist())
end

local function save()
  os.execute(("mkdir -p '%s'"):format(args.out:gsub("'", "'\\''")))
  torch.save({model = model:state_dict(), optim = optimizer:state_dict(), scaler = scaler:state_dict(),
    config = config, vocab = chars, iter_num = iter_num, history = history, rng = torch.get_rng_state()}, ckpt_path)
end

-- evaluate, sample, save: every eval_interval iterations and at the end
local function checkpoint()
  local l = estimate_loss()
  local it = #history.iters + 1
  history.iters[it], history.train[it], history.val[it] = iter_num, l.train, l.val
  history.best_val = math.min(history.best_val, l.val)
  print(("step %d: train loss %.4f, val loss %.4f"):format(iter_num, l.train, l.val))
  if args.sample > 0 then print("---- sample ----\n" .. sample(args.sample) .. "\n----------------") end
  save()
end

print(("tensh: a %d-layer GPT (%d heads, width %d, context %d; %.2fM parameters) on %s: %d characters, "
  .. "vocabulary %d; %s, %s"):format(config.n_layer, config.n_head, config.n_embd, T, model:get_num_params() / 1e6,
  source, all:numel(), #chars, device, args.dtype))

-- ---- training ------------------------------------------------------------------------

model:train()
local t0 = time.perf_counter()
local resumed = ck ~= nil -- the checkpoint was written after its evaluation: do not run it again
while true do
  if iter_num % args.eval_interval == 0 and not resumed then
    checkpoint()
    if args.stop_after > 0 and iter_num == args.stop_after then
      print(("stopping after iteration %d as asked; continue with --resume"):format(iter_num))
      return
    end
    t0 = time.perf_counter() -- the iterations' time leaves the evaluation out
  end
  resumed = false
  if iter_num >= args.steps then break end
  local lr = get_lr(iter_num)
  for _, g in ipairs(optimizer.param_groups) do g.lr = lr end
  local x, y = get_batch("train")
  local loss = forward(x, y)
  scaler:scale(loss):backward()
  if args.grad_clip > 0 then
    scaler:unscale_(optimizer)
    nn.utils.clip_grad_norm_(model:parameters(), args.grad_clip)
  end
  scaler:step(optimizer)
  scaler:update()
  optimizer:zero_grad({set_to_none = true})
  iter_num = iter_num + 1
  if iter_num % args.log_interval == 0 then
    local l = loss:item() -- the only wait for the device a step, every log_interval steps
    local t1 = time.perf_counter()
    history.logged_iters[#history.logged_iters + 1], history.logged[#history.logged + 1] = iter_num, l
    print(("iter %d: loss %.4f, %.1f ms/iter, lr %.2e"):format(iter_num, l, (t1 - t0) * 1000 / args.log_interval, lr))
    t0 = t1
  end
end
if iter_num % args.eval_interval ~= 0 then checkpoint() end
print(("final: val loss %.4f (best %.4f), checkpoint %s"):format(history.val[#history.val], history.best_val, ckpt_path))

if args.plot then
  local plot = require "tensh.plot"
  if #history.iters >= 2 then
    plot.plot(history.iters, {history.train, history.val}, {title = "loss", labels = {"train", "val"}})
  elseif #history.logged >= 2 then
    plot.plot(history.logged_iters, history.logged, {title = "training loss"})
  end
end
