-- CUDA graphs as PyTorch has them: cuda.CUDAGraph captured with cuda.graph(g,
-- fn) on a side stream, replayed with new values in its static inputs; a
-- whole training step captured once and replayed N times against N eager
-- steps of a copy of the model; host synchronisations inside a capture
-- raising CUDA's error with the session going on; the private pool keeping
-- the graph's blocks from other allocations; make_graphed_callables against
-- the eager module, forward and backward. References: the same ops run
-- eagerly (the simulated device runs the captured kernels, so graph and eager
-- must agree to the bit) and float64 on the CPU. Skips without a CUDA device
-- (the simulated device runs it in make test).
local T = require "harness"
local test, eq, ok, raises, close = T.test, T.eq, T.ok, T.raises, T.close

local function need_cuda()
  if not (cuda and cuda.is_available()) then T.skip("no CUDA device: CUDA graphs run on the simulated device in make test") end
end

-- Warm-up on a side stream before capture, as PyTorch's docs show.
local function warm_up(fn, n)
  local s = cuda.Stream()
  s:wait_stream(cuda.current_stream())
  cuda.stream(s, function() for _ = 1, n or 3 do fn() end end)
  cuda.current_stream():wait_stream(s)
end

test("a captured elementwise chain replays with new values copied into its static input", function()
  need_cuda()
  torch.manual_seed(0)
  local static_in = torch.randn(1000, {device = "cuda"})
  local function chain(x) return (x * 2 + 1):relu():exp():sub(x:sin()) end
  warm_up(function() chain(static_in) end)
  local g = cuda.CUDAGraph()
  local static_out = cuda.graph(g, function() return chain(static_in) end)
  for _ = 1, 3 do
    local new = torch.randn(1000, {dtype = torch.float64, device = "cpu"})
    static_in:copy_(new)
    g:replay()
    local ref = ((new * 2 + 1):relu():exp() - new:sin()):float()
    close(static_out:cpu(), ref, 1e-5, 1e-5)
    eq(torch.equal(static_out, chain(static_in)), true) -- the same kernels eagerly: the same bits
  end
  -- a non-contiguous static input (a transposed view) is read through its strides in the replay too
  local base = torch.randn(8, 6, {device = "cuda"})
  local view = base:t()
  warm_up(function() chain(view) end)
  local g2 = cuda.CUDAGraph()
  local out2 = cuda.graph(g2, function() return chain(view) end)
  base:copy_(torch.randn(8, 6))
  g2:replay()
  eq(torch.equal(out2, chain(view)), true)
end)

test("the scope form: local _ <close> = cuda.graph(g) captures the block", function()
  need_cuda()
  local x = torch.ones(16, {device = "cuda"})
  warm_up(function() return x + 1 end)
  local g, y = cuda.CUDAGraph(), nil
  do
    local _ <close> = cuda.graph(g)
    eq(cuda.is_current_stream_capturing(), true)
    y = x * 3 + 1
  end
  eq(cuda.is_current_stream_capturing(), false)
  x:fill_(2)
  g:replay()
  eq(y:cpu():tolist()[1], 7.0)
end)

test("nothing runs while capturing; launches per replay vs eager are counted", function()
  need_cuda()
  local x = torch.zeros(64, {device = "cuda"})
  local function step() return ((x + 1) * 2):neg():abs() end
  warm_up(step)
  local g = cuda.CUDAGraph()
  local before = cuda.launch_count()
  local y = cuda.graph(g, step)
  local captured = cuda.launch_count() - before -- the capture's launches are queued into the graph, not run
  ok(captured >= 4, "4 kernels captured, counted " .. captured)
  before = cuda.launch_count()
  g:replay()
  eq(cuda.launch_count() - before, 0) -- one cudaGraphLaunch from the host, no kernel launch
  eq(y:cpu():tolist()[1], 2.0)
end)

-- A model of Linear layers whose parameters are copied into a second, eager one.
local function two_models()
  torch.manual_seed(3)
  local function make() return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)):cuda() end
  local a, b = make(), make()
  b:load_state_dict(a:state_dict())
  return a, b
end

