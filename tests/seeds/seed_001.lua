-- Seed 001, "How to Use CUDA with PyTorch: Clearly Explained",
-- ported line for line. Python's
-- keyword arguments are a trailing table: nn.Linear(in_features=64, ...) is
-- nn.Linear({in_features = 64, ...}). GPU lines run when cuda.is_available();
-- without a GPU each must raise a Lua error naming the call.
package.path = (arg and arg[0] and arg[0]:match("^(.*)/[^/]*$") or ".") .. "/?.lua;" .. package.path
local check = require "seed_check"
local eq, ok, close, raises, no_cuda = check.eq, check.ok, check.close, check.raises, check.no_cuda
local gpu = torch.cuda.is_available()
torch.manual_seed(0)

-- ---- Verifying PyTorch's CUDA support ---------------------------------------------------
-- import torch; torch.cuda.is_available(), torch.cuda.device_count()
eq(type(torch.cuda.is_available()), "boolean", "torch.cuda.is_available()")
eq(math.type(torch.cuda.device_count()), "integer", "torch.cuda.device_count()")
eq(torch.cuda.is_available(), torch.cuda.device_count() > 0, "True and a non-zero count go together")

-- ---- Configuring PyTorch to use the GPU ----------------------------------------------------
do
  -- Create a tensor on the CPU
  local tensor_cpu = torch.randn(10, 10)
  eq(tensor_cpu.shape, torch.Size({10, 10}), "tensor_cpu.shape")
  eq(tensor_cpu.is_cuda, false, "tensor_cpu.is_cuda")
  -- Move the tensor to the GPU
  if gpu then
    local tensor_gpu = tensor_cpu:to({device = 'cuda'})
    eq(tensor_gpu.is_cuda, true, "tensor_gpu.is_cuda")
    eq(tostring(tensor_gpu.device), "cuda:0", "tensor_gpu.device")
    close(tensor_gpu, tensor_cpu, 0, 0, "to('cuda') keeps the values")
  else
    no_cuda(function() return tensor_cpu:to({device = 'cuda'}) end, "to")
  end

  -- Define a simple neural network
  local model = nn.Sequential(
    nn.Linear({in_features = 64, out_features = 32}),
    nn.Linear({in_features = 32, out_features = 10}))
  eq(tostring(model), [[
Sequential(
  (0): Linear(in_features=64, out_features=32, bias=True)
  (1): Linear(in_features=32, out_features=10, bias=True)
)]], "print(model)")
  -- Move the model to the GPU
  if gpu then
    model:to('cuda')
    for _, p in ipairs(model:parameters()) do eq(p.is_cuda, true, "model:to('cuda') moves every parameter") end
  else
    no_cuda(function() model:to('cuda') end, "to")
    for _, p in ipairs(model:parameters()) do eq(p.is_cuda, false, "a failed move leaves the model on the CPU") end
  end
end

-- ---- Using the to() method to move tensors and modules to the GPU ---------------------------
-- (the same snippet again, with both imports)
local device = gpu and 'cuda' or 'cpu'
local model
do
  local tensor_cpu = torch.randn(10, 10)
  local tensor_gpu = tensor_cpu:to({device = device})
  eq(tensor_gpu.is_cuda, gpu, "to(device = device)")
  model = nn.Sequential(
    nn.Linear({in_features = 64, out_features = 32}),
    nn.Linear({in_features = 32, out_features = 10}))
  model:to(device)
  eq(model:parameters()[1].is_cuda, gpu, "model:to(device)")
end

-- ---- Ensuring data compatibility between CPU and GPU ----------------------------------------
do
  -- Assuming you have some input data and labels
  local inputs = torch.randn(64, 3, 224, 224)
  local labels = torch.randint(0, 10, {64})
  eq(inputs.shape, torch.Size({64, 3, 224, 224}), "inputs.shape")
  eq(labels.dtype, torch.int64, "labels.dtype")
  ok(labels:min():item() >= 0 and labels:max():item() < 10, "labels in [0, 10)")
  -- Move the data to the GPU
  if gpu then
    inputs = inputs:to('cuda')
    labels = labels:to('cuda')
    eq(inputs.is_cuda and labels.is_cuda, true, "inputs and labels on the GPU")
  else
    no_cuda(function() return inputs:to('cuda') end, "to")
    no_cuda(function() return labels:to('cuda') end, "to")
  end
end

