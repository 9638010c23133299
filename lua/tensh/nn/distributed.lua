-- nn.parallel.DistributedDataParallel: one process per device, each with a
-- replica of the model and its own share of the batch; gradients averaged
-- across the processes during the backward, so every replica takes the
-- same optimizer step.
--
-- How (PyTorch's reducer, in Lua over dist's non-blocking all-reduce):
-- the parameters go into buckets of about bucket_cap_mb (in reverse order of
-- model:parameters(), the order their gradients tend to become ready; the
-- first bucket is at most 1 MiB so communication starts early). Each parameter has
-- a post-accumulate-grad hook (src/autograd/autograd.c): when all of a bucket's
-- gradients are ready, they are copied into the bucket's flat host buffer
-- (pinned for CUDA parameters) and its all-reduce starts while the rest of
-- the backward runs (buckets start in index order, the same on every rank,
-- as MPI needs). A callback at the end of the backward waits for them, and
-- copies the averages back into .grad.
local nn = require "tensh.nn"
local C = require "tensh.nn.common"
local args = require "tensh.args"
local Module = nn.Module
local raise = C.raise

local M = {}

local DDP = Module:extend("DistributedDataParallel")
M.DistributedDataParallel = DDP

local FIRST_BUCKET_BYTES = 1024 * 1024 -- PyTorch's dist._DEFAULT_FIRST_BUCKET_BYTES

local defaults = {device_ids = false, output_device = false, dim = 0, broadcast_buffers = true, process_group = false,
  bucket_cap_mb = 25, find_unused_parameters = false, check_reduction = false, gradient_as_bucket_view = false,
  static_graph = false}

local function dist() return require "tensh.dist" end
-- the gradient hooks' steps (defined below; local, for the hooks alone to call)
local grad_ready, finish_backward

-- every rank must wrap the same model: the parameters' count, shapes and
-- dtypes compared through one all_gather of a digest
local function check_same_model(params)
  local d = dist()
  local n, numel, shapes = #params, 0, 0
  for i, p in ipairs(params) do
    numel = numel + p:numel()
    for k = 0, p:dim() - 1 do shapes = (shapes * 31 + p:size(k) * i) % 1000000007 end
  end
  local mine = torch.tensor({n, numel, shapes}, {dtype = torch.int64, device = "cpu"})
  local all = torch.zeros(d.get_world_size() * 3, {dtype = torch.int64, device = "cpu"})
  d.all_gather_into_tensor(all, mine)
  local v = all:tolist()
  for r = 0, d.get_world_size() - 1 do
    if v[3 * r + 1] ~= n or v[3 * r + 2] ~= numel or v[3 * r + 3] ~= shapes then
      raise("DistributedDataParallel: rank %d's model has %d parameters of %d elements, rank %d's %d of %d: every "
        .. "rank must wrap the same model", d.get_rank(), n, numel, r, v[3 * r + 1], v[3 * r + 2])
    end
  end
end