test("a whole training step captured once and replayed N times equals N eager steps", function()
  need_cuda()
  local model, eager = two_models()
  local opt = optim.SGD(model:parameters(), 0.05, {momentum = 0.9, weight_decay = 1e-3})
  local eopt = optim.SGD(eager:parameters(), 0.05, {momentum = 0.9, weight_decay = 1e-3})
  local static_x, static_y = torch.randn(32, 8, {device = "cuda"}), torch.randn(32, 4, {device = "cuda"})
  local function step(m, o, x, y)
    local loss = nn.F.mse_loss(m(x), y)
    loss:backward()
    o:step()
    return loss
  end
  -- the same warm-up steps on both (the graphed one on a side stream), grads dropped before capture
  warm_up(function() opt:zero_grad({set_to_none = true}); step(model, opt, static_x, static_y) end)
  for _ = 1, 3 do eopt:zero_grad({set_to_none = true}); step(eager, eopt, static_x, static_y) end
  opt:zero_grad({set_to_none = true})
  local g = cuda.CUDAGraph()
  local static_loss = cuda.graph(g, function() return step(model, opt, static_x, static_y) end)
  torch.manual_seed(11)
  for i = 1, 5 do
    local x, y = torch.randn(32, 8, {device = "cuda"}), torch.randn(32, 4, {device = "cuda"})
    static_x:copy_(x)
    static_y:copy_(y)
    g:replay()
    eopt:zero_grad({set_to_none = true})
    local loss = step(eager, eopt, x, y)
    eq(static_loss:item(), loss:item(), "loss of step " .. i)
  end
  local pa, pb = model:parameters(), eager:parameters()
  for i = 1, #pa do eq(torch.equal(pa[i], pb[i]), true, "parameter " .. i .. " after 5 replays") end
  ok(not torch.equal(pa[1], two_models():parameters()[1]), "the replays trained the model")
end)

test("a host synchronisation inside a capture raises; the capture is invalidated and the session goes on", function()
  need_cuda()
  local x = torch.randn(10, {device = "cuda"})
  warm_up(function() return x:sum() end)
  local cases = {
    {"item()", function() return (x:sum()):item() end},
    {"tolist()", function() return x:tolist() end},
    {"a blocking copy to the CPU", function() return x:cpu() end},
    {"cuda.synchronize()", function() cuda.synchronize() end},
    {"stream synchronize", function() cuda.current_stream():synchronize() end},
  }
  for _, c in ipairs(cases) do
    local g = cuda.CUDAGraph()
    local err = raises(function() cuda.graph(g, function() local _ = x * 2; c[2]() end) end, "capturing")
    eq(cuda.is_current_stream_capturing(), false, c[1])
    raises(function() g:replay() end, "holds no capture")
    ok(type(err) == "string", c[1])
  end
  -- the device and a new capture still work
  eq(torch.equal((x * 2):cpu(), x:cpu() * 2), true)
  local g = cuda.CUDAGraph()
  local y = cuda.graph(g, function() return x + 1 end)
  g:replay()
  close(y:cpu(), x:cpu() + 1, 0, 0)
end)

test("graph misuse raises with what to do", function()
  need_cuda()
  local g = cuda.CUDAGraph()
  raises(function() g:replay() end, "holds no capture")
  raises(function() g:capture_begin() end, "stream other than the default")
  raises(function() g:capture_end() end, "not capturing")
  raises(function() g:pool() end, "no memory pool")
  raises(function() cuda.graph(g, {poool = 1}, function() end) end, "unknown option 'poool'")
  raises(function() cuda.graph(g, {capture_error_mode = "loose"}, function() end) end, "capture_error_mode")
  raises(function() cuda.graph(42) end, "CUDAGraph")
  raises(function() cuda.graph(g, {pool = 2}, function() end) end, "pool must be a handle")
  eq(tostring(g), "<torch.cuda.CUDAGraph empty>")
end)

