-- A short tour of tensh's tensors, run by `make demo`: creation, dtypes,
-- views, slicing, broadcasting and elementwise arithmetic. Each section
-- prints what it computes; read this file next to its output.
--
-- Only what is built on the main line today is shown. To add as the other
-- op families land (TODO, one section each):
--   * reductions: x:sum(1, {keepdim = true}), x:mean(), x:max(), x:argmax(-1), x:softmax(-1)
--   * matmul: a:matmul(b), a:mm(b), torch.matmul with broadcasting batches
--   * joining and sorting: torch.cat, torch.stack, x:sort(), x:topk()
--   * index ops: x:index_select, x:gather, boolean-mask indexing
--   * print(x) once printing of values lands (show() below stands in for it)
--   * autograd, nn, optim, then the training demo replaces this tour

-- Formats a tensor's values (nested lists) the way torch prints them.
local function fmt(v)
  if type(v) == "table" then
    local parts = {}
    for i, e in ipairs(v) do parts[i] = fmt(e) end
    return "[" .. table.concat(parts, ", ") .. "]"
  elseif math.type(v) == "integer" or type(v) == "boolean" then
    return tostring(v)
  end
  return string.format("%.4f", v)
end

local function show(label, t)
  local extra = t.dtype ~= torch.float32 and ", dtype=" .. tostring(t.dtype) or ""
  print(string.format("  %-32s %s  %s%s", label, fmt(t:tolist()), tostring(t.shape), extra))
end

-- Prints a label and plain Lua values.
local function say(label, ...)
  local parts = {}
  for k = 1, select("#", ...) do parts[k] = tostring((select(k, ...))) end
  print(string.format("  %-32s %s", label, table.concat(parts, "  ")))
end

local function section(title) print("\n== " .. title) end

print("tensh " .. torch.__version__ .. ": a tour of tensors (dims and indices count from 0, as in PyTorch)")
torch.manual_seed(0)

section("creating tensors")
show("torch.tensor({1, 2, 3})", torch.tensor({1, 2, 3}))
show("torch.tensor({{1.5, 2}, {3, 4}})", torch.tensor({{1.5, 2}, {3, 4}}))
show("torch.zeros(2, 3)", torch.zeros(2, 3))
show("torch.full({2, 2}, 7)", torch.full({2, 2}, 7))
show("torch.arange(0, 10, 3)", torch.arange(0, 10, 3))
show("torch.linspace(0, 1, 5)", torch.linspace(0, 1, 5))
show("torch.eye(3)", torch.eye(3))
show("torch.rand(2, 3) (seeded)", torch.rand(2, 3))
show("torch.randint(0, 10, {5})", torch.randint(0, 10, {5}))

section("dtypes: float32 by default, integers stay int64")
local i = torch.tensor({1, 2, 3})
show("int64 tensor", i)
show("i:float()", i:float())
show("i:to('float16')", i:to("float16"))
show("i:double() / 3", i:double() / 3)
show("i / 2 (true division)", i / 2)
show("i // 2 (floor division)", i // 2)
say("i:exp().dtype", i:exp().dtype)

section("views share storage with their base")
local x = torch.arange(12):view(3, 4)
show("x = arange(12):view(3, 4)", x)
show("x:t()", x:t())
say("x:t():is_contiguous()", x:t():is_contiguous(), "strides", fmt(x:t():stride()))
show("x:reshape(2, 6)", x:reshape(2, 6))
show("x:unsqueeze(0)", x:unsqueeze(0))
show("x:permute(1, 0)", x:permute(1, 0))
show("x:narrow(1, 1, 2)", x:narrow(1, 1, 2))
local row = x:select(0, 1)
row:fill_(0)
show("after x:select(0, 1):fill_(0)", x)

section("indexing and slicing: {start, stop[, step]}, stop excluded")
local y = torch.arange(20):view(4, 5)
show("y", y)
show("y[1]", y[1])
show("y[-1]", y[-1])
show("y[{{0, 2}, 1}]", y[{{0, 2}, 1}])
show("y[{{0, 4, 2}}] (every 2nd row)", y[{{0, 4, 2}}])
say("y[{2, 3}]:item()", y[{2, 3}]:item())
y[0] = -1
show("after y[0] = -1", y)

section("broadcasting and arithmetic")
local col = torch.tensor({{1}, {2}, {3}})
local r = torch.tensor({10, 20, 30, 40})
show("col (3, 1)", col)
show("r (4,)", r)
show("col + r -> (3, 4)", col + r)
show("col * r - 1", col * r - 1)
show("r ^ 2", r ^ 2)
show("r % 7", r % 7)
show("-r", -r)
local a = torch.linspace(-2, 2, 5)
show("a", a)
show("a:relu()", a:relu())
show("a:sigmoid()", a:sigmoid())
show("a:exp()", a:exp())
show("a:abs():sqrt()", a:abs():sqrt())
show("a:clamp(-1, 1)", a:clamp(-1, 1))
show("a:gt(0)", a:gt(0))
show("torch.where(a:gt(0), a, 0)", torch.where(a:gt(0), a, 0))
a:mul_(10)
show("after a:mul_(10) (in place)", a)

section("back to Lua")
say("torch.tensor(2.5):item()", torch.tensor(2.5):item())
say("#x.shape, x.shape[1]", #x.shape, x.shape[1])
say("x:numel(), x:dim()", x:numel(), x:dim())

section("errors are Lua errors that say how to fix them")
local _, err = pcall(function() return torch.ones(2, 3) + torch.ones(4) end)
say("ones(2, 3) + ones(4)  ->", err)
_, err = pcall(function() return torch.ones(2, 3):view(4) end)
say("ones(2, 3):view(4)  ->", err)

print("\nMore in README.md and ../shared/API.md; `build/tensh` opens the prompt.")
