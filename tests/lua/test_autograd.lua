-- Autograd: every differentiable op's backward against float64 finite
-- differences (gradcheck.lua), and the engine's behaviour: accumulation,
-- retain_graph, no_grad, autograd.grad, detach, in-place rules, memory.
local T = require "harness"
local G = require "gradcheck"
local test, eq, raises, ok = T.test, T.eq, T.raises, T.ok
local R = T.rand_list

-- Every differentiable unary op of the registry (a GRAD column in
-- src/ops/ops.def), on inputs inside its domain: (-2, 2) unless DOMAIN
-- says otherwise; an op whose call takes parameters is called as CALL says.
local DOMAIN = {
  log = {0.2, 3}, log1p = {0.2, 3}, sqrt = {0.2, 3}, rsqrt = {0.2, 3}, reciprocal = {0.2, 3}, log2 = {0.2, 3},
  log10 = {0.2, 3}, acosh = {1.2, 3}, asin = {-0.9, 0.9}, acos = {-0.9, 0.9}, atanh = {-0.9, 0.9},
  erfinv = {-0.9, 0.9}, tan = {-1.2, 1.2},
}
local CALL = {clamp = function(t) return t:clamp(-1, 0.5) end, pow_scalar = function(t) return t:pow(3) end}

test("unary ops: every differentiable one of the registry", function()
  local names, ops = T.unary_ops()
  local checked = {}
  for _, name in ipairs(names) do
    if ops[name].grad_fn then
      local d = DOMAIN[name] or {-2, 2}
      G.check(name, CALL[name] or function(t) return t[name](t) end, {R({3, 4}, d[1], d[2])})
      checked[#checked + 1] = name
    end
  end
  ok(#checked >= 37, "differentiable unary ops checked: " .. table.concat(checked, " "))
  local x = R({3, 4}, -2, 2)
  local pos = R({3, 4}, 0.2, 3)
  G.check("gelu tanh", function(t) return t:gelu({approximate = "tanh"}) end, {x})
  G.check("clamp min", function(t) return t:clamp({min = 0.1}) end, {x})
  G.check("pow fractional", function(t) return t:pow(1.5) end, {pos})
  G.check("x ^ 2", function(t) return t ^ 2 end, {x})
  G.check("floor has zero gradient", function(t) return t:floor() + t end, {x})
end)

-- y:backward(g), and a function giving how many kernels of an op it ran on the suite's device
local function backward_dispatches(y, g)
  torch.backends._dispatch_counts(true)
  local before = torch.backends._dispatch_counts()[T.device]
  y:backward(g)
  local after = torch.backends._dispatch_counts(false)[T.device]
  return function(op) return (after[op] or 0) - (before[op] or 0) end
end

-- ReLU's backward is one kernel (threshold_backward), checked here against
-- its definition computed in Lua, ATen's: y <= 0 (0, -0, a negative) gives
-- +0, anything else (a positive, NaN) passes g; g contiguous, strided and
-- expanded (stride 0)
test("relu's gradient is y <= 0 ? 0 : g in one kernel: every floating dtype, strided and expanded gradients, NaN, -0, inf", function()
  local vals = {-2, -0.0, 0.0, 1e-3, 3, 0 / 0, math.huge, -math.huge, 0.5, -1e-3, 7, -7}
  local n = #vals
  for _, dt in ipairs({"float32", "float64", "float16", "bfloat16"}) do
    local base = torch.arange(1, 2 * n + 1):to(dt) * 0.75
    local grads = {
      contiguous = base:narrow(0, 0, n),
      strided = base[{{0, 2 * n, 2}}],
      expanded = torch.tensor({2.5}):to(dt):expand(n),
    }
    for layout, g in pairs(grads) do
      local x = torch.tensor(vals):to(dt):requires_grad_(true)
      local y = x:relu()
      local ran = backward_dispatches(y, g)
      local what = dt .. " " .. layout
      eq(ran("threshold_backward"), 1, what .. ": one threshold_backward")
      eq(ran("where"), 0, what .. ": no where")
      local yl, gl, got = y:double():tolist(), g:double():tolist(), x.grad:double():tolist()
      for i = 1, n do
        local want = yl[i] <= 0 and 0.0 or gl[i]
        if got[i] ~= want or 1 / got[i] ~= 1 / want then
          eq(got[i], want, ("%s: element %d (x = %s, g = %s)"):format(what, i, tostring(vals[i]), tostring(gl[i])))
        end
      end
      eq(x.grad.dtype, x.dtype, what .. ": dtype")
    end
  end
  -- and through a graph: finite differences in float64 away from the kink
  local x = torch.tensor({{-1.5, 0.7, 2.0}, {0.3, -0.2, -3.0}}, {dtype = "float64"})
  G.check("relu in a chain", function(t) return (t * 2):relu() * t:exp() end, {x:tolist()})
end)

-- GELU's backward is one kernel too (gelu_backward, PyTorch's formulas), checked
-- against its definition in Lua doubles: exact g (Phi(x) + x phi(x)) and the tanh
-- approximation's derivative; erf as Numerical Recipes' erfc (~1e-7)
local function erf(x)
  local t = 1 / (1 + 0.5 * math.abs(x))
  local y = 1 - t * math.exp(-x * x - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
    t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))))
  return x >= 0 and y or -y
