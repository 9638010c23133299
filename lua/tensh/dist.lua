-- Several processes, as torch.distributed (also `dist`): a default process
-- group over Open MPI ("mpi": CPU tensors, and CUDA tensors staged through
-- pinned host memory) or NCCL ("nccl": CUDA tensors, its unique id handed
-- out over MPI).
--
--   dist.init_process_group("mpi")          -- under `tensh --nproc 2 x.lua` or mpirun
--   dist.all_reduce(t, {op = dist.ReduceOp.SUM})
--
-- Each collective first compares what every rank passed (a 16-integer
-- signature gathered from all ranks): a shape, dtype or device that differs
-- is an error on every rank naming the ranks, where MPI would hang or mix
-- bytes. The C half is torch._dist (src/lua/ldist.c over src/dist/dist_mpi.c).
local M = require("tensh.lazy").claim("dist") -- the table the global dist holds from start-up

local args = require "tensh.args"
local raise, typename = args.raise, args.typename
local C = torch._dist

-- ReduceOp.SUM prints as PyTorch's; the value is the op's name
M.ReduceOp = {SUM = "SUM", AVG = "AVG", PRODUCT = "PRODUCT", MIN = "MIN", MAX = "MAX"}
local op_codes = {SUM = 0, PRODUCT = 1, MIN = 2, MAX = 3}

local group -- the default process group: {backend =, rank =, world_size =}

function M.is_available() return true end
function M.is_mpi_available() return true end
-- a GPU, and libnccl.so.2 loads (never on the simulated device)
function M.is_nccl_available() return rawget(torch, "_nccl") ~= nil and torch._nccl.available() end
function M.is_initialized() return group ~= nil end
function M.is_torchelastic_launched() return os.getenv("TORCHELASTIC_RUN_ID") ~= nil end

local function need_group(fn)
  if not group then
    raise("%s: the default process group has not been initialized; call dist.init_process_group(\"mpi\") "
      .. "(and start the script with `tensh --nproc N script.lua` or mpirun)", fn)
  end
  return group
end

function M.get_rank() return need_group("get_rank").rank end
function M.get_world_size() return need_group("get_world_size").world_size end
function M.get_backend() return need_group("get_backend").backend end

local init_opts = {init_method = true, rank = true, world_size = true, timeout = true, device_id = true,
  backend = true}