-- ---- Batching your data for efficient GPU utilization ---------------------------------------
-- "Assuming you have a dataset loaded in PyTorch": 640 samples of the model's 64
-- features, stored on the device, so the batches are already there.
local X, Y = torch.randn(640, 64), torch.randint(0, 10, {640})
local dataset = torch.utils.data.TensorDataset(X:to(device), Y:to(device))
do
  local train_loader = torch.utils.data.DataLoader(dataset, {batch_size = 64, shuffle = true})
  eq(#train_loader, 10, "len(train_loader)")
  local seen = 0
  for inputs, labels in train_loader:iter() do
    -- The inputs and labels are already on the GPU
    eq(inputs.is_cuda, gpu, "inputs come on the dataset's device")
    local outputs = model(inputs)
    eq(outputs.shape, torch.Size({64, 10}), "outputs.shape")
    seen = seen + labels:numel()
    -- Perform the rest of your training logic
  end
  eq(seen, 640, "one epoch sees every sample")
end

-- ---- Overlapping data transfer and computation with asynchronous operations ------------------
do
  local train_loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y),
    {batch_size = 64, shuffle = true, pin_memory = gpu})
  -- Move the model to the GPU
  if gpu then model:to('cuda') end
  local batches = 0
  for inputs, labels in train_loader:iter() do
    if gpu then
      -- Transfer the data to the GPU asynchronously
      eq(inputs:is_pinned(), true, "pin_memory = true gives pinned batches")
      inputs = inputs:to('cuda', {non_blocking = true})
      labels = labels:to('cuda', {non_blocking = true})
    else
      no_cuda(function() return inputs:to('cuda', {non_blocking = true}) end, "to")
    end
    -- Perform the forward pass on the GPU
    local outputs = model(inputs)
    eq(outputs.shape, torch.Size({64, 10}), "outputs.shape")
    local ref = model:cpu()(inputs:cpu()) -- the same numbers on the CPU
    close(outputs, ref, 1e-4, 1e-5, "the forward pass on the device matches the CPU")
    model:to(device)
    batches = batches + 1
    -- Perform the rest of your training logic
  end
  eq(batches, 10, "batches per epoch")
end

-- ---- Accessing GPU-specific information using PyTorch's built-in functions -------------------
do
  -- Check the number of available GPUs
  local num_gpus = torch.cuda.device_count()
  print(("Number of available GPUs: %d"):format(num_gpus))
  if gpu then
    -- Get the name of the current GPU device
    local current_gpu = torch.cuda.current_device()
    local gpu_name = torch.cuda.get_device_name(current_gpu)
    print(("Current GPU device: %s"):format(gpu_name))
    -- Monitor the GPU memory usage
    print(("GPU memory allocated: %.2f MB"):format(torch.cuda.memory_allocated(current_gpu) / 1e6))
    print(("GPU memory cached: %.2f MB"):format(torch.cuda.memory_cached(current_gpu) / 1e6))
    ok(torch.cuda.memory_allocated(current_gpu) > 0, "the model and dataset on the GPU hold memory")
    ok(torch.cuda.memory_cached(current_gpu) >= torch.cuda.memory_allocated(current_gpu), "cached >= allocated")
  else
    eq(num_gpus, 0, "no GPU: device_count() is 0")
    no_cuda(function() return torch.cuda.current_device() end, "cuda.current_device")
    no_cuda(function() return torch.cuda.get_device_name(0) end, "cuda.get_device_name")
    -- without a GPU the memory statistics are PyTorch's: 0 bytes (issue 10)
    eq(torch.cuda.memory_allocated(0), 0, "cuda.memory_allocated")
    eq(torch.cuda.memory_cached(0), 0, "cuda.memory_cached")
  end
end

-- ---- Convolutional Neural Networks (CNNs) ---------------------------------------------------
local CNN = nn.Module:extend("CNN")
function CNN:init()
  self.conv1 = nn.Conv2d({in_channels = 3, out_channels = 16, kernel_size = 3, stride = 1, padding = 1})
  self.pool1 = nn.MaxPool2d({kernel_size = 2, stride = 2})
  self.conv2 = nn.Conv2d({in_channels = 16, out_channels = 32, kernel_size = 3, stride = 1, padding = 1})
  self.pool2 = nn.MaxPool2d({kernel_size = 2, stride = 2})
  self.fc1 = nn.Linear({in_features = 32 * 7 * 7, out_features = 128})
  self.fc2 = nn.Linear({in_features = 128, out_features = 10})
end
function CNN:forward(x)
  x = self.pool1(nn.functional.relu(self.conv1(x)))
  x = self.pool2(nn.functional.relu(self.conv2(x)))
  x = x:view(-1, 32 * 7 * 7)
  x = nn.functional.relu(self.fc1(x))
  x = self.fc2(x)
  return x