end
local function gelu_grad(x, tanh_approx)
  if tanh_approx then
    local b, k = math.sqrt(2 / math.pi), 0.044715
    local t = 1 - 2 / (math.exp(2 * b * (x + k * x ^ 3)) + 1) -- tanh (Lua 5.4 has no math.tanh)
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * b * (1 + 3 * k * x * x)
  end
  return 0.5 * (1 + erf(x / math.sqrt(2))) + x * math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
end

test("gelu's gradient in one kernel, exact and tanh: every floating dtype, strided gradients", function()
  local vals = {-4, -1.5, -0.5, -1e-3, 0.0, 1e-3, 0.5, 1.25, 3, 6, -6, 0.75}
  local n = #vals
  local tol = {float32 = 1e-6, float64 = 1e-6, float16 = 2e-3, bfloat16 = 1.6e-2}
  for _, approx in ipairs({"none", "tanh"}) do
    for _, dt in ipairs({"float32", "float64", "float16", "bfloat16"}) do
      local g = (torch.arange(1, 2 * n + 1):to(dt) * 0.25)[{{0, 2 * n, 2}}]
      local x = torch.tensor(vals):to(dt):requires_grad_(true)
      local ran = backward_dispatches(x:gelu({approximate = approx}), g)
      local what = dt .. " " .. approx
      eq(ran("gelu_backward"), 1, what .. ": one gelu_backward")
      eq(ran("exp") + ran("where"), 0, what .. ": no composite")
      local xl, gl, got = x:detach():double():tolist(), g:double():tolist(), x.grad:double():tolist()
      for i = 1, n do
        local want = gl[i] * gelu_grad(xl[i], approx == "tanh")
        ok(math.abs(got[i] - want) <= tol[dt] * (1 + math.abs(want)),
          ("%s: element %d (x = %g): %.9g, expected %.9g"):format(what, i, xl[i], got[i], want))
      end
      eq(x.grad.dtype, x.dtype, what .. ": dtype")
    end
  end
end)

test("binary ops with broadcasting and Lua numbers", function()
  local a, b, c = R({2, 3, 4}), R({3, 1}), R({4}, 0.5, 2)
  G.check("add", function(x, y) return x + y end, {a, b})
  G.check("add alpha", function(x, y) return x:add(y, {alpha = -2.5}) end, {a, c})
  G.check("sub", function(x, y) return x - y end, {a, b})
  G.check("mul", function(x, y) return x * y end, {a, b})
  G.check("div", function(x, y) return x / y end, {a, c})
  G.check("pow tensor", function(x, y) return x ^ y end, {R({3, 4}, 0.5, 2), R({3, 4}, -1, 2)})
  G.check("maximum", function(x, y) return torch.maximum(x, y) end, {a, b})
  G.check("minimum", function(x, y) return torch.minimum(x, y) end, {a, b})
  G.check("numbers", function(x) return 3 - x * 2 + 1 / (x + 10) end, {a})
  G.check("remainder", function(x, y) return x % y end, {R({5}, 1, 3), R({5}, 0.3, 0.7)})
  G.check("where", function(x, y) return torch.where(x:gt(0), x, y) end, {a, b})
  G.check("lerp", function(x, y, w) return torch.lerp(x, y, w) end, {R({4}), R({4}), R({4}, 0, 1)})
  G.check("reuse", function(x) return x * x * x end, {c})
end)

test("views", function()
  local x = R({2, 3, 4})
  G.check("reshape", function(t) return t:reshape(4, 6) * 1 end, {x})
  G.check("view -1", function(t) return t:view(-1) end, {x})
  G.check("transpose", function(t) return t:transpose(0, 2):contiguous() end, {x})
  G.check("permute", function(t) return t:permute(2, 0, 1) * torch.arange(4, {dtype = "float64"}):view(4, 1, 1) end, {x})
  G.check("expand", function(t) return t:expand(5, 2, 3, 4) end, {R({2, 1, 4})})
  G.check("slice", function(t) return t[{ {}, {0, 3, 2}, {1} }] end, {x})
  G.check("select", function(t) return t[1][-1] end, {x})
  G.check("narrow", function(t) return t:narrow(2, 1, 2) end, {x})
  G.check("squeeze/unsqueeze", function(t) return t:unsqueeze(1):squeeze(1):flatten(1) end, {x})
  G.check("t()", function(t) return t:t():matmul(t) end, {R({3, 2})})
  G.check("to float32 and back", function(t) return t:float():double() * 2 end, {R({3})}, {eps = 1e-3, tol = 1e-3})
end)

