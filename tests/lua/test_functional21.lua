-- Issue 21's nn.functional functions and modules: softplus, elu, hardtanh,
-- logsigmoid, mish (kernels of their own, src/ops/op_nn_act.c), softmin,
-- normalize, group_norm (fused, src/ops/op_nn_norm.c), interpolate (nearest,
-- linear, bilinear: src/ops/op_nn_upsample.c), max_pool1d/avg_pool1d (the 2-d
-- kernels), adaptive_max_pool2d, kl_div and huber_loss. Values and gradients
-- against PyTorch 1.13's (tests/fixtures/functional21/functional21_torch.lua,
-- made by gen_functional21_fixture.py next to it: float64 and float32,
-- non-contiguous inputs, empty batches), gradients against finite
-- differences, cuda against the CPU, the half types, the modules and the
-- error messages. On the cuda pass (TENSH_TEST_DEVICE) the fixture cases run
-- on the GPU against the same values.
local T = require "harness"
local G = require "gradcheck"
local test, close, eq, raises, ok = T.test, T.close, T.eq, T.raises, T.ok
local F = nn.functional

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local fixture = dofile(here .. "../fixtures/functional21/functional21_torch.lua")

local function shape(t) return table.concat(t.shape:totable(), "x") end

-- a fixture tensor {shape, data} as a leaf of dtype dt (on the test's device)
local function tensor(f, dt)
  local t = torch.tensor(#f.data > 0 and f.data or {}, {dtype = "float64"})
  t = #f.shape == 0 and t:reshape({}) or t:reshape(f.shape)
  return t:to(dt or "float64"):detach()
end

-- the views the generator applies to its base tensor
local VIEWS = {
  t = function(b) return b:transpose(-1, -2) end,
  p = function(b) return b:permute(0, 3, 1, 2) end,
}

-- the ops that record a node of their own: PyTorch's grad_fn names
local OWN_NODE = {softplus = true, elu = true, hardtanh = true, logsigmoid = true, mish = true, group_norm = true,
  interpolate = true, adaptive_max_pool2d = true}

-- ---- against PyTorch -------------------------------------------------------------------------

for _, c in ipairs(fixture) do
  test("PyTorch's values and gradients: " .. c.name, function()
    local dt = c.dtype
    local tol = dt == "float32" and 2e-5 or 1e-10
    local base = tensor(c.base, dt):requires_grad_()
    local x = c.view and VIEWS[c.view](base) or base
    local opts = {}
    for k, v in pairs(c.opts) do opts[k] = v end
    local leaves = {base = base}
    for k, v in pairs(c.tensors) do
      leaves[k] = tensor(v, dt):requires_grad_()
      opts[k] = leaves[k]
    end
    local args = {x}
    if c.target then
      leaves.target = tensor(c.target, dt):requires_grad_()
      args[#args + 1] = leaves.target
    end
    for _, p in ipairs(c.pos) do args[#args + 1] = p end
    args[#args + 1] = opts
    local out, idx = F[c.fn](table.unpack(args))
    eq(shape(out), table.concat(c.out.shape, "x"), "output shape")
    eq(out.dtype, "torch." .. (c.opts.dtype or dt), "output dtype")
    close(out, c.out.data, tol, tol, "output")
    if c.indices then close(idx, c.indices.data, 0, 0, "indices") end
    if OWN_NODE[c.fn] then eq(out.grad_fn and out.grad_fn.name, c.grad_fn, "grad_fn") end
    local r = tensor(c.r, dt)
    local loss = (out * r):sum()
    loss:backward()
    for k, g in pairs(c.grads) do
      ok(leaves[k].grad ~= nil, k .. " got a gradient")
      close(leaves[k].grad, g.data, tol, tol, "gradient of " .. k)
    end
  end)
end

-- ---- finite differences (float64) ---------------------------------------------------------------

test("activation gradients match finite differences", function()
  local x = T.rand_list({3, 5}, -4, 4)
  x[1][1], x[1][2], x[2][1] = 0.3, -0.2, 2.5 -- away from hardtanh's and softplus's kinks
  G.check("softplus", function(t) return F.softplus(t) end, {x})
  G.check("softplus beta", function(t) return F.softplus(t, 2.0, 3.0) end, {x})
  G.check("elu", function(t) return F.elu(t, 0.6) end, {x})
  G.check("hardtanh", function(t) return F.hardtanh(t, -1.5, 1.2) end, {x})
  G.check("logsigmoid", function(t) return F.logsigmoid(t) end, {x})
  G.check("mish", function(t) return F.mish(t) end, {x})
  G.check("softmin", function(t) return F.softmin(t, 1) end, {x})
  G.check("normalize", function(t) return F.normalize(t, {p = 3.0, dim = 0}) end, {x})
end)

test("group_norm gradients (input, weight, bias) match finite differences", function()
  local x = T.rand_list({2, 6, 3})
  local w, b = T.rand_list({6}), T.rand_list({6})
  G.check("group_norm", function(t, wt, bt) return F.group_norm(t, 3, wt, bt) end, {x, w, b})
  G.check("group_norm no affine", function(t) return F.group_norm(t, 2, {eps = 1e-3}) end, {x})
end)

test("interpolate and pooling gradients match finite differences", function()
  local x4, x3 = T.rand_list({1, 2, 3, 4}), T.rand_list({2, 2, 5})
  G.check("nearest", function(t) return F.interpolate(t, {size = {5, 7}}) end, {x4})
  G.check("bilinear", function(t) return F.interpolate(t, {size = {5, 7}, mode = "bilinear"}) end, {x4})
  G.check("bilinear align down", function(t)
    return F.interpolate(t, {size = {2, 3}, mode = "bilinear", align_corners = true})
  end, {x4})
  G.check("bilinear scale", function(t) return F.interpolate(t, {scale_factor = 1.5, mode = "bilinear"}) end, {x4})
  G.check("nearest1d", function(t) return F.interpolate(t, {scale_factor = 1.7}) end, {x3})
  G.check("linear1d", function(t) return F.interpolate(t, {size = 9, mode = "linear"}) end, {x3})
  G.check("adaptive_max_pool2d", function(t) return F.adaptive_max_pool2d(t, {2, 3}) end, {x4})
  G.check("max_pool1d", function(t) return F.max_pool1d(t, 2, {stride = 1, padding = 1}) end, {x3})
  G.check("avg_pool1d", function(t) return F.avg_pool1d(t, 3, {stride = 2, padding = 1}) end, {x3})
end)

test("kl_div and huber_loss gradients match finite differences", function()
  local a, b = T.rand_list({3, 4}, -2, 0), T.rand_list({3, 4}, 0.1, 1)
  G.check("kl_div", function(x, t) return F.kl_div(x, t, {reduction = "batchmean"}) end, {a, b})
  G.check("kl_div log_target", function(x, t) return F.kl_div(x, t, {log_target = true}) end, {a, a})
  local c, d = T.rand_list({3, 4}, -3, 3), T.rand_list({3, 4}, -3, 3)
  G.check("huber", function(x, t) return F.huber_loss(x, t, {delta = 0.7, reduction = "none"}) end, {c, d})
end)

-- ---- cuda against the CPU --------------------------------------------------------------------

test("cuda gives the CPU's values and gradients (float32, float64, strided, long rows)", function()
  if not (cuda and cuda.is_available()) then T.skip("no CUDA device") end
  torch.manual_seed(5)
  local cases = {
    {"softplus", {4, 33, 17}, function(x) return F.softplus(x:transpose(0, 2), 1.5, 2.0) end},
    {"elu", {4, 33, 17}, function(x) return F.elu(x:transpose(1, 2)) end},
    {"hardtanh", {300}, function(x) return F.hardtanh(x, -0.3, 0.4) end},
    {"logsigmoid", {5, 70}, function(x) return F.logsigmoid(x * 10) end},
    {"mish", {5, 70}, function(x) return F.mish(x:t()) end},
    {"group_norm long rows", {3, 8, 30, 25}, function(x, w, b) return F.group_norm(x, 4, w, b) end, 8},
    {"group_norm short rows", {40, 12, 2}, function(x, w, b) return F.group_norm(x:transpose(0, 2):transpose(0, 2), 3, w, b) end, 12},
    {"nearest", {2, 3, 17, 13}, function(x) return F.interpolate(x, {scale_factor = {2.3, 0.6}}) end},
    {"bilinear", {2, 3, 17, 13}, function(x) return F.interpolate(x:transpose(2, 3), {size = {31, 40}, mode = "bilinear"}) end},
    {"bilinear align", {2, 3, 17, 13}, function(x)
      return F.interpolate(x, {scale_factor = 1.9, mode = "bilinear", align_corners = true})
    end},
    {"linear1d", {3, 4, 29}, function(x) return F.interpolate(x, {size = 70, mode = "linear"}) end},
    {"adaptive_max_pool2d", {2, 5, 19, 23}, function(x) return F.adaptive_max_pool2d(x:transpose(2, 3), {7, 4}) end},
  }
  for _, dt in ipairs({"float32", "float64"}) do
    for _, c in ipairs(cases) do
      local name, sz, f, C = c[1], c[2], c[3], c[4]
      local cpu = {device = "cpu", dtype = dt}
      local x = torch.randn(sz, cpu)
      local w, b = C and torch.randn(C, cpu), C and torch.randn(C, cpu)
      local function run(dev)
        local function leaf(t) return t and t:to(dev):detach():requires_grad_() end
        local xd, wd, bd = leaf(x), leaf(w), leaf(b)
        local out = f(xd, wd, bd)
        out:backward(torch.ones(out.shape, cpu):to(dev) * 0.5 + torch.arange(out:numel(), cpu):reshape(out.shape):to(dev) / out:numel())
        return out:cpu(), xd.grad:cpu(), wd and wd.grad:cpu(), bd and bd.grad:cpu()
      end
      local rc, rg = {run("cpu")}, {run("cuda")}
      local tol = dt == "float32" and 2e-5 or 1e-11
      for i, what in ipairs({"output", "grad x", "grad w", "grad b"}) do
        if rc[i] then close(rg[i], rc[i], tol, tol, ("%s %s: %s"):format(dt, name, what)) end
      end
    end
  end
end)

test("the activations, group_norm, interpolate and adaptive_max_pool2d run one kernel each way", function()
  local x = torch.randn(2, 4, 3, 5, {requires_grad = true})
  local runs = {
    {"softplus", function() return F.softplus(x) end}, {"elu", function() return F.elu(x) end},
    {"hardtanh", function() return F.hardtanh(x) end}, {"log_sigmoid", function() return F.logsigmoid(x) end},
    {"mish", function() return F.mish(x) end}, {"group_norm", function() return F.group_norm(x, 2) end},
    {"upsample_nearest2d", function() return F.interpolate(x, {scale_factor = 2}) end},
    {"upsample_bilinear2d", function() return F.interpolate(x, {size = {4, 7}, mode = "bilinear"}) end},
  }
  local dev = tostring(x.device):match("^%a+")
  for _, r in ipairs(runs) do
    local name, f = r[1], r[2]
    local y = f()
    local g = torch.ones(y.shape)
    torch.backends._dispatch_counts(true)
    local before = torch.backends._dispatch_counts()[dev]
    y = f()
    y:backward(g)
    local after = torch.backends._dispatch_counts(false)[dev]
    eq(after[name] - before[name], 1, name .. " forward kernel calls")
    eq(after[name .. "_backward"] - before[name .. "_backward"], 1, name .. " backward kernel calls")
  end
  torch.backends._dispatch_counts(true)
  local before = torch.backends._dispatch_counts()[dev]
  F.adaptive_max_pool2d(x, 2):sum():backward()
  local after = torch.backends._dispatch_counts(false)[dev]
  eq(after.adaptive_max_pool2d - before.adaptive_max_pool2d, 1, "adaptive_max_pool2d forward")
  eq(after.max_pool2d_backward - before.max_pool2d_backward, 1, "its backward is max-pool's scatter")
end)

-- ---- dtypes -----------------------------------------------------------------------------------

test("float16 and bfloat16 compute in float32 and round once", function()
  local x = torch.randn(4, 6, 5) * 3
  local fns = {
    function(t) return F.softplus(t) end, function(t) return F.elu(t) end, function(t) return F.hardtanh(t) end,
    function(t) return F.logsigmoid(t) end, function(t) return F.mish(t) end,
    function(t) return F.group_norm(t, 3) end, function(t) return F.interpolate(t, {size = 9, mode = "linear"}) end,
    function(t) return F.interpolate(t:unsqueeze(0), {scale_factor = 1.5, mode = "bilinear"}) end,
    function(t) return F.adaptive_max_pool2d(t, 2) end,
  }
  for i, f in ipairs(fns) do
    for _, dt in ipairs({"float16", "bfloat16"}) do
      local xh = x:to(dt)
      local y = f(xh)
      eq(y.dtype, "torch." .. dt, ("function %d %s dtype"):format(i, dt))
      close(y, f(xh:float()):to(dt):float(), 0, 0, ("function %d %s: the float32 result rounded"):format(i, dt))
    end
  end
end)

test("integer and bool inputs are refused with the dtype named", function()
  local n = torch.arange(6)
  raises(function() return F.softplus(n) end, "softplus: expected a floating-point input, got int64")
  raises(function() return F.mish(n:bool()) end, "mish: expected a floating-point input, got bool")
  raises(function() return F.group_norm(n:view(1, 2, 3), 2) end, "group_norm: expected a floating-point input, got int64")
  raises(function() return F.interpolate(n:view(1, 2, 3):float():long(), {size = 4}) end,
    "upsample_nearest1d: expected a floating-point input, got int64")
  raises(function() return F.adaptive_max_pool2d(n:view(1, 2, 3), 1) end,
    "adaptive_max_pool2d: expected a floating-point input, got int64")
end)

-- ---- behaviour ----------------------------------------------------------------------------------

test("inplace activations write into x when autograd does not need it", function()
  local x = torch.tensor({-2.0, -0.5, 0.5, 3.0})
  local y = F.elu(x, {alpha = 1.0, inplace = true})
  ok(rawequal(y, x), "elu returns x itself")
  close(x, {math.exp(-2) - 1, math.exp(-0.5) - 1, 0.5, 3.0}, 1e-6, 1e-7, "elu in place")
  F.hardtanh(x, -0.1, 0.2, true)
  close(x, {-0.1, -0.1, 0.2, 0.2}, 1e-6, 1e-7, "hardtanh in place")
  local w = torch.tensor({-1.0, 1.0}, {requires_grad = true})
  local z = F.mish(w, {inplace = true})
  ok(not rawequal(z, w), "a leaf that requires grad is not overwritten")
  z:sum():backward()
  ok(w.grad ~= nil, "and its gradient flows")
end)

test("softplus above the threshold is x itself, and logsigmoid does not overflow", function()
  local x = torch.tensor({100.0, -100.0, 30.0}, {dtype = "float64"})
  close(F.softplus(x), {100, math.exp(-100), 30}, 1e-12, 0, "softplus")
  close(F.softplus(x, 1, 50), {100, math.exp(-100), 30 + math.log(1 + math.exp(-30))}, 1e-12, 0, "threshold 50")
  close(F.logsigmoid(x), {-math.exp(-100), -100, -math.exp(-30)}, 1e-12, 0, "logsigmoid")
end)

test("group_norm on an empty batch gives empty results and zero parameter gradients", function()
  local x = torch.randn(0, 4, 3, {requires_grad = true})
  local w, b = torch.ones(4, {requires_grad = true}), torch.zeros(4, {requires_grad = true})
  local y = F.group_norm(x, 2, w, b)
  eq(shape(y), "0x4x3", "shape")
  y:sum():backward()
  close(w.grad, {0, 0, 0, 0}, 0, 0, "weight grad")
  close(b.grad, {0, 0, 0, 0}, 0, 0, "bias grad")
  eq(shape(x.grad), "0x4x3", "input grad")
end)

-- ---- modules ----------------------------------------------------------------------------------

test("activation modules: PyTorch's defaults, repr and forward", function()
  local x = torch.randn(3, 4)
  local cases = {
    {nn.Softplus(), "Softplus(beta=1, threshold=20)", F.softplus(x)},
    {nn.Softplus(2, 5), "Softplus(beta=2, threshold=5)", F.softplus(x, 2, 5)},
    {nn.ELU(), "ELU(alpha=1.0)", F.elu(x)},
    {nn.ELU({alpha = 0.5, inplace = true}), "ELU(alpha=0.5, inplace=True)", F.elu(x, 0.5)},
    {nn.Hardtanh(), "Hardtanh(min_val=-1.0, max_val=1.0)", F.hardtanh(x)},
    {nn.Hardtanh(-2, 3), "Hardtanh(min_val=-2, max_val=3)", F.hardtanh(x, -2, 3)},
    {nn.LogSigmoid(), "LogSigmoid()", F.logsigmoid(x)},
    {nn.Mish(), "Mish()", F.mish(x)},
    {nn.Softmin(1), "Softmin(dim=1)", F.softmin(x, 1)},
    {nn.Softmin(), "Softmin(dim=None)", F.softmin(x)},
  }
  for _, c in ipairs(cases) do
    eq(tostring(c[1]), c[2], "repr")
    close(c[1](x:clone()), c[3], 0, 0, c[2])
  end
  raises(function() return nn.Hardtanh(1, -1) end, "Hardtanh: max_val (-1) must be greater than min_val (1)")
  raises(function() return nn.Softplus({bta = 2}) end, "unknown option 'bta'")
end)

test("GroupNorm: parameters, repr, forward and its checks", function()
  local m = nn.GroupNorm(2, 6)
  eq(tostring(m), "GroupNorm(2, 6, eps=1e-05, affine=True)", "repr")
  eq(shape(m.weight), "6", "weight")
  close(m.weight, torch.ones(6), 0, 0, "weight ones")
  close(m.bias, torch.zeros(6), 0, 0, "bias zeros")
  local x = torch.randn(3, 6, 4)
  close(m(x), F.group_norm(x, 2, m.weight, m.bias), 0, 0, "forward")
  local names = {}
  for name in m:named_parameters() do names[#names + 1] = name end
  eq(table.concat(names, " "), "weight bias", "parameter names")
  local plain = nn.GroupNorm(3, 6, {affine = false, eps = 1e-3})
  eq(#plain:parameters(), 0, "affine = false has no parameters")
  eq(tostring(plain), "GroupNorm(3, 6, eps=0.001, affine=False)", "repr without affine")
  raises(function() return nn.GroupNorm(4, 6) end, "GroupNorm: num_channels (6) must be divisible by num_groups (4)")
  raises(function() return m(torch.randn(3, 5, 4)) end, "GroupNorm(2, 6): expected an input (N, 6, *), got shape (3, 5, 4)")
  raises(function() return F.group_norm(torch.randn(2, 6), 4) end,
    "group_norm: expected the number of channels to be divisible by num_groups, but got input of shape (2, 6) and num_groups=4")
  raises(function() return F.group_norm(torch.randn(2, 6), 3, torch.ones(5)) end,
    "group_norm: weight should be a 1-D tensor of 6 elements, got shape (5,)")
  raises(function() return F.group_norm(torch.randn(6), 3) end, "group_norm: expected an input of at least 2 dims")
end)

test("pooling modules: MaxPool1d, AvgPool1d, AdaptiveMaxPool2d", function()
  local x = torch.randn(2, 3, 10)
  local mp = nn.MaxPool1d(3, {stride = 2, return_indices = true})
  eq(tostring(mp), "MaxPool1d(kernel_size=3, stride=2, padding=0, dilation=1, ceil_mode=False)", "MaxPool1d repr")
  local y, i = mp(x)
  local y2, i2 = F.max_pool1d(x, 3, 2, {return_indices = true})
  close(y, y2, 0, 0, "values")
  close(i, i2, 0, 0, "indices")
  local ap = nn.AvgPool1d(3)
  eq(tostring(ap), "AvgPool1d(kernel_size=(3,), stride=(3,), padding=(0,))", "AvgPool1d repr")
  close(ap(x), F.avg_pool1d(x, 3), 0, 0, "AvgPool1d forward")
  local am = nn.AdaptiveMaxPool2d({2, 3})
  eq(tostring(am), "AdaptiveMaxPool2d(output_size=(2, 3))", "AdaptiveMaxPool2d repr")
  local z = torch.randn(2, 4, 5, 7)
  close(am(z), F.adaptive_max_pool2d(z, {2, 3}), 0, 0, "forward")
  local v, idx = nn.AdaptiveMaxPool2d(2, {return_indices = true})(z)
  eq(shape(v), "2x4x2x2", "values")
  eq(idx.dtype, torch.int64, "indices")
end)

test("Upsample and its fixed-mode forms", function()
  local x = torch.randn(1, 2, 3, 4)
  local u = nn.Upsample({scale_factor = 2})
  eq(tostring(u), "Upsample(scale_factor=2.0, mode='nearest')", "repr")
  close(u(x), F.interpolate(x, {scale_factor = 2}), 0, 0, "forward")
  local s = nn.Upsample({size = {5, 6}, mode = "bilinear"})
  eq(tostring(s), "Upsample(size=(5, 6), mode='bilinear')", "repr with size")
  close(s(x), F.interpolate(x, {size = {5, 6}, mode = "bilinear", align_corners = false}), 0, 0, "bilinear")
  local b = nn.UpsamplingBilinear2d({scale_factor = 2})
  eq(tostring(b), "UpsamplingBilinear2d(scale_factor=2.0, mode='bilinear')", "UpsamplingBilinear2d repr")
  close(b(x), F.interpolate(x, {scale_factor = 2, mode = "bilinear", align_corners = true}), 0, 0, "align_corners")
  close(nn.UpsamplingNearest2d({size = 5})(x), F.interpolate(x, {size = 5}), 0, 0, "UpsamplingNearest2d")
  close(F.interpolate(x, {size = torch.Size({5, 6})}), F.interpolate(x, {size = {5, 6}}), 0, 0, "a torch.Size as size")
  raises(function() return nn.Upsample({size = true})(x) end, "size must be an integer, got boolean")
  -- options that cannot work with any input fail when the module is built, not at its first forward
  for _, c in ipairs({
    {{size = 2, scale_factor = 2}, "Upsample: only one of size or scale_factor should be defined"},
    {{}, "Upsample: either size or scale_factor should be defined"},
    {{size = {2, "a"}}, "Upsample: size must be an integer, got string"},
    {{scale_factor = {}}, "Upsample: scale_factor must be a number or a non-empty list of numbers"},
    {{scale_factor = 0 / 0}, "Upsample: scale_factor must be finite"},
    {{size = 2, mode = 3}, "Upsample: mode must be 'nearest', 'linear' or 'bilinear', got 3"},
    {{size = 2, mode = "bicubic"}, "Upsample: mode 'bicubic' is not supported yet"},
    {{scale_factor = 2, align_corners = false}, "Upsample: align_corners option can only be set with the interpolating"},
    {{size = 2, recompute_scale_factor = true}, "recompute_scale_factor is not meaningful with an explicit size"},
    {{size = {4, 0}}, "Upsample: input and output sizes should be greater than 0, but got size (4, 0)"},
    {{size = -2}, "Upsample: input and output sizes should be greater than 0, but got size -2"},
    {{scale_factor = 0}, "Upsample: input and output sizes should be greater than 0, but got scale_factor 0"},
    {{scale_factor = {2, -1.5}}, "Upsample: input and output sizes should be greater than 0, but got scale_factor (2, -1.5)"},
  }) do
    raises(function() return nn.Upsample(c[1]) end, c[2], c[2])
  end
  raises(function() return nn.UpsamplingBilinear2d({size = {3, "a"}}) end, "UpsamplingBilinear2d: size must be an integer")
  raises(function() return nn.UpsamplingNearest2d() end, "UpsamplingNearest2d: either size or scale_factor")
end)

test("HuberLoss and KLDivLoss modules", function()
  local a, b = torch.randn(4, 3), torch.randn(4, 3)
  close(nn.HuberLoss()(a, b), F.huber_loss(a, b), 0, 0, "HuberLoss")
  close(nn.HuberLoss({delta = 0.3, reduction = "sum"})(a, b), F.huber_loss(a, b, {delta = 0.3, reduction = "sum"}), 0, 0,
    "options")
  local lp, t = a:log_softmax(1), b:softmax(1)
  close(nn.KLDivLoss({reduction = "batchmean"})(lp, t), F.kl_div(lp, t, {reduction = "batchmean"}), 0, 0, "KLDivLoss")
  raises(function() return nn.KLDivLoss({size_average = false}) end, "KLDivLoss: unknown option 'size_average'")
  raises(function() return nn.HuberLoss({dleta = 1}) end, "did you mean 'delta'?")
end)

-- ---- errors -------------------------------------------------------------------------------------

test("interpolate's argument errors are PyTorch's", function()
  local x = torch.randn(1, 2, 3, 4)
  raises(function() return F.interpolate(x) end, "either size or scale_factor should be defined")
  raises(function() return F.interpolate(x, {size = 2, scale_factor = 2}) end, "only one of size or scale_factor")
  raises(function() return F.interpolate(x, {size = 4, align_corners = true}) end,
    "align_corners option can only be set with the interpolating modes")
  raises(function() return F.interpolate(x, {size = 4, mode = "linear"}) end, "got 4D input, but linear mode needs 3D input")
  raises(function() return F.interpolate(x[0], {size = 4, mode = "bilinear"}) end,
    "got 3D input, but bilinear mode needs 4D input")
  raises(function() return F.interpolate(x, {size = 4, mode = "bicubic"}) end, "mode 'bicubic' is not supported yet")
  raises(function() return F.interpolate(x, {size = 4, mode = "cubic"}) end, "mode must be 'nearest', 'linear' or 'bilinear'")
  raises(function() return F.interpolate(x, {size = {2, 3, 4}}) end, "size must be a number or a list of 2")
  raises(function() return F.interpolate(x, {size = 0}) end, "input and output sizes should be greater than 0")
  raises(function() return F.interpolate(x, {scale_factor = 0.1}) end, "input and output sizes should be greater than 0")
  raises(function() return F.interpolate(x, {scale_factor = math.huge}) end, "scale_factor must be finite")
  raises(function() return F.interpolate(x:view(1, 2, 3, 4, 1), {size = 2}) end, "expected a 3-D (N, C, L) or 4-D")
  raises(function() return F.interpolate(x, {size = 5, recompute_scale_factor = true}) end,
    "recompute_scale_factor is not meaningful with an explicit size")
  raises(function() return F.interpolate(torch.randn(1, 0, 3), {size = 5}) end, "non-empty 3-D data tensor expected")
  raises(function() return F.interpolate(x, {size = 5, antialias = true}) end, "antialias is not supported")
end)

test("the other functions' argument errors", function()
  local x = torch.randn(2, 3, 8)
  raises(function() return F.softplus(x, 0) end, "beta must not be 0")
  raises(function() return F.elu(x, "a") end, "alpha must be a number")
  raises(function() return F.max_pool1d(x, 3, {padding = 2}) end,
    "padding should be at most half of kernel size, but got padding=2 and kernel_size=3")
  raises(function() return F.max_pool1d(x, 9) end, "the output length 0 is too small")
  raises(function() return F.max_pool1d(x:view(2, 3, 2, 4), 2) end, "expected a 2-D (C, L) or 3-D (N, C, L) input")
  raises(function() return F.avg_pool1d(x) end, "kernel_size is required")
  raises(function() return F.adaptive_max_pool2d(torch.randn(1, 2, 3, 3), {-1, 2}) end, "output_size must be at least 0")
  raises(function() return F.normalize(x, {p = "two"}) end, "p must be a number")
  raises(function() return F.kl_div(x, x, {reduction = "avg"}) end,
    "kl_div: \"avg\" is not a valid value for reduction (expected \"mean\", \"batchmean\", \"sum\" or \"none\")")
  raises(function() return F.kl_div(x, x[0]) end, "kl_div: target size torch.Size([3, 8]) is different from input size torch.Size([2, 3, 8])")
  raises(function() return F.huber_loss(x, x, {delta = 0}) end, "huber_loss: delta must be a positive number, got 0")
  raises(function() return torch._nn.upsample(x, "cubic", {4}) end, "invalid option 'cubic'")
end)

T.run()
