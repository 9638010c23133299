-- The global `data`: PyTorch's torch.utils.data (datasets, samplers,
-- DataLoader, default_collate) plus the torchvision pieces a training script
-- needs (MNIST, FashionMNIST, CIFAR10 and a few batch transforms).
--
-- Two paths make batches. Datasets made of CPU tensors (TensorDataset, the
-- built-in datasets, Subsets of those) have a C source (torch._data): a
-- batch is one gather per field plus the transforms, made in C, ahead of the
-- loop by `num_workers` threads. Any other dataset (a Lua object with get(i)
-- and a length) is read sample by sample on the main thread and collated in
-- Lua; Lua states are not thread-safe, so there num_workers is ignored (with
-- a one-time warning). Both paths give the same batches for the same seed.
--
-- Randomness. Shuffling and random transforms never depend on thread
-- timing: each epoch gets a key, either Philox(seed, epoch) with the `seed`
-- option or one draw from the global torch generator (as PyTorch draws one
-- int64 per epoch), so torch.manual_seed(s) replays the same epochs. The
-- transforms of the sample at position p of an epoch draw from Philox keyed
-- by (that key, p). random_split with {seed = s} uses a private Philox
-- stream and leaves the global generator alone; without a seed it takes one
-- draw from it. Indices count from 0.
--
-- Worth knowing:
-- - Each epoch's sampler (or batch_sampler) is read in full when iter()
--   starts, so the workers can run ahead: samplers must be finite.
-- - Workers read the dataset's tensors while the loop runs: do not modify
--   them in place during an epoch. A non-contiguous tensor is copied once
--   when its dataset is made, so later in-place changes to it do not reach
--   the loader (they do reach dataset:get).
-- - pin_memory = true puts batches in page-locked memory when a GPU is there
--   (ordinary memory otherwise; is_pinned() tells), so that
--   x:to("cuda", {non_blocking = true}) overlaps with compute.
-- - ConcatDataset, datasets with a collate_fn or a Lua-function transform,
--   and Lua datasets take the per-sample path.
local C = torch._data
local A = require "tensh.args"
local check_meta = require("tensh.classes").check_meta
local data = require("tensh.lazy").claim("data") -- the table the global data holds from start-up

-- ipairs's iterator: a dataset indexed by it was given to ipairs
local ipairs_step = ipairs({})
local function by_ipairs() return debug.getinfo(3, "f").func == ipairs_step end -- 1 this, 2 __index, 3 its caller

