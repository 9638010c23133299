-- A short tour of tensh's tensors, run by `make demo` until the training
-- demo lands (autograd, nn and optim come with the training issue): creation,
-- dtypes, views, indexing, broadcasting, reductions, matmul, joining and
-- sorting. Read this file next to its output; every line is one you can type
-- at the prompt.

local cli = require "tensh.cli"
cli.parse(arg, "A tour of tensh's tensors: each line as typed at the prompt, then what it gives.", {})

-- Prints a line that defines something, as typed at the prompt (which
-- prints nothing for an assignment).
local function define(code) print("> " .. code) end

-- Prints what a line of code gives, the way the prompt would.
local function show(code, ...)
  local parts = {}
  for k = 1, select("#", ...) do parts[k] = tostring((select(k, ...))) end
  local value = table.concat(parts, "\t")
  print("> " .. code)
  print(value)
end

local function section(title) print("\n-- " .. title .. " " .. string.rep("-", 60 - #title)) end

print("tensh " .. torch.__version__ .. ": a tour of tensors (dims and indices count from 0, as in PyTorch)")
torch.manual_seed(0)

section("creating tensors")
show("torch.tensor({{1.5, 2}, {3, 4}})", torch.tensor({{1.5, 2}, {3, 4}}))
show("torch.arange(0, 10, 3)", torch.arange(0, 10, 3))
show("torch.linspace(0, 1, 5)", torch.linspace(0, 1, 5))
show("torch.eye(3)", torch.eye(3))
show("torch.randn(2, 3)  -- seeded: the same values on every run", torch.randn(2, 3))
show("torch.randint(0, 10, {5})", torch.randint(0, 10, {5}))

section("dtypes: float32 by default, integers stay int64")
local i = torch.tensor({1, 2, 3})
show("i = torch.tensor({1, 2, 3}); i.dtype", i.dtype)
show("i / 2  -- true division gives floats", i / 2)
show("i // 2", i // 2)
show("i:to('float16') * 1.5", i:to("float16") * 1.5)

section("views share storage with their base")
local x = torch.arange(12):view(3, 4)
show("x = torch.arange(12):view(3, 4)", x)
show("x:t(), x:t():is_contiguous()", x:t(), x:t():is_contiguous())
show("x:reshape(2, 6)", x:reshape(2, 6))
x:select(0, 1):fill_(0)
show("x:select(0, 1):fill_(0); x", x)

section("indexing: {start, stop[, step]}, stop excluded, negatives from the end")
local y = torch.arange(20):view(4, 5)
define("y = torch.arange(20):view(4, 5)")
show("y[-1]", y[-1])
show("y[{{0, 4, 2}, {1, 3}}]", y[{{0, 4, 2}, {1, 3}}])
show("y[y:gt(15)]  -- a bool mask", y[y:gt(15)])
show("y[torch.tensor({3, 0})]  -- an index tensor", y[torch.tensor({3, 0})])
y[{{}, 0}] = -1
show("y[{{}, 0}] = -1; y", y)

section("broadcasting and elementwise ops")
local col, row = torch.tensor({{1}, {2}, {3}}), torch.tensor({10, 20, 30, 40})
define("col, row = torch.tensor({{1}, {2}, {3}}), torch.tensor({10, 20, 30, 40})")
show("col (3, 1) + row (4,)", col + row)
local a = torch.linspace(-2, 2, 5)
define("a = torch.linspace(-2, 2, 5)")
show("a:relu(), a:sigmoid()", a:relu(), a:sigmoid())
show("torch.where(a:gt(0), a, 0)", torch.where(a:gt(0), a, 0))

section("reductions")
local m = torch.tensor({{1.0, 5.0, 2.0}, {4.0, 3.0, 6.0}})
define("m = torch.tensor({{1.0, 5.0, 2.0}, {4.0, 3.0, 6.0}})")
show("m:sum(), m:mean(1)", m:sum(), m:mean(1))
show("values, indices = m:max(1)", m:max(1))
show("m:argmax(-1), m:std()", m:argmax(-1), m:std())
show("m:softmax(-1)", m:softmax(-1))
show("m:cumsum(1)", m:cumsum(1))

section("matrix products (OpenBLAS)")
local w = torch.randn(3, 2)
define("w = torch.randn(3, 2)")
show("m:matmul(w)", m:matmul(w))
show("torch.randn(5, 2, 3):matmul(w).shape  -- batches broadcast", torch.randn(5, 2, 3):matmul(w).shape)
show("torch.dot(torch.ones(3), torch.arange(3):float())", torch.dot(torch.ones(3), torch.arange(3):float()))

section("joining, splitting, sorting")
show("torch.cat({m, m}, 1)", torch.cat({m, m}, 1))
show("torch.stack({m, m}).shape", torch.stack({m, m}).shape)
local v = torch.tensor({3, 1, 4, 1, 5, 9, 2, 6})
define("v = torch.tensor({3, 1, 4, 1, 5, 9, 2, 6})")
show("v:sort()", v:sort())
show("v:topk(3)", v:topk(3))
show("torch.unique(v)", torch.unique(v))

section("errors are Lua errors that say how to fix them")
show("pcall(function() return torch.ones(2, 3) + torch.ones(4) end)",
  pcall(function() return torch.ones(2, 3) + torch.ones(4) end))
show("pcall(function() return torch.ones(2, 3):t():view(6) end)",
  pcall(function() return torch.ones(2, 3):t():view(6) end))
show("pcall(torch.matmul, torch.ones(2, 3), torch.ones(2, 3))",
  pcall(torch.matmul, torch.ones(2, 3), torch.ones(2, 3)))

print("\nMore in README.md and docs/api.md; `build/tensh` opens the prompt, where help() says how to start.")
