-- Hostile input that once crashed or hung the session: each must give a Lua
-- error that says what was wrong, and the session goes on.
local T = require "harness"
local test, eq, raises, ok, close = T.test, T.eq, T.raises, T.ok, T.close

test("a tensor's metamethods called by hand on something else raise instead of crashing", function()
  local mt = getmetatable(torch.zeros(1))
  raises(function() mt.__gc({}) end, "tensor expected, got table")
  raises(function() mt.__close(io.stdout) end, "tensor expected, got FILE*")
  raises(function() mt.__gc(5) end, "tensor expected, got number")
  raises(function() mt.__close(nil) end, "tensor expected, got nil")
  local t = torch.ones(2)
  mt.__close(t)
  mt.__gc(t) -- a finalizer may run twice
  raises(function() return t + 1 end, "tensor was already freed")
  eq(torch.ones(3):sum():item(), 3, "the session goes on")
end)

test("a userdata given the tensor metatable (debug.setmetatable) is still not a tensor", function()
  -- a file handle is a userdata of a tensor box's size: the box's tag, not the
  -- metatable, tells them apart (the metatable check read its FILE * as a tensor)
  local mt, f = getmetatable(torch.zeros(1)), io.tmpfile()
  local file_mt = debug.getmetatable(f)
  debug.setmetatable(f, mt)
  ok(not torch.is_tensor(f), "is_tensor")
  raises(function() return f + 1 end, "a tensor expected on one side, got userdata and number")
  raises(function() return torch.ones(2) * f end, "tensor or number expected")
  raises(function() return f:sum() end, "tensor expected")
  raises(function() mt.__gc(f) end, "tensor expected")
  debug.setmetatable(f, file_mt)
  f:close()
  local t = torch.ones(2)
  debug.setmetatable(t, nil) -- and a tensor stripped of its metatable is still one to the ops
  eq(torch.add(t, 1):sum():item(), 4, "a tensor without its metatable")
  debug.setmetatable(t, mt) -- its finalizer frees it
end)