-- init_process_group(backend, {init_method =, rank =, world_size =}): the
-- processes meet through MPI (mpirun started them), so rank and world_size,
-- when given, must be the ones MPI says.
function M.init_process_group(backend, opts)
  if args.is_plain_table(backend) and opts == nil then backend, opts = backend.backend, backend end
  opts = args.check_opts("init_process_group", opts, init_opts)
  backend = backend or opts.backend or "mpi"
  if type(backend) ~= "string" then args.type_error("init_process_group", 1, "backend name (string)", backend) end
  backend = backend:lower()
  if backend ~= "mpi" and backend ~= "nccl" then
    raise("init_process_group: unknown backend '%s' (tensh has \"mpi\" and \"nccl\"; \"gloo\"'s CPU collectives "
      .. "are \"mpi\" here)", backend)
  end
  if group then
    raise("init_process_group: trying to initialize the default process group twice (call "
      .. "dist.destroy_process_group() first)")
  end
  local im = opts.init_method
  if im ~= nil and im ~= "env://" and im ~= "mpi://" then
    raise("init_process_group: init_method '%s' is not supported: the processes meet through MPI (start them with "
      .. "`tensh --nproc N` or mpirun; init_method = \"env://\" or nil)", tostring(im))
  end
  local rank, size, version = C.init() -- also makes os.exit(failure) end the whole job (ldist.c)
  for _, k in ipairs {"rank", "world_size"} do
    local want, got = opts[k], k == "rank" and rank or size
    if want ~= nil and want ~= -1 and want ~= got then
      raise("init_process_group: %s = %s but MPI started this process with %s %d (mpirun -np decides both)",
        k, tostring(want), k, got)
    end
  end
  local g = {backend = backend, rank = rank, world_size = size, mpi_version = version}
  if backend == "nccl" then
    if not rawget(torch, "_nccl") then
      raise("init_process_group: the \"nccl\" backend needs a CUDA build of tensh (this one is CPU-only); use \"mpi\"")
    end
    if not torch.cuda.is_available() or os.getenv("TENSH_SIM_DEVICES") then
      raise("init_process_group: the \"nccl\" backend needs a GPU%s; use \"mpi\"",
        os.getenv("TENSH_SIM_DEVICES") and " (the simulated device has no NCCL)" or " (cuda.is_available() is false)")
    end
    local local_rank = tonumber(os.getenv("LOCAL_RANK") or "") or rank
    local device = opts.device_id and torch.device(opts.device_id).index or (local_rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    -- rank 0 makes the unique id; MPI hands it to the others
    local id = torch.zeros(torch._nccl.ID_BYTES, {dtype = torch.uint8, device = "cpu"})
    if rank == 0 then torch._nccl.get_unique_id(id) end
    C.broadcast(id, 0)
    g.nccl = torch._nccl.init_rank(id, size, rank, device)
    g.device = device
  end
  group = g
end

function M.destroy_process_group()
  if group and group.nccl then torch._nccl.destroy(group.nccl) end
  group = nil
end

-- ---- checking what the ranks passed -----------------------------------------

local dtype_codes, device_codes = {}, {cpu = 1, cuda = 2}
for i, name in ipairs {"float32", "float64", "float16", "bfloat16", "int64", "int32", "uint8", "bool"} do
  dtype_codes[torch[name]] = i
end
local dtype_of_code = {}
for d, i in pairs(dtype_codes) do dtype_of_code[i] = d end
local fn_codes = {all_reduce = 1, broadcast = 2, all_gather = 3, reduce_scatter = 4, barrier = 5,
  all_gather_into_tensor = 3, reduce_scatter_tensor = 4}
local MAXDIM = 8

local function describe(sig)
  local dims = {}
  for i = 1, sig[5] do dims[i] = sig[5 + i] end
  return ("%s tensor of shape [%s] (%s)"):format(sig[3] == 2 and "cuda" or "cpu", table.concat(dims, ", "),
    dtype_of_code[sig[2]] or "?")
end

-- Gathers (fn, dtype, device, extra, ndim, sizes) from every rank and raises
-- on every rank when they differ; extra is the op or the root, which must
-- agree too.
local function check_same(fn, t, extra)
  local sig = {fn_codes[fn], 0, 0, extra or 0, 0}
  if t then
    sig[2], sig[3], sig[5] = dtype_codes[t.dtype], device_codes[t.device.type], t:dim()
    if t:dim() > MAXDIM then sig[5] = MAXDIM + 1 end
    for i = 1, math.min(t:dim(), MAXDIM) do sig[5 + i] = t:size(i - 1) end
  end
  for i = #sig + 1, 16 do sig[i] = 0 end
  -- on the host whatever a caller made the default device (the test harness's cuda pass)
  local mine = torch.tensor(sig, {dtype = torch.int64, device = "cpu"})
  local all = torch.empty(group.world_size * 16, {dtype = torch.int64, device = "cpu"})
  C.all_gather(all, mine)
  local v = all:tolist()
  for r = 0, group.world_size - 1 do
    local other = table.move(v, r * 16 + 1, r * 16 + 16, 1, {})
    if other[1] ~= sig[1] then
      local theirs = "another collective"
      for name, c in pairs(fn_codes) do if c == other[1] and not name:find("_tensor$") then theirs = name end end
      raise("%s: rank %d called %s while rank %d called %s: every rank must call the same collectives in the "
        .. "same order", fn, group.rank, fn, r, theirs)
    end
    if other[4] ~= sig[4] then
      raise("%s: rank %d and rank %d passed a different %s", fn, group.rank, r,
        fn == "broadcast" and "src" or "op")
    end
    for i = 2, 16 do
      if other[i] ~= sig[i] and i ~= 4 then
        raise("%s: rank %d passed a %s but rank %d passed a %s: every rank must pass the same shape, dtype and "
          .. "device", fn, group.rank, describe(sig), r, describe(other))
      end
    end
  end
end

local function check_op(fn, op, dtype)
  op = op == nil and "SUM" or op
  if type(op) ~= "string" or not (op_codes[op:upper()] or op:upper() == "AVG") then
    raise("%s: op must be one of dist.ReduceOp.SUM, AVG, PRODUCT, MIN, MAX, got %s", fn, args.show(op))
  end
  op = op:upper()
  if op == "AVG" and not args.is_floating_dtype(dtype) then
    raise("%s: ReduceOp.AVG needs a floating-point tensor, got %s (use SUM and divide)", fn, dtype)
  end
  return op
end

local function check_tensor(fn, pos, t)
  args.check_tensor(fn, pos, t)
  local g = need_group(fn)
  if g.backend == "nccl" and t.device.type ~= "cuda" then
    raise("%s: the \"nccl\" backend takes CUDA tensors, got a %s tensor (use the \"mpi\" backend for CPU tensors)",
      fn, t.device.type)
  end
  return t
end

-- ---- staging: MPI reads contiguous host memory -----------------------------

local pinned = {} -- dtype -> a flat pinned host buffer, grown as needed

-- A contiguous host tensor with t's values (t itself when it is one), and
-- whether results must be copied back into t.
local function host_of(t, fill)
  if t.device.type == "cpu" then
    if t:is_contiguous() then return t, false end
    return t:contiguous(), true
  end
  local n = t:numel()
  local buf = pinned[t.dtype]
  if not buf or buf:numel() < n then
    buf = torch.empty(math.max(n, 1), {dtype = t.dtype, device = "cpu"}):pin_memory()
    pinned[t.dtype] = buf
  end
  local h = buf:narrow(0, 0, n):view(t:size())
  if fill ~= false then h:copy_(t) end
  return h, true
end

-- a second staging buffer (all_gather's or reduce_scatter's other side), not pinned
local function host_fresh(t)
  if t.device.type == "cpu" and t:is_contiguous() then return t, false end
  return torch.empty(t:size(), {dtype = t.dtype, device = "cpu"}), true
end

local function reduce(fn, t, op)
  op = check_op(fn, op, t.dtype)
  return op, op_codes[op == "AVG" and "SUM" or op]
end

-- ---- async work --------------------------------------------------------------

local Work = {__name = "dist.Work"}
Work.__index = Work
function Work:wait()
  if self._req then
    C.wait(self._req)
    self._req = nil
    if self._finish then self._finish() end
  end
  return true
end
function Work:is_completed()
  if self._req and C.test(self._req) then
    self._req = nil
    if self._finish then self._finish() end
  end
  return self._req == nil
end
require("tensh.classes").setup(Work, {var = "work"}) -- work.wait() for work:wait() says so
local function done_work() return setmetatable({}, Work) end

-- ---- collectives -------------------------------------------------------------

local function opts_of(fn, v, names)
  return args.check_opts(fn, v, names)
end

-- all_reduce(t, {op = ReduceOp.SUM, async_op = false}) (or all_reduce(t, op)):
-- t gets the reduction of every rank's t, in place
function M.all_reduce(t, o)
  local fn = "all_reduce"
  check_tensor(fn, 1, t)
  if type(o) == "string" then o = {op = o} end
  o = opts_of(fn, o, {op = true, async_op = true, group = true})
  local op, code = reduce(fn, t, o.op)
  check_same(fn, t, code * 2 + (op == "AVG" and 1 or 0))
  if group.nccl then
    torch._nccl.all_reduce(group.nccl, t, op_codes[op] or 4)
    return o.async_op and done_work() or nil
  end
  local h, back = host_of(t)
  local function finish()
    if op == "AVG" then h:div_(group.world_size) end
    if back then t:copy_(h) end
  end
  if o.async_op then
    local w = setmetatable({_req = C.iall_reduce(h, code), _finish = finish, _keep = h}, Work)
    return w
  end
  C.all_reduce(h, code)
  finish()
end

-- broadcast(t, src): every rank's t gets rank src's values
function M.broadcast(t, src, o)
  local fn = "broadcast"
  check_tensor(fn, 1, t)
  if args.is_plain_table(src) then src, o = src.src, src end
  o = opts_of(fn, o, {src = true, async_op = true, group = true})
  if math.type(src) ~= "integer" or src < 0 or src >= group.world_size then
    raise("broadcast: src must be a rank in [0, %d), got %s", group.world_size, args.show(src))
  end
  check_same(fn, t, src)
  if group.nccl then
    torch._nccl.broadcast(group.nccl, t, src)
  else
    local h, back = host_of(t, group.rank == src)
    C.broadcast(h, src)
    if back then t:copy_(h) end
  end
  return o.async_op and done_work() or nil
end

-- all_gather's and reduce_scatter's two tensors (arguments 1 and 2 in
-- either order): the same dtype and device, the large one world_size times
-- the small one's elements
local function check_pair(fn, large, small, large_name, small_name)
  local first, second = large, small
  if large_name == "input" then first, second = small, large end
  check_tensor(fn, 1, first)
  check_tensor(fn, 2, second)
  if large.dtype ~= small.dtype or large.device ~= small.device then
    raise("%s: output is %s on %s but the input is %s on %s", fn, first.dtype, tostring(first.device),
      second.dtype, tostring(second.device))
  end
  if large:numel() ~= small:numel() * group.world_size then
    raise("%s: %s has %d elements; expected world_size (%d) times the %s's %d", fn, large_name, large:numel(),
      group.world_size, small_name, small:numel())
  end
end

-- all_gather_into_tensor(out, t): out (world_size * t's numel elements,
-- e.g. shape (world_size, ...) or (world_size * n, ...)) gets every rank's t in rank order
function M.all_gather_into_tensor(out, t, o)
  local fn = "all_gather_into_tensor"
  check_pair(fn, out, t, "output", "input")
  o = opts_of(fn, o, {async_op = true, group = true})
  check_same(fn, t)
  if group.nccl then
    torch._nccl.all_gather(group.nccl, out, t)
  else
    local h = host_of(t)
    local ho, back = host_fresh(out)
    C.all_gather(ho, h)
    if back then out:copy_(ho) end
  end
  return o.async_op and done_work() or nil
end

-- all_gather(tensor_list, t): tensor_list[r + 1] gets rank r's t
function M.all_gather(list, t, o)
  local fn = "all_gather"
  if type(list) ~= "table" or torch.is_tensor(list) then args.type_error(fn, 1, "list of tensors", list) end
  check_tensor(fn, 2, t)
  o = opts_of(fn, o, {async_op = true, group = true})
  if #list ~= group.world_size then
    raise("all_gather: tensor_list has %d tensors; expected one per rank (%d)", #list, group.world_size)
  end
  for i, x in ipairs(list) do
    if not torch.is_tensor(x) then raise("all_gather: tensor_list[%d] is a %s, not a tensor", i, typename(x)) end
    if x.dtype ~= t.dtype or x:numel() ~= t:numel() or x.device ~= t.device then
      raise("all_gather: tensor_list[%d] (%s, %d elements, %s) does not match the input (%s, %d elements, %s)", i,
        x.dtype, x:numel(), tostring(x.device), t.dtype, t:numel(), tostring(t.device))
    end
  end
  local out = torch.empty(group.world_size * t:numel(), {dtype = t.dtype, device = t.device})
  M.all_gather_into_tensor(out, t)
  for i, x in ipairs(list) do x:copy_(out:narrow(0, (i - 1) * t:numel(), t:numel()):view(x:size())) end
  return o.async_op and done_work() or nil
end

-- reduce_scatter_tensor(out, input, {op}): input holds world_size blocks of
-- out's size; rank r's out gets the reduction of every rank's block r
function M.reduce_scatter_tensor(out, input, o)
  local fn = "reduce_scatter_tensor"
  check_pair(fn, input, out, "input", "output")
  if type(o) == "string" then o = {op = o} end
  o = opts_of(fn, o, {op = true, async_op = true, group = true})
  local op, code = reduce(fn, out, o.op)
  check_same(fn, input, code * 2 + (op == "AVG" and 1 or 0))
  if group.nccl then
    torch._nccl.reduce_scatter(group.nccl, out, input, op_codes[op] or 4)
  else
    local hi = host_of(input)
    local ho, back = host_fresh(out)
    C.reduce_scatter(ho, hi, code)
    if op == "AVG" then ho:div_(group.world_size) end
    if back then out:copy_(ho) end
  end
  return o.async_op and done_work() or nil
end

-- reduce_scatter(out, input_list, {op}): input_list[r + 1] is the block for rank r
function M.reduce_scatter(out, list, o)
  local fn = "reduce_scatter"
  check_tensor(fn, 1, out)
  if type(list) ~= "table" or torch.is_tensor(list) then args.type_error(fn, 2, "list of tensors", list) end
  if #list ~= group.world_size then
    raise("reduce_scatter: input_list has %d tensors; expected one per rank (%d)", #list, group.world_size)
  end
  for i, x in ipairs(list) do
    if not torch.is_tensor(x) or x:numel() ~= out:numel() or x.dtype ~= out.dtype then
      raise("reduce_scatter: input_list[%d] must be a %s tensor of %d elements like the output, got %s", i,
        out.dtype, out:numel(), torch.is_tensor(x) and (x.dtype .. " with " .. x:numel() .. " elements")
          or typename(x))
    end
  end
  local flat = {}
  for i, x in ipairs(list) do flat[i] = x:reshape(-1) end
  return M.reduce_scatter_tensor(out, torch.cat(flat):to(out.device), o)
end

function M.barrier(o)
  need_group("barrier")
  opts_of("barrier", o, {group = true, async_op = true, device_ids = true})
  check_same("barrier", nil)
  C.barrier()
end

-- send(t, dst, {tag = 0}) / recv(t, src, {tag = 0}): point to point; recv
-- fills t and returns the sender's rank
local function p2p(fn, t, peer, o, pos)
  check_tensor(fn, 1, t)
  if args.is_plain_table(peer) then peer, o = peer[fn == "send" and "dst" or "src"], peer end
  o = opts_of(fn, o, {tag = true, group = true, dst = true, src = true})
  if math.type(peer) ~= "integer" or peer < 0 or peer >= group.world_size or peer == group.rank then
    raise("%s: %s must be another rank in [0, %d), got %s (this is rank %d)", fn, pos, group.world_size,
      args.show(peer), group.rank)
  end
  local tag = o.tag or 0
  if math.type(tag) ~= "integer" or tag < 0 then raise("%s: tag must be a non-negative integer", fn) end
  return peer, tag
end

function M.send(t, dst, o)
  local peer, tag = p2p("send", t, dst, o, "dst")
  if group.nccl then raise("send: point-to-point over \"nccl\" is not supported yet; use the \"mpi\" backend") end
  C.send((host_of(t)), peer, tag)
end

function M.recv(t, src, o)
  local peer, tag = p2p("recv", t, src, o, "src")
  if group.nccl then raise("recv: point-to-point over \"nccl\" is not supported yet; use the \"mpi\" backend") end
  local h, back = host_of(t, false)
  C.recv(h, peer, tag)
  if back then t:copy_(h) end
  return peer
end

-- for DistributedDataParallel (lua/tensh/nn/distributed.lua): a non-blocking SUM of
-- a contiguous host buffer every rank builds the same way (no signature check)
function M._iall_reduce_sum(h) return C.iall_reduce(h, op_codes.SUM) end
-- the same on a CUDA buffer under "nccl": queued on the device's stream, so
-- nothing to wait for (later kernels on that stream see the sum)
function M._nccl_sum(t)
  local g = need_group("_nccl_sum")
  if not g.nccl then raise("_nccl_sum: the process group's backend is %s, not \"nccl\"", tostring(g.backend)) end
  if not torch.is_tensor(t) then args.type_error("_nccl_sum", 1, "tensor", t) end
  torch._nccl.all_reduce(g.nccl, t, op_codes.SUM)
end
function M._uses_nccl() return group ~= nil and group.nccl ~= nil end
M._test, M._wait = C.test, C.wait

torch.distributed = M
return M
