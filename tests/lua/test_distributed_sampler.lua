-- data.DistributedSampler (lua/tensh/distributed_sampler.lua): each rank's
-- share of an epoch, checked against PyTorch's rule written out here in
-- plain Lua (pad the epoch's order by repeating its head up to a multiple of
-- num_replicas, or cut it down with drop_last; rank r takes every
-- num_replicas-th position from r).
local T = require "harness"
local test, eq, ok, raises = T.test, T.eq, T.ok, T.raises

local function dataset(n) return data.TensorDataset(torch.arange(n, {device = "cpu"})) end

local function indices(s) return s:indices():tolist() end

-- PyTorch's split of `order` (a Lua list) for rank r
local function reference(order, replicas, r, drop_last)
  local n = #order
  local per = (drop_last and n % replicas ~= 0) and math.ceil((n - replicas) / replicas) or math.ceil(n / replicas)
  local total, padded = per * replicas, {}
  if drop_last then
    for i = 1, total do padded[i] = order[i] end
  else
    for i = 1, total do padded[i] = order[(i - 1) % n + 1] end
  end
  local out = {}
  for i = r + 1, total, replicas do out[#out + 1] = padded[i] end
  return out
end

local function range(n)
  local t = {}
  for i = 1, n do t[i] = i - 1 end
  return t
end

test("without shuffle: PyTorch's split, padded by repeating the head", function()
  for _, c in ipairs({{10, 3}, {10, 2}, {7, 4}, {2, 5}, {1, 1}, {12, 4}}) do
    local n, w = c[1], c[2]
    for r = 0, w - 1 do
      local s = data.DistributedSampler(dataset(n), {num_replicas = w, rank = r, shuffle = false})
      local want = reference(range(n), w, r, false)
      eq(T.fmt(indices(s)), T.fmt(want), ("n=%d replicas=%d rank=%d"):format(n, w, r))
      eq(#s, math.ceil(n / w), "len")
    end
  end
  -- 2 samples over 5 ranks: the order repeats more than once
  eq(T.fmt(indices(data.DistributedSampler(dataset(2), {num_replicas = 5, rank = 4, shuffle = false}))), "{0}", "rank 4 of 5")
end)

test("shuffled: every rank together covers the dataset exactly once, plus the padding", function()
  for _, c in ipairs({{10, 3}, {100, 4}, {9, 2}}) do
    local n, w = c[1], c[2]
    local count, all = {}, 0
    for r = 0, w - 1 do
      local s = data.DistributedSampler(dataset(n), {num_replicas = w, rank = r, seed = 5})
      s:set_epoch(3)
      for _, i in ipairs(indices(s)) do
        count[i] = (count[i] or 0) + 1
        all = all + 1
      end
    end
    local per = math.ceil(n / w)
    eq(all, per * w, "total samples across ranks")
    local twice = 0
    for i = 0, n - 1 do
      ok(count[i] and count[i] >= 1, ("sample %d missing (n=%d, replicas=%d)"):format(i, n, w))
      if count[i] == 2 then twice = twice + 1 end
    end
    eq(twice, per * w - n, "padding repeats exactly the missing count")
  end
end)

test("the shuffled order is the same permutation on every rank, PyTorch's split of it", function()
  local n, w = 11, 3
  local ranks = {}
  for r = 0, w - 1 do
    local s = data.DistributedSampler(dataset(n), {num_replicas = w, rank = r, seed = 9})
    s:set_epoch(2)
    ranks[r] = indices(s)
  end
  -- one order of 0..n-1 whose split gives every rank's share: rebuild it from the ranks
  local order = {}
  for r = 0, w - 1 do
    for k, i in ipairs(ranks[r]) do order[(k - 1) * w + r + 1] = i end
  end
  local seen = {}
  for p = 1, n do
    ok(not seen[order[p]], "position " .. p .. " repeats a sample before the padding")
    seen[order[p]] = true
  end
  for p = n + 1, #order do eq(order[p], order[p - n], "padding position " .. p .. " repeats the head") end
  ok(T.fmt(range(n)) ~= T.fmt({table.unpack(order, 1, n)}), "shuffled")
end)

test("drop_last: the tail is dropped, nothing repeats", function()
  for _, c in ipairs({{10, 3}, {10, 4}, {3, 5}, {8, 4}}) do
    local n, w = c[1], c[2]
    local seen, all = {}, 0
    for r = 0, w - 1 do
      local s = data.DistributedSampler(dataset(n), {num_replicas = w, rank = r, drop_last = true, shuffle = false})
      eq(T.fmt(indices(s)), T.fmt(reference(range(n), w, r, true)), ("n=%d replicas=%d rank=%d"):format(n, w, r))
      eq(#s, n // w, "len")
      for _, i in ipairs(indices(data.DistributedSampler(dataset(n), {num_replicas = w, rank = r, drop_last = true}))) do
        ok(not seen[i], "sample " .. i .. " given twice")
        seen[i] = true
        all = all + 1
      end
    end
    eq(all, (n // w) * w, "shuffled, drop_last: samples across ranks")
  end
end)

test("epochs: set_epoch changes the order, the same epoch and seed repeat it", function()
  local ds = dataset(50)
  local a = data.DistributedSampler(ds, {num_replicas = 2, rank = 1})
  local b = data.DistributedSampler(ds, {num_replicas = 2, rank = 1})
  local e0 = indices(a)
  eq(T.fmt(indices(a)), T.fmt(e0), "reading twice without set_epoch gives the same order")
  eq(T.fmt(indices(b)), T.fmt(e0), "another sampler, same seed and epoch")
  a:set_epoch(1)
  local e1 = indices(a)
  ok(T.fmt(e1) ~= T.fmt(e0), "epoch 1 differs from epoch 0")
  b:set_epoch(1)
  eq(T.fmt(indices(b)), T.fmt(e1), "same epoch, same order")
  local c = data.DistributedSampler(ds, {num_replicas = 2, rank = 1, seed = 1})
  ok(T.fmt(indices(c)) ~= T.fmt(e0), "another seed, another order")
  eq(a.epoch, 1, "epoch attribute")
end)

test("with DataLoader: each rank's batches are its share", function()
  local ds = dataset(10)
  local got = {}
  for r = 0, 1 do
    local s = data.DistributedSampler(ds, {num_replicas = 2, rank = r})
    s:set_epoch(4)
    local loader = data.DataLoader(ds, {batch_size = 2, sampler = s})
    eq(#loader, 3, "batches of rank " .. r)
    local rows = {}
    for x in loader do
      for _, v in ipairs(x:tolist()) do rows[#rows + 1] = v end
    end
    eq(T.fmt(rows), T.fmt(indices(s)), "the loader follows the sampler, rank " .. r)
    for _, v in ipairs(rows) do got[v] = true end
  end
  for i = 0, 9 do ok(got[i], "sample " .. i .. " reached a rank") end
end)

test("bad arguments: clear errors", function()
  local ds = dataset(4)
  raises(function() data.DistributedSampler(ds, {num_replicas = 2, rank = 2}) end,
    "DistributedSampler: Invalid rank 2, rank should be in the interval [0, 1]")
  raises(function() data.DistributedSampler(ds, {num_replicas = 2, rank = -1}) end, "Invalid rank -1")
  raises(function() data.DistributedSampler(ds, {num_replicas = 0, rank = 0}) end,
    "DistributedSampler: num_replicas must be at least 1, got 0")
  raises(function() data.DistributedSampler(ds, {num_replicas = 2.5, rank = 0}) end,
    "DistributedSampler: num_replicas must be an integer, got float")
  raises(function() data.DistributedSampler(ds, {num_replicas = 2, rank = 0, shuffle = "yes"}) end,
    "DistributedSampler: shuffle must be a boolean, got string")
  raises(function() data.DistributedSampler(ds, {num_replicas = 2, rank = 0, sed = 1}) end,
    "DistributedSampler: unknown option 'sed'")
  raises(function() data.DistributedSampler(42, {num_replicas = 2, rank = 0}) end,
    "DistributedSampler: expected a dataset with a length")
  raises(function() data.DistributedSampler(ds, {num_replicas = 2, rank = 0}):set_epoch("1") end,
    "DistributedSampler: set_epoch: epoch must be an integer, got string")
  local d = rawget(torch, "distributed") or rawget(_G, "dist")
  if d == nil or not d.is_initialized() then
    raises(function() data.DistributedSampler(ds) end,
      "DistributedSampler: num_replicas not given and the default process group is not initialized (call dist.init_process_group first)")
    raises(function() data.DistributedSampler(ds, {num_replicas = 2}) end,
      "DistributedSampler: rank not given and the default process group is not initialized")
  end
end)

test("the process group fills in num_replicas and rank", function()
  -- a stand-in group: the sampler asks torch.distributed (looked up when needed)
  local saved = rawget(torch, "distributed")
  rawset(torch, "distributed", {is_initialized = function() return true end, get_world_size = function() return 3 end,
    get_rank = function() return 2 end})
  local ok_, s = pcall(data.DistributedSampler, dataset(7), {shuffle = false})
  rawset(torch, "distributed", saved)
  ok(ok_, tostring(s))
  eq(s.num_replicas .. " " .. s.rank, "3 2", "from the group")
  eq(T.fmt(indices(s)), T.fmt(reference(range(7), 3, 2, false)), "its share")
end)

T.run()