test("the private pool: a graph's blocks are handed to no one else while it lives; reset frees them", function()
  need_cuda()
  local x = torch.randn(256, {device = "cuda"})
  warm_up(function() return (x + 1) * 2 end)
  local g, s = cuda.CUDAGraph(), cuda.Stream()
  local keep
  cuda.graph(g, {stream = s}, function()
    local tmp = x + 1 -- freed inside the capture: its block stays the graph's
    keep = tmp:data_ptr()
    tmp = nil
    collectgarbage()
    return nil
  end)
  collectgarbage()
  local seen = {}
  local hold = {}
  cuda.stream(s, function() -- eager allocations of that size on the capture's own stream never get it
    for i = 1, 20 do
      hold[i] = torch.empty(256, {device = "cuda"})
      seen[hold[i]:data_ptr()] = true
    end
  end)
  eq(seen[keep], nil)
  -- a second graph shares the first one's pool; reset of both gives it back
  local g2 = cuda.CUDAGraph()
  local y = cuda.graph(g2, {pool = g:pool()}, function() return x * 3 end)
  eq(g2:pool(), g:pool())
  g:replay()
  g2:replay()
  close(y:cpu(), x:cpu() * 3, 0, 0)
  g:reset()
  g2:reset()
  raises(function() g:replay() end, "holds no capture")
  local h = cuda.graph_pool_handle()
  ok(math.type(h) == "integer", "a pool handle")
end)

-- The training step a PyTorch user captures: zero_grad, forward, backward, clip_grad_norm_, AdamW.
local function adamw_step(m, o, x, y)
  o:zero_grad({set_to_none = true})
  local loss = nn.F.mse_loss(m(x), y)
  loss:backward()
  nn.utils.clip_grad_norm_(m:parameters(), 0.5)
  o:step()
  return loss
end

test("AdamW with capturable = true: the whole step captured and replayed N times equals N eager steps", function()
  need_cuda()
  local model, eager = two_models()
  local on_cpu = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)):cpu():double() -- the CPU even when the harness makes cuda the default
  on_cpu:load_state_dict(eager:state_dict())
  local hyper = {lr = 2e-2, betas = {0.8, 0.95}, weight_decay = 0.1, amsgrad = true}
  local function adamw(ps, capturable)
    local o = {capturable = capturable}
    for k, v in pairs(hyper) do o[k] = v end
    return optim.AdamW(ps, o)
  end
  -- the graphed model's optimizer keeps its step count on the device; the eager ones on the host
  local opt, eopt, copt = adamw(model:parameters(), true), adamw(eager:parameters(), false), adamw(on_cpu:parameters(), false)
  local static_x, static_y = torch.randn(32, 8, {device = "cuda"}), torch.randn(32, 4, {device = "cuda"})
  warm_up(function() adamw_step(model, opt, static_x, static_y) end)
  for _ = 1, 3 do
    adamw_step(eager, eopt, static_x, static_y)
    adamw_step(on_cpu, copt, static_x:cpu():double(), static_y:cpu():double())
  end
  local p1 = model:parameters()[1]
  eq(opt.state[p1].step.device.type, "cuda", "the step count is a tensor on the device")
  eq(opt.state[p1].step:item(), 3, "after the warm-up's three steps")
  local g = cuda.CUDAGraph()
  local static_loss = cuda.graph(g, function() return adamw_step(model, opt, static_x, static_y) end)
  eq(opt.state[p1].step:item(), 3, "capturing ran nothing")
  torch.manual_seed(12)
  local n = 6
  for i = 1, n do
    local x, y = torch.randn(32, 8, {device = "cuda"}), torch.randn(32, 4, {device = "cuda"})
    static_x:copy_(x)
    static_y:copy_(y)
    g:replay()
    local loss = adamw_step(eager, eopt, x, y)
    adamw_step(on_cpu, copt, x:cpu():double(), y:cpu():double())
    eq(static_loss:item(), loss:item(), "loss of replay " .. i)
  end
  eq(opt.state[p1].step:item(), 3 + n, "each replay counted its step on the device")
  local pa, pb, pc = model:parameters(), eager:parameters(), on_cpu:parameters()
  for i = 1, #pa do
    eq(torch.equal(pa[i], pb[i]), true, "parameter " .. i .. " after the replays: the eager steps' bits")
    close(pa[i]:cpu():double(), pc[i], 1e-4, 1e-5, "parameter " .. i .. " against float64 on the CPU")
  end
  ok(not torch.equal(pa[1], two_models():parameters()[1]), "the replays trained the model")
