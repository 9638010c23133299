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