-- A class; an integer key on an instance of a class with get() is a sample,
-- so ds[0] is ds:get(0) as PyTorch's ds[0]. ipairs(ds), which would start at
-- sample 1, and an integer key on a class without get() (a DataLoader,
-- which PyTorch does not index either: ipairs(loader) would run 0 times)
-- raise, saying how to iterate. The end of this file sets each class up as
-- every tensh class (tensh.classes).
local made = {}
local function class(name)
  local c = {__name = name}
  made[#made + 1] = c
  c.__index = function(self, k)
    if math.type(k) == "integer" then
      check_meta(c, "__index", self) -- (by hand: getmetatable(ds).__index(5, 0))
      local get = c.get
      if get and by_ipairs() then
        A.raise("%s: ipairs(ds) starts at 1 and would skip sample 0 (datasets count from 0); "
          .. "iterate with for i, sample in enumerate(ds) do, or for i = 0, #ds - 1 do local sample = ds[i]", name)
      end
      if get then return get(self, k) end
      local var = name == "DataLoader" and "loader" or "sampler"
      local what = by_ipairs() and ("ipairs(%s) would run no %s"):format(var, var == "loader" and "batch" or "index")
        or ("%s[%d]"):format(var, k)
      A.raise("%s: %s: a %s is not indexed, as PyTorch's; iterate it: for x, y in %s do ... end, "
        .. "or for i, x, y in enumerate(%s) do ... end (i counts from 0)", name, what, name, var, var)
    end
    return c[k]
  end
  c.__len = function(self)
    check_meta(c, "__len", self)
    return self:len()
  end
  return c
end

local function shape_str(shape)
  return "(" .. table.concat(shape:totable(), ", ") .. ")"
end

local function is_int(v) return math.type(v) == "integer" end

-- The length of a dataset or sampler: a len method, a __len method or
-- metamethod, a tensor's first dim, or a list's length.
local function length_of(obj)
  if torch.is_tensor(obj) then return obj:numel() end
  if type(obj) ~= "table" then return nil end
  if type(obj.len) == "function" then return obj:len() end
  local mt = getmetatable(obj)
  if mt and mt.__len then return #obj end
  if type(obj.__len) == "function" then return obj:__len() end
  if obj[1] ~= nil or next(obj) == nil then return #obj end
  return nil
end

local function check_dataset(ds, fn)
  local kind = torch.is_tensor(ds) and "tensor" or type(ds)
  if type(ds) ~= "table" or type(ds.get) ~= "function" then
    error(("%s: expected a dataset (an object with a get(i) method and a length: a len method or __len), got a %s%s")
      :format(fn, kind, type(ds) == "table" and " without a get method" or ""), 3)
  end
  local n = length_of(ds)
  if not is_int(n) then
    error(("%s: the dataset has no length: give it a len method or a __len metamethod"):format(fn), 3)
  end
  return n
end

local function check_index(i, n, fn)
  if not is_int(i) then error(("%s: index must be an integer, got %s"):format(fn, math.type(i) or type(i)), 3) end
  if i < -n or i >= n then
    error(("%s: index %d out of range for a dataset of %d samples (indices count from 0)"):format(fn, i, n), 3)
  end
  return i < 0 and i + n or i
end

-- Calls a C function; its error is re-raised at `level` (the user's line,
-- not this file's), without the position Lua put in front.
local function strip(msg) return (tostring(msg):gsub("^[%w%./_-]+:%d+: ", "")) end
local function call_at(level, prefix, f, ...)
  local r = table.pack(pcall(f, ...))
  if not r[1] then error(prefix .. strip(r[2]):gsub("^dataset: ", ""), level + 1) end
  return table.unpack(r, 2, r.n)
end

local function index_tensor(list) return torch.tensor(list, {dtype = "int64", device = "cpu"}) end

-- The tensors of one sample from a C source (a batch of one, its row 0).
local function source_sample(src, i, key)
  local outs = {src:batch(index_tensor({i}), key, 0)}
  for k, t in ipairs(outs) do outs[k] = t[0] end
  return outs
end

-- ---- transforms ---------------------------------------------------------------

-- Transforms are specs that the C side runs on whole batches; applied to a
-- single (C, H, W) float32 tensor (t(x)) they run on a batch of one, drawing
-- from the global generator.
local Transform = {__name = "Transform"}
Transform.__index = Transform
local transforms = {}
data.transforms = transforms

-- The flat list of C specs of a transform, a Compose, or a list of them
-- (nested at most MAX_NESTING deep: a list that holds itself is refused too).
local MAX_NESTING = 100
local function specs_of(tf, out, depth)
  out, depth = out or {}, depth or 0
  if tf == nil then return out end
  if getmetatable(tf) == Transform then
    for _, s in ipairs(tf._specs) do out[#out + 1] = s end
  elseif type(tf) == "table" and getmetatable(tf) == nil then
    if depth >= MAX_NESTING then A.raise("transform: lists of transforms nested deeper than %d levels", MAX_NESTING) end
    for _, t in ipairs(tf) do specs_of(t, out, depth + 1) end
  else
    A.raise("transform: expected a data.transforms object, a list of them, or a function, got %s", A.typename(tf))
  end
  return out
end

local function new_transform(name, specs) return setmetatable({name = name, _specs = specs}, Transform) end

function Transform.__call(self, x)
  if not torch.is_tensor(x) or x:dim() ~= 3 then
    A.raise("%s: expected a (C, H, W) tensor, got %s", self.name,
      torch.is_tensor(x) and ("a %d-D tensor"):format(x:dim()) or A.typename(x))
  end
  if x.is_cuda then
    A.raise("%s: expected a CPU tensor, got one on %s (transforms run on the CPU: apply them before :cuda())",
      self.name, tostring(x.device))
  end
  local src = call_at(2, "", C.source, {x:contiguous():unsqueeze(0)}, {transforms = self._specs})
  return call_at(2, "", src.batch, src, index_tensor({0}), C.global_key(), 0)[0]
end
Transform.__tostring = function(self) return self.name .. "()" end

function transforms.Compose(list)
  if type(list) ~= "table" then error("Compose: expected a list of transforms", 2) end
  return new_transform("Compose", specs_of(list))
end

-- Samples are already float tensors in [0, 1]; kept so ported code reads the same.
function transforms.ToTensor() return new_transform("ToTensor", {}) end

function transforms.Normalize(mean, std)
  local function list(v, what)
    if type(v) == "number" then return {v} end
    if torch.is_tensor(v) then v = v:tolist() end
    v = A.plain(v) -- a torch.Size: a tuple of numbers to PyTorch, counted from 0 here
    if type(v) ~= "table" or #v == 0 then error(("Normalize: %s must be a number or a list of numbers"):format(what), 3) end
    for _, x in ipairs(v) do
      if type(x) ~= "number" then error(("Normalize: %s must be a number or a list of numbers"):format(what), 3) end
    end
    return v
  end
  mean, std = list(mean, "mean"), list(std, "std")
  if #mean ~= #std then
    error(("Normalize: mean and std need the same number of values, got %d and %d"):format(#mean, #std), 2)
  end
  return new_transform("Normalize", {{kind = "normalize", mean = mean, std = std}})
end

local INT32_MAX = (1 << 31) - 1

function transforms.RandomCrop(size, opts)
  local h, w
  size = A.plain(size) -- a torch.Size counts from 0
  if is_int(size) then h, w = size, size
  elseif type(size) == "table" and is_int(size[1]) and is_int(size[2]) then h, w = size[1], size[2]
  else error("RandomCrop: size must be an integer or {h, w}", 2) end
  if opts ~= nil and not A.is_plain_table(opts) then A.type_error("RandomCrop", 2, "options table ({padding = n})", opts) end
  local pad = A.check_opts("RandomCrop", opts, {padding = true}).padding or 0
  if not is_int(pad) or pad < 0 then error("RandomCrop: padding must be a non-negative integer", 2) end
  if h < 1 or w < 1 then error(("RandomCrop: size must be positive, got (%d, %d)"):format(h, w), 2) end
  if h > INT32_MAX or w > INT32_MAX or pad > INT32_MAX then -- (the C side's int32 sizes)
    error(("RandomCrop: size and padding must be at most %d, got size (%d, %d) and padding %d"):format(INT32_MAX, h, w,
      pad), 2)
  end
  return new_transform("RandomCrop", {{kind = "crop", h = h, w = w, pad = pad}})
end

function transforms.RandomHorizontalFlip(p)
  p = p == nil and 0.5 or p
  if type(p) ~= "number" or not (p >= 0 and p <= 1) then
    error(("RandomHorizontalFlip: p must be a number in [0, 1], got %s"):format(tostring(p)), 2)
  end
  return new_transform("RandomHorizontalFlip", {{kind = "hflip", p = p}})
end

-- Splits a dataset's transform option into C specs or a Lua function.
local function read_transform(tf, fn)
  if type(tf) == "function" then return {}, tf end -- no C specs: the function runs in Lua
  return call_at(3, fn .. ": ", specs_of, tf), nil
end

-- ---- datasets --------------------------------------------------------------------

-- TensorDataset(X, y, ..., {transform = T}): sample i is {X[i], y[i], ...}.
-- The transform (a tensh extension) applies to X, whose samples must then be
-- float32 (C, H, W).
local TensorDataset = class("TensorDataset")
data.TensorDataset = TensorDataset

setmetatable(TensorDataset, {__call = function(_, ...)
  local args = table.pack(...)
  local opts = {}
  if args.n > 0 and type(args[args.n]) == "table" and not torch.is_tensor(args[args.n]) then
    opts = A.check_opts("TensorDataset", args[args.n], {transform = true})
    args.n = args.n - 1
  end
  if args.n == 0 then error("TensorDataset: expected at least one tensor", 2) end
  local ts, cpu = {}, true
  for k = 1, args.n do
    local t = args[k]
    if not torch.is_tensor(t) then
      error(("TensorDataset: argument %d is a %s, expected a tensor"):format(k, type(t)), 2)
    end
    if t:dim() == 0 then error(("TensorDataset: tensor %d is 0-dim; samples are its rows along dim 0"):format(k - 1), 2) end
    if t:size(0) ~= args[1]:size(0) then
      error(("TensorDataset: size mismatch between tensors: tensor %d has %d rows but tensor 0 has %d")
        :format(k - 1, t:size(0), args[1]:size(0)), 2)
    end
    if t.device.type ~= "cpu" then cpu = false end
    ts[k] = t
  end
  local self = setmetatable({tensors = ts, transform = opts.transform}, TensorDataset)
  local specs, fn = read_transform(opts.transform, "TensorDataset")
  self._lua_transform, self._c_transform = fn, #specs > 0
  if cpu then
    self._src = call_at(2, "TensorDataset: ", C.source, ts, {transforms = specs})
  elseif #specs > 0 then
    error("TensorDataset: transforms run on CPU tensors; move the tensors to the CPU or transform on the device", 2)
  end
  return self
end})

function TensorDataset:len() return self.tensors[1]:size(0) end

function TensorDataset:get(i)
  i = check_index(i, self:len(), "TensorDataset")
  local out
  if self._src and self._c_transform then
    out = source_sample(self._src, i, C.global_key())
  else
    out = {}
    for k, t in ipairs(self.tensors) do out[k] = t[i] end
  end
  if self._lua_transform then out[1] = self._lua_transform(out[1]) end
  return out
end

-- Subset(ds, indices): sample i is ds:get(indices[i]). indices: a Lua list
-- or an int64 tensor; kept as a Lua list in .indices.
local Subset = class("Subset")
data.Subset = Subset

setmetatable(Subset, {__call = function(_, ds, indices)
  local n = check_dataset(ds, "Subset")
  if torch.is_tensor(indices) then indices = indices:tolist() end
  if type(indices) ~= "table" then error("Subset: indices must be a list of integers or an int64 tensor", 2) end
  local list = {}
  for k, i in ipairs(indices) do
    if not is_int(i) then error(("Subset: index %d is a %s, expected an integer"):format(k - 1, math.type(i) or type(i)), 2) end
    if i < -n or i >= n then
      error(("Subset: index %d out of range for a dataset of %d samples (indices count from 0)"):format(i, n), 2)
    end
    list[k] = i < 0 and i + n or i
  end
  local self = setmetatable({dataset = ds, indices = list}, Subset)
  if ds._src then -- the C source, its rows reached through a composed index map
    self._src, self._lua_transform = ds._src, ds._lua_transform
    local map = index_tensor(list)
    self._map = ds._map and ds._map:index_select(0, map) or map
  end
  return self
end})

function Subset:len() return #self.indices end
function Subset:get(i)
  i = check_index(i, #self.indices, "Subset")
  return self.dataset:get(self.indices[i + 1])
end

-- ConcatDataset({ds1, ds2, ...}): the samples of each in turn.
local ConcatDataset = class("ConcatDataset")
data.ConcatDataset = ConcatDataset

setmetatable(ConcatDataset, {__call = function(_, list)
  if type(list) ~= "table" or #list == 0 then error("ConcatDataset: expected a non-empty list of datasets", 2) end
  local self = setmetatable({datasets = {}, cumulative_sizes = {}}, ConcatDataset)
  local total = 0
  for k, ds in ipairs(list) do
    total = total + check_dataset(ds, "ConcatDataset")
    self.datasets[k], self.cumulative_sizes[k] = ds, total
  end
  return self
end})

function ConcatDataset:len() return self.cumulative_sizes[#self.cumulative_sizes] end
function ConcatDataset:get(i)
  i = check_index(i, self:len(), "ConcatDataset")
  local lo, hi = 1, #self.cumulative_sizes -- the first part whose cumulative size exceeds i
  while lo < hi do
    local mid = (lo + hi) // 2
    if self.cumulative_sizes[mid] > i then hi = mid else lo = mid + 1 end
  end
  return self.datasets[lo]:get(i - (self.cumulative_sizes[lo - 1] or 0))
end

-- random_split(ds, {0.8, 0.2} | {800, 200}, {seed = 42}) -> list of Subsets.
-- Fractions are floored and the remainder goes one by one to the first
-- splits, as PyTorch does.
function data.random_split(ds, lengths, opts)
  local n = check_dataset(ds, "random_split")
  if type(lengths) ~= "table" or #lengths == 0 then error("random_split: lengths must be a non-empty list", 2) end
  local sum = 0
  for _, l in ipairs(lengths) do
    if type(l) ~= "number" or l < 0 then error("random_split: lengths must be non-negative numbers", 2) end
    sum = sum + l
  end
  local sizes = {}
  if math.abs(sum - 1) < 1e-9 and sum <= n then
    local used = 0
    for k, f in ipairs(lengths) do sizes[k] = math.floor(n * f) used = used + sizes[k] end
    for k = 0, n - used - 1 do local j = k % #sizes + 1 sizes[j] = sizes[j] + 1 end
  else
    for k, l in ipairs(lengths) do
      if not is_int(l) and l ~= math.floor(l) then
        error("random_split: lengths must be integers, or fractions that sum to 1", 2)
      end
      sizes[k] = math.tointeger(l)
    end
    if sum ~= n then
      error(("random_split: sum of input lengths (%d) does not equal the length of the input dataset (%d)"):format(
        math.tointeger(sum) or sum, n), 2)
    end
  end
  opts = A.check_opts("random_split", opts, {seed = true})
  if opts.seed ~= nil and not is_int(opts.seed) then error("random_split: seed must be an integer", 2) end
  local key = opts.seed and C.mix(opts.seed, 0x73706c6974) or C.global_key()
  local perm, out, off = C.randperm(n, key), {}, 0
  for k, len in ipairs(sizes) do
    out[k] = Subset(ds, perm:narrow(0, off, len))
    off = off + len
  end
  return out
end

-- ---- built-in datasets --------------------------------------------------------------

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() return true end
  return false
end

local function join(dir, name) return (dir:gsub("/+$", "")) .. "/" .. name end

-- The first existing candidate for each name, or an error listing every path tried.
local function find_files(fn, dirs, names, suffixes, help)
  local found, tried = {}, {}
  for k, name in ipairs(names) do
    for _, dir in ipairs(dirs) do
      for _, suf in ipairs(suffixes) do
        local p = join(dir, name .. suf)
        if not found[k] and exists(p) then found[k] = p end
        tried[#tried + 1] = "  " .. p
      end
    end
  end
  for k = 1, #names do
    if not found[k] then
      error(("%s: dataset not found; looked for:\n%s\n%s"):format(fn, table.concat(tried, "\n"), help), 3)
    end
  end
  return found
end

-- A dataset of (image, label) from uint8 pixels (N, ...) and int64 labels:
-- samples are float32 (C, H, W) / 255 unless raw, then the transform.
local ImageDataset = class("ImageDataset")

-- download is accepted for PyTorch's scripts, which pass it, but tensh never
-- downloads: the dataset-not-found error says where to get the files.
local IMAGE_OPTS = {train = true, transform = true, raw = true, download = true}

local function check_image_opts(fn, opts)
  A.check_opts(fn, opts, IMAGE_OPTS)
  if opts.raw and opts.transform ~= nil then error(fn .. ": transforms work on float images; drop raw = true", 3) end
end

local function image_dataset(fn, cls, images, labels, image_shape, opts, extra)
  local self = setmetatable(extra, cls)
  self.data, self.targets, self.train = images, labels, opts.train ~= false
  self.transform, self.raw = opts.transform, opts.raw == true
  local specs, f = read_transform(opts.transform, fn)
  self._lua_transform, self._c_transform = f, #specs > 0
  self._src = call_at(3, fn .. ": ", C.source, {images, labels},
    {image = not self.raw and image_shape or nil, transforms = specs})
  return self
end

function ImageDataset:len() return self.targets:size(0) end
function ImageDataset:get(i)
  i = check_index(i, self:len(), self.__name)
  local s = source_sample(self._src, i, self._c_transform and C.global_key() or 0)
  s[2] = s[2]:item() -- the label as a Lua integer, as torchvision returns int(target)
  if self._lua_transform then s[1] = self._lua_transform(s[1]) end
  return s
end
function ImageDataset:__tostring()
  check_meta(ImageDataset, "__tostring", self)
  return ("Dataset %s\n    Number of datapoints: %d\n    Split: %s"):format(self.__name, self:len(),
    self.train and "Train" or "Test")
end

local function idx_dataset(fn, default_root, help, classes)
  local cls = setmetatable(class(fn), {__index = ImageDataset})
  cls.__tostring = ImageDataset.__tostring
  return setmetatable(cls, {__index = ImageDataset, __call = function(_, root, opts)
    if type(root) == "table" and opts == nil then root, opts = nil, root end
    opts = opts or {}
    check_image_opts(fn, opts)
    root = root or default_root
    if type(root) ~= "string" then error(fn .. ": root must be the folder holding the IDX files", 2) end
    local train = opts.train ~= false
    local prefix = train and "train" or "t10k"
    local files = find_files(fn, {root, join(root, fn .. "/raw"), join(root, "raw")},
      {prefix .. "-images-idx3-ubyte", prefix .. "-labels-idx1-ubyte"}, {"", ".gz"}, help)
    local images = call_at(2, "", C.read_idx, files[1], 3)
    local labels = call_at(2, "", C.read_idx, files[2], 1):long()
    if images:size(0) ~= labels:size(0) then
      error(("%s: %s holds %d images but %s holds %d labels; the files do not belong together")
        :format(fn, files[1], images:size(0), files[2], labels:size(0)), 2)
    end
    return image_dataset(fn, cls, images, labels, {1, images:size(1), images:size(2)}, opts,
      {root = root, classes = classes})
  end})
end

data.MNIST = idx_dataset("MNIST", nil,
  "Download train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and\n" ..
  "t10k-labels-idx1-ubyte.gz from https://ossci-datasets.s3.amazonaws.com/mnist/ (mirror of\n" ..
  "http://yann.lecun.com/exdb/mnist/) into root.",
  {"0 - zero", "1 - one", "2 - two", "3 - three", "4 - four", "5 - five", "6 - six", "7 - seven", "8 - eight", "9 - nine"})

data.FashionMNIST = idx_dataset("FashionMNIST", "/usr/share/datasets/fashion-mnist",
  "Install it with `apt-get install dataset-fashion-mnist` (it goes to /usr/share/datasets/fashion-mnist,\n" ..
  "the default root), or download the four files from\n" ..
  "https://github.com/zalandoresearch/fashion-mnist#get-the-data into root.",
  {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"})

-- CIFAR10(root, {train = true}): the binary version (cifar-10-batches-bin).
-- .data is uint8 (N, 3, 32, 32), channel-major as the files store it.
local CIFAR10 = setmetatable(class("CIFAR10"), {__index = ImageDataset})
CIFAR10.__tostring = ImageDataset.__tostring
data.CIFAR10 = CIFAR10
getmetatable(CIFAR10).__call = function(_, root, opts)
  opts = opts or {}
  check_image_opts("CIFAR10", opts)
  if type(root) ~= "string" then error("CIFAR10: root must be the folder holding cifar-10-batches-bin", 2) end
  local train = opts.train ~= false
  local names = train and {"data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5"}
    or {"test_batch"}
  local files = find_files("CIFAR10", {join(root, "cifar-10-batches-bin"), root}, names, {".bin"},
    "Download https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz and unpack it into root.")
  local images, labels = call_at(2, "", C.read_cifar, files)
  return image_dataset("CIFAR10", CIFAR10, images, labels, {3, 32, 32}, opts, {root = root,
    classes = {"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"}})
end

-- ---- samplers --------------------------------------------------------------------------
-- A sampler is a Lua list of indices, an int64 tensor, or an object whose
-- iter() returns a Lua iterator of indices (and that has a length).

local function draw_key(seed, epoch)
  if seed ~= nil then return C.mix(seed, epoch) end
  return C.global_key()
end

local SequentialSampler = class("SequentialSampler")
data.SequentialSampler = SequentialSampler
setmetatable(SequentialSampler, {__call = function(_, ds)
  return setmetatable({n = check_dataset(ds, "SequentialSampler")}, SequentialSampler)
end})
function SequentialSampler:len() return self.n end
function SequentialSampler:indices() return torch.arange(self.n) end
function SequentialSampler:iter()
  local i = -1
  return function() i = i + 1 if i < self.n then return i end end
end

-- RandomSampler(ds, {replacement = false, num_samples = #ds, seed = nil})
local RandomSampler = class("RandomSampler")
data.RandomSampler = RandomSampler
setmetatable(RandomSampler, {__call = function(_, ds, opts)
  opts = A.check_opts("RandomSampler", opts, {replacement = true, num_samples = true, seed = true})
  local n = check_dataset(ds, "RandomSampler")
  local m = opts.num_samples or n
  if not is_int(m) or m < 0 then error("RandomSampler: num_samples must be a non-negative integer", 2) end
  return setmetatable({n = n, num_samples = m, replacement = opts.replacement == true, seed = opts.seed, _epoch = 0},
    RandomSampler)
end})
function RandomSampler:len() return self.num_samples end
function RandomSampler:indices()
  local key = draw_key(self.seed, self._epoch)
  self._epoch = self._epoch + 1
  if self.n == 0 then return torch.arange(0) end
  if self.replacement then
    local out = {}
    for k = 0, self.num_samples - 1 do out[k + 1] = C.mix(key, k) % self.n end
    return index_tensor(out)
  end
  local parts, m = {}, self.num_samples
  local round = 0
  while m > 0 do
    local p = C.randperm(self.n, C.mix(key, round))
    parts[#parts + 1] = m >= self.n and p or p:narrow(0, 0, m)
    m, round = m - self.n, round + 1
  end
  return #parts == 1 and parts[1] or torch.cat(parts)
end
function RandomSampler:iter()
  local list, i = self:indices():tolist(), 0
  return function() i = i + 1 return list[i] end
end

-- SubsetRandomSampler(indices, {seed = nil}): the given indices, shuffled each epoch.
local SubsetRandomSampler = class("SubsetRandomSampler")
data.SubsetRandomSampler = SubsetRandomSampler
setmetatable(SubsetRandomSampler, {__call = function(_, indices, opts)
  if torch.is_tensor(indices) then indices = indices:tolist() end
  indices = A.plain(indices) -- a torch.Size is a list of integers too
  if type(indices) ~= "table" then A.raise("SubsetRandomSampler: indices must be a list or a tensor, got %s", A.typename(indices)) end
  for i, v in ipairs(indices) do
    if not is_int(v) then A.raise("SubsetRandomSampler: indices[%d] must be an integer, got %s", i, A.show(v)) end
  end
  opts = A.check_opts("SubsetRandomSampler", opts, {seed = true})
  return setmetatable({list = indices, seed = opts.seed, _epoch = 0}, SubsetRandomSampler)
end})
function SubsetRandomSampler:len() return #self.list end
function SubsetRandomSampler:indices()
  local key = draw_key(self.seed, self._epoch)
  self._epoch = self._epoch + 1
  return index_tensor(self.list):index_select(0, C.randperm(#self.list, key))
end
SubsetRandomSampler.iter = RandomSampler.iter

data.DistributedSampler = require("tensh.distributed_sampler")(class, length_of)

-- BatchSampler(sampler, batch_size, drop_last): lists of indices.
local BatchSampler = class("BatchSampler")
data.BatchSampler = BatchSampler

-- All of a sampler's indices for one epoch, as a Lua list.
local function sampler_list(s, fn)
  if torch.is_tensor(s) then
    if s:dim() ~= 1 then A.raise("%s: a sampler tensor must be 1-d (a list of indices), got %d-d", fn, s:dim()) end
    return s:tolist()
  end
  if type(s) == "table" and type(s.indices) == "function" then return s:indices():tolist() end
  if type(s) == "table" and type(s.iter) == "function" then
    local out = {}
    for i in s:iter() do out[#out + 1] = i end
    return out
  end
  if type(s) == "table" then return s end
  error(("%s: a sampler must be a list of indices, a tensor, or an object with an iter() method, got a %s")
    :format(fn, type(s)), 3)
end

local function check_batch_size(bs, fn)
  if not is_int(bs) or bs < 1 then
    error(("%s: batch_size should be a positive integer value, but got batch_size=%s"):format(fn, tostring(bs)), 3)
  end
end

setmetatable(BatchSampler, {__call = function(_, sampler, batch_size, drop_last)
  check_batch_size(batch_size, "BatchSampler")
  return setmetatable({sampler = sampler, batch_size = batch_size, drop_last = drop_last == true}, BatchSampler)
end})
function BatchSampler:len()
  local n = length_of(self.sampler)
  if not is_int(n) then A.raise("BatchSampler: the sampler has no length") end
  return self.drop_last and n // self.batch_size or (n + self.batch_size - 1) // self.batch_size
end
function BatchSampler:iter()
  local list, bs, pos = sampler_list(self.sampler, "BatchSampler"), self.batch_size, 0
  local stop = self.drop_last and #list - #list % bs or #list
  return function()
    if pos >= stop then return nil end
    local b = {}
    for k = pos + 1, math.min(pos + bs, stop) do b[#b + 1] = list[k] end
    pos = pos + bs
    return b
  end
end

-- ---- collate -------------------------------------------------------------------------------

-- As torch's default_collate: tensors stack along a new dim 0, integers
-- become an int64 tensor, floats float64, booleans bool, strings stay a
-- list, and tables are collated per position or key.
local function collate(batch, depth)
  if depth > 100 then
    A.raise("collate: samples nest more than 100 tables deep (does a sample contain itself?)")
  end
  batch = A.plain(batch) -- a torch.Size is a list of integers, as PyTorch's tuple is
  if type(batch) ~= "table" or torch.is_tensor(batch) then A.type_error("default_collate", 1, "list of samples", batch) end
  local elem = batch[1]
  if elem == nil then A.raise("collate: empty batch") end
  local function bad(k, v, what)
    A.raise(("collate: sample %d is a %s but sample 0 is %s"):format(k - 1, torch.is_tensor(v) and "tensor" or type(v), what))
  end
  if torch.is_tensor(elem) then
    local shape = elem.shape
    for k = 2, #batch do
      local t = batch[k]
      if not torch.is_tensor(t) then bad(k, t, "a tensor") end
      if t.shape ~= shape then
        A.raise(("collate: sample %d has shape %s but sample 0 has %s; samples must all have one shape to be "
          .. "stacked (or pass a collate_fn)"):format(k - 1, shape_str(t.shape), shape_str(shape)))
      end
    end
    return torch.stack(batch)
  end
  local kind = type(elem)
  if kind == "number" then
    local float = false
    for k, v in ipairs(batch) do
      if type(v) ~= "number" then bad(k, v, "a number") end
      if math.type(v) == "float" then float = true end
    end
    return torch.tensor(batch, {dtype = float and "float64" or "int64"})
  elseif kind == "boolean" then
    for k, v in ipairs(batch) do if type(v) ~= "boolean" then bad(k, v, "a boolean") end end
    return torch.tensor(batch, {dtype = "bool"})
  elseif kind == "string" then
    for k, v in ipairs(batch) do if type(v) ~= "string" then bad(k, v, "a string") end end
    return {table.unpack(batch)}
  elseif kind == "table" and getmetatable(elem) == nil then
    for k, v in ipairs(batch) do
      if type(v) ~= "table" or torch.is_tensor(v) then bad(k, v, "a table") end
    end
    local out = {}
    if #elem > 0 then
      for k, v in ipairs(batch) do
        if #v ~= #elem then
          A.raise(("collate: sample %d has %d fields but sample 0 has %d; each sample must have the same number")
            :format(k - 1, #v, #elem))
        end
      end
      for j = 1, #elem do
        local col = {}
        for k, v in ipairs(batch) do col[k] = v[j] end
        out[j] = collate(col, depth + 1)
      end
    else
      for key in pairs(elem) do
        local col = {}
        for k, v in ipairs(batch) do
          if v[key] == nil then A.raise(("collate: sample %d has no field '%s'"):format(k - 1, tostring(key))) end
          col[k] = v[key]
        end
        out[key] = collate(col, depth + 1)
      end
    end
    return out
  end
  A.raise(("collate: samples must be tensors, numbers, booleans, strings or tables of those, got a %s"):format(kind))
end

function data.default_collate(batch) return collate(batch, 0) end

-- ---- DataLoader ---------------------------------------------------------------------------

local DataLoader = class("DataLoader")
data.DataLoader = DataLoader

-- PyTorch's DataLoader arguments after the dataset, positionally in its order
-- (DataLoader(ds, 64, true)) or as options; then its keyword-only ones and seed
local positional_args = {"batch_size", "shuffle", "sampler", "batch_sampler", "num_workers", "collate_fn", "pin_memory",
  "drop_last", "timeout", "worker_init_fn", "multiprocessing_context", "generator"}
local keyword_args = {prefetch_factor = true, persistent_workers = true, seed = true}
local unsupported_opts = {
  worker_init_fn = "workers are C threads that run no Lua; seed their random transforms with the seed option",
  multiprocessing_context = "workers are threads in this process, not processes",
  generator = "give the seed option instead (an integer): it keys the shuffle and the random transforms"}

local warned_pin_memory = false

setmetatable(DataLoader, {__call = function(_, ds, ...)
  local n = check_dataset(ds, "DataLoader")
  local nargs = select("#", ...)
  local last = nargs > 0 and select(nargs, ...) or nil
  if nargs == 1 and last ~= nil and type(last) ~= "number" and type(last) ~= "table" then
    error(("DataLoader: options must be a table, got %s"):format(A.typename(last)), 2)
  end
  if A.is_opts(last) then
    for k in pairs(last) do
      if unsupported_opts[k] then error(("DataLoader: option '%s' is not supported: %s"):format(k, unsupported_opts[k]), 2) end
    end
  end
  local opts = A.bind_keywords("DataLoader", positional_args, keyword_args, ...)
  for k, why in pairs(unsupported_opts) do
    if opts[k] ~= nil then error(("DataLoader: argument '%s' is not supported: %s"):format(k, why), 2) end
  end
  local self = setmetatable({dataset = ds, batch_size = opts.batch_size or 1, shuffle = opts.shuffle == true,
    drop_last = opts.drop_last == true, sampler = opts.sampler, batch_sampler = opts.batch_sampler,
    collate_fn = opts.collate_fn, num_workers = opts.num_workers or 0, pin_memory = opts.pin_memory == true,
    prefetch_factor = opts.prefetch_factor or 2, seed = opts.seed, _n = n, _epoch = 0}, DataLoader)
  if self.batch_sampler ~= nil then
    if opts.batch_size ~= nil or self.shuffle or self.sampler ~= nil or self.drop_last then
      error("DataLoader: batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last", 2)
    end
  else
    check_batch_size(self.batch_size, "DataLoader")
  end
  if self.sampler ~= nil and self.shuffle then
    error("DataLoader: sampler option is mutually exclusive with shuffle", 2)
  end
  if not is_int(self.num_workers) or self.num_workers < 0 then
    error(("DataLoader: num_workers option should be a non-negative integer, got %s"):format(tostring(opts.num_workers)), 2)
  end
  if not is_int(self.prefetch_factor) or self.prefetch_factor < 1 then
    error("DataLoader: prefetch_factor option should be a positive integer", 2)
  end
  if self.seed ~= nil and not is_int(self.seed) then error("DataLoader: seed must be an integer", 2) end
  if self.collate_fn ~= nil and type(self.collate_fn) ~= "function" then error("DataLoader: collate_fn must be a function", 2) end
  if self.pin_memory and not (cuda and cuda.is_available()) and not warned_pin_memory then
    warned_pin_memory = true -- once, as PyTorch's warning
    io.stderr:write("data.DataLoader: 'pin_memory' is true but no CUDA device is found, so pinned memory won't be used\n")
  end
  return self
end})

function DataLoader:len()
  if self.batch_sampler ~= nil then
    local n = length_of(self.batch_sampler)
    if not is_int(n) then A.raise("DataLoader: the batch_sampler has no length") end
    return n
  end
  local n = self._n
  if self.sampler ~= nil then
    n = length_of(self.sampler)
    if not is_int(n) then A.raise("DataLoader: the sampler has no length") end
  end
  local bs = self.batch_size
  return self.drop_last and n // bs or (n + bs - 1) // bs
end

-- One epoch's plan: the sample indices in order (int64 tensor) and the batch
-- boundaries (a Lua list, starting at 0). Local: the epoch's iterator alone
-- calls it, with its loader and key.
local function plan(self, key)
  local idx, offsets = nil, {0}
  if self.batch_sampler ~= nil then
    local flat = {}
    local bsm = self.batch_sampler
    local iter
    if type(bsm) == "table" and type(bsm.iter) == "function" then iter = bsm:iter()
    elseif type(bsm) == "table" then
      local k = 0
      iter = function() k = k + 1 return bsm[k] end
    else
      error("DataLoader: batch_sampler must be a list of index lists or an object with an iter() method", 3)
    end
    for b in iter do
      if torch.is_tensor(b) then b = b:tolist() end
      if type(b) ~= "table" then error("DataLoader: batch_sampler gave a " .. type(b) .. ", expected a list of indices", 3) end
      for _, i in ipairs(b) do flat[#flat + 1] = i end
      offsets[#offsets + 1] = #flat
    end
    idx = flat
  else
    local total
    if self.sampler ~= nil then
      idx = self.sampler
      if torch.is_tensor(idx) then idx = idx:long() elseif type(idx) == "table" and type(idx.indices) == "function" then
        idx = idx:indices()
      else idx = sampler_list(idx, "DataLoader") end
    elseif self.shuffle then
      idx = C.randperm(self._n, C.mix(key, 1))
    else
      idx = torch.arange(self._n)
    end
    total = torch.is_tensor(idx) and idx:numel() or #idx
    local bs = self.batch_size
    local stop = self.drop_last and total - total % bs or total
    for o = bs, stop - 1, bs do offsets[#offsets + 1] = o end
    if stop > 0 then offsets[#offsets + 1] = stop end
  end
  if type(idx) == "table" then
    for k, i in ipairs(idx) do
      if not is_int(i) then error(("DataLoader: the sampler gave %s at position %d, expected an integer index"):format(
        tostring(i), k - 1), 3) end
    end
    idx = index_tensor(idx)
  end
  local used = offsets[#offsets]
  if used < idx:numel() then idx = idx:narrow(0, 0, used) end -- drop_last
  return idx, offsets
end

local warned_lua_workers = false

-- for x, y in loader:iter() do ... end: one epoch. The fourth value closes
-- the epoch (joining its workers) when the loop ends or is left by break.
function DataLoader:iter()
  local epoch = self._epoch
  self._epoch = epoch + 1
  local key = draw_key(self.seed, epoch)
  local idx, offsets = plan(self, key)
  local ds, tkey = self.dataset, C.mix(key, 2)
  local nb = #offsets - 1

  if ds._src and not ds._lua_transform and not self.collate_fn then
    if ds._map then idx = ds._map:index_select(0, idx) end
    local ep = call_at(2, "", C.epoch, ds._src, idx, index_tensor(offsets), tkey, self.num_workers, self.prefetch_factor, self.pin_memory)
    local function finish(...)
      if select("#", ...) == 0 then ep:close() end
      return ...
    end
    return function() return finish(ep:next()) end, nil, nil, ep
  end

  if self.num_workers > 0 and not warned_lua_workers then
    warned_lua_workers = true
    io.stderr:write("data.DataLoader: num_workers > 0 needs a dataset made of CPU tensors (TensorDataset, MNIST, "
      .. "CIFAR10, Subsets of those) without a collate_fn or Lua transform; this one is read on the main thread "
      .. "(Lua states are not thread-safe)\n")
  end
  local list = idx:tolist()
  local collate = self.collate_fn or data.default_collate
  -- a TensorDataset on a device: one index_select per field
  local tensors = getmetatable(ds) == TensorDataset and not self.collate_fn and not ds._lua_transform and ds.tensors
  local b = 0
  return function()
    if b >= nb then return nil end
    local lo, hi = offsets[b + 1], offsets[b + 2]
    b = b + 1
    if tensors then
      local sel, out = idx:narrow(0, lo, hi - lo), {}
      for k, t in ipairs(tensors) do out[k] = t:index_select(0, sel:to(t.device)) end
      return table.unpack(out)
    end
    local samples = {}
    for k = lo + 1, hi do
      local s = ds:get(list[k])
      if s == nil then error(("DataLoader: dataset:get(%d) returned nil"):format(list[k]), 2) end
      samples[#samples + 1] = s
    end
    local batch = collate(samples)
    if type(batch) == "table" and not torch.is_tensor(batch) and batch[1] ~= nil then return table.unpack(batch) end
    return batch
  end
end

-- for x, y in loader do ... end, as Python's `for x, y in loader:`: the
-- loader is its own iterator function. The generic for calls it first with a
-- nil control value, which starts an epoch (closing one a break left open);
-- later calls continue it. (loader:iter() also closes the epoch on break.)
function DataLoader:__call(_, control)
  check_meta(DataLoader, "__call", self)
  local cur = rawget(self, "_loop")
  if control == nil then
    if cur then cur[2]() end
    local f, _, _, closer = self:iter()
    cur = {f, function() if closer then closer:close() end end}
    rawset(self, "_loop", cur)
  elseif cur == nil then
    error("DataLoader: called with a loop value but no loop is running; iterate with for x, y in loader do", 2)
  end
  return (function(...)
    if select("#", ...) == 0 or (...) == nil then rawset(self, "_loop", nil) end
    return ...
  end)(cur[1]())
end

function DataLoader:__tostring()
  check_meta(DataLoader, "__tostring", self)
  return ("DataLoader(%d batches of %s, batch_size=%s, shuffle=%s, num_workers=%d)"):format(self:len(),
    tostring(self.dataset.__name or "dataset"), tostring(self.batch_size), tostring(self.shuffle), self.num_workers)
end

-- torchvision.utils' make_grid and save_image, torchvision.io's read_image,
-- encode_png, decode_png and ImageReadMode (lua/tensh/image.lua)
do
  local image = require "tensh.image"
  data.make_grid, data.save_image, data.read_image = image.make_grid, image.save_image, image.read_image
  data.encode_png, data.decode_png, data.ImageReadMode = image.encode_png, image.decode_png, image.ImageReadMode
end

-- enumerate(iterable [, start = 0]): Python's enumerate, as `for i, (x, y) in
-- enumerate(loader)` is written: for i, x, y in enumerate(loader) do ... end.
-- i counts from start (0, as Python's); the iterable is a DataLoader or
-- sampler (anything with iter()), a dataset (get and a length: samples
-- 0..n-1), a tensor (its rows), a Lua list, or an iterator function with its
-- state (enumerate(loader:iter())). Leaving the loop by break closes a
-- loader's epoch, as for x, y in loader does.
function data.enumerate(iterable, ...)
  local f, s, c, closer, start
  if type(iterable) == "function" then
    f, s, c, closer = iterable, ...
    start = 0
  else
    iterable = A.plain(iterable) -- a torch.Size is its list, as Python enumerates a tuple
    start = ...
    if start == nil then start = 0 end
    if not is_int(start) then A.raise("enumerate: start must be an integer, got %s", A.show(start)) end
    if type(iterable) == "table" and type(iterable.iter) == "function" then
      f, s, c, closer = iterable:iter()
    elseif torch.is_tensor(iterable) then
      if iterable:dim() == 0 then A.raise("enumerate: iteration over a 0-d tensor") end
      local n, r = iterable:size(0), -1
      f = function() r = r + 1 if r < n then return iterable[r] end end
    elseif type(iterable) == "table" and type(iterable.get) == "function" then
      local n, r = check_dataset(iterable, "enumerate"), -1
      f = function()
        r = r + 1
        if r < n then return iterable:get(r) end
      end
    elseif type(iterable) == "table" and getmetatable(iterable) == nil then
      local r = 0
      f = function() r = r + 1 return iterable[r] end
    else
      A.raise("enumerate: expected a DataLoader, a dataset, a sampler, a tensor, a list or an iterator function, got %s",
        A.typename(iterable))
    end
  end
  local i = start - 1
  local function counted(...)
    c = ...
    if c == nil then return nil end
    i = i + 1
    return i, ...
  end
  return function() return counted(f(s, c)) end, nil, nil, closer
end
-- a global too, as Python's builtin
if rawget(_G, "enumerate") == nil then rawset(_G, "enumerate", data.enumerate) end

-- every class above: methods check they got their object (loader.iter() for
-- loader:iter()); instances join with .. as they print
for _, c in ipairs(made) do
  local name = c.__name
  require("tensh.classes").setup(c, {var = name == "DataLoader" and "loader" or name:find("Sampler$") and "sampler"
    or "dataset"})
end
require("tensh.printable").give(Transform)

-- ported code says torch.utils.data
torch.utils = torch.utils or {}
torch.utils.data = data

return data
