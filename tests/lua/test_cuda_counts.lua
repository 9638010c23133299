-- Kernel launches and host synchronisations of a CUDA training step, counted
-- from the profiler's Chrome trace (one "kernel" event per launch, one
-- "cuda_runtime" event per cudaStreamSynchronize / cudaDeviceSynchronize /
-- cudaEventSynchronize), as a PyTorch user reads them in PyTorch's traces:
-- seed 003's MLP step (tests/seeds/seed_003.lua, written as its tutorial
-- does) launches at most 30 kernels and never waits for the host after its
-- warm-up; so does issue 23's small GPT (models.gpt), in at most 132 (issue 23 asks for 160); a bad class index is reported at the next synchronisation, naming
-- the op, and the session goes on; the always-on counters agree with the
-- trace; the sync debug mode warns or raises. Skips without a CUDA device (the
-- simulated device runs it in make test).
local T = require "harness"
local json = require "tensh.json"
local test, eq, ok, raises, close = T.test, T.eq, T.ok, T.raises, T.close
local profiler = torch.profiler

local function need_cuda()
  if not (cuda and cuda.is_available()) then T.skip("no CUDA device") end
end

local SYNCS = {cudaStreamSynchronize = true, cudaDeviceSynchronize = true, cudaEventSynchronize = true,
  cudaMemcpy = true}

