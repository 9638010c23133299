-- nn.DataParallel: one process, several CUDA devices, as PyTorch's
-- torch.nn.DataParallel. Each forward
--   1. scatters the inputs: every tensor is cut along `dim` with chunk() (so
--      PyTorch's chunk sizes: ceil(n / #devices) each, the last smaller, and
--      fewer pieces, hence fewer devices, when the batch is small) and each
--      piece copied to its device; tables are scattered key by key, other
--      values go to every replica as they are;
--   2. replicates the module: a shallow copy of the module tree per device
--      whose parameters and buffers are copies made once per forward (on the
--      first device, the originals themselves). The copies are made by
--      autograd-tracked moves, so the gradients of all replicas flow back
--      through them and are summed into the original parameters' .grad, as
--      PyTorch's Broadcast function does. Buffers are copied without
--      autograd; replica 0 works on the original buffers, so its batch-norm
--      running statistics are the ones kept (the other replicas' are dropped);
--   3. runs replica i on device i, on that device's current stream, inside a
--      cuda.device scope. Kernel launches do not wait for the device, so the
--      devices compute at the same time while the host queues the next
--      replica (PyTorch uses one thread per device for the same end);
--   4. gathers the outputs on output_device: tensors are concatenated along
--      `dim` (0-dim outputs become a vector, with PyTorch's warning), tables
--      of tensors key by key; the moves and cat are tracked by autograd.
-- Without CUDA devices it is the module itself; with one device it moves
-- the inputs there and calls the module.
local torch = torch
local nn = require "tensh.nn"
local util = require "tensh.nn.common"
local A = require "tensh.args"
local raise, is_opts, is_tensor = util.raise, util.is_opts, torch.is_tensor

local M = {}

local function cuda_count()
  local c = rawget(_G, "cuda")
  if c == nil or not c.is_available() then return 0 end
  return c.device_count()
end

-- the index of a CUDA device given as an integer, "cuda:N", "cuda" or
-- torch.device; -1 for the CPU when allow_cpu
local function device_index(fn, what, v, allow_cpu)
  if math.type(v) == "integer" then
    if v == -1 and allow_cpu then return -1 end
    if v < 0 then raise("%s: %s must be a CUDA device index (0, 1, ...), got %d", fn, what, v) end
    return v
  end
  local ok, d = pcall(torch.device, v)
  if not ok then
    raise("%s: %s must be a device (an index, \"cuda:1\" or torch.device), got %s", fn, what, A.typename(v))
  end
  if d.type == "cpu" and allow_cpu then return -1 end
  if d.type ~= "cuda" then raise("%s: %s must be a CUDA device, got %s", fn, what, tostring(d)) end
  return d.index or rawget(_G, "cuda").current_device()
end

local function device_name(i) return i < 0 and "cpu" or "cuda:" .. i end

-- ---- scatter ----------------------------------------------------------------------------

-- Python's zip over the scattered pieces of a table's values: the number of
-- pieces is the smallest among the values (a value that is not cut counts
-- as one piece per device).
local scatter_value

local function scatter_table(fn, t, devices, dim)
  local parts, count = {}, nil
  for k, v in pairs(t) do
    local p = scatter_value(fn, v, devices, dim)
    parts[k] = p
    if count == nil or #p < count then count = #p end
  end
  if count == nil then count = #devices end -- an empty table: each replica gets its own
  local out = {}
  for i = 1, count do
    local r = {}
    for k, p in pairs(parts) do r[k] = p[i] end
    out[i] = r
  end
  return out
end

-- v's pieces, one a device: a tensor cut along dim and moved, a plain table
-- scattered by key, anything else repeated
function scatter_value(fn, v, devices, dim)
  if is_tensor(v) then
    local nd = v:dim()
    if nd == 0 then raise("%s: can't scatter a 0-dim tensor along dim %d; give the inputs a batch dimension", fn, dim) end
    if dim < -nd or dim >= nd then
      raise("%s: dim %d is out of range for an input of %d dimension%s (shape %s; expected a dim in [%d, %d])",
        fn, dim, nd, nd == 1 and "" or "s", util.shape_str(v), -nd, nd - 1)
    end
    local chunks = v:chunk(#devices, dim)
    for i, c in ipairs(chunks) do chunks[i] = c:to("cuda:" .. devices[i]) end
    return chunks
  end
  if type(v) == "table" and getmetatable(v) == nil then return scatter_table(fn, v, devices, dim) end
  local out = {}
  for i = 1, #devices do out[i] = v end
  return out
end

-- the argument lists of the replicas: args is a table.pack of forward's arguments
local function scatter_args(fn, args, devices, dim)
  local per_arg, count = {}, nil
  for a = 1, args.n do
    local p = scatter_value(fn, args[a], devices, dim)
    per_arg[a] = p
    if count == nil or #p < count then count = #p end
  end
  local out = {}
  for i = 1, count or 1 do -- no arguments at all: one replica, called with none
    local r = {n = args.n}
    for a = 1, args.n do r[a] = per_arg[a][i] end
    out[i] = r
  end
  return out
end
M.scatter_args = scatter_args

-- ---- replicate ----------------------------------------------------------------------------

local function od_copy(od, map)
  local keys, pos, vals = {}, {}, {}
  for i, k in ipairs(od.keys) do
    keys[i], pos[k] = k, i
    local v = od.vals[k]
    if v ~= nil then vals[k] = map(v) end
  end
  return {keys = keys, vals = vals, pos = pos}
end

-- One replica of the tree under `module` whose tensors are looked up in
-- `copy` (original tensor -> its copy on the replica's device). Shared
-- submodules stay shared within the replica; plain attributes are shared
-- with the original (shallow copies, as PyTorch's replicate).
local function replicate_tree(module, copy)
  local memo = {}
  local function rep(m)
    local done = memo[m]
    if done then return done end
    local r = {}
    for k, v in next, m do r[k] = v end
    memo[m] = r
    local attrs = {}
    for k, v in pairs(rawget(m, "_attrs")) do attrs[k] = v end
    r._attrs = attrs
    r._parameters = od_copy(rawget(m, "_parameters"), function(p) return copy[p] end)
    r._buffers = od_copy(rawget(m, "_buffers"), function(b) return copy[b] end)
    r._modules = od_copy(rawget(m, "_modules"), rep)
    return setmetatable(r, getmetatable(m))
  end
  return rep(module)
end

-- replicas of module, one for each device index in `devices`; the first
-- device must hold the module. With detach (no autograd wanted) the copies
-- are not tracked.
function M.replicate(module, devices, detach)
  local params, buffers = module:parameters(), module:buffers()
  local grad = torch.is_grad_enabled() and not detach
  local replicas = {}
  for i, d in ipairs(devices) do
    local copy, dev = {}, "cuda:" .. d
    for _, p in ipairs(params) do
      if i == 1 then copy[p] = grad and p or p:detach()
      elseif grad then copy[p] = p:to(dev)
      else copy[p] = p:detach():to(dev) end
    end
    for _, b in ipairs(buffers) do
      if i == 1 then copy[b] = b
      elseif grad and b.requires_grad then copy[b] = b:to(dev)
      else copy[b] = b:detach():to(dev) end
    end
    replicas[i] = replicate_tree(module, copy)
  end
  return replicas
end

-- ---- apply and gather -----------------------------------------------------------------------

local function strip_position(msg) return (tostring(msg):gsub("^[^\n]-:%d+: ", "", 1)) end

-- outputs[i] = table.pack(replicas[i](inputs[i])) on devices[i] (a forward
-- may return several values, PyTorch's tuple); an error names the replica
function M.parallel_apply(replicas, inputs, devices)
  local outputs, device_scope = {}, rawget(_G, "cuda").device
  for i, r in ipairs(replicas) do
    local inp = inputs[i]
    local res = table.pack(pcall(device_scope, devices[i], function() return r(table.unpack(inp, 1, inp.n)) end))
    if not res[1] then
      raise("DataParallel: caught an error in replica %d on device %d:\n%s", i - 1, devices[i], strip_position(res[2]))
    end
    outputs[i] = table.pack(table.unpack(res, 2, res.n))
  end
  return outputs
end

local warned_scalars = false

-- outs[1..n]: one value from each replica, gathered into one
local function gather_value(fn, outs, n, target, dim)
  local first = outs[1]
  if is_tensor(first) then
    local parts, scalars = {}, first:dim() == 0
    for i = 1, n do
      local o = outs[i]
      if not is_tensor(o) then raise("%s: replica 0 returned a tensor but replica %d a %s", fn, i - 1, A.typename(o)) end
      parts[i] = scalars and o:reshape(1) or o
    end
    if scalars and dim == 0 and not warned_scalars then
      warned_scalars = true
      io.stderr:write("UserWarning: Was asked to gather along dimension 0, but all input tensors were scalars; "
        .. "will instead unsqueeze and return a vector.\n")
    end
    local nd = parts[1]:dim()
    if dim < -nd or dim >= nd then
      raise("%s: dim %d is out of range for outputs of %d dimension%s (expected a dim in [%d, %d])", fn, dim, nd,
        nd == 1 and "" or "s", -nd, nd - 1)
    end
    local dev = device_name(target)
    for i = 1, n do parts[i] = parts[i]:to(dev) end
    return torch.cat(parts, dim)
  end
  if first == nil then
    for i = 2, n do
      if outs[i] ~= nil then raise("%s: replica 0 returned nil but replica %d a %s", fn, i - 1, A.typename(outs[i])) end
    end
    return nil
  end
  if type(first) == "table" and getmetatable(first) == nil then
    for i = 2, n do
      local o = outs[i]
      if type(o) ~= "table" then raise("%s: replica 0 returned a table but replica %d a %s", fn, i - 1, A.typename(o)) end
      for k in pairs(o) do
        if first[k] == nil then raise("%s: replica %d's output has a key %s that replica 0's lacks", fn, i - 1, tostring(k)) end
      end
    end
    local out = {}
    for k in pairs(first) do
      local col = {}
      for i = 1, n do col[i] = outs[i][k] end
      out[k] = gather_value(fn, col, n, target, dim)
    end
    return out
  end
  raise("%s: can't gather a %s from the replicas' outputs (tensors and tables of tensors are gathered)", fn,
    A.typename(first))
end

-- the replicas' outputs (each a table.pack of a forward's values) gathered
-- on device `target` (-1: the CPU), value by value; returns a table.pack
function M.gather(outputs, target, dim)
  local n = outputs[1].n
  for i, o in ipairs(outputs) do
    if o.n ~= n then
      raise("DataParallel: replica 0 returned %d value%s but replica %d returned %d", n, n == 1 and "" or "s", i - 1, o.n)
    end
  end
  local out = {n = n}
  for v = 1, n do
    local col = {}
    for i, o in ipairs(outputs) do col[i] = o[v] end
    out[v] = gather_value("DataParallel", col, #outputs, target, dim or 0)
  end
  return out
end

-- ---- the module -----------------------------------------------------------------------------

local DataParallel = nn.Module:extend("DataParallel")
M.DataParallel = DataParallel

local DP_OPTS = {device_ids = true, output_device = true, dim = true}

-- DataParallel(module, {device_ids =, output_device =, dim = 0}), or the
-- same positionally as PyTorch's DataParallel(module, device_ids, output_device, dim)
function DataParallel:init(module, device_ids, output_device, dim, extra)
  local fn = "DataParallel"
  if not nn.is_module(module) then raise("%s: expected an nn.Module to wrap, got %s", fn, A.typename(module)) end
  -- Module's construct() has moved the keys that name a parameter of init to
  -- their places; an options table left among the arguments holds the others
  local given = {device_ids, output_device, dim, extra}
  for i = 1, 4 do
    local v = given[i]
    if is_opts(v) and next(v) ~= nil then A.check_opts(fn, v, DP_OPTS) end
  end
  if dim == nil then dim = 0 end
  dim = util.check_int(fn, "dim", dim)
  self.module = module
  self.dim = dim
  local n = cuda_count()
  if n == 0 then -- no CUDA device: the module runs as it is
    self.device_ids, self.output_device = {}, nil
    return
  end
  local ids = {}
  if device_ids == nil then
    for i = 0, n - 1 do ids[#ids + 1] = i end
  else
    if is_tensor(device_ids) or type(device_ids) ~= "table" then device_ids = {device_ids} end
    if #device_ids == 0 then raise("%s: device_ids is empty; name at least one device (or leave it out for all)", fn) end
    -- the device is named, not its place: device_ids is a Lua list (from 1), PyTorch's counts from 0
    for i, v in ipairs(device_ids) do
      local d = device_index(fn, "each of device_ids", v)
      if d >= n then
        raise("%s: device_ids names cuda:%d, but there %s only %d CUDA device%s (cuda:0 to cuda:%d)", fn, d,
          n == 1 and "is" or "are", n, n == 1 and "" or "s", n - 1)
      end
      ids[i] = d
    end
  end
  self.device_ids = ids
  if output_device == nil then output_device = ids[1] end
  local out = device_index(fn, "output_device", output_device, true)
  if out >= n then raise("%s: output_device is cuda:%d, but there %s only %d CUDA device%s", fn, out,
    n == 1 and "is" or "are", n, n == 1 and "" or "s") end
  self.output_device = out
  self.src_device = "cuda:" .. ids[1]
  if #ids == 1 then module:to(self.src_device) end
end

-- PyTorch's check: everything on device_ids[0] before a forward
local function check_on_source(self)
  local src = self.src_device
  for _, list in ipairs({self.module:parameters(), self.module:buffers()}) do
    for _, t in ipairs(list) do
      if tostring(t.device) ~= src then
        raise("DataParallel: module must have its parameters and buffers on device %s (device_ids[0]) but found "
          .. "one of them on device: %s (move it with model:to(\"%s\"))", src, tostring(t.device), src)
      end
    end
  end
end

function DataParallel:forward(...)
  local ids = self.device_ids
  if #ids == 0 then return self.module(...) end
  check_on_source(self)
  local inputs = scatter_args("DataParallel", table.pack(...), ids, self.dim)
  if #ids == 1 then
    local inp = inputs[1]
    return self.module(table.unpack(inp, 1, inp.n))
  end
  local used = {}
  for i = 1, #inputs do used[i] = ids[i] end
  local replicas = M.replicate(self.module, used)
  local outputs = M.gather(M.parallel_apply(replicas, inputs, used), self.output_device, self.dim)
  return table.unpack(outputs, 1, outputs.n)
end

return M