test("a module can't contain itself: every way in refuses the cycle, the tree stays walkable", function()
  local a, b = nn.Sequential(nn.Linear(2, 2)), nn.Sequential(nn.Linear(2, 2))
  a:add_module("b", b)
  raises(function() b:add_module("a", a) end, "add_module: module 'a' would contain itself")
  raises(function() b.back = a end, "module assignment: module 'back' would contain itself")
  raises(function() a.me = a end, "it is the module itself")
  local l = nn.ModuleList({nn.ReLU()})
  raises(function() l:append(l) end, "would contain itself")
  raises(function() l[0] = l end, "ModuleList[0]: module '0' would contain itself")
  raises(function() l:insert(0, l) end, "ModuleList:insert")
  local d = nn.ModuleDict()
  raises(function() d:update({x = d}) end, "would contain itself")
  -- a shared child (a DAG) is allowed, as in PyTorch
  local shared = nn.Linear(2, 2)
  local c = nn.Sequential(shared, shared)
  eq(#c:parameters(), 2, "shared parameters counted once")
  local n = 0
  for _ in pairs(a:state_dict()) do n = n + 1 end
  eq(n, 4, "a's state_dict after the refused cycles")
  ok(tostring(a):find("(b): Sequential", 1, true), "printing still works")
end)

test("in-place writes over overlapping memory raise as in PyTorch instead of giving order-dependent results", function()
  for _, dev in ipairs(T.devices()) do
    local b = torch.arange(9, {device = dev}):float():view(3, 3)
    raises(function() b:copy_(b:t()) end, "copy_: unsupported operation: some elements of the input tensor")
    raises(function() b:add_(b:t()) end, "add: unsupported operation: some elements")
    local x = torch.zeros(3, {device = dev})
    raises(function() x:expand(4, 3):add_(1) end, "more than one element of the written-to tensor")
    raises(function() x:expand(2, 3):fill_(1) end, "more than one element of the written-to tensor")
    raises(function() x:expand(2, 3):copy_(torch.ones(2, 3)) end, "more than one element")
    raises(function() x:expand(2, 3):neg_() end, "more than one element")
    close(x:tolist(), {0, 0, 0}, 0, 0, "nothing was written")
    local a = torch.arange(10, {device = dev}):float()
    raises(function() a[{{1, 10}}]:copy_(a[{{0, 9}}]) end, "some elements of the input tensor")
    raises(function() a[{{1, 10}}]:mul_(a[{{0, 9}}]) end, "some elements of the input tensor")
    -- what PyTorch allows: the very same elements, disjoint parts, a clone
    local c = torch.arange(4, {device = dev}):float()
    c:add_(c)
    c:mul_(c)
    c:copy_(c)
    close(c:tolist(), {0, 4, 16, 36}, 0, 0, "full overlap is element-wise")
    local d = torch.arange(6, {device = dev}):float():view(2, 3)
    d[0]:copy_(d[1])
    d[{{}, 0}]:add_(d[{{}, 2}])
    close(d:tolist(), {{8, 4, 5}, {8, 4, 5}}, 0, 0, "disjoint parts of one storage")
    b:copy_(b:t():clone())
    close(b:tolist(), {{0, 3, 6}, {1, 4, 7}, {2, 5, 8}}, 0, 0, "through a clone")
  end
end)

-- a safetensors file with the given header text and data bytes
local function write_safetensors(path, header, data)
  local f = assert(io.open(path, "wb"))
  f:write(string.pack("<I8", #header), header, data)
  f:close()
end

test("NUL bytes in paths and in a file's names and dtypes are refused, not cut short", function()
  local dir = os.tmpname()
  local base = dir .. ".safetensors"
  torch.save({w = torch.ones(2)}, base)
  raises(function() torch.load(base .. "\0x") end, "torch.load: the path holds a NUL byte")
  raises(function() torch.save({w = torch.ones(2)}, base .. "\0y") end, "torch.save: the path holds a NUL byte")
  raises(function() tb.SummaryWriter("runs\0x") end, "SummaryWriter: the path holds a NUL byte")
  local bad_key = '{"a\\u0000b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'
  write_safetensors(base, bad_key, string.pack("<f", 1))
  raises(function() torch.load(base) end, "NUL character")
  local bad_dtype = '{"a":{"dtype":"F32\\u0000","shape":[1],"data_offsets":[0,4]}}'
  write_safetensors(base, bad_dtype, string.pack("<f", 1))
  raises(function() torch.load(base) end, "NUL character")
  -- a header crafted to cost memory is refused before cJSON builds it: deep nesting, a huge array
  write_safetensors(base, '{"a":' .. ("["):rep(5000000) .. ("]"):rep(5000000) .. '}', "")
  raises(function() torch.load(base) end, "nests deeper than a safetensors header")
  write_safetensors(base, '{"a":{"dtype":"F32","shape":[' .. ("1,"):rep(3000000) .. '1],"data_offsets":[0,4]}}', "")
  raises(function() torch.load(base) end, "an array longer than a tensor's shape")
  local good = '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'
  write_safetensors(base, good, string.pack("<f", 2.5))
  eq(torch.load(base).a:item(), 2.5, "the same file without the NUL loads")
  os.remove(base)
  os.remove(dir)
end)

test("sizes and indices at the edge of 64 bits: errors or right answers, never overflowed arithmetic", function()
  raises(function() torch.zeros(1):expand(1 << 62, 2):sum() end, "expand: shape (4611686018427387904, 2) has more elements")
  raises(function() torch.zeros(1, 1, 1, 1, 1, 1, 1, 1):expand(1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000) end,
    "expand: shape")
  raises(function() torch.empty(0, 1 << 53, 1 << 53) end, "more elements than 64-bit sizes can count")
  close(torch.arange(4)[{{1, 4, math.maxinteger - 1}}]:tolist(), {1}, 0, 0, "a step past the end keeps the first element")
  close(torch.arange(10)[{{3, 10, 7}}]:tolist(), {3}, 0, 0, "slice step 7")
  eq(torch.arange(10)[{{2, 2, 3}}]:numel(), 0, "empty slice")
  raises(function() torch.one_hot(torch.tensor(math.maxinteger), -1) end, "too large to infer the number of classes")
  local s = torch.arange(5):split(math.maxinteger)
  eq(#s, 1, "split into one piece")
  eq(s[1]:numel(), 5, "the whole tensor")
  local c = torch.arange(5):chunk(math.maxinteger)
  eq(#c, 5, "chunk: one element a piece, as PyTorch")
  raises(function() torch.arange(5):split({math.maxinteger, math.maxinteger}) end, "split_sizes sum past 64 bits")
  local g = torch.autograd.grad({}, {})
  eq(#g, 0, "grad of nothing is nothing")
end)

test("temporaries a killed torch.save left behind are removed by the next save of that path", function()
  local base = os.tmpname()
  local path = base .. ".safetensors"
  -- a dead process's temporary (pid 99999999 is past the largest pid Linux hands out)
  local stale = path .. ".tmp.99999999"
  local f = assert(io.open(stale, "wb"))
  f:write(("x"):rep(1000))
  f:close()
  local other = path .. ".tmpfile" -- not a temporary of ours: kept
  assert(io.open(other, "wb")):close()
  torch.save({w = torch.ones(2)}, path)
  ok(io.open(stale, "rb") == nil, "the stale temporary is gone")
  local kept = io.open(other, "rb")
  ok(kept ~= nil, "other files stay")
  if kept then kept:close() end
  eq(torch.load(path).w:sum():item(), 2, "the save itself")
  os.remove(path); os.remove(other); os.remove(base)
end)

test("a wrong option value names the function and the option, not 'bad argument #-1'", function()
  -- the function's name is the one it was called by: on the cuda pass the harness's wrapper calls it
  local named = T.device == "cpu"
  local ok1, e1 = pcall(function() return torch.randn(2, {dtype = 5}) end)
  ok(not ok1 and e1:find((named and "randn: " or "") .. "option 'dtype': unknown dtype '5'", 1, true), tostring(e1))
  local ok2, e2 = pcall(function() return torch.zeros(2, {device = "gpu"}) end)
  ok(not ok2 and e2:find((named and "zeros: " or "") .. "option 'device': unknown device 'gpu'", 1, true), tostring(e2))
  local ok3, e3 = pcall(function() return torch.ones(2, {device = {}}) end)
  ok(not ok3 and e3:find("option 'device': device expected, got table", 1, true), tostring(e3))
  ok(not tostring(e1):find("#-1", 1, true), "no negative argument number")
end)

test("options read from a table name the function and the option (dim, min/max, padding_idx, booleans)", function()
  local x = torch.randn(3)
  local e = raises(function() return x:softmax({dim = "a"}) end, "softmax: option 'dim' must be an integer, got string")
  ok(not e:find("#-", 1, true), e)
  raises(function() return x:log_softmax({dim = 0.5}) end,
    "log_softmax: option 'dim' must be an integer, got a number with a fraction")
  raises(function() return torch.cumsum(x, {dim = true}) end, "cumsum: option 'dim' must be an integer, got boolean")
  close(x:softmax({dim = 0}), x:softmax(0), 1e-6, 1e-7, "the option still works")
  raises(function() return x:clamp({min = "low"}) end, "clamp: option 'min' must be a number or a tensor, got string")
  raises(function() return x:clamp({max = {}}) end, "clamp: option 'max' must be a number or a tensor, got table")
  close(x:clamp({min = 0}), T.map(T.flat(x), function(v) return math.max(v, 0) end), 0, 0, "clamp({min = 0})")
  local w, idx = torch.randn(4, 2), torch.tensor({0, 1})
  raises(function() return torch.embedding(w, idx, {padding_idx = "x"}) end,
    "embedding: option 'padding_idx' must be an integer, got string")
  raises(function() return x:sum(0, {keepdim = 1}) end, "sum: option 'keepdim' must be a boolean, got number")
  raises(function() return x:gelu({approximate = 5}) end, "gelu: approximate must be 'none' or 'tanh', got number")
  local img = torch.randn(1, 1, 4, 4)
  local e2 = raises(function() return nn.F.max_pool2d(img, 2, {stride = 0.5}) end,
    "option 'stride' must be an integer or a pair of integers {h, w}, got 0.5")
  ok(not e2:find("#-", 1, true), e2)
  raises(function() return nn.F.max_pool2d(img, 1.5) end, "kernel_size must be an integer or a pair of integers {h, w}, got 1.5")
  raises(function() return nn.MaxPool2d(nn.ReLU())(img) end,
    "max_pool2d: kernel_size must be an integer or a pair of integers {h, w}, got ReLU")
  local pair_like = setmetatable({1, 1}, {__name = "PairLike"}) -- an object, even with two entries, is no pair
  raises(function() return torch.conv2d(img, torch.randn(1, 1, 1, 1), nil, {stride = pair_like}) end,
    "option 'stride' must be an integer or a pair of integers {h, w}, got PairLike")
end)

test("an op that nn or optim calls for the user fails at the user's line, not inside lua/tensh", function()
  local x = torch.randn(2, 3)
  local err = select(2, pcall(function()
    local y = nn.F.softmax(x, 5) -- the op's own error, raised in C under lua/tensh's nn_functional
    return y
  end))
  ok(tostring(err):find("test_hostile.lua:%d+: softmax: dimension out of range"), tostring(err))
  ok(not tostring(err):find("lua/tensh/", 1, true), tostring(err))
end)

test("grad scopes' and grad_fns' metamethods called by hand on something else name what they expected", function()
  local scope = torch.no_grad()
  local close = getmetatable(scope).__close
  raises(function() close(5) end, "tensh.GradMode expected, got number")
  raises(function() close(torch.zeros(1)) end, "tensh.GradMode expected, got Tensor")
  close(scope)
  ok(torch.is_grad_enabled(), "closing the real scope still restores the mode")
  local fn = (torch.randn(2, {requires_grad = true}) * 2).grad_fn
  local tostr = getmetatable(fn).__tostring
  raises(function() tostr(true) end, "tensh.GradFn expected, got boolean")
  eq(tostr(fn), tostring(fn), "the real grad_fn prints")
  local index = getmetatable(fn).__index
  raises(function() index(true, "next_functions") end, "tensh.GradFn expected, got boolean")
  local fake = setmetatable({name = "Fake"}, getmetatable(fn))
  eq(#fake.next_functions, 0, "a table given the class by hand has no node: no inputs")
  ok(fake ~= fn, "nor equals a real one")
end)

test("torch._dist's all_gather and reduce_scatter check the sizes MPI takes on trust (the fuzzer's heap overflow)", function()
  local d = torch._dist
  local function zeros(...) return torch.zeros({...}, {device = "cpu"}) end -- torch._dist takes host tensors
  local want = "bad argument #1 to 'all_gather' (float32 tensor of 20 elements (world size 1 x 20) expected, got float32 of 48)"
  raises(function() d.all_gather(zeros(2, 3, 8), zeros(5, 4)) end, want, "all_gather into a larger out")
  raises(function() d.all_gather(torch.zeros(20, {dtype = "float64", device = "cpu"}), zeros(5, 4)) end, "got float64 of 20")
  raises(function() d.reduce_scatter(zeros(3), zeros(5, 4), 0) end,
    "bad argument #2 to 'reduce_scatter' (float32 tensor of 3 elements (world size 1 x 3) expected, got float32 of 20)")
  -- with MPI up (a world of one, as in the fuzzer's process), where the call once wrote past out: in a
  -- child process, since MPI stays up until exit
  local tensh = (os.getenv("TENSH_BUILD") or "../../build") .. "/tensh"
  local p = io.popen(T.MPI_ASAN_ENV .. tensh .. [[ -e 'torch.dist.init_process_group("mpi")
    print(pcall(torch._dist.all_gather, torch.zeros(2, 3, 8), torch.zeros(5, 4)))' 2>&1]])
  local out = p:read("a")
  p:close()
  ok(out:find(want, 1, true), "all_gather with MPI running: " .. out)
end)

test("default_collate of a sample that contains itself, and layer_norm's normalized_shape with a hole (the fuzzer's)", function()
  local data, F = torch.utils.data, torch.nn.functional
  local s = {}
  s[1] = s
  local msg = raises(function() data.default_collate({s, s}) end, "collate: samples nest more than 100 tables deep")
  ok(msg:find("test_hostile.lua", 1, true), "at the caller's line: " .. msg)
  msg = raises(function() data.default_collate({{torch.zeros(2)}, {torch.zeros(3)}}) end, "sample 1 has shape")
  ok(msg:find("test_hostile.lua", 1, true), "a nested sample's error at the caller's line: " .. msg)
  raises(function() F.layer_norm(torch.randn(2, 3), {3, nil, 1}) end, "normalized_shape[2] must be an integer, got nil")
  raises(function() F.layer_norm(torch.randn(2, 3), {1, 1, 1, 1, 1, 1, 1, 1, 1}) end, "has more dims than the input's 2")
end)

test("torch._dist's send and recv refuse this process's own rank and ranks outside the group (a fuzzed recv hung)", function()
  local tensh = (os.getenv("TENSH_BUILD") or "../../build") .. "/tensh"
  local p = io.popen(T.MPI_ASAN_ENV .. "timeout 60 " .. tensh .. [[ -e 'torch.dist.init_process_group("mpi")
    local t = torch.zeros(3, 0, 2)
    print(pcall(torch._dist.recv, t, 0)); print(pcall(torch._dist.send, t, 0)); print(pcall(torch._dist.recv, t, 1))' 2>&1]])
  local out = p:read("a")
  p:close()
  ok(out:find("bad argument #2 to 'recv' (the rank of another process, 0 to 0 but not 0 (this process), expected, got 0)",
    1, true), "recv from itself: " .. out)
  ok(out:find("bad argument #2 to 'send' (the rank of another process", 1, true), "send to itself: " .. out)
  ok(out:find("expected, got 1)", 1, true), "recv from outside the group: " .. out)
end)

T.run()