end
do
  local cnn = CNN()
  eq(tostring(cnn), [[
CNN(
  (conv1): Conv2d(3, 16, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))
  (pool1): MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)
  (conv2): Conv2d(16, 32, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))
  (pool2): MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)
  (fc1): Linear(in_features=1568, out_features=128, bias=True)
  (fc2): Linear(in_features=128, out_features=10, bias=True)
)]], "print(CNN())")
  cnn:to(device)
  local x = torch.randn(8, 3, 28, 28, {device = device})
  local y = cnn(x)
  eq(y.shape, torch.Size({8, 10}), "CNN output shape for 3x28x28 images")
  -- it trains: a few SGD steps on one batch lower its loss
  local target = torch.randint(0, 10, {8}, {device = device})
  local opt = optim.Adam(cnn:parameters(), {lr = 1e-3})
  local first, last
  for step = 1, 25 do
    opt:zero_grad()
    local loss = nn.functional.cross_entropy(cnn(x), target)
    loss:backward()
    opt:step()
    if step == 1 then first = loss:item() end
    last = loss:item()
  end
  ok(last < first * 0.5, ("the CNN fits one batch: loss %.4f -> %.4f"):format(first, last))
end

-- ---- Recurrent Neural Networks (RNNs) -------------------------------------------------------
-- The article's RNN is built from Linear layers and torch.cat (nn.RNN, nn.RNNCell exist too).
local RNN = nn.Module:extend("RNN")
function RNN:init(input_size, hidden_size, output_size)
  self.hidden_size = hidden_size
  self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
  self.i2o = nn.Linear(input_size + hidden_size, output_size)
  self.softmax = nn.LogSoftmax({dim = 1})
end
function RNN:forward(input, hidden)
  local combined = torch.cat({input, hidden}, 1)
  hidden = self.i2h(combined)
  local output = self.i2o(combined)
  output = self.softmax(output)
  return output, hidden
end
function RNN:initHidden()
  return torch.zeros(1, self.hidden_size)
end
do
  local rnn = RNN(5, 8, 3)
  eq(tostring(rnn), [[
RNN(
  (i2h): Linear(in_features=13, out_features=8, bias=True)
  (i2o): Linear(in_features=13, out_features=3, bias=True)
  (softmax): LogSoftmax(dim=1)
)]], "print(RNN(5, 8, 3))")
  -- one character at a time: the hidden state carries from step to step
  local hidden = rnn:initHidden()
  close(hidden, torch.zeros(1, 8), 0, 0, "initHidden()")
  local chars = torch.randn(4, 1, 5)
  local output
  for i = 0, 3 do
    output, hidden = rnn(chars[i], hidden)
    eq(output.shape, torch.Size({1, 3}), "output shape")
    eq(hidden.shape, torch.Size({1, 8}), "hidden shape")
    close(output:exp():sum(), 1, 1e-5, 1e-6, "LogSoftmax rows are log-probabilities")
  end
  -- the last output against the same steps written out with matmul
  local h = torch.zeros(1, 8)
  local o
  for i = 0, 3 do
    local c = torch.cat({chars[i], h}, 1)
    h = c:matmul(rnn.i2h.weight:t()) + rnn.i2h.bias
    o = c:matmul(rnn.i2o.weight:t()) + rnn.i2o.bias
    o = o - o:exp():sum(1, {keepdim = true}):log()
  end
  close(output, o, 1e-5, 1e-6, "RNN output after 4 steps")
  close(hidden, h, 1e-5, 1e-6, "RNN hidden after 4 steps")
  -- backpropagation through time reaches every parameter
  local loss = nn.functional.nll_loss(output, torch.tensor({2}))
  loss:backward()
  for name, p in rnn:named_parameters() do ok(p.grad ~= nil, "a gradient for " .. name) end
end

-- ---- Long Short-Term Memory (LSTMs) and Gated Recurrent Units (GRUs) -------------------------
-- The article's class, with nn.LSTM (batch_first).
local LSTM = nn.Module:extend("LSTM")
function LSTM:init(input_size, hidden_size, num_layers)
  self.num_layers = num_layers
  self.hidden_size = hidden_size
  self.lstm = nn.LSTM(input_size, hidden_size, num_layers, {batch_first = true})
end
function LSTM:forward(x, h0, c0)
  local out, hc = self.lstm(x, {h0, c0})
  local h_n, c_n = hc[1], hc[2]
  return out, h_n, c_n
end
function LSTM:init_hidden(batch_size)
  local h0 = torch.zeros(self.num_layers, batch_size, self.hidden_size, {device = device})
  local c0 = torch.zeros(self.num_layers, batch_size, self.hidden_size, {device = device})
  return h0, c0
