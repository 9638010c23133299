-- Functional losses (lua/tensh/nn/losses.lua) against references computed here
-- in plain Lua doubles from the input lists, their gradients against finite
-- differences, and every error path.
local T = require "harness"
local G = require "gradcheck"
local F = require "tensh.nn.losses"
local test, eq, raises, ok, close = T.test, T.eq, T.raises, T.ok, T.close
local R = T.rand_list

local function f64(l) return torch.tensor(l, {dtype = "float64"}) end

-- ---- references ------------------------------------------------------------

local function log_softmax(v)
  local m = -math.huge
  for _, x in ipairs(v) do m = math.max(m, x) end
  local s = 0
  for _, x in ipairs(v) do s = s + math.exp(x - m) end
  local lse = m + math.log(s)
  local out = {}
  for i, x in ipairs(v) do out[i] = x - lse end
  return out
end

-- The samples of an (N, C, d1...) list as {vec = C values, target = ...} in
-- (N, d1...) order; 2-D and 3-D inputs are enough for the tests.
local function samples(x, t)
  local out = {}
  for n = 1, #x do
    if type(x[n][1]) == "table" then
      for d = 1, #x[n][1] do
        local v, tv = {}, {}
        for c = 1, #x[n] do
          v[c] = x[n][c][d]
          if type(t[n]) == "table" and type(t[n][1]) == "table" then tv[c] = t[n][c][d] end
        end
        out[#out + 1] = {vec = v, target = type(t[n]) == "table" and (type(t[n][1]) == "table" and tv or t[n][d]) or t[n]}
      end
    else
      out[#out + 1] = {vec = x[n], target = t[n]}
    end
  end
  return out
end

-- cross_entropy (lp = false) or nll_loss (lp = true) on class indices or probabilities
local function ref_ce(x, t, o, is_logprob)
  o = o or {}
  local ignore, eps, red, w = o.ignore_index or -100, o.label_smoothing or 0, o.reduction or "mean", o.weight
  local per, denom = {}, 0
  for i, s in ipairs(samples(x, t)) do
    local lp = is_logprob and s.vec or log_softmax(s.vec)
    local C = #lp
    local function wc(c) return w and w[c] or 1 end
    if type(s.target) == "table" then -- probabilities
      local l = 0
      for c = 1, C do l = l - wc(c) * (s.target[c] * (1 - eps) + eps / C) * lp[c] end
      per[i] = l
      denom = denom + 1
    elseif s.target == ignore then
      per[i] = 0
    else
      local k = s.target + 1
      local smooth = 0
      for c = 1, C do smooth = smooth - wc(c) * lp[c] end
      per[i] = (1 - eps) * (-wc(k) * lp[k]) + eps / C * smooth
      denom = denom + wc(k)
    end
  end
  if red == "none" then return per end
  local s = 0
  for _, v in ipairs(per) do s = s + v end
  if red == "sum" then return s end
  return s / denom
end

local function flat(v) return T.flat(v) end

local function ref_pointwise(a, b, f, red)
  local x, y, out, s = flat(a), flat(b), {}, 0
  for i = 1, #x do out[i] = f(x[i], y[i], i); s = s + out[i] end
  if red == "none" then return out end
  if red == "sum" then return s end
  return s / #x
end

local function targets(shape, C, ignore_every)
  local t = R(shape, 0, C - 1, true)
  if ignore_every then
    local k = 0
    t = T.map(t, function(v) k = k + 1; return k % ignore_every == 0 and -100 or v end)
  end
  return t
end

-- ---- cross_entropy and nll_loss --------------------------------------------

test("cross_entropy with class indices against a Lua reference, every option", function()
  local N, C = 7, 4
  local x = R({N, C}, -3, 3)
  local t = targets({N}, C, 3)
  local w = R({C}, 0.2, 2)
  for _, red in ipairs({"mean", "sum", "none"}) do
    for _, ls in ipairs({0, 0.2}) do
      for _, weighted in ipairs({false, true}) do
        local o = {reduction = red, label_smoothing = ls, weight = weighted and w or nil}
        local got = F.cross_entropy(f64(x), torch.tensor(t), {reduction = red, label_smoothing = ls, weight = weighted and f64(w) or nil})
        local what = ("ce %s ls=%g weight=%s"):format(red, ls, tostring(weighted))
        close(got, ref_ce(x, t, o), 1e-10, 1e-12, what)
        if red ~= "none" then eq(got:dim(), 0, what .. " is 0-dim") else eq(got.shape, torch.Size({N}), what .. " shape") end
      end
    end
  end
  -- a custom ignore_index, and float32 in float32 out
  local t2 = targets({N}, C)
  t2[2] = 1
  local got = F.cross_entropy(torch.tensor(x), torch.tensor(t2), {ignore_index = 1})
  eq(got.dtype, torch.float32, "float32 loss")
  close(got, ref_ce(x, t2, {ignore_index = 1}), 1e-5, 1e-6, "ignore_index = 1")
end)

-- float32 rows of contiguous logits take the float-lane path (src/cpu/loss.c): eight
-- lanes and a tail (C = 37), a vocabulary-sized row (C = 1000), large logits, weights and
-- label smoothing (the general gradient from the float probabilities), an ignored row,
-- -inf entries, and rows whose max is not finite (a NaN, all -inf), against float64
test("float32 cross_entropy over long rows agrees with float64 (loss and gradient)", function()
  torch.manual_seed(31)
  for _, C in ipairs({37, 1000}) do
    local x = torch.randn(9, C) * 4
    x[3] = x[3] + 60
    x[4][5] = -math.huge
    local t = torch.randint(0, C, {9})
    t[6] = -100
    local w = torch.rand(C) + 0.5
    for _, o in ipairs({{}, {weight = w, label_smoothing = 0.1}, {reduction = "none"}}) do
      local what = ("C %d weight %s"):format(C, tostring(o.weight ~= nil))
      local xf = x:clone():requires_grad_()
      local xd = x:double():requires_grad_()
      local od = {weight = o.weight and o.weight:double(), label_smoothing = o.label_smoothing, reduction = o.reduction}
      local lf, ld = F.cross_entropy(xf, t, o), F.cross_entropy(xd, t, od)
      close(lf:double(), ld, 1e-5, 1e-6, what .. ": loss")
      lf:sum():backward()
      ld:sum():backward()
      close(xf.grad:double(), xd.grad, 1e-5, 1e-7, what .. ": grad")
    end
  end
  local x = torch.randn(3, 20)
  x[0][7] = 0 / 0
  x[1]:fill_(-math.huge)
  local l = F.cross_entropy(x, torch.tensor({1, 2, 3}), {reduction = "none"})
  ok(l[0]:item() ~= l[0]:item() and l[1]:item() ~= l[1]:item(), "a NaN row and an all -inf row give NaN")
  close(l[2]:double(), F.cross_entropy(x[2]:double():unsqueeze(0), torch.tensor({3})), 1e-5, 1e-6, "the finite row")
end)

test("cross_entropy on (N, C, d) input and non-contiguous logits", function()
  local N, C, D = 3, 5, 4
  local x = R({N, C, D}, -2, 2)
  local t = targets({N, D}, C, 5)
  local w = R({C}, 0.5, 1.5)
  for _, red in ipairs({"mean", "sum", "none"}) do
    local o = {reduction = red, weight = w, label_smoothing = 0.1}
    local got = F.cross_entropy(f64(x), torch.tensor(t), {reduction = red, weight = f64(w), label_smoothing = 0.1})
    close(got, ref_ce(x, t, o), 1e-10, 1e-12, "K-dim " .. red)
    if red == "none" then eq(got.shape, torch.Size({N, D}), "K-dim none shape") end
  end
  -- logits given transposed: a (C, N) tensor's t() is a non-contiguous (N, C)
  local xt = R({C, N}, -2, 2)
  local tt = targets({N}, C)
  local rows = {}
  for n = 1, N do rows[n] = {} for c = 1, C do rows[n][c] = xt[c][n] end end
  close(F.cross_entropy(f64(xt):t(), torch.tensor(tt), {reduction = "none"}), ref_ce(rows, tt, {reduction = "none"}), 1e-10, 1e-12, "transposed logits")
end)

test("cross_entropy with class probabilities", function()
  local N, C = 4, 3
  local x = R({N, C}, -2, 2)
  local p = R({N, C}, 0, 1)
  local w = R({C}, 0.5, 2)
  for _, red in ipairs({"mean", "sum", "none"}) do
    for _, ls in ipairs({0, 0.3}) do
      local got = F.cross_entropy(f64(x), f64(p), {reduction = red, label_smoothing = ls, weight = f64(w)})
      close(got, ref_ce(x, p, {reduction = red, label_smoothing = ls, weight = w}), 1e-10, 1e-12, "probs " .. red .. " " .. ls)
      local got2 = F.cross_entropy(f64(x), f64(p), {reduction = red, label_smoothing = ls})
      close(got2, ref_ce(x, p, {reduction = red, label_smoothing = ls}), 1e-10, 1e-12, "probs unweighted " .. red)
    end
  end
  local x3, p3 = R({2, C, 3}), R({2, C, 3}, 0, 1)
  close(F.cross_entropy(f64(x3), f64(p3)), ref_ce(x3, p3, {}), 1e-10, 1e-12, "K-dim probabilities")
end)

test("cross_entropy on a single sample (C) and empty batches", function()
  local x = R({5})
  local got = F.cross_entropy(f64(x), torch.tensor(2))
  close(got, ref_ce({x}, {2}, {}), 1e-10, 1e-12, "1-D input")
  eq(F.cross_entropy(f64(x), torch.tensor(2), {reduction = "none"}):dim(), 0, "1-D none is 0-dim")
  local e = torch.zeros(0, 3, {dtype = "float64"})
  local et = torch.zeros(0, {dtype = "int64"})
  local m = F.cross_entropy(e, et):item()
  ok(m ~= m, "mean over an empty batch is NaN, got " .. tostring(m))
  eq(F.cross_entropy(e, et, {reduction = "sum"}):item(), 0.0, "sum over an empty batch")
  eq(F.cross_entropy(e, et, {reduction = "none"}).shape, torch.Size({0}), "none over an empty batch")
  -- every target ignored: 0/0 as PyTorch
  local all = F.cross_entropy(f64(R({2, 3})), torch.tensor({-100, -100})):item()
  ok(all ~= all, "all-ignored mean is NaN")
end)

test("an ignored target with a -inf log-probability gives no NaN", function()
  local x = torch.tensor({{0.0, -math.huge}, {1.0, 2.0}}, {dtype = "float64"})
  local got = F.cross_entropy(x, torch.tensor({-100, 1}), {reduction = "sum"})
  close(got, ref_ce({{0, -1e300}, {1, 2}}, {-100, 1}, {reduction = "sum"}), 1e-12, 1e-12, "ignored -inf")
end)

test("nll_loss against a Lua reference", function()
  local N, C = 6, 4
  local lp = R({N, C}, -4, 0)
  local t = targets({N}, C, 4)
  local w = R({C}, 0.1, 3)
  for _, red in ipairs({"mean", "sum", "none"}) do
    close(F.nll_loss(f64(lp), torch.tensor(t), {reduction = red, weight = f64(w)}),
      ref_ce(lp, t, {reduction = red, weight = w}, true), 1e-10, 1e-12, "nll " .. red)
    close(F.nll_loss(f64(lp), torch.tensor(t), {reduction = red}), ref_ce(lp, t, {reduction = red}, true), 1e-10, 1e-12, "nll unweighted " .. red)
  end
  local lp3, t3 = R({2, C, 3}, -3, 0), targets({2, 3}, C, 4)
  close(F.nll_loss(f64(lp3), torch.tensor(t3), {weight = f64(w)}), ref_ce(lp3, t3, {weight = w}, true), 1e-10, 1e-12, "nll K-dim")
  close(F.nll_loss(f64(lp[1]), torch.tensor(1)), ref_ce({lp[1]}, {1}, {}, true), 1e-10, 1e-12, "nll 1-D")
end)

test("cross_entropy on float16 and bfloat16 computes in float32 and rounds once", function()
  local x, t = R({6, 5}, -3, 3), targets({6}, 5, 4)
  for _, dt in ipairs({"float16", "bfloat16"}) do
    local xh = torch.tensor(x):to(dt)
    local ref = ref_ce(xh:double():tolist(), t, {reduction = "none"})
    local got = F.cross_entropy(xh, torch.tensor(t), {reduction = "none"})
    eq(got.dtype, xh.dtype, dt .. " loss dtype")
    close(got:double(), ref, dt == "float16" and 1e-3 or 8e-3, 1e-3, dt .. " loss")
    local xg = xh:detach():requires_grad_(true)
    F.cross_entropy(xg, torch.tensor(t)):backward()
    eq(xg.grad.dtype, xh.dtype, dt .. " grad dtype")
    local x64 = xh:double():requires_grad_(true)
    F.cross_entropy(x64, torch.tensor(t)):backward()
    close(xg.grad:double(), x64.grad, 1e-2, 1e-3, dt .. " grad")
  end
end)

test("cross_entropy and nll_loss gradients against finite differences", function()
  local w = f64(R({4}, 0.3, 2))
  local t = torch.tensor({1, -100, 3, 0, 2})
  G.check("ce", function(x) return F.cross_entropy(x, t) end, {R({5, 4})})
  G.check("ce weight ls", function(x) return F.cross_entropy(x, t, {weight = w, label_smoothing = 0.15}) end, {R({5, 4})})
  G.check("ce none", function(x) return F.cross_entropy(x, t, {reduction = "none", label_smoothing = 0.1}) end, {R({5, 4})})
  G.check("ce K-dim", function(x) return F.cross_entropy(x, torch.tensor({{0, 3}, {2, -100}}), {weight = w}) end, {R({2, 4, 2})})
  G.check("ce probs", function(x, p) return F.cross_entropy(x, p, {label_smoothing = 0.2, weight = w}) end,
    {R({3, 4}), R({3, 4}, 0, 1)})
  G.check("nll", function(x) return F.nll_loss(x, t, {weight = w, reduction = "sum"}) end, {R({5, 4}, -3, 0)})
end)

test("cross_entropy and nll_loss errors", function()
  local x = torch.randn(3, 4)
  -- a class index out of range: at once on the CPU, at the next synchronisation on a device (item here)
  raises(function() F.cross_entropy(x, torch.tensor({0, 4, 1})):item() end, "target 4 is out of bounds", "index = C")
  raises(function() F.cross_entropy(x, torch.tensor({0, 4, 1})):item() end, "C = 4", "message names C")
  raises(function() F.cross_entropy(x, torch.tensor({0, -1, 1})):item() end, "target -1 is out of bounds", "negative index")
  raises(function() F.nll_loss(x, torch.tensor({0, 9, 1})):item() end, "nll_loss: target 9 is out of bounds", "nll index")
  local v = F.cross_entropy(x, torch.tensor({0, 4, 1}), {ignore_index = 4}):item()
  ok(v == v, "an ignored index past C is no error")
  raises(function() F.cross_entropy(x, torch.tensor({0, 1, 2}), {weight = torch.ones(4, {requires_grad = true})}) end,
    "the derivative for 'weight' is not implemented", "weight requiring grad")
  raises(function() F.cross_entropy(x, torch.tensor({0, 1})) end,
    "expected target of size torch.Size([3]) (class indices) for input of size torch.Size([3, 4]), got target of size torch.Size([2])", "batch size")
  raises(function() F.cross_entropy(x, torch.tensor({0, 1, 2}, {dtype = "int32"})) end,
    "expected target dtype torch.int64 for class indices, got torch.int32", "int32 target")
  raises(function() F.cross_entropy(x, torch.tensor({0.0, 1.0, 2.0})) end, "got torch.float32", "float class target")
  raises(function() F.cross_entropy(x, torch.zeros(3, 4, {dtype = "int64"})) end, "must be floating point", "int probabilities")
  raises(function() F.cross_entropy(x, torch.rand(3, 4), {ignore_index = 0}) end, "ignore_index is not supported", "probs + ignore_index")
  raises(function() F.cross_entropy(x, torch.tensor({0, 1, 2}), {reduction = "avg"}) end, "avg is not a valid value for reduction", "reduction")
  raises(function() F.cross_entropy(x, torch.tensor({0, 1, 2}), {label_smoothing = 1.5}) end, "label_smoothing must be between 0.0 and 1.0", "smoothing")
  raises(function() F.cross_entropy(x, torch.tensor({0, 1, 2}), {weight = torch.ones(3)}) end,
    "weight should be defined for all 4 classes", "weight size")
  raises(function() F.cross_entropy(x, torch.tensor({0, 1, 2}), {weight = torch.ones(4, {dtype = "float64"})}) end,
    "weight dtype torch.float64 does not match input dtype torch.float32", "weight dtype")
  raises(function() F.cross_entropy(x, torch.tensor({0, 1, 2}), {wieght = torch.ones(4)}) end, "unknown option 'wieght'", "typo")
  raises(function() F.cross_entropy(x, {0, 1, 2}) end, "bad argument #2 to 'cross_entropy' (tensor expected, got table)", "list target")
  raises(function() F.cross_entropy(3, torch.tensor({0})) end, "bad argument #1 to 'cross_entropy' (tensor expected, got number)", "number input")
  raises(function() F.cross_entropy(torch.tensor({{1, 2}}), torch.tensor({0})) end, "expected a floating point input, got torch.int64", "int input")
  raises(function() F.cross_entropy(torch.tensor(1.0), torch.tensor(0)) end, "1 or more dimensions", "0-dim input")
  raises(function() F.cross_entropy(x, torch.tensor({0, 1, 2}), {weight = 3}) end, "cross_entropy: option 'weight': tensor expected, got number", "weight type")
  -- the error points at the caller's line
  local err = raises(function() F.cross_entropy(x, torch.tensor({0, 1})) end, "cross_entropy:")
  ok(err:find("test_losses.lua:%d+:") ~= nil, "position of the caller in: " .. err)
end)

-- ---- regression losses -----------------------------------------------------

test("mse_loss, l1_loss, smooth_l1_loss against Lua references", function()
  local a, b = R({3, 4}), R({3, 4})
  for _, red in ipairs({"mean", "sum", "none"}) do
    close(F.mse_loss(f64(a), f64(b), {reduction = red}), ref_pointwise(a, b, function(x, y) return (x - y) ^ 2 end, red), 1e-12, 1e-12, "mse " .. red)
    close(F.l1_loss(f64(a), f64(b), {reduction = red}), ref_pointwise(a, b, function(x, y) return math.abs(x - y) end, red), 1e-12, 1e-12, "l1 " .. red)
    for _, beta in ipairs({0, 0.5, 1, 3}) do
      local function sl1(x, y)
        local d = math.abs(x - y)
        if beta == 0 then return d end
        return d < beta and 0.5 * d * d / beta or d - 0.5 * beta
      end
      close(F.smooth_l1_loss(f64(a), f64(b), {reduction = red, beta = beta}), ref_pointwise(a, b, sl1, red), 1e-12, 1e-12,
        ("smooth_l1 %s beta %g"):format(red, beta))
    end
  end
  eq(F.mse_loss(f64(a), f64(b), {reduction = "none"}).shape, torch.Size({3, 4}), "none keeps the shape")
  -- non-contiguous operands and 0-dim ones
  local ta = f64(a):t()
  local at = {}
  for j = 1, 4 do for i = 1, 3 do at[#at + 1] = a[i][j] end end
  local bt = R({4, 3})
  close(F.mse_loss(ta, f64(bt)), ref_pointwise(at, bt, function(x, y) return (x - y) ^ 2 end, "mean"), 1e-12, 1e-12, "mse transposed")
  close(F.l1_loss(f64(2.5), f64(-1.0)), 3.5, 0, 0, "0-dim l1")
  local e = F.mse_loss(torch.zeros(0, 2), torch.zeros(0, 2)):item()
  ok(e ~= e, "mse mean over nothing is NaN")
end)

test("regression loss gradients against finite differences", function()
  local a, b = R({3, 4}), R({3, 4})
  G.check("mse", function(x, y) return F.mse_loss(x, y) end, {a, b})
  G.check("l1", function(x, y) return F.l1_loss(x, y, {reduction = "sum"}) end, {a, b})
  G.check("smooth_l1", function(x, y) return F.smooth_l1_loss(x, y, {beta = 0.7, reduction = "none"}) end, {a, b})
end)

test("regression loss errors", function()
  raises(function() F.mse_loss(torch.randn(3, 1), torch.randn(3)) end,
    "mse_loss: target size torch.Size([3]) is different from input size torch.Size([3, 1])", "mse sizes")
  raises(function() F.l1_loss(torch.randn(2), torch.randn(3)) end, "l1_loss: target size", "l1 sizes")
  raises(function() F.smooth_l1_loss(torch.randn(2), torch.randn(2), {beta = -1}) end, "beta must be a non-negative number", "beta")
  raises(function() F.mse_loss(torch.randn(2), torch.tensor({1, 2})) end, "expected a floating point target, got torch.int64", "int target")
  raises(function() F.mse_loss(torch.randn(2), torch.randn(2), {reduction = "mean ", beta = 1}) end, "unknown option 'beta'", "option")
  raises(function() F.mse_loss(torch.randn(2), torch.randn(2), {reduction = "batchmean"}) end, "batchmean is not a valid value", "reduction")
  raises(function() F.mse_loss(torch.randn(2), nil) end, "bad argument #2 to 'mse_loss' (tensor expected, got nil)", "nil")
end)

-- ---- binary losses ---------------------------------------------------------

local function bce_ref(p, y, w)
  local lp = p > 0 and math.max(math.log(p), -100) or -100
  local lq = p < 1 and math.max(math.log(1 - p), -100) or -100
  return -(w or 1) * (y * lp + (1 - y) * lq)
end

test("binary_cross_entropy against a Lua reference, log clamped at -100", function()
  local p, y = R({4, 3}, 0.01, 0.99), R({4, 3}, 0, 1)
  p[1][1], p[2][2], y[1][1], y[2][2] = 0, 1, 1, 0 -- log(0) clamps to -100
  local w = R({3}, 0.5, 2)
  for _, red in ipairs({"mean", "sum", "none"}) do
    close(F.binary_cross_entropy(f64(p), f64(y), {reduction = red}), ref_pointwise(p, y, function(a, b) return bce_ref(a, b) end, red),
      1e-10, 1e-12, "bce " .. red)
    close(F.binary_cross_entropy(f64(p), f64(y), {reduction = red, weight = f64(w)}),
      ref_pointwise(p, y, function(a, b, i) return bce_ref(a, b, w[(i - 1) % 3 + 1]) end, red), 1e-10, 1e-12, "bce weighted " .. red)
  end
  close(F.binary_cross_entropy(torch.tensor({0.0}), torch.tensor({1.0})), {100}, 0, 0, "clamped at 100")
  G.check("bce", function(a, b) return F.binary_cross_entropy(a, b, {weight = f64(w)}) end, {R({2, 3}, 0.1, 0.9), R({2, 3}, 0, 1)},
    {eps = 1e-7})
end)

local function bcel_ref(x, y, w, pw)
  local lsig = -math.log(1 + math.exp(-x)) -- log sigmoid(x), fine for |x| < 30
  local lsig_neg = lsig - x                -- log sigmoid(-x) = log(1 - sigmoid(x))
  return -(w or 1) * ((pw or 1) * y * lsig + (1 - y) * lsig_neg)
end

test("binary_cross_entropy_with_logits against a Lua reference, stable at large logits", function()
  local x, y = R({3, 4}, -6, 6), R({3, 4}, 0, 1)
  local w, pw = R({4}, 0.5, 2), R({4}, 0.2, 4)
  for _, red in ipairs({"mean", "sum", "none"}) do
    close(F.binary_cross_entropy_with_logits(f64(x), f64(y), {reduction = red}),
      ref_pointwise(x, y, function(a, b) return bcel_ref(a, b) end, red), 1e-10, 1e-12, "bcel " .. red)
    close(F.binary_cross_entropy_with_logits(f64(x), f64(y), {reduction = red, weight = f64(w), pos_weight = f64(pw)}),
      ref_pointwise(x, y, function(a, b, i) local c = (i - 1) % 4 + 1 return bcel_ref(a, b, w[c], pw[c]) end, red), 1e-10, 1e-12,
      "bcel weighted " .. red)
  end
  -- where exp(x) overflows float32: log(1 + e^-x) = -x for x << 0, 0 for x >> 0
  local big = F.binary_cross_entropy_with_logits(torch.tensor({200.0, -200.0, 200.0}), torch.tensor({0.0, 1.0, 1.0}), {reduction = "none"})
  close(big, {200, 200, 0}, 1e-6, 1e-6, "large logits")
  G.check("bcel", function(a, b) return F.binary_cross_entropy_with_logits(a, b, {pos_weight = f64(pw), weight = f64(w)}) end,
    {R({2, 4}, -3, 3), R({2, 4}, 0, 1)})
end)

test("binary loss errors", function()
  -- out of [0, 1]: at once on the CPU, at the next synchronisation on a device (item here)
  raises(function() F.binary_cross_entropy(torch.tensor({0.5, 1.5}), torch.tensor({0.0, 1.0})):item() end,
    "binary_cross_entropy: all elements of input should be between 0 and 1, got 1.5 (element 1)", "range")
  raises(function() F.binary_cross_entropy(torch.tensor({0 / 0, 0.5}), torch.tensor({0.0, 1.0})):item() end,
    "got nan (element 0)", "NaN")
  raises(function() F.binary_cross_entropy(torch.rand(2, 1), torch.rand(2)) end,
    "target size torch.Size([2]) is different from input size torch.Size([2, 1])", "sizes")
  raises(function() F.binary_cross_entropy(torch.rand(2, 3), torch.rand(2, 3), {weight = torch.ones(2)}) end,
    "weight of size torch.Size([2]) cannot be broadcast to the input size torch.Size([2, 3])", "weight")
  raises(function() F.binary_cross_entropy_with_logits(torch.rand(2, 3), torch.rand(2, 3), {pos_weight = torch.ones(4)}) end,
    "pos_weight of size torch.Size([4]) cannot be broadcast", "pos_weight")
  raises(function() F.binary_cross_entropy_with_logits(torch.rand(3), torch.rand(2)) end, "binary_cross_entropy_with_logits: target size", "sizes")
  raises(function() F.binary_cross_entropy_with_logits(torch.rand(3), torch.rand(3), {pos_weight = {1, 2, 3}}) end,
    "binary_cross_entropy_with_logits: option 'pos_weight': tensor expected, got table", "pos_weight type")
end)

T.run()