test("reductions and scans", function()
  local x = R({3, 4}, 0.5, 2)
  G.check("sum", function(t) return t:sum() end, {x})
  G.check("sum dim", function(t) return t:sum(1) end, {x})
  G.check("sum dims keepdim", function(t) return t:sum({0, 1}, {keepdim = true}) end, {x})
  G.check("mean", function(t) return t:mean(0) end, {x})
  G.check("prod", function(t) return t:prod(1) end, {x})
  G.check("var", function(t) return t:var(1) end, {x})
  G.check("std", function(t) return t:std() end, {x})
  G.check("std unbiased false", function(t) return t:std(0, {unbiased = false}) end, {x})
  for _, p in ipairs({1, 2, 3, math.huge}) do
    G.check("norm " .. p, function(t) return t:norm(p) end, {R({5}, -2, 2)})
  end
  G.check("norm dim", function(t) return t:norm(2, 1) end, {x})
  G.check("logsumexp", function(t) return t:logsumexp(1) end, {x})
  G.check("amax", function(t) return t:amax(0) end, {x})
  G.check("max values", function(t) local v = t:max(1) return v end, {x})
  G.check("min values keepdim", function(t) local v = t:min(0, true) return v end, {x})
  G.check("max all", function(t) return t:max() end, {x})
  G.check("cumsum", function(t) return t:cumsum(1) end, {x})
  G.check("softmax", function(t) return t:softmax(1) end, {x})
  G.check("log_softmax", function(t) return t:log_softmax(0) end, {x})
end)

test("matrix products", function()
  G.check("mm", function(a, b) return a:mm(b) end, {R({3, 4}), R({4, 2})})
  G.check("matmul batch broadcast", function(a, b) return a:matmul(b) end, {R({2, 1, 3, 4}), R({5, 4, 2})})
  G.check("matmul vector-matrix", function(a, b) return a:matmul(b) end, {R({4}), R({2, 4, 3})})
  G.check("matmul matrix-vector", function(a, b) return a:matmul(b) end, {R({2, 3, 4}), R({4})})
  G.check("dot", function(a, b) return a:dot(b) end, {R({5}), R({5})})
  G.check("mv", function(a, b) return a:mv(b) end, {R({3, 4}), R({4})})
  G.check("bmm", function(a, b) return a:bmm(b) end, {R({2, 3, 4}), R({2, 4, 2})})
  G.check("addmm", function(c, a, b) return torch.addmm(c, a, b, {beta = 0.5, alpha = 2}) end, {R({2}), R({3, 4}), R({4, 2})})
  G.check("outer", function(a, b) return torch.outer(a, b) end, {R({3}), R({2})})
  -- transposed (column-major) operands take the other formula for their gradient
  G.check("mm of transposes", function(a, b) return a:t():mm(b:t()) end, {R({4, 3}), R({2, 4})})
  G.check("addmm with w:t()", function(c, x, w) return torch.addmm(c, x, w:t()) end, {R({2}), R({3, 4}), R({2, 4})})
end)

test("joining and indexing", function()
  G.check("cat", function(a, b) return torch.cat({a, b}, 1) end, {R({2, 3}), R({2, 2})})
  G.check("stack", function(a, b) return torch.stack({a, b}, 1) end, {R({2, 3}), R({2, 3})})
  local idx = torch.tensor({{0, 2, 2}, {1, 0, 1}})
  G.check("gather", function(a) return a:gather(1, idx) end, {R({2, 3})})
  G.check("index_select repeats", function(a) return a:index_select(0, torch.tensor({2, 0, 2})) end, {R({3, 2})})
  G.check("x[idx]", function(a) return a[torch.tensor({-1, 0, 0})] end, {R({3, 2})})
  G.check("x[mask]", function(a) return a[a:gt(0)] end, {R({3, 4})})
  G.check("masked_select broadcast", function(a) return a:masked_select(torch.tensor({true, false, true})) end, {R({2, 3})})
  G.check("sort", function(a) local v = a:sort({dim = 1, descending = true}) return v end, {R({2, 5})})
  G.check("topk", function(a) local v = a:topk(2) return v end, {R({3, 5})})
  G.check("scatter", function(a, s) return a:scatter(1, torch.tensor({{0}, {2}}), s) end, {R({2, 3}), R({2, 1})})
  G.check("scatter_add", function(a, s) return a:scatter_add(1, torch.tensor({{0, 0}, {2, 1}}), s) end, {R({2, 3}), R({2, 2})})
  G.check("split", function(a) local p = a:split(2, 1) return p[1] * 2 + p[2]:sum() end, {R({2, 4})})
end)

