-- CUDA graphs composed over cuda.CUDAGraph (src/lua/lcuda_graph.c):
-- cuda.graph, PyTorch's `with torch.cuda.graph(g):` as a function argument or
-- a to-be-closed scope, and cuda.make_graphed_callables. Loaded on the first
-- call of either.
local argcheck = require "tensh.args"

local M = {}

local unpack = table.unpack
local capture_streams = {} -- per device: PyTorch's default capture stream, one side stream

local raise = require("tensh.errors").raise -- at the user's line, however deep the check

local GRAPH_OPTS = {pool = true, stream = true, capture_error_mode = true}

-- What torch.cuda.graph's __enter__ does: the device idle, dropped tensors
-- freed and the cache emptied (so the capture's pool starts clean), then the
-- capture stream current and the capture begun on it.
local function begin(g, opts)
  cuda.synchronize()
  collectgarbage()
  cuda.empty_cache()
  local dev = cuda.current_device()
  local s = opts.stream
  if s == nil then
    s = capture_streams[dev] or cuda.Stream()
    capture_streams[dev] = s
  end
  local scope = cuda.stream(s)
  local ok, err = pcall(g.capture_begin, g, opts.pool, {capture_error_mode = opts.capture_error_mode})
  if not ok then
    getmetatable(scope).__close(scope)
    error(err, 0)
  end
  return scope
end

-- Ends the capture; after an error inside it, that error is the one reported
-- (the capture is then invalid, and its end says only that).
local function finish(g, scope, failed)
  local ok, err = pcall(g.capture_end, g)
  getmetatable(scope).__close(scope)
  if not ok and not failed then error(err, 0) end
end

-- cuda.graph(g, [opts], [fn]): with fn, captures what fn queues into g and
-- returns fn's results; without, returns a scope for `local _ <close> =`.
function M.graph(g, a, b)
  if type(g) ~= "userdata" or not tostring(g):find("^<torch%.cuda%.CUDAGraph ") then
    raise("cuda.graph: expected a cuda.CUDAGraph as argument 1, got %s", type(g))
  end
  local opts, fn = {}, nil
  if type(a) == "function" then
    fn = a
  elseif type(a) == "table" then
    opts, fn = a, b
  elseif a ~= nil then
    raise("cuda.graph: expected an options table or a function as argument 2, got %s", type(a))
  end
  if fn ~= nil and type(fn) ~= "function" then raise("cuda.graph: expected a function, got %s", type(fn)) end
  argcheck.check_opts("cuda.graph", opts, GRAPH_OPTS)
  local scope = begin(g, opts)
  if not fn then
    return setmetatable({}, {__close = function(_, err) finish(g, scope, err ~= nil) end})
  end
  local res = table.pack(pcall(fn))
  finish(g, scope, not res[1])
  if not res[1] then error(res[2], 0) end
  return unpack(res, 2, res.n)
end

local function as_list(args)
  if torch.is_tensor(args) then return {args} end
  if type(args) ~= "table" then raise("cuda.make_graphed_callables: sample_args must be a tensor or a list of tensors, got %s", type(args)) end
  for i, t in ipairs(args) do
    if not torch.is_tensor(t) then raise("cuda.make_graphed_callables: sample_args[%d] is a %s, expected a tensor", i, type(t)) end
    if t.device.type ~= "cuda" then raise("cuda.make_graphed_callables: sample_args[%d] is on %s; graphs run on CUDA", i, tostring(t.device)) end
  end
  return args
end

-- The outputs of one call as a list, and whether fn returned a single tensor.
local function outputs(...)
  local outs = table.pack(...)
  for i = 1, outs.n do
    if not torch.is_tensor(outs[i]) then raise("cuda.make_graphed_callables: output %d is a %s; only tensors can be graphed", i, type(outs[i])) end
  end
  return outs
end

-- cuda.make_graphed_callables(module_or_fn, sample_args, {num_warmup_iters, allow_unused_input}):
-- PyTorch's: warm-up on a side stream, the forward captured into one graph
-- and its backward (torch.autograd.grad of the outputs with respect to the
-- inputs and parameters that require grad) into another sharing its pool.
-- Calls copy their inputs into the static ones and replay; backward copies
-- the output gradients in and replays the backward graph. A module comes
-- back with its forward replaced (while in the training mode it was graphed
-- in); a function comes back graphed.
function M.make_graphed_callables(callable, sample_args, opts)
  opts = argcheck.check_opts("cuda.make_graphed_callables", opts, {num_warmup_iters = true, allow_unused_input = true})
  local is_module = nn.is_module(callable)
  if not is_module and type(callable) ~= "function" then
    raise("cuda.make_graphed_callables: expected an nn.Module or a function, got %s", type(callable))
  end
  local args = as_list(sample_args)
  local orig_forward = is_module and callable.forward
  local function run(...)
    if is_module then return orig_forward(callable, ...) end
    return callable(...)
  end
  local diff = {} -- what the backward graph differentiates for: inputs, then parameters
  for _, t in ipairs(args) do if t.requires_grad then diff[#diff + 1] = t end end
  local n_inputs = #diff
  if is_module then
    for _, p in ipairs(callable:parameters()) do if p.requires_grad then diff[#diff + 1] = p end end
  end
  local allow_unused = opts.allow_unused_input or false

  local function grads_of(outs, grad_outs)
    local ys, gs = {}, {}
    for i = 1, outs.n do
      if outs[i].requires_grad then ys[#ys + 1], gs[#gs + 1] = outs[i], grad_outs and grad_outs[i] or torch.ones_like(outs[i]) end
    end
    if #ys == 0 or #diff == 0 then return {} end
    return torch.autograd.grad(ys, diff, {grad_outputs = gs, allow_unused = allow_unused})
  end

  -- warm-up on a side stream (cuBLAS handles, optimizer-free lazy state, the cache)
  local side = cuda.Stream()
  side:wait_stream(cuda.current_stream())
  cuda.stream(side, function()
    for _ = 1, opts.num_warmup_iters or 3 do grads_of(outputs(run(unpack(args)))) end
  end)
  cuda.current_stream():wait_stream(side)

  local fwd, bwd = cuda.CUDAGraph(), cuda.CUDAGraph()
  local static_outs = M.graph(fwd, function() return outputs(run(unpack(args))) end)
  local static_grad_outs = {}
  for i = 1, static_outs.n do
    if static_outs[i].requires_grad then static_grad_outs[i] = torch.empty_like(static_outs[i]) end
  end
  local static_grads = M.graph(bwd, {pool = fwd:pool()}, function() return grads_of(static_outs, static_grad_outs) end)
  local train_mode = is_module and callable.training

  local function graphed(...)
    local call = table.pack(...)
    if call.n ~= #args then raise("graphed callable: expected %d arguments (as sample_args), got %d", #args, call.n) end
    torch.no_grad(function()
      for i, t in ipairs(args) do
        if not rawequal(call[i], t) then t:copy_(call[i]) end
      end
    end)
    fwd:replay()
    -- Each output is a copy of the static one (the next replay overwrites
    -- that); with grad it is joined to the inputs and parameters through
    -- views whose hooks hand over the backward graph's gradients (tensh has
    -- no custom autograd functions).
    local wants_grad = torch.is_grad_enabled() and #diff > 0
    local anchors, link = {}, nil
    if wants_grad then
      local live, k = {}, 0 -- the caller's tensors where the static inputs require grad, then the parameters
      for i, t in ipairs(args) do if t.requires_grad then k = k + 1; live[k] = call[i] end end
      for j = n_inputs + 1, #diff do live[j] = diff[j] end
      for j = 1, #diff do
        if live[j].requires_grad then
          anchors[j] = live[j]:view(live[j].shape)
          local term = anchors[j]:sum()
          link = link and link + term or term
        end
      end
      if link then link = link * 0 end
    end
    local received, replayed = {}, false
    local outs = {}
    for i = 1, static_outs.n do
      local o = static_outs[i]:detach()
      if link and static_grad_outs[i] then
        outs[i] = o + link
        outs[i]:register_hook(function(g) static_grad_outs[i]:copy_(g); received[i] = true end)
      else
        outs[i] = o:clone()
      end
    end
    for j, a in pairs(anchors) do
      a:register_hook(function()
        if not replayed then -- every output's gradient has arrived: the anchors are upstream of all of them
          for i, g in pairs(static_grad_outs) do if not received[i] then g:zero_() end end
          bwd:replay()
          replayed = true
        end
        local g = static_grads[j]
        return g and g:clone() or nil
      end)
    end
    return unpack(outs, 1, static_outs.n)
  end

  if not is_module then return graphed end
  callable.forward = function(self, ...)
    if self.training == train_mode then return graphed(...) end
    return orig_forward(self, ...)
  end
  return callable
end

return M