end)

test("capturing Adam's step without capturable raises naming the option; before warm-up, saying so", function()
  need_cuda()
  local model = two_models()
  local x, y = torch.randn(4, 8, {device = "cuda"}), torch.randn(4, 4, {device = "cuda"})
  for _, cls in ipairs({optim.Adam, optim.AdamW}) do
    local opt = cls(model:parameters(), {lr = 1e-3})
    warm_up(function() adamw_step(model, opt, x, y) end, 1)
    local g = cuda.CUDAGraph()
    raises(function() cuda.graph(g, function() adamw_step(model, opt, x, y) end) end,
      "attempting CUDA graph capture of step() but param_groups' capturable is False; construct the optimizer with {capturable = true}")
    eq(cuda.is_current_stream_capturing(), false, "the capture ended")
  end
  -- capturable, but its state not made yet: the zeros would be captured and made again on every replay
  local fresh = optim.Adam(model:parameters(), {lr = 1e-3, capturable = true})
  warm_up(function() model(x):sum():backward() end, 1)
  raises(function() cuda.graph(cuda.CUDAGraph(), function() fresh:step() end) end, "run a step before capturing it")
  -- the session goes on: an eager capturable step counts on the device
  fresh:step()
  eq(fresh.state[model:parameters()[1]].step:item(), 1)
end)

-- Random ops captured in a graph: rand, randn, randint and dropout's mask.
local N = 20000
local function draws(x)
  return torch.rand(N, {device = "cuda"}), torch.randn(N, {device = "cuda"}),
    torch.randint(0, 10, {N}, {device = "cuda"}), nn.F.dropout(x, {p = 0.25})
end

-- draws captured after a warm-up: the graph, its static outputs, the input dropout reads
local function captured_draws()
  local x = torch.ones(N, {device = "cuda"})
  warm_up(function() draws(x) end, 1)
  local g = cuda.CUDAGraph()
  return g, table.pack(cuda.graph(g, function() return draws(x) end)), x
end

test("random ops in a captured graph draw fresh numbers on each replay, with the right distribution", function()
  need_cuda()
  local g, outs = captured_draws()
  local function snapshot()
    local r = {}
    for i = 1, 4 do r[i] = outs[i]:cpu():double() end
    return r
  end
  local l0 = cuda.launch_count()
  g:replay()
  eq(cuda.launch_count() - l0, 1, "a replay: the generator's state written (one launch), then the graph")
  local a = snapshot()
  g:replay()
  local b = snapshot()
  for i, name in ipairs({"rand", "randn", "randint", "dropout"}) do
    ok(not torch.equal(a[i], b[i]), name .. ": two replays drew different numbers")
  end
  for _, r in ipairs({a, b}) do
    -- 4 standard errors or more: N = 20000 draws
    local u, z, k, d = r[1], r[2], r[3], r[4]
    close(u:mean():item(), 0.5, 0, 0.01, "rand's mean")
    close(u:var():item(), 1 / 12, 0, 0.004, "rand's variance")
    ok(u:min():item() >= 0 and u:max():item() < 1, "rand in [0, 1)")
    close(z:mean():item(), 0, 0, 0.03, "randn's mean")
    close(z:std():item(), 1, 0, 0.03, "randn's standard deviation")
    for v = 0, 9 do close(k:eq(v):double():mean():item(), 0.1, 0, 0.01, "randint's share of " .. v) end
    close(d:eq(0):double():mean():item(), 0.25, 0, 0.015, "dropout zeroes a quarter")
    eq(d:ne(0):sum():item(), (d - 4 / 3):abs():lt(1e-6):sum():item(), "dropout scales the kept by 1 / (1 - p)")
  end
end)

