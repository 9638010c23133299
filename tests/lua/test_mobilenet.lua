-- MobileNetV3 (models.mobilenet_v3_small/large) and its blocks against
-- torchvision: state_dict keys and shapes, outputs and gradients on fixed
-- weights (tests/fixtures/mobilenet/mobilenet_torch.lua, made by
-- gen_mobilenet_fixture.py next to it), a live comparison where Debian's
-- python3-torchvision is installed, torchvision's initialisation, hardswish and
-- hardsigmoid (values, finite differences, cuda == CPU), and the error messages.
-- On the cuda pass (TENSH_TEST_DEVICE) the same cases run on the GPU.
local T = require "harness"
local G = require "gradcheck"
local test, close, eq, raises, ok = T.test, T.close, T.eq, T.raises, T.ok
local F64 = {dtype = "float64"}

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local fixture_dir = here .. "../fixtures/mobilenet/"
local fixture = dofile(fixture_dir .. "mobilenet_torch.lua")

local function tensor(f) return torch.tensor(f.data, F64):view(table.unpack(f.shape)) end
local function dims(list) return table.concat(list, "x") end

-- the fixed values both sides compute (gen_mobilenet_fixture.py's fixed and fixed_value)
local function fixed(n, j) return torch.arange(n, F64):mul(0.7):add(1.3 * j + 0.1):sin() end
local function fixed_value(name, t, j)
  local v = fixed(t:numel(), j):view(t.shape)
  if name:match("running_mean$") then return v * 0.1 end
  if name:match("running_var$") then return v * v * 0.5 + 1 end
  if t:dim() >= 2 then return v * (1.5 / math.sqrt(t:numel() // t:size(0))) end
  if name:match("bias$") then return v * 0.1 end
  return v * 0.2 + 1
end

-- ---- state_dict keys and shapes -------------------------------------------------

for _, case in ipairs(fixture.keys) do
  test("state_dict keys and shapes equal torchvision's: " .. case.name, function()
    local m = models[case.arch](case.opts)
    local got = {}
    for name, t in m:named_parameters() do got[name] = t end
    for name, t in m:named_buffers() do got[name] = t end
    local sd = m:state_dict()
    local n = 0
    for _ in pairs(sd) do n = n + 1 end
    eq(n, #case.entries, case.name .. ": number of state_dict entries")
    for i, e in ipairs(case.entries) do
      local t = sd[e[1]]
      if t == nil then error(("%s: entry %d '%s' is missing from the state_dict"):format(case.name, i, e[1])) end
      eq(dims(t.shape:totable()), dims(e[2]), case.name .. ": shape of " .. e[1])
    end
    -- named_parameters + named_buffers list them in torchvision's order
    local order = {}
    for name in m:named_parameters() do order[#order + 1] = name end
    local expected = {}
    for _, e in ipairs(case.entries) do
      if not e[1]:match("running_") and not e[1]:match("num_batches_tracked") then expected[#expected + 1] = e[1] end
    end
    eq(table.concat(order, " "), table.concat(expected, " "), case.name .. ": parameter order")
  end)
end

-- ---- fixed weights against torchvision's values ------------------------------------

-- the fixture's small model, its state set to the fixed values: entry j of torchvision's
-- state_dict order (the same names at every width: the "small" key list's)
local function build_fixed()
  local spec = fixture.eval
  local m = models[spec.arch](spec.opts):double()
  local sd = m:state_dict()
  local entries
  for _, case in ipairs(fixture.keys) do if case.name == "small" then entries = case.entries end end
  torch.no_grad(function()
    for j, e in ipairs(entries) do
      local name = e[1]
      if not name:match("num_batches_tracked$") then sd[name]:copy_(fixed_value(name, sd[name], j - 1)) end
    end
  end)
  return m
end

test("fixed weights, eval mode: outputs and input gradient equal torchvision's", function()
  local m = build_fixed()
  m:eval()
  local spec = fixture.eval
  local x = (fixed(2 * 3 * 24 * 24, 1000) * 1.5):view(table.unpack(spec.x_shape)):requires_grad_()
  local y = m(x)
  close(y, tensor(spec.out), 1e-9, 1e-11, "eval output")
  local r = fixed(y:numel(), 2000):view(y.shape);
  (y * r):sum():backward()
  close(x.grad[0][0], tensor(spec.grad_x0), 1e-8, 1e-11, "eval grad x[0, 0]")
end)

test("fixed weights, train mode: outputs, parameter gradients and running statistics equal torchvision's", function()
  local m = build_fixed()
  m:train()
  local spec = fixture.train
  local x = (fixed(4 * 3 * 32 * 32, 3000) * 1.5):view(table.unpack(spec.x_shape))
  local y = m(x)
  close(y, tensor(spec.out), 1e-8, 1e-10, "train output")
  local r = fixed(y:numel(), 4000):view(y.shape);
  (y * r):sum():backward()
  local params = {}
  for name, p in m:named_parameters() do params[name] = p end
  -- batch norm over 4 values per channel (the last blocks see 1x1 maps) amplifies
  -- rounding on the way back: agreement to 1e-7 of each gradient's largest entry
  for _, name in ipairs(spec.grad_names) do
    local want = tensor(spec.grads[name])
    close(params[name].grad, want, 1e-7, 1e-7 * want:abs():max():item(), "grad " .. name)
  end
  local sd = m:state_dict()
  close(sd["features.0.1.running_mean"], tensor(spec.running_mean), 1e-9, 1e-12, "running_mean")
  close(sd["features.0.1.running_var"], tensor(spec.running_var), 1e-9, 1e-12, "running_var")
  eq(sd["features.0.1.num_batches_tracked"]:item(), 1, "num_batches_tracked")
end)

-- ---- live against torchvision ---------------------------------------------------------

local PY = "/usr/bin/python3"
local function has_torchvision()
  local f = io.open(PY, "r")
  if not f then return false, PY .. " is not installed" end
  f:close()
  local p = io.popen(PY .. " -c 'import torchvision' 2>&1")
  local out = p:read("a")
  local okc = p:close()
  if not okc then return false, "torchvision does not import under " .. PY .. " (apt-get install python3-torchvision): " ..
    (out:match("[^\n]*Error[^\n]*") or out) end
  return true
end

T.cpu_test("live: MobileNetV3-small's outputs equal torchvision's for the same weights, both ways", function()
  local have, why = has_torchvision()
  if not have then T.skip(why) end
  torch.manual_seed(3)
  local m = models.mobilenet_v3_small({num_classes = 10, dropout = 0.0}):double()
  -- running statistics away from their initial values, so eval mode tests them
  torch.no_grad(function()
    for name, b in m:named_buffers() do
      if name:match("running_mean$") then b:normal_(0, 0.1) elseif name:match("running_var$") then b:uniform_(0.5, 1.5) end
    end
  end)
  local x = torch.randn(3, 3, 32, 32, F64)
  local state = {x = x}
  for k, v in pairs(m:state_dict()) do state["model." .. k] = v end
  local dir = os.tmpname()
  os.remove(dir)
  local src, dst = dir .. "_in.safetensors", dir .. "_out.safetensors"
  torch.save(state, src)
  local cmd = ("%s %storchvision_live.py mobilenet_v3_small 1.0 10 %s %s 2>&1"):format(PY, fixture_dir, src, dst)
  local p = io.popen(cmd)
  local log = p:read("a")
  local okc = p:close()
  os.remove(src)
  if not okc then error("torchvision_live.py failed:\n" .. log) end
  local got = torch.load(dst)
  os.remove(dst)
  m:eval()
  close(m(x), got.eval, 1e-9, 1e-11, "eval output (tensh weights in torchvision)")
  m:train()
  close(m(x), got.train, 1e-9, 1e-11, "train output")
  close(m:state_dict()["features.0.1.running_mean"], got["train.features.0.1.running_mean"], 1e-9, 1e-12,
    "running_mean after a train step")
  -- torchvision's own checkpoint loads as it is, strictly
  local tv = {}
  for k, v in pairs(got) do
    local key = k:match("^tv%.(.*)$")
    if key then tv[key] = v end
  end
  local m2 = models.mobilenet_v3_small({num_classes = 10, dropout = 0.0}):double()
  m2:load_state_dict(tv)
  m2:eval()
  close(m2(x), got.tv_eval, 1e-9, 1e-11, "eval output (torchvision's weights in tensh)")
end)

-- ---- torchvision's initialisation ---------------------------------------------------

local function std_of(t)
  local d = t:double()
  return math.sqrt(((d - d:mean()) ^ 2):mean():item())
end

test("initialisation as torchvision's: kaiming_normal_(fan_out) convs, unit batch norms, N(0, 0.01) linears", function()
  torch.manual_seed(5)
  local m = models.mobilenet_v3_small()
  local sd = m:state_dict()
  -- the last 1x1 conv: 576 x 96, fan_out 576
  local w = sd["features.12.0.weight"]
  local want = math.sqrt(2 / 576)
  ok(math.abs(std_of(w) - want) < 0.03 * want, ("features.12.0.weight std %g, want %g"):format(std_of(w), want))
  ok(math.abs(w:double():mean():item()) < 0.01 * want * 10, "conv weight mean near 0")
  -- a depthwise 5x5 of 96 channels: fan_out 96 * 25, as PyTorch counts it (groups ignored)
  local dw = sd["features.4.block.1.0.weight"]
  local want_dw = math.sqrt(2 / (96 * 25))
  ok(math.abs(std_of(dw) - want_dw) < 0.1 * want_dw, ("depthwise std %g, want %g"):format(std_of(dw), want_dw))
  local lin = sd["classifier.0.weight"]
  ok(math.abs(std_of(lin) - 0.01) < 0.0005, ("classifier.0.weight std %g, want 0.01"):format(std_of(lin)))
  eq(sd["classifier.0.bias"]:abs():sum():item(), 0, "linear bias zero")
  eq(sd["features.1.block.0.1.weight"]:sum():item(), 16, "batch norm weight ones")
  eq(sd["features.1.block.0.1.bias"]:abs():sum():item(), 0, "batch norm bias zero")
  eq(sd["features.1.block.1.fc1.bias"]:abs():sum():item(), 0, "SE conv bias zero")
  local bn = m.features[0][1]
  eq(bn.eps, 0.001, "batch norm eps")
  eq(bn.momentum, 0.01, "batch norm momentum")
  eq(m.classifier[2].p, 0.2, "default dropout")
end)

test("structure: residual connections, SE layers, activations and printing as torchvision's", function()
  local m = models.mobilenet_v3_small()
  local uses = {}
  for i = 1, 11 do uses[i] = m.features[i].use_res_connect and 1 or 0 end
  eq(table.concat(uses), "00101101011", "use_res_connect per block")
  eq(m.features[1].block[1]:_get_name(), "SqueezeExcitation", "block 1 has SE")
  eq(m.features[1].block[1].scale_activation:_get_name(), "Hardsigmoid", "SE scale activation")
  eq(m.features[4].block[0][2]:_get_name(), "Hardswish", "HS blocks use Hardswish")
  eq(m.features[2].block[0][2]:_get_name(), "ReLU", "RE blocks use ReLU")
  local s = tostring(m)
  ok(s:find("(0): Conv2dNormActivation(", 1, true), "prints Conv2dNormActivation")
  ok(s:find("(3): Linear(in_features=1024, out_features=1000, bias=True)", 1, true), "prints the classifier")
  ok(s:find("(2): Dropout(p=0.2, inplace=True)", 1, true), "prints the dropout")
  local large = models.mobilenet_v3_large({num_classes = 10})
  eq(large.classifier[0].out_features, 1280, "large's last_channel")
  eq(dims(large(torch.randn(2, 3, 32, 32)).shape:totable()), "2x10", "large's output shape")
  local x = torch.randn(1, 3, 40, 56)
  eq(dims(m(x).shape:totable()), "1x1000", "any image size")
end)

test("the blocks are reusable layers", function()
  torch.manual_seed(7)
  local se = models.SqueezeExcitation(8, 4, {scale_activation = nn.Hardsigmoid})
  local x = torch.randn(2, 8, 5, 5, F64)
  se:double()
  local s = nn.functional.hardsigmoid(se.fc2(nn.functional.relu(se.fc1(x:mean({2, 3}, {keepdim = true})))))
  close(se(x), x * s, 1e-12, 1e-12, "SqueezeExcitation = x * hardsigmoid(fc2(relu(fc1(mean))))")
  local cna = models.Conv2dNormActivation(4, 6, {kernel_size = 3, stride = 2, activation_layer = nn.Hardswish})
  eq(#cna, 3, "conv, norm, activation")
  eq(cna[0].padding[1], 1, "padding (k - 1) // 2")
  eq(cna[0].bias, nil, "no conv bias before a norm")
  eq(dims(cna(torch.randn(1, 4, 9, 9)).shape:totable()), "1x6x5x5", "Conv2dNormActivation output")
  local plain = models.Conv2dNormActivation(4, 6, {kernel_size = 1, norm_layer = false, activation_layer = false})
  eq(#plain, 1, "norm_layer = false, activation_layer = false: the conv alone")
  ok(plain[0].bias ~= nil, "a conv bias when there is no norm")
  local cnf = models.InvertedResidualConfig(16, 3, 64, 16, true, "HS", 1, 1, 1.0)
  local ir = models.InvertedResidual(cnf, nn.BatchNorm2d)
  ok(ir.use_res_connect, "stride 1, same width: residual")
  eq(dims(ir(torch.randn(2, 16, 6, 6)).shape:totable()), "2x16x6x6", "InvertedResidual output")
  eq(models._make_divisible(16 * 0.25, 8), 8, "_make_divisible's minimum")
  eq(models._make_divisible(70, 8), 72, "_make_divisible rounds to the nearest multiple")
  eq(models._make_divisible(20, 16), 32, "_make_divisible never 10% below")
end)

-- ---- hardswish and hardsigmoid -------------------------------------------------------

local function hs_ref(v) return v * math.min(math.max(v + 3, 0), 6) / 6 end
local function hsig_ref(v) return math.min(math.max(v + 3, 0), 6) / 6 end

-- values away from the kinks at -3 and 3, where finite differences are exact
local function smooth_points(n)
  local l = {}
  for i = 1, n do
    local v
    repeat v = (math.random() - 0.5) * 10 until math.abs(math.abs(v) - 3) > 0.01
    l[i] = v
  end
  return l
end

test("hardswish and hardsigmoid: values, float64 finite-difference gradients", function()
  local l = smooth_points(40)
  l[#l + 1], l[#l + 2], l[#l + 3] = -3, 3, 0
  local x = torch.tensor(l, F64)
  close(nn.functional.hardswish(x), T.map(l, hs_ref), 1e-15, 1e-15, "hardswish values")
  close(nn.functional.hardsigmoid(x), T.map(l, hsig_ref), 1e-15, 1e-15, "hardsigmoid values")
  local sl = smooth_points(30)
  G.check("hardswish", function(t) return nn.functional.hardswish(t) end, {sl}, {tol = 1e-7})
  G.check("hardsigmoid", function(t) return nn.Hardsigmoid()(t) end, {sl}, {tol = 1e-7})
  G.check("hardswish on a non-contiguous view", function(t) return nn.Hardswish()(t:t()) end,
    {{{-4, -1, 0.5}, {2, 3.5, -2.5}}}, {tol = 1e-7})
  -- float32 and an empty tensor
  local y = nn.functional.hardswish(torch.tensor({-1.5, 1.5}))
  eq(y.dtype, torch.float32, "float32 stays float32")
  close(y, {hs_ref(-1.5), hs_ref(1.5)}, 1e-6, 1e-7, "float32 values")
  eq(nn.functional.hardsigmoid(torch.zeros(0)):numel(), 0, "empty")
end)

test("cuda gives the CPU's answers: hardswish, hardsigmoid and a MobileNetV3 training step", function()
  if not (cuda and cuda.is_available()) then T.skip("no CUDA device") end
  torch.manual_seed(11)
  local x = torch.randn(257, 3, {device = "cpu"}) * 4
  for _, f in ipairs({nn.functional.hardswish, nn.functional.hardsigmoid}) do
    local a = x:clone():requires_grad_()
    local b = x:to("cuda"):requires_grad_()
    local ya, yb = f(a), f(b)
    close(yb:cpu(), ya, 1e-6, 1e-6, "forward")
    local r = torch.randn(257, 3, {device = "cpu"})
    ya:backward(r)
    yb:backward(r:to("cuda"))
    close(b.grad:cpu(), a.grad, 1e-6, 1e-6, "backward")
  end
  local m = models.mobilenet_v3_small({num_classes = 5, width_mult = 0.5, dropout = 0.0}):to("cpu")
  local mc = models.mobilenet_v3_small({num_classes = 5, width_mult = 0.5, dropout = 0.0}):to("cpu")
  mc:load_state_dict(m:state_dict())
  mc:to("cuda")
  local img = torch.randn(4, 3, 32, 32, {device = "cpu"})
  local out = m(img)
  local outc = mc(img:to("cuda"))
  close(outc:cpu(), out, 1e-4, 1e-5, "MobileNetV3 forward (train mode)")
  out:sum():backward()
  outc:sum():backward()
  local pc = {}
  for name, p in mc:named_parameters() do pc[name] = p end
  for name, p in m:named_parameters() do
    close(pc[name].grad:cpu(), p.grad, 1e-3, 1e-4, "grad " .. name)
  end
end)

test("global average pooling (the SE layers' squeeze, output 1x1): means, permuted inputs, gradients", function()
  torch.manual_seed(13)
  for _, dt in ipairs({"float32", "float64"}) do
    local tol = dt == "float32" and 1e-6 or 1e-14
    for _, hw in ipairs({{1, 1}, {2, 2}, {3, 5}, {8, 8}}) do
      local x = torch.randn(3, 4, hw[1], hw[2], {dtype = dt})
      local want = x:double():mean({2, 3}, {keepdim = true})
      close(nn.functional.adaptive_avg_pool2d(x, 1), want, tol, tol, "contiguous " .. dims(hw))
      -- (N, C, H, W) as a permuted view of an (N, H, W, C) tensor: strided rows
      local xp = x:permute(0, 2, 3, 1):contiguous():permute(0, 3, 1, 2)
      close(nn.AdaptiveAvgPool2d({1, 1})(xp), want, tol, tol, "permuted " .. dims(hw))
    end
  end
  G.check("adaptive_avg_pool2d to 1x1", function(t) return nn.functional.adaptive_avg_pool2d(t, 1) end,
    {T.rand_list({2, 3, 3, 4})}, {tol = 1e-7})
  G.check("adaptive_avg_pool2d to 1x1, permuted", function(t) return nn.functional.adaptive_avg_pool2d(
    t:permute(0, 3, 1, 2), 1) end, {T.rand_list({2, 3, 4, 5})}, {tol = 1e-7})
end)

-- ---- bad input ------------------------------------------------------------------------

test("bad input: clear errors naming the function and what came", function()
  local m = models.mobilenet_v3_small({num_classes = 4, width_mult = 0.25})
  raises(function() m(torch.randn(2, 5, 32, 32)) end,
    "MobileNetV3: expected images of shape (N, 3, H, W), got input of shape (2, 5, 32, 32)", "wrong channels")
  raises(function() m(torch.randn(3, 32, 32)) end,
    "MobileNetV3: expected images of shape (N, 3, H, W), got input of shape (3, 32, 32)", "rank 3")
  raises(function() m("image") end, "MobileNetV3: expected a tensor input, got string", "not a tensor")
  raises(function() models.mobilenet_v3_small({width_mult = 0}) end,
    "mobilenet_v3_small: width_mult must be a positive number, got 0", "width_mult")
  raises(function() models.mobilenet_v3_small({num_classes = 0}) end, "num_classes", "num_classes")
  local adjust = models.InvertedResidualConfig.adjust_channels
  eq(adjust(16, 0.75), 16, "adjust_channels rounds 12 up to a multiple of 8")
  raises(function() adjust("16", 1.0) end, "InvertedResidualConfig.adjust_channels: channels must be an integer, got string", "channels")
  raises(function() adjust(16, -1) end, "InvertedResidualConfig.adjust_channels: width_mult must be a positive number, got -1", "width_mult")
  raises(function() models.mobilenet_v3_large({dropout = 2}) end,
    "MobileNetV3: dropout must be a probability between 0 and 1, got 2", "dropout")
  raises(function() models.mobilenet_v3_small({weights = "IMAGENET1K_V1"}) end,
    "mobilenet_v3_small: pretrained weights are not downloaded", "weights")
  raises(function() models.mobilenet_v3_small({classes = 10}) end,
    "mobilenet_v3_small: unknown option 'classes'", "unknown option")
  raises(function() models.InvertedResidualConfig(16, 3, 16, 16, true, "XX", 1, 1, 1.0) end,
    "InvertedResidualConfig: activation must be \"RE\" (ReLU) or \"HS\" (Hardswish), got XX", "activation")
  raises(function() models.InvertedResidual({}, nn.BatchNorm2d) end,
    "InvertedResidual: cnf must be a models.InvertedResidualConfig, got table", "cnf")
  raises(function() models.MobileNetV3({}, 10) end, "MobileNetV3: the inverted_residual_setting should not be empty",
    "empty setting")
  raises(function() models.Conv2dNormActivation(3, 8, {activation_layer = 5}) end,
    "Conv2dNormActivation: activation_layer must be a layer class (such as nn.ReLU) or false for none, got number",
    "activation_layer")
  raises(function() nn.functional.hardswish("x") end, "hardswish", "hardswish of a string")
  -- the session goes on
  m:eval()
  eq(dims(m(torch.randn(1, 3, 16, 16)).shape:totable()), "1x4", "still works after the errors")
end)

T.run()
