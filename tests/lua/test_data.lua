-- Datasets, samplers, collate, the DataLoader (with and without worker
-- threads), the IDX and CIFAR readers on small files written here, and the
-- batch transforms, all against references computed in plain Lua from the
-- input lists; every error path with its message.
local T = require "harness"
-- Datasets and the loader assemble batches on the host, as in PyTorch: CPU on every pass.
local test, close, eq, raises = T.cpu_test, T.close, T.eq, T.raises
local C = torch._data

-- ---- helpers ------------------------------------------------------------------------

local function rand_rows(n, m, ints) return T.rand_list({n, m}, ints and 0 or -2, ints and 9 or 2, ints) end
local function ints(n, lo, hi) local t = {} for i = 1, n do t[i] = math.random(lo, hi) end return t end
local function range(a, b) local t = {} for i = a, b do t[#t + 1] = i end return t end
local function list_eq(a, b, what) eq(table.concat(a, ","), table.concat(b, ","), what) end
local function sorted(t) local c = {table.unpack(t)} table.sort(c) return c end
local function shape(t) return t.shape:totable() end

-- Every batch of one epoch, as Lua lists per field.
local function epoch_lists(loader)
  local out = {}
  for a, b in loader:iter() do out[#out + 1] = {a:tolist(), b and b:tolist()} end
  return out
end
local function same_batches(x, y, what)
  eq(#x, #y, what .. ": batches")
  for k = 1, #x do
    for f = 1, 2 do
      if x[k][f] ~= nil then list_eq(T.flat(x[k][f]), T.flat(y[k][f]), ("%s: batch %d field %d"):format(what, k - 1, f - 1)) end
    end
  end
end

local tmp_root = os.tmpname()
os.remove(tmp_root)
assert(os.execute("mkdir -p '" .. tmp_root .. "'"))
local function tmpdir(name)
  local d = tmp_root .. "/" .. name
  assert(os.execute("mkdir -p '" .. d .. "'"))
  return d
end
local function write(path, bytes)
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
end

-- IDX bytes: magic 0x000008nn, big-endian dims, then the bytes
local function idx_bytes(dims, values)
  local parts = {string.pack(">BBBB", 0, 0, 8, #dims)}
  for _, d in ipairs(dims) do parts[#parts + 1] = string.pack(">I4", d) end
  for _, v in ipairs(values) do parts[#parts + 1] = string.char(v) end
  return table.concat(parts)
end

-- A small MNIST-like split in dir: n images (h, w) and labels; returns the lists.
local function write_mnist(dir, prefix, n, h, w, gz)
  local px, lab = ints(n * h * w, 0, 255), ints(n, 0, 9)
  local img, lb = idx_bytes({n, h, w}, px), idx_bytes({n}, lab)
  local ip, lp = dir .. "/" .. prefix .. "-images-idx3-ubyte", dir .. "/" .. prefix .. "-labels-idx1-ubyte"
  if gz then C.gzip_write(ip .. ".gz", img) C.gzip_write(lp .. ".gz", lb) else write(ip, img) write(lp, lb) end
  return px, lab, img, lb
end

-- ---- datasets ----------------------------------------------------------------------------

test("TensorDataset: samples are rows of every tensor", function()
  local xs, ys = rand_rows(7, 3), ints(7, 0, 4)
  local ds = data.TensorDataset(torch.tensor(xs), torch.tensor(ys))
  eq(#ds, 7, "#ds")
  eq(ds:len(), 7, "ds:len()")
  for i = 0, 6 do
    local s = ds:get(i)
    eq(#s, 2, "fields")
    close(s[1], xs[i + 1], 1e-6, 0, "x row " .. i)
    eq(s[2]:item(), ys[i + 1], "y " .. i)
  end
  close(ds:get(-1)[1], xs[7], 1e-6, 0, "negative index counts from the end")
  -- non-contiguous input tensors (transposed, stepped slice)
  local base = torch.tensor(rand_rows(3, 7))
  local ds2 = data.TensorDataset(base:t(), torch.tensor(range(0, 13))[{{0, 14, 2}}])
  local b = base:tolist()
  for i = 0, 6 do
    close(ds2:get(i)[1], {b[1][i + 1], b[2][i + 1], b[3][i + 1]}, 1e-6, 0, "transposed row " .. i)
    eq(ds2:get(i)[2]:item(), 2 * i, "stepped slice " .. i)
  end
  for x, y in data.DataLoader(ds2, {batch_size = 7}):iter() do
    close(x, {{b[1][1], b[2][1], b[3][1]}, {b[1][2], b[2][2], b[3][2]}, {b[1][3], b[2][3], b[3][3]},
      {b[1][4], b[2][4], b[3][4]}, {b[1][5], b[2][5], b[3][5]}, {b[1][6], b[2][6], b[3][6]},
      {b[1][7], b[2][7], b[3][7]}}, 1e-6, 0, "gathered batch of a transposed tensor")
    list_eq(y:tolist(), {0, 2, 4, 6, 8, 10, 12}, "gathered labels of a stepped slice")
  end
end)

test("TensorDataset: errors", function()
  raises(function() data.TensorDataset(torch.zeros(3, 2), torch.zeros(4)) end,
    "TensorDataset: size mismatch between tensors: tensor 1 has 4 rows but tensor 0 has 3")
  raises(function() data.TensorDataset(torch.zeros(3), "y") end, "TensorDataset: argument 2 is a string, expected a tensor")
  raises(function() data.TensorDataset(torch.tensor(1)) end, "TensorDataset: tensor 0 is 0-dim")
  raises(function() data.TensorDataset() end, "TensorDataset: expected at least one tensor")
  local ds = data.TensorDataset(torch.zeros(3))
  raises(function() ds:get(3) end, "TensorDataset: index 3 out of range for a dataset of 3 samples")
  raises(function() ds:get(-4) end, "index -4 out of range")
  raises(function() ds:get(1.5) end, "TensorDataset: index must be an integer, got float")
  raises(function() ds:get("a") end, "index must be an integer, got string")
end)

test("Subset, nested Subset and ConcatDataset contents", function()
  local xs = rand_rows(10, 2)
  local ds = data.TensorDataset(torch.tensor(xs), torch.tensor(range(0, 9)))
  local sub = data.Subset(ds, {7, 2, 9, 0})
  eq(#sub, 4, "#subset")
  for k, i in ipairs({7, 2, 9, 0}) do close(sub:get(k - 1)[1], xs[i + 1], 1e-6, 0, "subset sample " .. k - 1) end
  local sub2 = data.Subset(sub, torch.tensor({3, 1}))
  eq(sub2:get(0)[2]:item(), 0, "subset of subset, sample 0")
  eq(sub2:get(1)[2]:item(), 2, "subset of subset, sample 1")
  -- through the loader (the C gather with composed index maps)
  for x, y in data.DataLoader(sub2, {batch_size = 2}):iter() do
    list_eq(y:tolist(), {0, 2}, "loader over a nested subset")
    close(x, {xs[1], xs[3]}, 1e-6, 0, "loader over a nested subset: x")
  end
  raises(function() data.Subset(ds, {1, 10}) end, "Subset: index 10 out of range for a dataset of 10 samples")
  raises(function() data.Subset(ds, {0.5}) end, "Subset: index 0 is a float, expected an integer")
  raises(function() data.Subset({}, {0}) end, "Subset: expected a dataset")
  raises(function() sub:get(4) end, "Subset: index 4 out of range for a dataset of 4 samples")

  local lua_ds = setmetatable({}, {__len = function() return 3 end, __index = {get = function(_, i) return {100 + i} end}})
  local cat = data.ConcatDataset({sub, lua_ds, sub2})
  eq(#cat, 9, "#concat")
  local want = {7, 2, 9, 0, 100, 101, 102, 0, 2}
  for i = 0, 8 do
    local s = cat:get(i)
    eq(torch.is_tensor(s[#s]) and s[#s]:item() or s[1], want[i + 1], "concat sample " .. i)
  end
  eq(cat:get(-1)[2]:item(), 2, "concat negative index")
  raises(function() cat:get(9) end, "ConcatDataset: index 9 out of range for a dataset of 9 samples")
  raises(function() data.ConcatDataset({}) end, "ConcatDataset: expected a non-empty list of datasets")
  raises(function() data.ConcatDataset({sub, 5}) end, "ConcatDataset: expected a dataset")
end)

test("random_split: sizes, a partition, deterministic for a seed, global generator untouched", function()
  local ds = data.TensorDataset(torch.arange(11))
  local a, b = table.unpack(data.random_split(ds, {0.5, 0.5}, {seed = 42}))
  eq(#a, 6, "first split gets the remainder")
  eq(#b, 5, "second split")
  local all = {}
  for _, s in ipairs({a, b}) do for i = 0, #s - 1 do all[#all + 1] = s:get(i)[1]:item() end end
  list_eq(sorted(all), range(0, 10), "every index exactly once")
  local a2 = data.random_split(ds, {0.5, 0.5}, {seed = 42})[1]
  list_eq(a2.indices, a.indices, "same seed, same split")
  local a3 = data.random_split(ds, {0.5, 0.5}, {seed = 7})[1]
  T.ok(table.concat(a3.indices, ",") ~= table.concat(a.indices, ","), "another seed gives another split")
  local parts = data.random_split(ds, {3, 0, 8}, {seed = 1})
  eq(#parts[1] .. "," .. #parts[2] .. "," .. #parts[3], "3,0,8", "integer lengths")
  -- fractions floor, remainder round-robin: 10 * {0.33, 0.33, 0.34} -> 3, 3, 3 + 1 to the first
  local f = data.random_split(data.TensorDataset(torch.arange(10)), {0.33, 0.33, 0.34}, {seed = 1})
  eq(#f[1] .. "," .. #f[2] .. "," .. #f[3], "4,3,3", "fraction lengths")

  torch.manual_seed(5)
  local r1 = torch.rand(4):tolist()
  torch.manual_seed(5)
  data.random_split(ds, {0.5, 0.5}, {seed = 3})
  local r2 = torch.rand(4):tolist()
  list_eq(r2, r1, "a seeded split leaves the global generator alone")
  torch.manual_seed(9)
  local u1 = data.random_split(ds, {0.5, 0.5})[1].indices
  torch.manual_seed(9)
  local u2 = data.random_split(ds, {0.5, 0.5})[1].indices
  list_eq(u2, u1, "unseeded split replays after torch.manual_seed")

  raises(function() data.random_split(ds, {5, 5}) end,
    "random_split: sum of input lengths (10) does not equal the length of the input dataset (11)")
  raises(function() data.random_split(ds, {2.5, 8.5}) end, "random_split: lengths must be integers, or fractions that sum to 1")
  raises(function() data.random_split(ds, {-1, 12}) end, "random_split: lengths must be non-negative numbers")
  raises(function() data.random_split(ds, {0.5, 0.5}, {seed = 1.5}) end, "random_split: seed must be an integer")
end)

-- ---- DataLoader ------------------------------------------------------------------------------

test("DataLoader: order without shuffle, partial last batch, drop_last, #loader", function()
  local xs, ys = rand_rows(10, 3), ints(10, 0, 9)
  local ds = data.TensorDataset(torch.tensor(xs), torch.tensor(ys))
  for _, c in ipairs({{3, false, {3, 3, 3, 1}}, {3, true, {3, 3, 3}}, {5, false, {5, 5}}, {5, true, {5, 5}},
    {4, false, {4, 4, 2}}, {10, true, {10}}, {11, false, {10}}, {11, true, {}}, {1, false, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1}}}) do
    local bs, dl, sizes = c[1], c[2], c[3]
    local loader = data.DataLoader(ds, {batch_size = bs, drop_last = dl})
    eq(#loader, #sizes, ("#loader for batch_size %d, drop_last %s"):format(bs, dl))
    local k, pos = 0, 0
    for x, y in loader:iter() do
      k = k + 1
      list_eq(shape(x), {sizes[k], 3}, "x shape")
      eq(y.dtype, torch.int64, "labels keep their dtype")
      local wx, wy = {}, {}
      for j = 1, sizes[k] do wx[j], wy[j] = xs[pos + j], ys[pos + j] end
      close(x, wx, 1e-6, 0, "batch x")
      list_eq(y:tolist(), wy, "batch y")
      pos = pos + sizes[k]
    end
    eq(k, #sizes, "batches yielded")
  end
  local empty = data.DataLoader(data.TensorDataset(torch.zeros(0, 2)), {batch_size = 4})
  eq(#empty, 0, "#loader of an empty dataset")
  for _ in empty:iter() do error("an empty dataset has no batches") end
  -- a single tensor: batches are that tensor
  for x, rest in data.DataLoader(data.TensorDataset(torch.tensor(ys)), {batch_size = 10}):iter() do
    list_eq(x:tolist(), ys, "one-tensor dataset")
    eq(rest, nil, "nothing after the one field")
  end
  -- default batch_size is 1
  eq(#data.DataLoader(ds), 10, "default batch_size 1")
end)

test("DataLoader: shuffle is a permutation per epoch, seeded, epoch-dependent", function()
  local n = 37
  local ds = data.TensorDataset(torch.arange(n))
  local function epoch(loader)
    local order = {}
    for x in loader:iter() do for _, v in ipairs(x:tolist()) do order[#order + 1] = v end end
    return order
  end
  local l1 = data.DataLoader(ds, {batch_size = 8, shuffle = true, seed = 11})
  local l2 = data.DataLoader(ds, {batch_size = 8, shuffle = true, seed = 11})
  local e1, e2 = epoch(l1), epoch(l1)
  list_eq(sorted(e1), range(0, n - 1), "epoch 0: every index exactly once")
  list_eq(sorted(e2), range(0, n - 1), "epoch 1: every index exactly once")
  T.ok(table.concat(e1, ",") ~= table.concat(e2, ","), "epochs are reshuffled")
  T.ok(table.concat(e1, ",") ~= table.concat(range(0, n - 1), ","), "shuffled")
  list_eq(epoch(l2), e1, "same seed, same epoch 0")
  list_eq(epoch(l2), e2, "same seed, same epoch 1")
  local l3 = data.DataLoader(ds, {batch_size = 8, shuffle = true, seed = 12})
  T.ok(table.concat(epoch(l3), ",") ~= table.concat(e1, ","), "another seed, another order")
  -- without the seed option: replayed by torch.manual_seed
  torch.manual_seed(3)
  local g = data.DataLoader(ds, {batch_size = 8, shuffle = true})
  local g1, g2 = epoch(g), epoch(g)
  torch.manual_seed(3)
  local h = data.DataLoader(ds, {batch_size = 8, shuffle = true})
  list_eq(epoch(h), g1, "manual_seed replays epoch 0")
  list_eq(epoch(h), g2, "manual_seed replays epoch 1")
  list_eq(sorted(g1), range(0, n - 1), "unseeded shuffle is a permutation")
end)

test("DataLoader: default collate of tensors, numbers, booleans, strings and tables", function()
  local vals = rand_rows(5, 2)
  local ds = {len = function() return 5 end,
    get = function(_, i)
      return {torch.tensor(vals[i + 1]), i, i * 0.5, i % 2 == 0, "s" .. i, {a = i, b = {torch.tensor(i), -i}}}
    end}
  local loader = data.DataLoader(ds, {batch_size = 3})
  eq(#loader, 2, "#loader of a Lua dataset")
  local k = 0
  for x, i, f, b, s, d in loader:iter() do
    k = k + 1
    local lo = (k - 1) * 3
    local n = k == 1 and 3 or 2
    local wx, wi, wf, wb, ws = {}, {}, {}, {}, {}
    for j = 1, n do
      local id = lo + j - 1
      wx[j], wi[j], wf[j], wb[j], ws[j] = vals[id + 1], id, id * 0.5, id % 2 == 0, "s" .. id
    end
    list_eq(shape(x), {n, 2}, "stacked tensors")
    close(x, wx, 1e-6, 0, "stacked values")
    eq(i.dtype, torch.int64, "integers collate to int64")
    list_eq(i:tolist(), wi, "integers")
    eq(f.dtype, torch.float64, "floats collate to float64")
    close(f, wf, 0, 0, "floats")
    eq(b.dtype, torch.bool, "booleans collate to bool")
    for j = 1, n do eq(b:tolist()[j], wb[j], "booleans") end
    list_eq(s, ws, "strings stay a list")
    list_eq(d.a:tolist(), wi, "dict field a")
    list_eq(d.b[1]:tolist(), wi, "nested list of 0-dim tensors stacks")
    local neg = {}
    for j = 1, n do neg[j] = -wi[j] end
    list_eq(d.b[2]:tolist(), neg, "nested list of numbers")
  end
  eq(k, 2, "batches")
  -- a tensor sample yields the stacked tensor
  local tds = {len = function() return 4 end, get = function(_, i) return torch.full({2}, i) end}
  for x in data.DataLoader(tds, {batch_size = 4}):iter() do list_eq(T.flat(x), {0, 0, 1, 1, 2, 2, 3, 3}, "tensor samples") end
  -- a dataset with only __len and get
  local mds = setmetatable({get = function(_, i) return i * 2 end}, {__len = function() return 3 end})
  for x in data.DataLoader(mds, {batch_size = 3}):iter() do list_eq(x:tolist(), {0, 2, 4}, "__len dataset") end
  -- a __len method (as in Python's class)
  local pds = {__len = function() return 2 end, get = function(_, i) return i end}
  eq(#data.DataLoader(pds, {batch_size = 1}), 2, "__len method")
end)

test("collate errors name the sample and what differs", function()
  local function loader(get, n) return data.DataLoader({len = function() return n or 4 end, get = get}, {batch_size = 4}) end
  local function first(l) for x in l:iter() do return x end end
  raises(function() first(loader(function(_, i) return i == 3 and torch.zeros(3, 28) or torch.zeros(1, 28, 28) end)) end,
    "collate: sample 3 has shape (3, 28) but sample 0 has (1, 28, 28)")
  raises(function() first(loader(function(_, i) return i == 2 and "x" or 1 end)) end,
    "collate: sample 2 is a string but sample 0 is a number")
  raises(function() first(loader(function(_, i) return i == 1 and {1} or {1, 2} end)) end,
    "collate: sample 1 has 1 fields but sample 0 has 2")
  raises(function() first(loader(function(_, i) return i == 3 and {b = 1} or {a = 1} end)) end,
    "collate: sample 3 has no field 'a'")
  raises(function() first(loader(function() return print end)) end,
    "collate: samples must be tensors, numbers, booleans, strings or tables of those, got a function")
  raises(function() first(loader(function() return nil end)) end, "DataLoader: dataset:get(0) returned nil")
  raises(function() data.default_collate({}) end, "collate: empty batch")
  -- a torch.Size is its list of dims (found by the fuzzer: Size index 1 out of range for rank 1)
  local sz = data.default_collate(torch.Size({4}))
  eq(sz.dtype, torch.int64, "a Size collates as integers")
  eq(sz:tolist()[1], 4, "its one dim")
end)

test("custom collate_fn gets the list of samples", function()
  local xs = rand_rows(6, 2)
  local ds = data.TensorDataset(torch.tensor(xs), torch.arange(6))
  local seen = {}
  local loader = data.DataLoader(ds, {batch_size = 4, collate_fn = function(samples)
    seen[#seen + 1] = #samples
    local s = 0
    for _, smp in ipairs(samples) do s = s + smp[2]:item() end
    return {s, #samples}
  end})
  local out = {}
  for s, n in loader:iter() do out[#out + 1] = s .. "/" .. n end
  list_eq(out, {"6/4", "9/2"}, "collate_fn results, unpacked")
  list_eq(seen, {4, 2}, "collate_fn batch sizes")
  local one = data.DataLoader(ds, {batch_size = 6, collate_fn = function(samples) return samples[6][1] end})
  for x in one:iter() do close(x, xs[6], 1e-6, 0, "a collate_fn returning a tensor") end
end)

test("sampler and batch_sampler", function()
  local ds = data.TensorDataset(torch.arange(10) * 10)
  local function values(loader)
    local out = {}
    for x in loader:iter() do out[#out + 1] = table.concat(x:tolist(), " ") end
    return out
  end
  list_eq(values(data.DataLoader(ds, {batch_size = 2, sampler = {9, 0, 4}})), {"90 0", "40"}, "list sampler")
  list_eq(values(data.DataLoader(ds, {batch_size = 3, sampler = torch.tensor({1, 1, 2})})), {"10 10 20"}, "tensor sampler")
  eq(#data.DataLoader(ds, {batch_size = 2, sampler = {9, 0, 4}}), 2, "#loader with a sampler")
  list_eq(values(data.DataLoader(ds, {batch_size = 4, sampler = data.SequentialSampler(ds)})), {"0 10 20 30", "40 50 60 70", "80 90"},
    "SequentialSampler")
  -- an object sampler with iter() and __len
  local odd = setmetatable({iter = function() local i = -1 return function() i = i + 2 if i < 10 then return i end end end},
    {__len = function() return 5 end})
  list_eq(values(data.DataLoader(ds, {batch_size = 5, sampler = odd})), {"10 30 50 70 90"}, "iter() sampler")
  local rs = data.RandomSampler(ds, {seed = 4})
  eq(#rs, 10, "#RandomSampler")
  local e = {}
  for i in rs:iter() do e[#e + 1] = i end
  list_eq(sorted(e), range(0, 9), "RandomSampler is a permutation")
  local rr = data.RandomSampler(ds, {replacement = true, num_samples = 25, seed = 4})
  local cnt = 0
  for i in rr:iter() do T.ok(i >= 0 and i < 10, "sample with replacement in range") cnt = cnt + 1 end
  eq(cnt, 25, "num_samples with replacement")
  local srs = data.SubsetRandomSampler({2, 4, 6}, {seed = 1})
  local got = {}
  for i in srs:iter() do got[#got + 1] = i end
  list_eq(sorted(got), {2, 4, 6}, "SubsetRandomSampler")
  -- batch_sampler: a list of lists, and BatchSampler over a sampler
  local bl = data.DataLoader(ds, {batch_sampler = {{3, 1}, {0}, {9, 8, 7}}})
  eq(#bl, 3, "#loader with a batch_sampler")
  list_eq(values(bl), {"30 10", "0", "90 80 70"}, "list batch_sampler")
  local bsm = data.BatchSampler(data.SequentialSampler(ds), 4, true)
  eq(#bsm, 2, "#BatchSampler")
  list_eq(values(data.DataLoader(ds, {batch_sampler = bsm})), {"0 10 20 30", "40 50 60 70"}, "BatchSampler")
  local lua_ds = {len = function() return 10 end, get = function(_, i) return i end}
  list_eq(values(data.DataLoader(lua_ds, {batch_sampler = {{5, 6}, {1}}})), {"5 6", "1"}, "batch_sampler on a Lua dataset")
  raises(function() data.DataLoader(ds, {batch_sampler = bsm, batch_size = 2}) end,
    "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last")
  raises(function() data.DataLoader(ds, {sampler = {1}, shuffle = true}) end, "sampler option is mutually exclusive with shuffle")
  raises(function() for _ in data.DataLoader(ds, {sampler = {10}}):iter() do end end,
    "DataLoader: index 10 out of range for a dataset of 10 samples")
  raises(function() for _ in data.DataLoader(ds, {sampler = {"a"}}):iter() do end end,
    "DataLoader: the sampler gave a at position 0, expected an integer index")
end)

test("DataLoader: option and dataset errors", function()
  local ds = data.TensorDataset(torch.zeros(4))
  raises(function() data.DataLoader(ds, {batch_size = 0}) end,
    "DataLoader: batch_size should be a positive integer value, but got batch_size=0")
  raises(function() data.DataLoader(ds, {batch_size = 2.5}) end, "batch_size should be a positive integer value")
  raises(function() data.DataLoader(ds, {batch_size = "8"}) end, "batch_size should be a positive integer value")
  raises(function() data.DataLoader({}, {}) end, "DataLoader: expected a dataset (an object with a get(i) method")
  raises(function() data.DataLoader(torch.zeros(3)) end, "got a tensor")
  raises(function() data.DataLoader({get = function() end}) end, "DataLoader: the dataset has no length")
  raises(function() data.DataLoader(ds, {num_workers = -1}) end, "num_workers option should be a non-negative integer")
  raises(function() data.DataLoader(ds, {batchsize = 4}) end, "DataLoader: unknown option 'batchsize'")
  raises(function() data.DataLoader(ds, "x") end, "DataLoader: options must be a table")
  raises(function() data.Subset(ds, 3) end, "Subset: indices must be a list of integers or an int64 tensor")
  raises(function() data.random_split(ds, "x") end, "random_split: lengths must be a non-empty list")
  raises(function() data.BatchSampler({1, 2}, 0) end, "BatchSampler: batch_size should be a positive integer value")
  raises(function() for _ in data.DataLoader(ds, {batch_sampler = {{0}, 5}}):iter() do end end,
    "DataLoader: batch_sampler gave a number, expected a list of indices")
  raises(function() data.DataLoader(ds, {worker_init_fn = print}) end,
    "DataLoader: option 'worker_init_fn' is not supported: workers are C threads that run no Lua")
  raises(function() data.DataLoader(ds, {seed = "x"}) end, "DataLoader: seed must be an integer")
  raises(function() data.DataLoader(ds, {prefetch_factor = 0}) end, "prefetch_factor option should be a positive integer")
  raises(function() data.DataLoader(ds, {collate_fn = 3}) end, "collate_fn must be a function")
end)

test("TensorDataset on a CUDA device: one index_select per field there", function()
  if not (cuda and cuda.is_available()) then T.skip("no CUDA device") end
  local xs = rand_rows(9, 2)
  local ds = data.TensorDataset(torch.tensor(xs):to("cuda"), torch.arange(9):to("cuda"))
  local got = {}
  for x, y in data.DataLoader(ds, {batch_size = 3, sampler = {8, 0, 3, 5, 1}}):iter() do
    T.ok(x.is_cuda and y.is_cuda, "batches stay on the device")
    for _, v in ipairs(y:cpu():tolist()) do got[#got + 1] = v end
    close(x:cpu(), (#got == 3) and {xs[9], xs[1], xs[4]} or {xs[6], xs[2]}, 1e-6, 0, "device batch")
  end
  list_eq(got, {8, 0, 3, 5, 1}, "device labels")
  raises(function() data.TensorDataset(torch.zeros(2, 1, 2, 2):to("cuda"), {transform = data.transforms.Normalize(0, 1)}) end,
    "TensorDataset: transforms run on CPU tensors")
end)

test("torch.utils.data is data", function() eq(torch.utils.data, data, "alias") end)

-- ---- workers ------------------------------------------------------------------------------------

local function cifar_like(n)
  local xs = T.rand_list({n, 3, 6, 5}, 0.1, 1)
  return xs, data.TensorDataset(torch.tensor(xs), torch.tensor(ints(n, 0, 9)), {transform = data.transforms.Compose({
    data.transforms.RandomCrop({5, 4}, {padding = 2}), data.transforms.RandomHorizontalFlip(),
    data.transforms.Normalize({0.5, 0.4, 0.3}, {0.2, 0.25, 0.3})})})
end

test("num_workers 0, 1 and 3 give identical batches (shuffle, random transforms)", function()
  local _, ds = cifar_like(45)
  local plain = data.TensorDataset(torch.tensor(rand_rows(45, 4)), torch.arange(45))
  for _, d in ipairs({ds, plain, data.Subset(ds, range(5, 40))}) do
    local ref
    for _, nw in ipairs({0, 1, 3}) do
      for _, pf in ipairs(nw == 3 and {1, 2} or {2}) do
        local loader = data.DataLoader(d, {batch_size = 4, shuffle = true, seed = 5, num_workers = nw, prefetch_factor = pf})
        local two = {epoch_lists(loader), epoch_lists(loader)}
        if not ref then ref = two
        else
          same_batches(two[1], ref[1], ("num_workers %d epoch 0"):format(nw))
          same_batches(two[2], ref[2], ("num_workers %d epoch 1"):format(nw))
        end
      end
    end
  end
  -- a Lua dataset with workers: made on the main thread, same batches
  local lua_ds = {len = function() return 9 end, get = function(_, i) return {torch.full({2}, i), i} end}
  local a = epoch_lists(data.DataLoader(lua_ds, {batch_size = 4, shuffle = true, seed = 2}))
  local b = epoch_lists(data.DataLoader(lua_ds, {batch_size = 4, shuffle = true, seed = 2, num_workers = 2}))
  same_batches(b, a, "Lua dataset with num_workers")
end)

test("early break closes the epoch's workers; a new epoch works; collected loaders shut down", function()
  local xs = rand_rows(64, 3)
  local ds = data.TensorDataset(torch.tensor(xs), torch.arange(64))
  local loader = data.DataLoader(ds, {batch_size = 4, num_workers = 3, pin_memory = true})
  local f, s, c, ep = loader:iter()
  eq(ep:workers(), 3, "workers running")
  local k = 0
  for x in f, s, c, ep do
    k = k + 1
    if k == 2 then break end
  end
  eq(ep:workers(), 0, "break joined the workers")
  eq(ep:next(), nil, "a closed epoch gives nothing")
  local seen = {}
  for x, y in loader:iter() do for _, v in ipairs(y:tolist()) do seen[#seen + 1] = v end end
  list_eq(seen, range(0, 63), "the next epoch runs in full")
  -- a loop that ends normally closes too
  local f2, s2, c2, ep2 = loader:iter()
  for _ in f2, s2, c2, ep2 do end
  eq(ep2:workers(), 0, "the end of an epoch joins the workers")
  -- an error inside the loop closes it as well
  local f3, s3, c3, ep3 = loader:iter()
  pcall(function() for _ in f3, s3, c3, ep3 do error("boom") end end)
  eq(ep3:workers(), 0, "an error in the loop body joins the workers")
  -- iterators and loaders dropped mid-epoch: __gc stops and joins (ASan checks the frees)
  for _ = 1, 5 do
    local l = data.DataLoader(ds, {batch_size = 2, shuffle = true, num_workers = 2, prefetch_factor = 3})
    local g = l:iter()
    g()
  end
  collectgarbage()
  collectgarbage()
end)

-- ---- readers --------------------------------------------------------------------------------------

test("MNIST: IDX files plain and gzip, train and test splits, raw", function()
  for _, gz in ipairs({false, true}) do
    local dir = tmpdir(gz and "mnist_gz" or "mnist")
    local px, lab = write_mnist(dir, "train", 6, 5, 4, gz)
    local tpx, tlab = write_mnist(dir, "t10k", 3, 5, 4, gz)
    local ds = data.MNIST(dir)
    eq(#ds, 6, "train samples")
    list_eq(shape(ds.data), {6, 5, 4}, ".data shape")
    eq(ds.data.dtype, torch.uint8, ".data dtype")
    eq(ds.targets.dtype, torch.int64, ".targets dtype")
    list_eq(ds.targets:tolist(), lab, "labels")
    for i = 0, 5 do
      local s = ds:get(i)
      list_eq(shape(s[1]), {1, 5, 4}, "sample shape (1, H, W)")
      eq(s[1].dtype, torch.float32, "sample dtype")
      local want = {}
      for e = 1, 20 do want[e] = px[i * 20 + e] / 255 end
      close(s[1], want, 1e-6, 0, "pixels / 255, sample " .. i)
      eq(math.type(s[2]), "integer", "label is a Lua integer")
      eq(s[2], lab[i + 1], "label " .. i)
    end
    for x, y in data.DataLoader(ds, {batch_size = 6}):iter() do
      list_eq(shape(x), {6, 1, 5, 4}, "batch shape")
      local want = {}
      for e = 1, 120 do want[e] = px[e] / 255 end
      close(x, want, 1e-6, 0, "batch pixels")
      list_eq(y:tolist(), lab, "batch labels")
    end
    local te = data.MNIST(dir, {train = false})
    eq(#te, 3, "test split")
    list_eq(te.targets:tolist(), tlab, "test labels")
    local raw = data.MNIST(dir, {train = false, raw = true})
    list_eq(shape(raw:get(2)[1]), {5, 4}, "raw sample shape")
    eq(raw:get(2)[1].dtype, torch.uint8, "raw sample dtype")
    list_eq(T.flat(raw:get(2)[1]), {table.unpack(tpx, 41, 60)}, "raw pixels")
    -- torchvision's layout root/MNIST/raw also works
    local tv = tmpdir((gz and "tv_gz" or "tv") .. "/MNIST/raw")
    write_mnist(tv, "train", 2, 3, 3, gz)
    eq(#data.MNIST(tmp_root .. "/" .. (gz and "tv_gz" or "tv")), 2, "root/MNIST/raw")
  end
end)

test("MNIST: corrupt, truncated and missing files give errors naming them", function()
  local dir = tmpdir("bad")
  local _, _, img, lb = write_mnist(dir, "train", 4, 3, 3, false)
  local ip, lp = dir .. "/train-images-idx3-ubyte", dir .. "/train-labels-idx1-ubyte"
  write(ip, img:sub(1, #img - 5))
  raises(function() data.MNIST(dir) end, ip .. ": truncated: the header says (4, 3, 3) (36 bytes of data) but the file holds 31")
  write(ip, img .. "xx")
  raises(function() data.MNIST(dir) end, ip .. ": corrupt file: more bytes than its IDX header says")
  write(ip, "\0\0\8\1" .. img:sub(5))
  raises(function() data.MNIST(dir) end, ip .. ": not an IDX file of bytes with 3 dims (magic 0x00000801, expected 0x00000803)")
  write(ip, "\0\0\13\3" .. img:sub(5))
  raises(function() data.MNIST(dir) end, "magic 0x00000d03")
  write(ip, img:sub(1, 2))
  raises(function() data.MNIST(dir) end, ip .. ": truncated: 2 bytes, shorter than an IDX header")
  write(ip, img:sub(1, 10))
  raises(function() data.MNIST(dir) end, ip .. ": truncated inside the IDX header")
  write(ip, img)
  write(lp, idx_bytes({3}, {1, 2, 3}))
  raises(function() data.MNIST(dir) end, "MNIST: " .. ip .. " holds 4 images but " .. lp .. " holds 3 labels")
  write(lp, lb)
  eq(#data.MNIST(dir), 4, "repaired files load")
  -- a gzip file cut short, and one with garbage inside
  os.remove(ip)
  C.gzip_write(ip .. ".gz", img)
  local f = assert(io.open(ip .. ".gz", "rb"))
  local gzb = f:read("a")
  f:close()
  write(ip .. ".gz", gzb:sub(1, #gzb - 12))
  raises(function() data.MNIST(dir) end, ip .. ".gz: truncated")
  local crc = #gzb - 7 -- the trailer's CRC-32: the data inflates but fails its check
  write(ip .. ".gz", gzb:sub(1, crc - 1) .. string.char((gzb:byte(crc) + 1) % 256) .. gzb:sub(crc + 1))
  raises(function() data.MNIST(dir) end, ip .. ".gz: corrupt file (incorrect data check)")
  -- missing: every path looked for, and where to get the files
  local err = raises(function() data.MNIST(tmp_root .. "/nowhere") end, "MNIST: dataset not found; looked for:")
  for _, p in ipairs({"/nowhere/train-images-idx3-ubyte", "/nowhere/train-images-idx3-ubyte.gz",
    "/nowhere/MNIST/raw/train-labels-idx1-ubyte.gz"}) do
    T.ok(err:find(tmp_root .. p, 1, true), "the error names " .. p)
  end
  T.ok(err:find("https://", 1, true), "the error says where to get MNIST")
  err = raises(function() data.FashionMNIST(tmp_root .. "/nowhere", {train = false}) end, "FashionMNIST: dataset not found")
  T.ok(err:find("t10k-labels-idx1-ubyte.gz", 1, true), "the test split's files are named")
  T.ok(err:find("apt-get install dataset-fashion-mnist", 1, true), "the error says how to install Fashion-MNIST")
  raises(function() data.MNIST(nil) end, "MNIST: root must be the folder holding the IDX files")
  raises(function() data.MNIST(dir, {raw = true, transform = data.transforms.RandomHorizontalFlip()}) end,
    "MNIST: transforms work on float images; drop raw = true")
end)

test("CIFAR10: binary records, splits, corrupt and missing files", function()
  local root = tmpdir("cifar")
  local dir = tmpdir("cifar/cifar-10-batches-bin")
  local labels, pixels, bytes = {4, 0, 9}, {}, {}
  for r = 1, 3 do
    pixels[r] = ints(3072, 0, 255)
    bytes[#bytes + 1] = string.char(labels[r])
    for _, v in ipairs(pixels[r]) do bytes[#bytes + 1] = string.char(v) end
  end
  write(dir .. "/test_batch.bin", table.concat(bytes))
  local ds = data.CIFAR10(root, {train = false})
  eq(#ds, 3, "records")
  list_eq(shape(ds.data), {3, 3, 32, 32}, ".data is (N, 3, 32, 32)")
  list_eq(ds.targets:tolist(), labels, "labels")
  for i = 0, 2 do
    local s = ds:get(i)
    list_eq(shape(s[1]), {3, 32, 32}, "sample shape")
    local want = {}
    for e = 1, 3072 do want[e] = pixels[i + 1][e] / 255 end
    close(s[1], want, 1e-6, 0, "CHW pixels / 255, record " .. i)
    eq(s[2], labels[i + 1], "label")
  end
  -- files directly in root, five training batches
  local flat = tmpdir("cifar_flat")
  for b = 1, 5 do write(flat .. "/data_batch_" .. b .. ".bin", table.concat(bytes)) end
  local tr = data.CIFAR10(flat)
  eq(#tr, 15, "five training files")
  list_eq({table.unpack(tr.targets:tolist(), 13, 15)}, labels, "the last file's labels come last")
  -- errors
  local err = raises(function() data.CIFAR10(root) end, "CIFAR10: dataset not found; looked for:")
  T.ok(err:find(root .. "/cifar-10-batches-bin/data_batch_1.bin", 1, true), "names data_batch_1.bin")
  T.ok(err:find(root .. "/data_batch_5.bin", 1, true), "names data_batch_5.bin in root")
  T.ok(err:find("cifar-10-binary.tar.gz", 1, true), "says where to get CIFAR-10")
  write(dir .. "/test_batch.bin", table.concat(bytes):sub(1, 5000))
  raises(function() data.CIFAR10(root, {train = false}) end,
    dir .. "/test_batch.bin: truncated or corrupt: 5000 bytes is not a whole number of 3073-byte records")
  write(dir .. "/test_batch.bin", "\12" .. table.concat(bytes):sub(2))
  raises(function() data.CIFAR10(root, {train = false}) end, dir .. "/test_batch.bin: corrupt: record 0 has label 12")
  write(dir .. "/test_batch.bin", "")
  raises(function() data.CIFAR10(root, {train = false}) end, "0 bytes is not a whole number")
  raises(function() data.CIFAR10() end, "CIFAR10: root must be the folder holding cifar-10-batches-bin")
end)

test("FashionMNIST from /usr/share/datasets (smoke)", function()
  local f = io.open("/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz", "rb")
  if not f then T.skip("dataset-fashion-mnist is not installed") end
  f:close()
  local tr, te = data.FashionMNIST(), data.FashionMNIST({train = false})
  eq(#tr, 60000, "train size")
  eq(#te, 10000, "test size")
  list_eq(shape(tr.data), {60000, 28, 28}, "train images")
  eq(#tr.classes, 10, "classes")
  for x, y in data.DataLoader(te, {batch_size = 100, shuffle = true, num_workers = 2}):iter() do
    list_eq(shape(x), {100, 1, 28, 28}, "a test batch")
    eq(y:size(0), 100, "labels")
    break
  end
end)

-- ---- transforms ---------------------------------------------------------------------------------------

-- plain-Lua image helpers over nested lists (C, H, W)
local function crop_ref(img, pad, top, left, h, w)
  local out = {}
  for c = 1, #img do
    out[c] = {}
    for y = 1, h do
      out[c][y] = {}
      for x = 1, w do
        local sy, sx = top + y - pad, left + x - pad
        out[c][y][x] = (img[c][sy] and img[c][sy][sx]) or 0
      end
    end
  end
  return out
end
local function hflip(img)
  local out = {}
  for c = 1, #img do
    out[c] = {}
    for y = 1, #img[c] do
      out[c][y] = {}
      local row = img[c][y]
      for x = 1, #row do out[c][y][x] = row[#row - x + 1] end
    end
  end
  return out
end
local function matches(got, want) -- exact up to float32 rounding
  local a, b = T.flat(got), T.flat(want)
  if #a ~= #b then return false end
  for i = 1, #a do if math.abs(a[i] - b[i]) > 1e-6 * math.max(1, math.abs(b[i])) then return false end end
  return true
end

test("Normalize per channel and for all channels, against Lua", function()
  local xs = T.rand_list({5, 3, 2, 4}, -1, 1)
  local mean, std = {0.1, -0.2, 0.3}, {0.5, 2, 0.25}
  local ds = data.TensorDataset(torch.tensor(xs), {transform = data.transforms.Normalize(mean, std)})
  for x in data.DataLoader(ds, {batch_size = 5}):iter() do
    local want = {}
    for n = 1, 5 do
      want[n] = {}
      for c = 1, 3 do want[n][c] = T.map(xs[n][c], function(v) return (v - mean[c]) / std[c] end) end
    end
    close(x, want, 1e-5, 1e-6, "normalized batch")
  end
  local one = data.TensorDataset(torch.tensor(xs), {transform = data.transforms.Normalize(0.5, 0.5)})
  close(one:get(2)[1], T.map(xs[3], function(v) return (v - 0.5) / 0.5 end), 1e-5, 1e-6, "one mean/std for all channels")
  -- called directly on a (C, H, W) tensor
  close(data.transforms.Normalize(mean, std)(torch.tensor(xs[1])), (function()
    local w = {}
    for c = 1, 3 do w[c] = T.map(xs[1][c], function(v) return (v - mean[c]) / std[c] end) end
    return w
  end)(), 1e-5, 1e-6, "a transform called on a tensor")
  -- errors
  raises(function() data.TensorDataset(torch.tensor(xs), {transform = data.transforms.Normalize({0, 0}, {1, 1})}) end,
    "Normalize: got 2 values of mean and std for images with 3 channels")
  raises(function() data.TensorDataset(torch.tensor(xs), {transform = data.transforms.Normalize({0, 0, 0}, {1, 0, 1})}) end,
    "Normalize: std is 0 for channel 1")
  raises(function() data.transforms.Normalize({0, 0}, {1}) end, "Normalize: mean and std need the same number of values, got 2 and 1")
  raises(function() data.transforms.Normalize("a", 1) end, "Normalize: mean must be a number or a list of numbers")
  raises(function() data.TensorDataset(torch.zeros(4, 3, 3), {transform = data.transforms.Normalize(0, 1)}) end,
    "transform: expected image samples of shape (C, H, W), got (3, 3)")
  raises(function() data.TensorDataset(torch.zeros(4, 1, 3, 3, {dtype = "float64"}), {transform = data.transforms.Normalize(0, 1)}) end,
    "transform: expected float32 samples, got float64")
  raises(function() data.TensorDataset(torch.zeros(4, 1, 3, 3), {transform = 5}) end,
    "TensorDataset: transform: expected a data.transforms object")
end)

test("RandomCrop: each output is a window of the zero-padded input; all offsets occur", function()
  local n, pad, h, w = 120, 1, 3, 2
  local xs = T.rand_list({n, 2, 3, 3}, 1, 2) -- positive, so padding zeros are visible
  local ds = data.TensorDataset(torch.tensor(xs), {transform = data.transforms.RandomCrop({h, w}, {padding = pad})})
  local seen, distinct = {}, 0
  for x in data.DataLoader(ds, {batch_size = 50, seed = 3}):iter() do
    list_eq({x:size(1), x:size(2), x:size(3)}, {2, h, w}, "cropped shape")
  end
  local k = 0
  for x in data.DataLoader(ds, {batch_size = 50, seed = 3}):iter() do
    local rows = x:tolist()
    for j = 1, #rows do
      k = k + 1
      local hit
      for top = 0, 3 + 2 * pad - h do
        for left = 0, 3 + 2 * pad - w do
          if not hit and matches(rows[j], crop_ref(xs[k], pad, top, left, h, w)) then hit = top .. "," .. left end
        end
      end
      T.ok(hit, "sample " .. (k - 1) .. " is a window of its padded input")
      if not seen[hit] then seen[hit], distinct = true, distinct + 1 end
    end
  end
  eq(distinct, (3 + 2 * pad - h + 1) * (3 + 2 * pad - w + 1), "every offset occurs over 120 samples")
  -- square size, no padding, size = image: the identity
  local same = data.TensorDataset(torch.tensor(xs), {transform = data.transforms.RandomCrop(3)})
  close(same:get(7)[1], xs[8], 1e-6, 0, "a full-size crop is the identity")
  raises(function() data.TensorDataset(torch.tensor(xs), {transform = data.transforms.RandomCrop(6, {padding = 1})}) end,
    "RandomCrop: crop size (6, 6) is larger than the padded image (5, 5)")
  raises(function() data.transforms.RandomCrop("a") end, "RandomCrop: size must be an integer or {h, w}")
  raises(function() data.transforms.RandomCrop(3, {padding = -1}) end, "RandomCrop: padding must be a non-negative integer")
end)

-- the fuzzer's finds (issue 26): a torch.Size counted from 1, sizes past the C side's int32, a
-- cuda tensor given to a transform, each once a message from inside the library
test("Compose refuses lists of transforms nested too deep or holding themselves", function()
  local deep, cyclic = {}, {}
  local t = deep
  for _ = 1, 100000 do t[1] = {}; t = t[1] end
  cyclic[1] = cyclic
  raises(function() data.transforms.Compose(deep) end, "transform: lists of transforms nested deeper than 100 levels")
  raises(function() data.transforms.Compose(cyclic) end, "transform: lists of transforms nested deeper than 100 levels")
  local x = torch.tensor(T.rand_list({1, 3, 3}))
  close(data.transforms.Compose({{{data.transforms.Normalize(1, 2)}}})(x), ((x - 1) / 2):tolist(), 1e-6, 0,
    "lists inside lists are flattened")
end)

test("RandomCrop takes a torch.Size; sizes past int32 and cuda inputs raise at the caller's line", function()
  local x = torch.tensor(T.rand_list({2, 5, 4}))
  local crop = data.transforms.RandomCrop(torch.Size({3, 2}))
  list_eq(crop(x).shape:totable(), {2, 3, 2}, "a torch.Size {h, w} crops to (h, w)")
  raises(function() data.transforms.RandomCrop(torch.Size({3})) end, "RandomCrop: size must be an integer or {h, w}")
  local function at_caller(fn, message)
    local err = raises(fn, message)
    T.ok(err:find("^[^\n]*test_data%.lua:%d+: "), "raised at the caller's line: " .. err)
  end
  at_caller(function() data.transforms.RandomCrop(1 << 40) end,
    "RandomCrop: size and padding must be at most 2147483647, got size (1099511627776, 1099511627776) and padding 0")
  at_caller(function() data.transforms.RandomCrop(3, {padding = 1 << 31}) end, "and padding 2147483648")
  at_caller(function() crop(torch.ones(2, 5, 4, {dtype = "int64"})) end, "transform: expected float32 samples, got int64")
  if cuda.is_available() then
    at_caller(function() crop(x:cuda()) end,
      "RandomCrop: expected a CPU tensor, got one on cuda:0 (transforms run on the CPU: apply them before :cuda())")
  end
end)

test("RandomHorizontalFlip: p = 0, 1 and 0.5 against Lua mirrors; the order of Compose matters", function()
  local xs = T.rand_list({40, 2, 2, 3}, -1, 1)
  local function run(tf)
    local out = {}
    for x in data.DataLoader(data.TensorDataset(torch.tensor(xs), {transform = tf}), {batch_size = 40, seed = 8}):iter() do
      out = x:tolist()
    end
    return out
  end
  local never, always, half = run(data.transforms.RandomHorizontalFlip(0)), run(data.transforms.RandomHorizontalFlip(1)),
    run(data.transforms.RandomHorizontalFlip())
  local flipped = 0
  for k = 1, 40 do
    T.ok(matches(never[k], xs[k]), "p = 0 keeps sample " .. k - 1)
    T.ok(matches(always[k], hflip(xs[k])), "p = 1 mirrors sample " .. k - 1)
    local f = matches(half[k], hflip(xs[k]))
    T.ok(f or matches(half[k], xs[k]), "p = 0.5 keeps or mirrors sample " .. k - 1)
    if f then flipped = flipped + 1 end
  end
  T.ok(flipped > 5 and flipped < 35, "p = 0.5 mirrors some samples, not all (got " .. flipped .. " of 40)")
  raises(function() data.transforms.RandomHorizontalFlip(1.5) end, "RandomHorizontalFlip: p must be a number in [0, 1], got 1.5")
  -- Normalize then pad: the padding stays 0; pad then Normalize: it becomes -mean/std
  local ones = torch.ones(1, 1, 1, 1)
  local function only(tf) return data.TensorDataset(ones, {transform = tf}):get(0)[1]:tolist() end
  local a = only(data.transforms.Compose({data.transforms.Normalize(2, 4), data.transforms.RandomCrop(3, {padding = 1})}))
  local b = only({data.transforms.RandomCrop(3, {padding = 1}), data.transforms.Normalize(2, 4)})
  close(a, {{{0, 0, 0}, {0, -0.25, 0}, {0, 0, 0}}}, 1e-6, 0, "normalize, then pad")
  close(b, {{{-0.5, -0.5, -0.5}, {-0.5, -0.25, -0.5}, {-0.5, -0.5, -0.5}}}, 1e-6, 0, "pad, then normalize")
  -- a built-in dataset with transforms: get applies them, ToTensor is a no-op
  local dir = tmpdir("tf_mnist")
  local px = write_mnist(dir, "train", 2, 2, 3, false)
  local ds = data.MNIST(dir, {transform = data.transforms.Compose({data.transforms.ToTensor(),
    data.transforms.RandomHorizontalFlip(1), data.transforms.Normalize(0.5, 0.5)})})
  local want = {}
  for y = 0, 1 do for x = 0, 2 do want[#want + 1] = (px[y * 3 + (2 - x) + 1] / 255 - 0.5) / 0.5 end end
  close(ds:get(0)[1], want, 1e-5, 1e-6, "MNIST sample flipped and normalized")
end)

test("random transforms: the same batches for any num_workers, and per epoch", function()
  local xs, ds = cifar_like(30)
  local ref = {epoch_lists(data.DataLoader(ds, {batch_size = 7, seed = 1})),
    epoch_lists(data.DataLoader(ds, {batch_size = 7, seed = 2}))}
  for _, nw in ipairs({1, 3}) do
    same_batches(epoch_lists(data.DataLoader(ds, {batch_size = 7, seed = 1, num_workers = nw})), ref[1], "workers " .. nw)
  end
  T.ok(not matches(ref[1][1][1], ref[2][1][1]), "another seed draws other crops and flips")
  -- each output is a crop (and maybe a mirror) of its own input, normalized
  local mean, std = {0.5, 0.4, 0.3}, {0.2, 0.25, 0.3}
  local k = 0
  for _, batch in ipairs(ref[1]) do
    for _, got in ipairs(batch[1]) do
      k = k + 1
      local ok = false
      for top = 0, 6 + 4 - 5 do
        for left = 0, 5 + 4 - 4 do
          local c = crop_ref(xs[k], 2, top, left, 5, 4)
          for _, cand in ipairs({c, hflip(c)}) do
            local norm = {}
            for ch = 1, 3 do norm[ch] = T.map(cand[ch], function(v) return (v - mean[ch]) / std[ch] end) end
            if not ok and matches(got, norm) then ok = true end
          end
        end
      end
      T.ok(ok, "sample " .. k - 1 .. " is a crop/flip/normalize of its input")
    end
  end
  eq(k, 30, "samples checked")
end)

-- leave no files behind
test("cleanup", function() assert(os.execute("rm -rf '" .. tmp_root .. "'")) end)

test("a Lua function as a dataset's transform, in get and through the loader", function()
  local ds = data.TensorDataset(torch.arange(8):float():view(4, 2), torch.arange(4),
    {transform = function(x) return x * 2 end})
  close(ds:get(1)[1], {4, 6}, 0, 0, "get applies it to the first field")
  eq(ds:get(1)[2]:item(), 1, "the labels untouched")
  local seen = {}
  for x, y in data.DataLoader(ds, {batch_size = 2}):iter() do
    for _, row in ipairs(x:tolist()) do seen[#seen + 1] = row[1] end
    eq(y:dim(), 1, "labels batched")
  end
  close(seen, {0, 4, 8, 12}, 0, 0, "the loader's batches are transformed")
end)

T.run()