test("gradients accumulate across backward calls and into broadcast shapes", function()
  local x = torch.tensor({1.0, 2.0}, {requires_grad = true})
  local b = torch.tensor({3.0}, {requires_grad = true})
  ;(x * b):sum():backward()
  T.close(x.grad, {3, 3})
  T.close(b.grad, {3})
  ;(x * b):sum():backward()
  T.close(x.grad, {6, 6})
  T.close(b.grad, {6})
  x.grad = nil
  ;(x * 2):sum():backward()
  T.close(x.grad, {2, 2})
  eq(x.grad.dtype, torch.float32, "grad dtype")
  local i = torch.tensor({1, 2}) -- an int tensor times a float leaf: the grad keeps the leaf's dtype
  local w = torch.tensor(2.0, {requires_grad = true})
  ;(i * w):sum():backward()
  T.close(w.grad, 3)
  eq(tostring(w.grad.shape), "torch.Size([])", "0-dim grad")
end)

test("a leaf adopts an unshared gradient, copies a shared one, sums into its .grad in place", function()
  -- a Linear layer's step: the weight's and bias's gradients are fresh
  -- results nothing else holds, so .grad takes them without a copy
  local xs, ws = R({5, 4}), R({3, 4})
  local x, w = torch.tensor(xs), torch.tensor(ws, {requires_grad = true})
  local b = torch.zeros(3, {requires_grad = true})
  local gy = R({5, 3})
  local y = x:matmul(w:t()) + b
  local before = torch.backends._dispatch_counts(true) -- the counts are cumulative: compare with these
  y:backward(torch.tensor(gy))
  local counts = torch.backends._dispatch_counts(false)
  -- float64 reference: dW = gy^T x, db = column sums of gy
  local want_w, want_b = {}, {}
  for i = 1, 3 do
    want_w[i], want_b[i] = {}, 0
    for n = 1, 5 do want_b[i] = want_b[i] + gy[n][i] end
    for j = 1, 4 do
      local s = 0
      for n = 1, 5 do s = s + gy[n][i] * xs[n][j] end
      want_w[i][j] = s
    end
  end
  T.close(w.grad, want_w, 1e-5, 1e-5)
  T.close(b.grad, want_b, 1e-5, 1e-5)
  eq(counts.cpu.copy - before.cpu.copy, 0, "copies during the Linear backward")
  -- a second backward sums into the same memory (what the optimizer holds)
  local held, ptr = w.grad, w.grad:data_ptr()
  ;(x:matmul(w:t()) + b):backward(torch.tensor(gy))
  eq(w.grad:data_ptr(), ptr, "in-place accumulation keeps .grad's memory")
  T.close(held, T.map(want_w, function(v) return 2 * v end), 1e-5, 1e-5)
  -- one fresh gradient reaching two leaves: one adopts it, the other copies
  local p = torch.tensor({1.0, 2.0, 3.0}, {requires_grad = true})
  local q = torch.tensor({4.0, 5.0, 6.0}, {requires_grad = true})
  ;((p + q) * 2):sum():backward()
  ok(p.grad:data_ptr() ~= q.grad:data_ptr(), "two leaves never share a .grad")
  p.grad:add_(1)
  T.close(p.grad, {3, 3, 3})
  T.close(q.grad, {2, 2, 2})
  -- a gradient the caller passed in stays the caller's
  local leaf = torch.tensor({1.0, 2.0}, {requires_grad = true})
  local seed = torch.tensor({0.5, -1.0})
  leaf:backward(seed)
  seed:add_(10)
  T.close(leaf.grad, {0.5, -1.0})
  -- the gradient of a sum is an expanded view: copied, then summed into
  local v = torch.tensor({1.0, 2.0, 3.0}, {requires_grad = true})
  v:sum():backward()
  v:sum():backward()
  T.close(v.grad, {2, 2, 2})
  -- a .grad the user set to an expanded view is not written through
  local base = torch.zeros(1)
  v.grad = base:expand(3)
  ;(v * 3):sum():backward()
  T.close(v.grad, {3, 3, 3})
  T.close(base, {0})
end)

test("backward errors explain themselves", function()
  local x = torch.ones(3, {requires_grad = true})
  local y = (x * x):sum()
  y:backward()
  raises(function() y:backward() end, "backward through the graph a second time")
  local z = (x * x):sum()
  z:backward({retain_graph = true})
  z:backward()
  T.close(x.grad, {6, 6, 6})
  raises(function() torch.ones(2):sum():backward() end, "does not require grad")
  raises(function() (x * 2):backward() end, "only for one-element outputs")
  raises(function() (x * 2):backward(torch.ones(2)) end, "gradient has shape (2,)")
  raises(function() torch.ones(2, {dtype = "int64"}):requires_grad_() end, "floating point")
  raises(function() x:add_(1) end, "a leaf Variable that requires grad is being used in an in-place operation.")
  raises(function() x.grad = torch.ones(4) end, "assigned grad has shape (4,)")
  local a = x * 2
  local b = a * a -- saves a
  torch.no_grad(function() a:add_(1) end)
  raises(function() b:sum():backward() end, "has been modified by an inplace operation")
  T.close(x + 1, {2, 2, 2}) -- the session goes on
end)