-- buckets of parameters of one dtype and device, at most cap bytes each
-- (a larger parameter gets a bucket of its own)
local function make_buckets(params, cap_bytes)
  local buckets, open = {}, {}
  for i = #params, 1, -1 do
    local p = params[i]
    local key = p.dtype .. "@" .. tostring(p.device)
    local b = open[key]
    local bytes = p:numel() * p:element_size()
    local limit = #buckets == 0 and math.min(FIRST_BUCKET_BYTES, cap_bytes) or cap_bytes
    if b and b.bytes + bytes > b.limit then b = nil end
    if not b then
      b = {params = {}, offsets = {}, numel = 0, bytes = 0, limit = limit, dtype = p.dtype, device = p.device}
      buckets[#buckets + 1] = b
      open[key] = b
    end
    b.params[#b.params + 1] = p
    b.offsets[#b.offsets + 1] = b.numel
    b.numel = b.numel + p:numel()
    b.bytes = b.bytes + bytes
  end
  local nccl = dist()._uses_nccl()
  for i, b in ipairs(buckets) do
    b.index = i
    -- "nccl": the bucket lives on the device; "mpi": on the host, pinned for a CUDA model
    b.on_device = nccl and b.device.type == "cuda"
    b.flat = torch.zeros(math.max(b.numel, 1), {dtype = b.dtype, device = b.on_device and b.device or "cpu"})
    if b.device.type == "cuda" and not b.on_device then b.flat = b.flat:pin_memory() end
  end
  return buckets
end

function DDP:init(module, opts)
  if not nn.is_module(module) then
    raise("DistributedDataParallel: expected a module to wrap, got %s", args.typename(module))
  end
  opts = args.check_opts("DistributedDataParallel", opts, defaults)
  local d = dist()
  if not d.is_initialized() then
    raise("DistributedDataParallel: the default process group has not been initialized; call "
      .. "dist.init_process_group(\"mpi\") first (and start with `tensh --nproc N`)")
  end
  local cap = opts.bucket_cap_mb == nil and 25 or opts.bucket_cap_mb
  if type(cap) ~= "number" or cap <= 0 then
    raise("DistributedDataParallel: bucket_cap_mb must be a positive number, got %s", args.show(cap))
  end
  if opts.device_ids and (type(opts.device_ids) ~= "table" or #opts.device_ids > 1) then
    raise("DistributedDataParallel: device_ids must list this process's one device ({local_rank}), got %s",
      args.show(opts.device_ids))
  end
  self.module = module
  local params = {}
  for _, p in ipairs(module:parameters()) do if p.requires_grad then params[#params + 1] = p end end
  check_same_model(params)
  -- rank 0's weights and buffers everywhere
  do
    local _ <close> = torch.no_grad()
    for _, p in ipairs(params) do d.broadcast(p:detach(), 0) end
    for _, b in ipairs(module:buffers()) do d.broadcast(b, 0) end
  end
  local state = {
    params = params, buckets = make_buckets(params, cap * 1024 * 1024), world = d.get_world_size(),
    find_unused = opts.find_unused_parameters == true, broadcast_buffers = opts.broadcast_buffers ~= false,
    armed = false, sync = true, bucket_cap_mb = cap,
  }
  state.where = {} -- param -> {bucket, position}
  for _, b in ipairs(state.buckets) do
    for k, p in ipairs(b.params) do state.where[p] = {b, k} end
  end
  self._ddp = state
  state.hooks = {}
  for _, p in ipairs(params) do
    -- the hook's argument is a new reference to the tensor (another userdata): p names it
    state.hooks[#state.hooks + 1] = p:register_post_accumulate_grad_hook(function() grad_ready(self, p) end)
  end
end

-- the previous iteration's requests, if a failed backward left any
local function drain(state)
  for _, b in ipairs(state.buckets) do
    if b.req then
      dist()._wait(b.req)
      b.req = nil
    end
  end
end

local function reset(state)
  drain(state)
  for _, b in ipairs(state.buckets) do
    b.pending, b.ready, b.launched = #b.params, {}, false
  end
  state.next_launch, state.queued = 1, false
end

-- a bucket's gradients into its flat buffer, then its all-reduce
local function launch(state, b)
  local _ <close> = torch.no_grad()
  for k, p in ipairs(b.params) do
    local view = b.flat:narrow(0, b.offsets[k], p:numel())
    if p.grad ~= nil and b.ready[k] then view:copy_(p.grad:reshape(-1)) else view:zero_() end
  end
  if b.numel > 0 and b.on_device then dist()._nccl_sum(b.flat)
  elseif b.numel > 0 then b.req = dist()._iall_reduce_sum(b.flat) end
  b.launched = true
end

-- buckets start in index order on every rank; each hook also moves MPI's
-- progress along for the requests in flight
local function launch_ready(state)
  local bs = state.buckets
  while state.next_launch <= #bs and bs[state.next_launch].pending == 0 do
    launch(state, bs[state.next_launch])
    state.next_launch = state.next_launch + 1
  end
  for i = 1, state.next_launch - 1 do
    local b = bs[i]
    if b.req and dist()._test(b.req) then b.req = nil end
  end
end

function grad_ready(self, p)
  local state = rawget(self, "_attrs")._ddp
  if not state.armed then return end
  local w = state.where[p]
  local b, k = w[1], w[2]
  if b.ready[k] then return end
  b.ready[k] = true
  b.pending = b.pending - 1
  if not state.queued then
    state.queued = true
    torch.autograd._queue_callback(function() finish_backward(self) end)
  end
  launch_ready(state)
end

-- end of the backward: the unused parameters (find_unused_parameters), the
-- last buckets, then the averages back into .grad
function finish_backward(self)
  local state = rawget(self, "_attrs")._ddp
  state.armed = false
  local d = dist()
  local unused = {}
  for _, p in ipairs(state.params) do
    local w = state.where[p]
    if not w[1].ready[w[2]] then unused[#unused + 1] = p end
  end
  if #unused > 0 and not state.find_unused then
    local names, index = {}, {}
    for name, p in self.module:named_parameters() do index[p] = name end
    for i, p in ipairs(unused) do
      if i > 5 then names[#names + 1] = "..." break end
      names[#names + 1] = index[p] or "?"
    end
    drain(state)
    raise("DistributedDataParallel: %d parameter(s) received no gradient in this backward (%s); if the model "
      .. "does not use all its parameters in every forward, wrap it with {find_unused_parameters = true}",
      #unused, table.concat(names, ", "))
  end
  -- which parameters some rank used: those get the reduced gradient, the
  -- others keep none (PyTorch's locally-used map)
  local used
  if state.find_unused then
    local mine = {}
    for i, p in ipairs(state.params) do
      local w = state.where[p]
      mine[i] = w[1].ready[w[2]] and 1 or 0
    end
    for _, b in ipairs(state.buckets) do b.pending = 0 end
    launch_ready(state)
    local map = torch.tensor(mine, {dtype = torch.int32, device = "cpu"})
    d.all_reduce(map, {op = d.ReduceOp.MAX})
    used = {}
    for i, v in ipairs(map:tolist()) do used[state.params[i]] = v == 1 end
  end
  local _ <close> = torch.no_grad()
  for _, b in ipairs(state.buckets) do
    if b.req then
      d._wait(b.req)
      b.req = nil
    end
    if b.numel > 0 then b.flat:div_(state.world) end
    for k, p in ipairs(b.params) do
      if not used or used[p] then
        local avg = b.flat:narrow(0, b.offsets[k], p:numel()):view(p:size())
        if p.grad == nil then p.grad = p.device.type == "cpu" and avg:clone() or avg:to(p.device)
        else p.grad:copy_(avg) end
      end
    end
  end
end

function DDP:forward(...)
  local state = rawget(self, "_attrs")._ddp
  if state.broadcast_buffers and state.world > 1 then
    local _ <close> = torch.no_grad()
    for _, b in ipairs(self.module:buffers()) do dist().broadcast(b, 0) end
  end
  if torch.is_grad_enabled() and state.sync then
    reset(state)
    state.armed = true
  else
    state.armed = false
  end
  return self.module(...)
end

-- no_sync(): forward/backward pairs inside accumulate gradients locally;
-- the first backward after it averages the accumulated sum.
--   do local _ <close> = model:no_sync(); model(x):sum():backward() end
--   model:no_sync(function() model(x):sum():backward() end)
local NoSync = {__name = "DistributedDataParallel.no_sync"}
NoSync.__index = NoSync
function NoSync:__close()
  if self._open then
    self._open = false
    self._state.sync = self._prev
  end
end
-- never closed (local ctx = model:no_sync()): syncing comes back when the
-- collector takes it, with a warning, as the other scopes (lua/tensh/scopes.lua)
function NoSync:__gc()
  if not self._open then return end
  self:__close()
  require("tensh.warnings").warn("model:no_sync() was collected without being closed, so gradients were not averaged "
    .. "until now; open it as `local _ <close> = model:no_sync()` or give it the function to run: "
    .. "model:no_sync(function() ... end)", "UserWarning", "unclosed no_sync")
end

function DDP:no_sync(fn, ...)
  local state = rawget(self, "_attrs")._ddp
  local ctx = setmetatable({_state = state, _prev = state.sync, _open = true}, NoSync)
  state.sync = false
  if fn == nil then return ctx end
  if type(fn) ~= "function" then args.type_error("no_sync", 1, "function or nothing", fn) end
  local res = table.pack(pcall(fn, ...))
  ctx:__close()
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

function DDP:extra_repr() return "" end

return M