test("a replay after manual_seed draws what eager draws after it, and moves the generator as far", function()
  need_cuda()
  local g, outs, x = captured_draws()
  torch.manual_seed(7)
  g:replay()
  local after_replay = torch.rand(5, {device = "cuda"})
  torch.manual_seed(7)
  local eager = table.pack(draws(x))
  local after_eager = torch.rand(5, {device = "cuda"})
  for i = 1, 4 do eq(torch.equal(outs[i], eager[i]), true, "draw " .. i .. ": the eager numbers of that seed") end
  eq(torch.equal(after_replay, after_eager), true, "the next draw: the generator moved past the capture's counters")
  torch.manual_seed(7)
  close(outs[1]:cpu(), torch.rand(N, {device = "cpu"}), 0, 0, "and the CPU's, as every device draws the same")
  -- a graph without random ops: no launch before its replay
  local g2 = cuda.CUDAGraph()
  cuda.graph(g2, function() return x * 2 end)
  local l0 = cuda.launch_count()
  g2:replay()
  eq(cuda.launch_count() - l0, 0, "nothing written for a graph that draws nothing")
end)

test("pin_memory and attention's dropout inside a capture raise saying why; the session goes on", function()
  need_cuda()
  local x = torch.ones(8, {device = "cuda"})
  warm_up(function() return x * 2 end)
  -- an odd size (about 5 MB): no block the pinned cache holds already
  local host = torch.ones(1234567, {device = "cpu"})
  raises(function() cuda.graph(cuda.CUDAGraph(), function() local _ = x * 2; host:pin_memory() end) end,
    "pin_memory: page-locked host memory cannot be allocated while a CUDA graph is being captured")
  eq(cuda.is_current_stream_capturing(), false, "the capture ended")
  ok(host:pin_memory():is_pinned(), "pinned outside the capture")
  local q = torch.randn(1, 2, 4, 8, {device = "cuda"})
  warm_up(function() return nn.F.scaled_dot_product_attention(q, q, q, {dropout_p = 0.1}) end, 1)
  raises(function()
    cuda.graph(cuda.CUDAGraph(), function() return nn.F.scaled_dot_product_attention(q, q, q, {dropout_p = 0.1}) end)
  end, "scaled_dot_product_attention: dropout_p 0.1 inside a CUDA graph capture is not supported yet")
  local g = cuda.CUDAGraph()
  local y = cuda.graph(g, function() return nn.F.scaled_dot_product_attention(q, q, q) end)
  g:replay()
  close(y:cpu(), nn.F.scaled_dot_product_attention(q, q, q):cpu(), 0, 0, "without dropout it captures")
end)

test("make_graphed_callables on a small MLP matches eager forward and backward", function()
  need_cuda()
  local model, eager = two_models()
  local sample = torch.randn(5, 8, {device = "cuda", requires_grad = true})
  local graphed = cuda.make_graphed_callables(model, {sample})
  eq(rawequal(graphed, model), true)
  for round = 1, 3 do
    for _, p in ipairs(model:parameters()) do p.grad = nil end
    for _, p in ipairs(eager:parameters()) do p.grad = nil end
    local x = torch.randn(5, 8, {device = "cuda"})
    local xa, xb = x:clone():requires_grad_(true), x:clone():requires_grad_(true)
    local ya, yb = graphed(xa), eager(xb)
    close(ya, yb, 1e-6, 1e-6, "forward of round " .. round)
    local w = torch.randn(5, 4, {device = "cuda"})
    ;(ya * w):sum():backward()
    ;(yb * w):sum():backward()
    close(xa.grad, xb.grad, 1e-6, 1e-6, "input gradient")
    local pa, pb = model:parameters(), eager:parameters()
    for i = 1, #pa do close(pa[i].grad, pb[i].grad, 1e-6, 1e-6, "parameter gradient " .. i) end
  end
  -- a function too, and its output without grad mode
  local f = cuda.make_graphed_callables(function(a) return (a * a):sum(1) end, {torch.randn(3, 4, {device = "cuda"})})
  local a = torch.randn(3, 4, {device = "cuda"})
  close(torch.no_grad(function() return f(a) end), (a * a):sum(1), 1e-6, 1e-6)
  raises(function() cuda.make_graphed_callables(model, {torch.randn(2, 8, {device = "cpu"})}) end, "graphs run on CUDA")
end)

T.run()
