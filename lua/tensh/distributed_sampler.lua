-- data.DistributedSampler: PyTorch's torch.utils.data.distributed.DistributedSampler.
-- Each of num_replicas processes reads its own share of the dataset: the
-- epoch's order (a permutation keyed by (seed, epoch), the same on every
-- rank, or 0..n-1 without shuffle) is padded by repeating its head until it
-- divides evenly (or, with drop_last, cut to the largest multiple), and rank
-- r takes positions r, r + num_replicas, ... of it. Call set_epoch(e) before
-- each epoch for a new order. When num_replicas or rank is not given, the
-- default process group says (torch.distributed, looked up when needed).
local A = require "tensh.args"
local C = torch._data

-- the distributed package's table once it exists, nil before
local function dist_table()
  local t = rawget(torch, "distributed")
  if t == nil then t = rawget(_G, "dist") end
  return type(t) == "table" and t or nil
end

local function from_group(what, getter)
  local d = dist_table()
  local ok, initialized = false, false
  if d and type(d.is_initialized) == "function" then ok, initialized = pcall(d.is_initialized) end
  if not (ok and initialized) then
    A.raise("DistributedSampler: %s not given and the default process group is not initialized "
      .. "(call dist.init_process_group first)", what)
  end
  return d[getter]()
end

local function check_int(what, v)
  if math.type(v) ~= "integer" then
    A.raise("DistributedSampler: %s must be an integer, got %s", what, math.type(v) or A.typename(v))
  end
  return v
end

local function check_bool(what, v, default)
  if v == nil then return default end
  if type(v) ~= "boolean" then A.raise("DistributedSampler: %s must be a boolean, got %s", what, A.typename(v)) end
  return v
end

local KNOWN = {num_replicas = true, rank = true, shuffle = true, seed = true, drop_last = true}

-- make(class, length_of): the class, built with data.lua's class() and length rule
return function(class, length_of)
  local DistributedSampler = class("DistributedSampler")

  -- DistributedSampler(dataset, {num_replicas =, rank =, shuffle = true, seed = 0, drop_last = false})
  setmetatable(DistributedSampler, {__call = function(_, ds, opts)
    if opts ~= nil and (type(opts) ~= "table" or getmetatable(opts) ~= nil) then
      A.raise("DistributedSampler: expected an options table after the dataset, got %s", A.typename(opts))
    end
    opts = A.check_opts("DistributedSampler", opts, KNOWN)
    local n = length_of(ds)
    if math.type(n) ~= "integer" then
      A.raise("DistributedSampler: expected a dataset with a length (a len method or __len), got %s", A.typename(ds))
    end
    local replicas = opts.num_replicas
    if replicas == nil then replicas = from_group("num_replicas", "get_world_size") end
    replicas = check_int("num_replicas", replicas)
    if replicas < 1 then A.raise("DistributedSampler: num_replicas must be at least 1, got %d", replicas) end
    local rank = opts.rank
    if rank == nil then rank = from_group("rank", "get_rank") end
    rank = check_int("rank", rank)
    if rank < 0 or rank >= replicas then
      A.raise("DistributedSampler: Invalid rank %d, rank should be in the interval [0, %d]", rank, replicas - 1)
    end
    local drop_last = check_bool("drop_last", opts.drop_last, false)
    local num_samples
    if drop_last and n % replicas ~= 0 then
      num_samples = (n - replicas + replicas - 1) // replicas -- ceil((n - replicas) / replicas)
      if num_samples < 0 then num_samples = 0 end
    else
      num_samples = (n + replicas - 1) // replicas
    end
    return setmetatable({
      dataset = ds, n = n, num_replicas = replicas, rank = rank, epoch = 0,
      shuffle = check_bool("shuffle", opts.shuffle, true), seed = check_int("seed", opts.seed or 0),
      drop_last = drop_last, num_samples = num_samples, total_size = num_samples * replicas,
    }, DistributedSampler)
  end})

  function DistributedSampler:len() return self.num_samples end

  -- set_epoch(e): the next epochs' order is the one keyed by (seed, e)
  function DistributedSampler:set_epoch(epoch)
    self.epoch = check_int("set_epoch: epoch", epoch)
  end

  -- this rank's indices for the current epoch, as an int64 CPU tensor
  function DistributedSampler:indices()
    local n, total = self.n, self.total_size
    local order
    if self.shuffle and n > 0 then order = C.randperm(n, C.mix(self.seed, self.epoch)):tolist()
    else
      order = {}
      for i = 1, n do order[i] = i - 1 end
    end
    local mine = {}
    if n > 0 then
      -- position p of the padded order is order[p % n]: padding repeats the head
      for p = self.rank, total - 1, self.num_replicas do mine[#mine + 1] = order[p % n + 1] end
    end
    return torch.tensor(mine, {dtype = "int64", device = "cpu"})
  end

  function DistributedSampler:iter()
    local list, i = self:indices():tolist(), 0
    return function() i = i + 1 return list[i] end
  end

  function DistributedSampler:__tostring()
    require("tensh.classes").check_meta(DistributedSampler, "__tostring", self)
    return ("DistributedSampler(%d of %d samples, rank %d of %d, shuffle=%s, seed=%d, drop_last=%s, epoch=%d)")
      :format(self.num_samples, self.n, self.rank, self.num_replicas, tostring(self.shuffle), self.seed,
        tostring(self.drop_last), self.epoch)
  end

  return DistributedSampler
end