-- PyTorch's backward(gradient=None, retain_graph=True): the options after a
-- nil gradient were once dropped, so the graph was freed and a misspelt key passed
test("backward(nil, opts) reads and checks its options", function()
  local x = torch.ones(3, {requires_grad = true})
  local y = (x * x):sum()
  y:backward(nil, {retain_graph = true})
  y:backward() -- the graph was kept
  T.close(x.grad, {4, 4, 4})
  local z = (x * x):sum()
  z:backward(torch.tensor(1.0), {retain_graph = true})
  z:backward(nil)
  T.close(x.grad, {8, 8, 8})
  raises(function() (x * x):sum():backward(nil, {retain_grap = true}) end,
    "backward: unknown option 'retain_grap' (expected one of: create_graph, retain_graph; did you mean 'retain_graph'?)")
  raises(function() (x * x):sum():backward(nil, true) end, "options table expected, got boolean")
  raises(function() (x * x):sum():backward(nil, {create_graph = true}) end, "create_graph = true is not supported")
  T.close(x.grad, {8, 8, 8}) -- none of the refused calls accumulated
end)

T.cpu_test("no_grad and enable_grad scopes, detach, requires_grad", function()
  local x = torch.ones(2, {requires_grad = true})
  do
    local _ <close> = torch.no_grad()
    eq((x * 2).requires_grad, false, "inside no_grad")
    eq(torch.is_grad_enabled(), false, "grad mode off")
    do
      local _ <close> = torch.enable_grad()
      eq((x * 2).requires_grad, true, "enable_grad inside no_grad")
    end
  end
  eq(torch.is_grad_enabled(), true, "restored")
  local r = torch.no_grad(function(a) return a * 3 end, x)
  eq(r.requires_grad, false, "function form")
  local okk = pcall(torch.no_grad, function() error("boom") end)
  eq(okk, false, "error propagates")
  eq(torch.is_grad_enabled(), true, "restored after an error")
  local y = x * 2
  eq(y.requires_grad, true, "y requires grad")
  eq(y.is_leaf, false, "y is not a leaf")
  eq(tostring(y.grad_fn), "<MulBackward0>", "grad_fn")
  eq(tostring(y), "tensor([2., 2.], grad_fn=<MulBackward0>)", "print shows grad_fn")
  eq(tostring(x), "tensor([1., 1.], requires_grad=True)", "print shows requires_grad")
  eq(tostring(y:sum().grad_fn), "<SumBackward0>", "full sum")
  eq(tostring(y:sum(0).grad_fn), "<SumBackward1>", "sum over a dim")
  local d = y:detach()
  eq(d.requires_grad, false, "detach")
  eq(d.grad_fn, nil, "detached has no grad_fn")
  local w = torch.zeros(2)
  w.requires_grad = true
  eq(w.requires_grad, true, "requires_grad setter")
  raises(function() y.requires_grad = false end, "leaf")
end)

test("slice and select backward: g in the region, exact zeros elsewhere, whatever memory the allocator hands back", function()
  local R, C = 6, 256 -- 6 KiB: the caching allocator's, reused from the tensors of 7s just freed
  local cases = {
    {"narrow in the middle", function(x) return x:narrow(0, 1, 2) end, 1, 3},
    {"narrow at the start", function(x) return x:narrow(0, 0, 2) end, 0, 2},
    {"narrow to the end", function(x) return x:narrow(0, 3, 3) end, 3, 6},
    {"select", function(x) return x:select(0, 2) end, 2, 3},
    {"select from the end", function(x) return x:select(0, -1) end, 5, 6},
    {"empty narrow", function(x) return x:narrow(0, 2, 0) end, 2, 2},
    {"whole", function(x) return x:narrow(0, 0, R) end, 0, R},
    {"slice with a step (all zeros first)", function(x) return x[{{1, 5, 2}}] end, nil},
    {"narrow along dim 1 (all zeros first)", function(x) return x:narrow(1, 3, 4) end, nil},
  }
  for _, c in ipairs(cases) do
    local name, f, a, b = c[1], c[2], c[3], c[4]
    for _ = 1, 3 do local junk = torch.full({R, C}, 7.0); junk:add_(1) end
    local x = torch.randn(R, C):requires_grad_()
    local y = f(x)
    ;(y * 2):sum():backward()
    local want
    if a then
      want = torch.zeros(R, C)
      if b > a then want:narrow(0, a, b - a):fill_(2) end
    else
      want = torch.zeros(R, C)
      local view = f(want)
      view:fill_(2)
    end
    T.close(x.grad:cpu(), want, 0, 0, name)
  end
end)