-- The trace's events inside the record_function scope `scope`: kernel launches
-- (by name), synchronisations (by name), and the scope's count.
local function count_trace(prof, scope)
  local path = os.tmpname()
  prof:export_chrome_trace(path)
  local f = assert(io.open(path))
  local trace = json.decode(f:read("a"))
  f:close()
  os.remove(path)
  local spans = {}
  for _, e in ipairs(trace.traceEvents) do
    if e.ph == "X" and e.cat == "user_annotation" and e.name == scope then spans[#spans + 1] = e end
  end
  local function inside(e)
    for _, s in ipairs(spans) do
      if e.ts >= s.ts and e.ts <= s.ts + s.dur then return true end
    end
    return false
  end
  local kernels, syncs = {}, {}
  for _, e in ipairs(trace.traceEvents) do
    if e.ph == "X" and inside(e) then
      if e.cat == "kernel" then kernels[#kernels + 1] = e.name end
      if e.cat == "cuda_runtime" and SYNCS[e.name] then syncs[#syncs + 1] = e.name end
    end
  end
  return kernels, syncs, #spans, trace
end

-- seed 003's introduction: a 1024-2048-512-10 MLP, CrossEntropyLoss, Adam, one step as the tutorial writes it
local function seed003()
  local model = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 512), nn.ReLU(), nn.Linear(512, 10))
  local data, target = torch.randn(128, 1024, {device = "cpu"}), torch.randint(0, 10, {128}, {device = "cpu"})
  local model_gpu, data_gpu, target_gpu = model:cuda(), data:cuda(), target:cuda()
  local criterion = nn.CrossEntropyLoss()
  local optimizer = torch.optim.Adam(model_gpu:parameters())
  local loss
  local function step()
    optimizer:zero_grad()
    local output = model_gpu(data_gpu)
    loss = criterion(output, target_gpu)
    loss:backward()
    optimizer:step()
  end
  return step, function() return loss end
end

test("seed 003's MLP step: at most 30 kernel launches and no host synchronisation after warm-up", function()
  need_cuda()
  torch.manual_seed(3)
  local step, last_loss = seed003()
  step() -- warm-up: the optimizer's state, the allocator's blocks
  step()
  cuda.synchronize()
  local steps = 2
  local prof = profiler.profile({activities = {"cpu", "cuda"}}, function()
    for _ = 1, steps do profiler.record_function("train_step", step) end
  end)
  local kernels, syncs, nspans = count_trace(prof, "train_step")
  eq(nspans, steps, "one scope per step")
  local per_step = #kernels / steps
  ok(per_step <= 30, ("%g kernel launches per step (at most 30):\n  %s"):format(per_step, table.concat(kernels, "\n  ")))
  ok(per_step >= 10, ("%g launches per step: too few to be the whole step"):format(per_step))
  eq(#syncs, 0, "host synchronisations in the steps (" .. table.concat(syncs, ", ") .. ")")
  -- the fused loss ran: one kernel each way
  local rows = {}
  for _, r in ipairs(prof:key_averages().rows) do rows[r.key] = r end
  eq(rows.nll_loss.launches, steps, "cross_entropy's forward: one launch a step")
  eq(rows.nll_loss_backward.launches, steps, "and one back")
  eq(rows.nll_loss.syncs, 0, "no sync in the loss")
  ok(rows.adam_step.launches <= steps, "Adam: one launch a step for all parameters")
  -- the counters see the same, without a profiler
  local l0, s0 = cuda.launch_count(), cuda.sync_count()
  step()
  eq(cuda.launch_count() - l0, per_step, "cuda.launch_count() over a step")
  eq(cuda.sync_count() - s0, 0, "cuda.sync_count() over a step")
  -- and the steps trained: the loss is a number (read once, at the end)
  local v = last_loss():item()
  ok(v == v and v > 0, "the loss after the steps: " .. tostring(v))
end)

-- Issue 23's small GPT (4 layers, 4 heads, width 256, context 128, character vocabulary 65, tied embeddings),
-- models.gpt as nanoGPT writes it, trained as its train.py does: AdamW with decay on matrices
-- (configure_optimizers), clip_grad_norm_ at 1.0. Batch 4: the launches are those of batch 16 (the
-- benchmark's) in a quarter of the simulated device's time.
local GPT_LAUNCH_BOUND = 132 -- today's count (249 before attention read strided heads, one-launch bias sums, a
-- two-launch LayerNorm backward and one cat for the qkv split's backward; 164 before cuBLASLt's epilogues took
-- the 16 Linear layers' bias copies and bias-gradient sums); PyTorch eager runs ~150 kernels, issue 23 asks for <= 160
local function gpt_step()
  local V, T = 65, 128
  local model = models.gpt.GPT({vocab_size = V, block_size = T, n_layer = 4, n_head = 4, n_embd = 256}):cuda()
  local optimizer = model:configure_optimizers(0.1, 3e-4, {0.9, 0.95}, "cuda")
  local x = torch.randint(0, V, {4, T}, {device = "cpu"}):cuda()
  local y = torch.randint(0, V, {4, T}, {device = "cpu"}):cuda()
  local loss
  local function step()
    optimizer:zero_grad({set_to_none = true})
    local _
    _, loss = model(x, y)
    loss:backward()
    nn.utils.clip_grad_norm_(model:parameters(), 1.0)
    optimizer:step()
  end
  return step, function() return loss end
end

test("the small GPT's training step: at most " .. GPT_LAUNCH_BOUND .. " launches and no host synchronisation after warm-up", function()
  need_cuda()
  torch.manual_seed(23)
  local step, last_loss = gpt_step()
  step() -- warm-up: AdamW's state, the allocator's blocks
  step()
  cuda.synchronize()
  local l0, s0 = cuda.launch_count(), cuda.sync_count()
  local prof = profiler.profile({activities = {"cpu", "cuda"}}, function()
    profiler.record_function("train_step", step)
  end)
  local l1, s1 = cuda.launch_count(), cuda.sync_count()
  local kernels, syncs, nspans = count_trace(prof, "train_step")
  eq(nspans, 1, "one scope")
  -- where the launches go, for the message: the outermost op (or backward node) of each kernel
  local evs, by_op = prof:events(), {}
  for _, e in ipairs(evs) do
    if e.kind == "kernel" then
      local p, top = e.parent, "(none)"
      while p do
        if evs[p].kind ~= "kernel" and evs[p].name ~= "train_step" then top = evs[p].name end
        p = evs[p].parent
      end
      by_op[top] = (by_op[top] or 0) + 1
    end
  end
  local lines = {}
  for k, n in pairs(by_op) do lines[#lines + 1] = ("%4d %s"):format(n, k) end
  table.sort(lines, function(a, b) return a > b end)
  ok(#kernels <= GPT_LAUNCH_BOUND, ("%d kernel launches in the step (at most %d), by op:\n%s"):format(#kernels,
    GPT_LAUNCH_BOUND, table.concat(lines, "\n")))
  ok(#kernels >= 120, ("%d launches: too few to be the whole step"):format(#kernels))
  eq(#syncs, 0, "host synchronisations in the step (" .. table.concat(syncs, ", ") .. ")")
  eq(l1 - l0, #kernels, "cuda.launch_count() over the step agrees with the trace")
  eq(s1 - s0, 0, "cuda.sync_count() over the step")
  -- the fused pieces stay single launches: the loss each way, AdamW once a parameter group, the clipping in three
  local rows = {}
  for _, r in ipairs(prof:key_averages().rows) do rows[r.key] = r end
  eq(rows.nll_loss.launches, 1, "cross_entropy's forward")
  eq(rows.nll_loss_backward.launches, 1, "and its backward")
  eq(rows.adam_step.launches, 2, "AdamW: one launch for each of the two groups")
  ok(rows.SplitBackward0 and rows.SplitBackward0.launches == 4, "the qkv split's backward: one cat a layer")
  eq(rows.layer_norm.launches, 9, "LayerNorm: one launch each (4 layers x 2 + the final one)")
  eq(rows.sdpa_forward.launches, 4, "attention: one launch a layer")
  eq(rows.sdpa_backward.launches, 4, "and one back (dq, dk and dv, delta computed inside)")
  eq(rows.layer_norm_backward.launches, 18, "LayerNorm backward: two launches each (dgamma/dbeta partials in the first)")
  -- no layout copies around attention, none for the biases (added by the GEMMs' epilogue), none in the
  -- backward of the views (the heads' transpose and the output's view)
  eq(by_op.copy, nil, "copies outside the backward")
  eq(rows.gemm_bias.launches, 16, "the 16 Linear layers: one launch each, the bias in the GEMM")
  eq(rows.gemm_bgrad.launches, 16, "and their weight and bias gradients: one GEMM each")
  eq(rows.AddmmBackward0.launches, 32, "AddmmBackward0: the input's gradient and the weight's with the bias's")
  eq(by_op.ViewBackward0, nil, "no launches in ViewBackward0")
  ok(rows.clip_grad_norm.launches <= 5, "clip_grad_norm_: " .. rows.clip_grad_norm.launches .. " launches")
  local v = last_loss():item()
  ok(v == v and v > 3 and v < 5, "the loss is near ln 65 = 4.17: " .. tostring(v))
end)

test("an embedding index out of range raises at the next synchronisation, in the CPU's words", function()
  need_cuda()
  local w = torch.randn(5, 3, {device = "cuda", requires_grad = true})
  local bad = torch.tensor({1, 7}, {device = "cpu"}):cuda()
  local s0 = cuda.sync_count()
  local e = nn.functional.embedding(bad, w)
  e:sum():backward() -- the backward's scatter meets it too; the first report is kept
  eq(cuda.sync_count() - s0, 0, "the lookup and its backward do not synchronise")
  raises(function() return e:sum():item() end,
    "embedding: index 7 is out of range for a weight of 5 rows (expected 0 <= index < 5)", "at item()")
  local ok_e = nn.functional.embedding(torch.tensor({1, 4}, {device = "cpu"}):cuda(), w)
  close(ok_e:cpu(), w:detach():cpu():index_select(0, torch.tensor({1, 4}, {device = "cpu"})), 0, 0, "the next lookup is fine")
end)

test("a class index out of range raises at the next synchronisation, naming the op and the value", function()
  need_cuda()
  local x = torch.randn(4, 3, {device = "cuda", requires_grad = true})
  local bad = torch.tensor({0, 7, 1, 2}, {device = "cpu"}):cuda()
  local s0 = cuda.sync_count()
  local loss = nn.functional.cross_entropy(x, bad) -- queued: no wait for the host
  eq(cuda.sync_count() - s0, 0, "the loss does not synchronise")
  loss:backward() -- the backward runs too (the bad row gives no gradient)
  local err = raises(function() return loss:item() end, "cross_entropy: target 7 is out of bounds", "at item()")
  ok(err:find("C = 3", 1, true), "names C: " .. err)
  ok(err:find("test_cuda_counts.lua:%d+:"), "at the caller's line: " .. err)
  -- reported once: the session goes on
  local good = nn.functional.cross_entropy(x, torch.tensor({0, 1, 2, 2}, {device = "cpu"}):cuda())
  local v = good:item()
  ok(v == v, "the next loss is fine: " .. tostring(v))
  -- nll_loss names itself; a synchronisation of any kind reports it
  local _ = nn.functional.nll_loss(x:log_softmax(1), torch.tensor({-2, 0, 0, 0}, {device = "cpu"}):cuda())
  raises(function() cuda.synchronize() end, "nll_loss: target -2 is out of bounds", "at cuda.synchronize()")
  eq(x:sum():item() == x:sum():item(), true, "still usable")
  -- binary_cross_entropy's input checked on the device too
  local p = torch.tensor({0.2, 1.25, 0.5}, {device = "cpu"}):cuda()
  local bce = nn.functional.binary_cross_entropy(p, torch.zeros(3, {device = "cuda"}))
  raises(function() return bce:item() end, "binary_cross_entropy: all elements of input should be between 0 and 1, got 1.25 (element 1)")
end)

test("clip_grad_norm_ returns the total norm without a synchronisation, in three launches", function()
  need_cuda()
  local ps = {}
  for i = 1, 5 do
    local p = torch.randn(i * 100, {device = "cuda", requires_grad = true})
    p.grad = torch.randn(i * 100, {device = "cuda"})
    ps[i] = p
  end
  cuda.synchronize()
  local l0, s0 = cuda.launch_count(), cuda.sync_count()
  local total = nn.utils.clip_grad_norm_(ps, 0.1)
  eq(cuda.sync_count() - s0, 0, "no synchronisation")
  eq(cuda.launch_count() - l0, 3, "the norms, the total, the scale")
  eq(total.device.type, "cuda", "the total stays on the device")
  ok(math.abs(torch.stack({ps[1].grad:norm(), ps[5].grad:norm()}):norm():item()) <= 0.1 + 1e-5, "clipped")
end)

test("tensh bench records a cuda case's launches and synchronisations per run", function()
  need_cuda()
  local runner = require "tensh.bench_runner"
  local a = torch.randn(32, {device = "cuda"})
  local act = runner.device_activity({device = "cuda"}, function() local _ = (a + 1):sum() end)
  eq(act.launches, 2, "add and sum")
  eq(act.syncs, 0, "no synchronisation")
  eq(runner.device_activity({device = "cpu"}, function() end), nil, "nothing on the CPU")
end)

test("the counters: launches, synchronisations, copies and fills", function()
  need_cuda()
  local a = torch.randn(64, {device = "cuda"})
  cuda.synchronize()
  local c0 = cuda.activity_counts()
  local b = a * 2 + 1 -- two kernels
  local c1 = cuda.activity_counts()
  eq(c1.launches - c0.launches, 2, "two elementwise ops: two launches")
  eq(c1.syncs - c0.syncs, 0, "no synchronisation")
  local _ = b:sum():item() -- a reduction, then a copy to the host that waits
  local c2 = cuda.activity_counts()
  ok(c2.launches - c1.launches >= 1, "the sum launched")
  eq(c2.syncs - c1.syncs, 1, "item() waits once")
  ok(c2.memcpys - c1.memcpys >= 1, "item() copies")
  local z = torch.zeros(16, {device = "cuda"})
  ok(cuda.activity_counts().memsets - c2.memsets >= 1, "zeros is a fill")
  cuda.synchronize()
  eq(cuda.sync_count() - c2.syncs, 1, "cuda.synchronize() counts")
  eq(cuda.launch_count(), cuda.activity_counts().launches, "launch_count is the table's")
end)

test("the profiler: kernels with grid and block, runtime calls, synchronisations per op", function()
  need_cuda()
  local a = torch.randn(300, 7, {device = "cuda"})
  local prof = profiler.profile({activities = {"cpu", "cuda"}}, function()
    profiler.record_function("work", function()
      local y = (a + 1):sum()
      return y:item()
    end)
  end)
  local evs = prof:events()
  local add, kernel, launch, sync
  for i, e in ipairs(evs) do
    if e.kind == "op" and e.name == "add" then add = i end
    if e.kind == "kernel" and e.parent == add and add then kernel = e end
  end
  ok(kernel, "the add's kernel is a child of the op")
  eq(#kernel.grid, 3, "grid {x, y, z}")
  ok(kernel.grid[1] >= 1 and kernel.block[1] >= 1 and kernel.block[1] <= 1024, "grid and block")
  launch = evs[kernel.correlation]
  eq(launch.kind, "runtime", "the kernel's runtime call")
  eq(launch.name, "cudaLaunchKernel", "named as in PyTorch's traces")
  for _, e in ipairs(evs) do if e.kind == "runtime" and e.sync then sync = e end end
  ok(sync and sync.name == "cudaStreamSynchronize", "item()'s wait is a cudaStreamSynchronize")
  local rows = {}
  for _, r in ipairs(prof:key_averages().rows) do rows[r.key] = r end
  eq(rows.work.syncs, 1, "the scope holds one synchronisation")
  ok(rows.work.launches >= 2 and rows.add.launches == 1, "launches per op")
  local tab = prof:key_averages():table()
  ok(tab:find("# Launches", 1, true) and tab:find("# Syncs", 1, true), "the table's columns:\n" .. tab)
  local _, _, _, trace = count_trace(prof, "work")
  local cats = {}
  for _, e in ipairs(trace.traceEvents) do if e.ph == "X" then cats[e.cat] = (cats[e.cat] or 0) + 1 end end
  ok(cats.kernel and cats.cuda_runtime and cats.gpu_memcpy, "kernel, cuda_runtime and gpu_memcpy events")
  -- the profiler's own wait at its end is not the program's
  eq(#select(2, count_trace(prof, "work")), 1, "one synchronisation in the scope")
end)

test("the sync debug mode: warn names the line, error raises, default is silent", function()
  need_cuda()
  local a = torch.randn(8, {device = "cuda"})
  eq(cuda.get_sync_debug_mode(), 0, "off by default")
  cuda.set_sync_debug_mode("error")
  eq(cuda.get_sync_debug_mode(), 2, "error is 2")
  local b = a * 3 -- no synchronisation: no error
  raises(function() return b:sum():item() end,
    "called a synchronizing CUDA operation (cudaStreamSynchronize) while cuda.set_sync_debug_mode(\"error\") is set", "item()")
  raises(function() cuda.synchronize() end, "cudaDeviceSynchronize", "cuda.synchronize()")
  cuda.set_sync_debug_mode(0)
  ok(b:sum():item() == b:sum():item(), "default: silent")
  raises(function() cuda.set_sync_debug_mode("loud") end, "invalid value of debug_mode 'loud'")
  raises(function() cuda.set_sync_debug_mode(3) end, "invalid value of debug_mode 3")
  -- warn: a warning on stderr with the Lua line, the value still read
  local exe = (os.getenv("TENSH_BUILD") or "../../build") .. "/tensh"
  local p = io.popen(("%q -e %q 2>&1"):format(exe,
    'local a = torch.ones(4, {device = "cuda"}) cuda.set_sync_debug_mode("warn")\nprint(a:sum():item())'))
  local out = p:read("a")
  p:close()
  ok(out:find("UserWarning: called a synchronizing CUDA operation (cudaStreamSynchronize) at", 1, true), "warned: " .. out)
  ok(out:find("4.0", 1, true) or out:find("\n4\n", 1, true), "and read the value: " .. out)
end)

T.run()