end
do
  local model = LSTM(5, 8, 2):to(device)
  eq(tostring(model), [[
LSTM(
  (lstm): LSTM(5, 8, num_layers=2, batch_first=True)
)]], "print(LSTM(5, 8, 2))")
  local x = torch.randn(3, 7, 5, {device = device})
  local h0, c0 = model:init_hidden(3)
  local out, h_n, c_n = model(x, h0, c0)
  eq(out.shape, torch.Size({3, 7, 8}), "out (batch, seq, hidden)")
  eq(h_n.shape, torch.Size({2, 3, 8}), "h_n (num_layers, batch, hidden)")
  eq(c_n.shape, torch.Size({2, 3, 8}), "c_n")
  -- the last layer's final hidden state is its output at the last step
  close(h_n[1], out:select(1, 6), 1e-6, 1e-7, "h_n[-1] == out[:, -1]")
  out:sum():backward()
  for name, p in model:named_parameters() do ok(p.grad ~= nil, "a gradient for " .. name) end
  -- a GRU, the article's other gated unit, in the same shapes
  local gru = nn.GRU(5, 8, 2, {batch_first = true}):to(device)
  local gout, gh = gru(x, h0)
  eq(gout.shape, torch.Size({3, 7, 8}), "GRU out")
  close(gh[1], gout:select(1, 6), 1e-6, 1e-7, "GRU h_n[-1] == out[:, -1]")
end

-- ---- Transformers and Attention Mechanisms --------------------------------------------------
-- The article omits Encoder and Decoder ("implementation details omitted for brevity");
-- here they are built of the real layers, as a PyTorch user would fill them in:
-- nn.TransformerEncoder over nn.TransformerEncoderLayer, nn.TransformerDecoder over
-- nn.TransformerDecoderLayer (self-attention, then attention to the encoder's output).
local Encoder = nn.Module:extend("Encoder")
function Encoder:init(input_size, num_layers, num_heads, hidden_size)
  self.embed = nn.Linear(input_size, hidden_size)
  self.layers = nn.TransformerEncoder(nn.TransformerEncoderLayer(hidden_size, num_heads,
    {dim_feedforward = 4 * hidden_size, batch_first = true}), num_layers)
end
function Encoder:forward(src)
  return self.layers(self.embed(src))
end
local Decoder = nn.Module:extend("Decoder")
function Decoder:init(output_size, num_layers, num_heads, hidden_size)
  self.embed = nn.Linear(output_size, hidden_size)
  self.layers = nn.TransformerDecoder(nn.TransformerDecoderLayer(hidden_size, num_heads,
    {dim_feedforward = 4 * hidden_size, batch_first = true}), num_layers)
  self.out = nn.Linear(hidden_size, output_size)
end
function Decoder:forward(tgt, encoder_output)
  local T = tgt.shape[1]
  local mask = nn.Transformer.generate_square_subsequent_mask(T, {device = tgt.device})
  return self.out(self.layers(self.embed(tgt), encoder_output, {tgt_mask = mask}))
end

local Transformer = nn.Module:extend("Transformer")
function Transformer:init(input_size, output_size, num_layers, num_heads, hidden_size)
  self.encoder = Encoder(input_size, num_layers, num_heads, hidden_size)
  self.decoder = Decoder(output_size, num_layers, num_heads, hidden_size)
end
function Transformer:forward(src, tgt)
  local encoder_output = self.encoder(src)
  local output = self.decoder(tgt, encoder_output)
  return output
end
do
  local tr = Transformer(6, 4, 2, 4, 16):to(device)
  local src, tgt = torch.randn(2, 7, 6, {device = device}), torch.randn(2, 5, 4, {device = device})
  local out = tr(src, tgt)
  eq(out.shape, torch.Size({2, 5, 4}), "Transformer output (batch, target length, output_size)")
  -- the decoder's attention to the encoder: weights are a softmax over the 7 source steps
  -- (in eval mode: in training they come after dropout, as PyTorch's)
  tr:eval()
  local attn = tr.decoder.layers.layers[0].multihead_attn
  local _, w = attn(torch.randn(2, 5, 16, {device = device}), torch.randn(2, 7, 16, {device = device}),
    torch.randn(2, 7, 16, {device = device}))
  eq(w.shape, torch.Size({2, 5, 7}), "attention weights (batch, target, source)")
  close(w:sum(-1), torch.ones(2, 5, {device = device}), 1e-5, 1e-6, "softmax rows")
  -- the target mask is causal: changing a later target step leaves earlier outputs alone
  local tgt2 = tgt:clone()
  tgt2:select(1, 4):fill_(5)
  close(tr(src, tgt2):narrow(1, 0, 4), tr(src, tgt):narrow(1, 0, 4), 1e-5, 1e-6, "causal decoder")
  tr:train()
  out:sum():backward()
  for name, p in tr:named_parameters() do ok(p.grad ~= nil, "a gradient for " .. name) end
end

print("seed 001: ok")