test("grad_fn.next_functions walks the graph as PyTorch's (a leaf: AccumulateGrad; no gradient: nil)", function()
  local a, b = torch.randn(3, {requires_grad = true}), torch.randn(3)
  local m = a * b
  local loss = (m + a:exp()):sum()
  local nf = loss.grad_fn.next_functions
  eq(#nf, 1, "sum has one input")
  eq(nf[1][1].name, "AddBackward0", "sum's input")
  eq(nf[1][2], 0, "the input's output number")
  local add = nf[1][1].next_functions
  eq(#add, 2, "add has two inputs")
  eq(add[1][1].name, "MulBackward0", "add's first input")
  eq(add[2][1].name, "ExpBackward0", "add's second input")
  ok(add[1][1] == m.grad_fn, "the same node as m.grad_fn")
  ok(add[1][1] ~= add[2][1], "different nodes differ")
  ok(loss.grad_fn == loss.grad_fn, "one node, equal (PyTorch: loss.grad_fn is loss.grad_fn)")
  local mul = add[1][1].next_functions
  eq(#mul, 2, "mul has two inputs")
  eq(mul[1][1].name, "AccumulateGrad", "a leaf that requires grad")
  eq(tostring(mul[1][1]), "<AccumulateGrad>", "prints as PyTorch's")
  eq(mul[1][1].variable:data_ptr(), a:data_ptr(), "its variable is the leaf")
  ok(mul[1][1].variable.requires_grad, "the leaf itself")
  eq(mul[2][1], nil, "b needs no gradient")
  eq(mul[2][2], 0, "its pair is still there")
  eq(#mul[1][1].next_functions, 0, "AccumulateGrad has no inputs")
  eq(add[2][1].next_functions[1][1].name, "AccumulateGrad", "exp's input: the leaf a")
  eq(loss.grad_fn.no_such_field, nil, "other fields are nil")
  -- the node outlives the tensor that made it
  local fn = (a * 2):sum().grad_fn
  collectgarbage()
  collectgarbage()
  eq(fn.next_functions[1][1].name, "MulBackward0", "kept alive by the grad_fn")
  -- the whole graph of a module, walked to its leaves
  local lin = nn.Linear(4, 2)
  local out = nn.functional.relu(lin(torch.randn(5, 4))):mean()
  local leaves, seen = {}, {}
  local function walk(f)
    if f == nil or seen[f] then return end
    seen[f] = true
    if f.name == "AccumulateGrad" then leaves[#leaves + 1] = f.variable end
    for _, p in ipairs(f.next_functions) do walk(p[1]) end
  end
  walk(out.grad_fn)
  eq(#leaves, 2, "the Linear's weight and bias")
  local ptrs = {[lin.weight:data_ptr()] = true, [lin.bias:data_ptr()] = true}
  ok(ptrs[leaves[1]:data_ptr()] and ptrs[leaves[2]:data_ptr()], "they are the parameters")
end)

test("in-place ops on non-leaf tensors keep the history", function()
  local x = torch.tensor({1.0, 2.0, 3.0}, {requires_grad = true})
  local y = x * 2
  y:add_(1)
  y:mul_(x)
  y:exp_()
  y:sum():backward()
  -- y = exp((2x + 1) x); dy/dx = exp(...) * (4x + 1)
  local ref = {}
  for i, v in ipairs({1, 2, 3}) do ref[i] = math.exp((2 * v + 1) * v) * (4 * v + 1) end
  T.close(x.grad, ref, 1e-5)
end)

test("torch.autograd.grad gives gradients without touching .grad", function()
  local x = torch.tensor({1.0, 2.0}, {requires_grad = true})
  local w = torch.tensor({3.0, 4.0}, {requires_grad = true})
  local h = x * w
  local y = (h * h):sum()
  local g = torch.autograd.grad(y, {x, h}, {retain_graph = true})
  T.close(g[1], {2 * 1 * 9, 2 * 2 * 16})
  T.close(g[2], {2 * 3, 2 * 8})
  eq(x.grad, nil, "x.grad untouched")
  local u = torch.ones(2, {requires_grad = true})
  raises(function() torch.autograd.grad(y, {u}, {retain_graph = true}) end, "was not used")
  local g2 = torch.autograd.grad(y, {u, x}, {allow_unused = true})
  eq(g2[1], nil, "unused gives nil")
  T.close(g2[2], {18, 64})
end)

test("a long chain and repeated graphs run at flat memory", function()
  local x = torch.ones(10, {dtype = "float64", requires_grad = true})
  local y = x
  for i = 1, 20000 do y = y * 1.0001 end -- 20000 nodes: backward and freeing must not recurse
  y:sum():backward()
  T.close(x.grad, T.map(torch.ones(10):tolist(), function() return 1.0001 ^ 20000 end), 1e-9)
  local w = torch.randn(256, 256, {requires_grad = true})
  local f = io.open("/proc/self/status")
  if not f then T.skip("no /proc") end
  f:close()
  local function rss()
    local h = io.open("/proc/self/status"); local s = h:read("a"); h:close()
    return tonumber(s:match("VmRSS:%s*(%d+)"))
  end
  for i = 1, 50 do ((w:matmul(w)):tanh():sum()):backward() end
  local before = rss()
  for i = 1, 300 do ((w:matmul(w)):tanh():sum()):backward() end
  ok(rss() - before < 100 * 1024, ("RSS grew by %d KB"):format(rss() - before))
end)

test("ops whose gradient is zero keep nothing of their input alive, as torch's", function()
  -- FloorBackward0 and its kind save nothing in PyTorch (the gradient is zeros like g):
  -- t below is held by nothing but the node, so dropping t frees it
  local x = torch.randn(1 << 16, {requires_grad = true})
  local allocated = x.device.type == "cuda" and cuda.memory_allocated or torch.cpu.memory_allocated
  for _, op in ipairs({"floor", "ceil", "round", "trunc", "sign"}) do
    local t = x * 2
    local y = t[op](t)
    collectgarbage(); collectgarbage()
    local live = allocated()
    t = nil
    collectgarbage(); collectgarbage()
    eq(live - allocated(), 4 * (1 << 16), op .. ": the intermediate is freed")
    y:sum():backward()
    eq(x.grad:abs():sum():item(), 0, op .. ": zero gradient")
    x.grad = nil
  end
end)

test("neural-network ops", function()
  G.check("conv2d", function(x, w, b) return torch.conv2d(x, w, b, {stride = 2, padding = 1}) end,
    {R({2, 2, 5, 5}), R({3, 2, 3, 3}), R({3})})
  G.check("conv2d groups dilation", function(x, w) return torch.conv2d(x, w, nil, {groups = 2, dilation = 2}) end,
    {R({1, 4, 6, 6}), R({4, 2, 2, 2})})
  -- C/groups * kh * kw >= 32 takes the one-GEMM-per-chunk backward (thin layers go per sample)
  G.check("conv2d wide", function(x, w, b) return torch.conv2d(x, w, b, {padding = 1, stride = 2}) end,
    {R({2, 4, 5, 5}), R({3, 4, 3, 3}), R({3})})
  G.check("depthwise", function(x, w) return torch.conv2d(x, w, nil, {groups = 3, padding = 1}) end,
    {R({1, 3, 4, 4}), R({3, 1, 3, 3})})
  G.check("conv1d", function(x, w, b) return torch.conv1d(x, w, b, {padding = 1}) end, {R({2, 2, 6}), R({3, 2, 3}), R({3})})
  G.check("max_pool2d", function(x) return torch.max_pool2d(x, 2) end, {R({1, 2, 4, 4})})
  G.check("avg_pool2d", function(x) return torch.avg_pool2d(x, 3, {stride = 2, padding = 1}) end, {R({1, 2, 5, 5})})
  G.check("adaptive_avg_pool2d", function(x) return torch.adaptive_avg_pool2d(x, {2, 3}) end, {R({2, 1, 5, 7})})
  G.check("batch_norm training", function(x, w, b)
    return torch.batch_norm(x, nil, nil, w, b, true, 0.1, 1e-5) end, {R({4, 3, 2, 2}), R({3}), R({3})})
  G.check("batch_norm eval", function(x, w, b)
    return torch.batch_norm(x, torch.tensor({0.1, 0.2, -0.3}, {dtype = "float64"}),
      torch.tensor({1.0, 2.0, 0.5}, {dtype = "float64"}), w, b, false, 0.1, 1e-5) end, {R({4, 3}), R({3}), R({3})})
  G.check("layer_norm", function(x, w, b) return torch.layer_norm(x, {4}, w, b, 1e-5) end, {R({3, 4}), R({4}), R({4})})
  local idx = torch.tensor({{0, 2, 2}, {1, 0, 3}})
  G.check("embedding", function(w) return torch.embedding(w, idx) end, {R({4, 3})})
  G.check("embedding padding_idx", function(w) return torch.embedding(w, idx, {padding_idx = 2}) * (w:sum() * 0 + 1) end,
    {R({4, 3})}, {skip_check = true, tol = math.huge})
  local w = torch.randn(4, 3, {requires_grad = true})
  torch.embedding(w, idx, {padding_idx = 2}):sum():backward()
  T.close(w.grad[2], {0, 0, 0}) -- the padding row gets no gradient
  T.close(w.grad[0], {2, 2, 2})
end)


test("grad_fn names of the kinds recorded from grad_kinds.def, as torch's", function()
  local x = torch.randn(2, 3, {requires_grad = true})
  local img = torch.randn(1, 2, 4, 4, {requires_grad = true})
  local name = function(t) return tostring(t.grad_fn) end
  local cases = {
    {x:view(3, 2), "<ViewBackward0>"}, {x:permute(1, 0), "<PermuteBackward0>"},
    {x:unsqueeze(0):expand(2, 2, 3), "<ExpandBackward0>"}, {x:narrow(1, 0, 2), "<SliceBackward0>"},
    {x:select(0, 1), "<SelectBackward0>"},
    {x:sum(), "<SumBackward0>"}, {x:sum(1), "<SumBackward1>"}, {x:mean(), "<MeanBackward0>"},
    {x:mean(1), "<MeanBackward1>"}, {x:prod(), "<ProdBackward0>"}, {x:prod(1), "<ProdBackward1>"},
    {x:norm(), "<NormBackward0>"}, {x:norm(2, 1), "<NormBackward1>"}, {x:var(1), "<VarBackward0>"},
    {x:std(1), "<StdBackward0>"}, {x:logsumexp(1), "<LogsumexpBackward0>"}, {x:amax(1), "<AmaxBackward0>"},
    {(x:max(1)), "<MaxBackward0>"}, {x:cumsum(1), "<CumsumBackward0>"}, {x:softmax(1), "<SoftmaxBackward0>"},
    {x:log_softmax(1), "<LogSoftmaxBackward0>"},
    {torch.cat({x, x}, 0), "<CatBackward0>"}, {torch.stack({x, x}), "<StackBackward0>"},
    {x:gather(1, torch.tensor({{0}, {2}})), "<GatherBackward0>"},
    {x:index_select(1, torch.tensor({2, 0})), "<IndexSelectBackward0>"},
    {x:masked_select(x:gt(0)), "<MaskedSelectBackward0>"}, {x[torch.tensor({1, 0})], "<IndexBackward0>"},
    {(x:sort(1)), "<SortBackward0>"}, {x:scatter(1, torch.tensor({{0}, {2}}), x), "<ScatterBackward0>"},
    {torch.conv2d(img, torch.randn(3, 2, 3, 3)), "<ConvolutionBackward0>"},
    {torch.max_pool2d(img, 2), "<MaxPool2DWithIndicesBackward0>"},
    {torch.avg_pool2d(img, 2), "<AvgPool2DBackward0>"},
    {torch.adaptive_avg_pool2d(img, {1, 1}), "<AdaptiveAvgPool2DBackward0>"},
    {torch.batch_norm(img, nil, nil, nil, nil, true, 0.1, 1e-5), "<NativeBatchNormBackward0>"},
    {torch.layer_norm(x, {3}), "<NativeLayerNormBackward0>"},
    {torch.embedding(x, torch.tensor({1, 0})), "<EmbeddingBackward0>"},
  }
  for i, c in ipairs(cases) do eq(name(c[1]), c[2], "case " .. i) end
end)

test("an in-place op counts one version, as torch's _version", function()
  -- z = y * y saves y at version 0; each in-place op on y then reads "now at version 1" (issue 10:
  -- one mul_ read 2, the binding bumping again after the op layer did)
  local function after(change)
    local x = torch.randn(3, {requires_grad = true})
    local y = x * 2
    local z = y * y
    change(y)
    local okk, err = pcall(function() z:sum():backward() end)
    eq(okk, false, "backward refuses")
    return tostring(err):match("is at version (%d+); expected version 0 instead")
  end
  local ng = function(f) return function(y) torch.no_grad(f, y) end end
  local cases = {
    {"mul_", function(y) y:mul_(2) end}, {"add_ alpha", function(y) y:add_(y:detach(), {alpha = 2}) end},
    {"exp_", function(y) y:exp_() end}, {"clamp_", function(y) y:clamp_(0, 1) end},
    {"mul_ in no_grad", ng(function(y) y:mul_(2) end)}, {"exp_ in no_grad", ng(function(y) y:exp_() end)},
    {"add_ of another dtype in no_grad", ng(function(y) y:add_(torch.ones(3, {dtype = "float64"})) end)},
    {"masked_fill_", ng(function(y) y:masked_fill_(torch.tensor({true, false, true}), 0) end)},
    {"index assignment", ng(function(y) y[1] = 5 end)}, {"slice copy", ng(function(y) y[{{0, 2}}] = torch.zeros(2) end)},
    {"fill_", ng(function(y) y:fill_(1) end)}, {"uniform_", ng(function(y) y:uniform_() end)},
    {"normal_", ng(function(y) y:normal_() end)},
  }
  for _, c in ipairs(cases) do eq(after(c[2]), "1", c[1]) end
  eq(after(function(y) y:mul_(2) y:add_(1) end), "2", "two ops, two versions")
end)

T.run()
