-- Options tables (PyTorch's keyword arguments) are checked: a key a
-- function does not read is an error naming the keys it takes and the
-- nearest one, worded the same by the C bindings (lt_opts_check) and by the
-- Lua library (args.check_opts), instead of being ignored (torch.zeros(3,
-- {dtyp = "float64"}) once gave float32 zeros). One misspelt and one
-- correct call per C binding file; the correct spelling must still take
-- effect. And create_graph = true, which the engine cannot honour, says so.
local T = require "harness"
local test, eq, ok, raises, close = T.test, T.eq, T.ok, T.raises, T.close
local A = require "tensh.args"

-- The message of fn's error without "file:line: ", checking the position is
-- this file (the user's line, not the library).
local function message(fn)
  local okc, err = pcall(fn)
  ok(not okc, "expected an error")
  err = tostring(err)
  ok(err:find("^test_options%.lua:%d+: ") or err:find("^[^:]*/test_options%.lua:%d+: "),
    "raised at the user's line: " .. err)
  return (err:gsub("^[^:]*:%d+: ", ""))
end

local function shape(t)
  local d = {}
  for i = 0, t:dim() - 1 do d[#d + 1] = t.shape[i] end
  return table.concat(d, "x")
end

local x23 = torch.arange(6, {dtype = torch.float32}):view(2, 3)

-- {name, bad call, its exact message, good call, check of the good call's result}
-- (creation calls are not tail calls: on the cuda pass the harness wraps them, and a tail
-- call would leave no line of this file to position their errors at)
local cases = {
  -- lcreate.c
  {"zeros", function() local r = torch.zeros(3, {dtyp = "float64"}) return r end,
    "zeros: unknown option 'dtyp' (expected one of: device, dtype, requires_grad; did you mean 'dtype'?)",
    function() local r = torch.zeros(3, {dtype = "float64"}) return r end,
    function(t) eq(t.dtype, torch.float64, "dtype") eq(t:sum():item(), 0) end},
  {"randn", function() local r = torch.randn(3, {requires_gard = true}) return r end,
    "randn: unknown option 'requires_gard' (expected one of: device, dtype, requires_grad; did you mean 'requires_grad'?)",
    function() local r = torch.randn(3, {requires_grad = true}) return r end,
    function(t) eq(t.requires_grad, true, "requires_grad") end},
  {"tensor", function() local r = torch.tensor({1, 2}, {devise = "cpu"}) return r end,
    "tensor: unknown option 'devise' (expected one of: device, dtype, requires_grad; did you mean 'device'?)",
    function() local r = torch.tensor({1, 2}, {device = "cpu", dtype = "int32"}) return r end,
    function(t) eq(t.dtype, torch.int32) close(t, {1, 2}) end},
  {"full_like", function() return torch.full_like(x23, 7, {layout = "strided"}) end,
    "full_like: unknown option 'layout' (expected one of: device, dtype, requires_grad)",
    function() return torch.full_like(x23, 7, {dtype = "int64"}) end,
    function(t) eq(t.dtype, torch.int64) eq(t:sum():item(), 42) end},
  {"arange", function() local r = torch.arange(4, {Dtype = "float64"}) return r end,
    "arange: unknown option 'Dtype' (expected one of: device, dtype, requires_grad; did you mean 'dtype'?)",
    function() local r = torch.arange(4, {dtype = "float64"}) return r end,
    function(t) eq(t.dtype, torch.float64) close(t, {0, 1, 2, 3}) end},
  -- ltensor.c
  {"to", function() return x23:to({dtyp = "float64"}) end,
    "to: unknown option 'dtyp' (expected one of: copy, device, dtype, non_blocking; did you mean 'dtype'?)",
    function() return x23:to({dtype = "float64", copy = true}) end,
    function(t) eq(t.dtype, torch.float64) eq(t:sum():item(), 15) end},
  {"cuda", function() return x23:cuda({non_blockng = true}) end,
    "cuda: unknown option 'non_blockng' (expected one of: device, non_blocking; did you mean 'non_blocking'?)"},
  -- lindex.c
  {"cat", function() return torch.cat({x23, x23}, {dmi = 1}) end,
    "cat: unknown option 'dmi' (expected one of: dim; did you mean 'dim'?)",
    function() return torch.cat({x23, x23}, {dim = 1}) end,
    function(t) eq(shape(t), "2x6") end},
  {"sort", function() return x23:sort({descnding = true}) end,
    "sort: unknown option 'descnding' (expected one of: descending, dim, stable; did you mean 'descending'?)",
    function() return x23:sort({descending = true}) end,
    function(v) close(v[0], {2, 1, 0}) end},
  {"topk", function() return x23:topk(1, {larget = false}) end,
    "topk: unknown option 'larget' (expected one of: dim, largest, sorted; did you mean 'largest'?)",
    function() return x23:topk(1, {largest = false}) end,
    function(v) close(v:flatten(), {0, 3}) end},
  {"unique", function() return torch.unique(torch.tensor({3, 1, 3}), {return_count = true}) end,
    "unique: unknown option 'return_count' (expected one of: dim, return_counts, return_inverse, sorted; did you mean 'return_counts'?)",
    function() return select(2, torch.unique(torch.tensor({3, 1, 3}), {return_counts = true})) end,
    function(c) close(c, {1, 2}) end},
  {"split", function() return x23:split(1, {axis = 0}) end,
    "split: unknown option 'axis' (expected one of: dim)",
    function() return x23:split(1, {dim = 1}) end,
    function(l) eq(#l, 3) eq(shape(l[1]), "2x1") end},
  {"scatter_add", function() local r = torch.zeros(3):scatter_add(0, torch.tensor({0, 0}), torch.ones(2), {reduc = "add"}) return r end,
    "scatter_add: unknown option 'reduc' (expected one of: reduce; did you mean 'reduce'?)",
    function() local r = torch.zeros(3):scatter(0, torch.tensor({0, 0}), torch.ones(2), {reduce = "add"}) return r end,
    function(t) close(t, {2, 0, 0}) end},
  {"nonzero", function() local r = torch.tensor({0, 1}):nonzero({as_tupel = true}) return r end,
    "nonzero: unknown option 'as_tupel' (expected one of: as_tuple; did you mean 'as_tuple'?)",
    function() local r = torch.tensor({0, 1}):nonzero({as_tuple = true}) return r end,
    function(l) eq(#l, 1) close(l[1], {1}) end},
  -- lreduce.c
  {"sum", function() return x23:sum({dim = 1, keepdims = true}) end,
    "sum: unknown option 'keepdims' (expected one of: dim, dtype, keepdim; did you mean 'keepdim'?)",
    function() return x23:sum({dim = 1, keepdim = true}) end,
    function(t) eq(shape(t), "2x1") close(t:flatten(), {3, 12}) end},
  {"var", function() return x23:var({unbaised = false}) end,
    "var: unknown option 'unbaised' (expected one of: correction, dim, keepdim, unbiased; did you mean 'unbiased'?)",
    function() return x23:var({unbiased = false}) end,
    function(t) close(t:item(), 35 / 12, 1e-5) end},
  {"max", function() return x23:max({dim = 0, keep_dim = true}) end,
    "max: unknown option 'keep_dim' (expected one of: dim, keepdim; did you mean 'keepdim'?)",
    function() return x23:max({dim = 0, keepdim = true}) end,
    function(v) eq(shape(v), "1x3") end},
  {"norm", function() return x23:norm({P = 1}) end,
    "norm: unknown option 'P' (expected one of: dim, dtype, keepdim, p; did you mean 'p'?)",
    function() return x23:norm({p = 1}) end,
    function(t) eq(t:item(), 15) end},
  {"softmax", function() return x23:softmax({dim = 1, dtpe = "float64"}) end,
    "softmax: unknown option 'dtpe' (expected one of: dim, dtype; did you mean 'dtype'?)",
    function() return x23:softmax({dim = 1, dtype = "float64"}) end,
    function(t) eq(t.dtype, torch.float64) close(t:sum():item(), 2, 1e-12) end},
  {"allclose", function() return torch.allclose(x23, x23 + 0.01, {atl = 0.1}) end,
    "allclose: unknown option 'atl' (expected one of: atol, equal_nan, rtol; did you mean 'atol'?)",
    function() return torch.allclose(x23, x23 + 0.01, {atol = 0.1}) end,
    function(r) eq(r, true) end},
  -- lelementwise.c
  {"clamp", function() return x23:clamp({mn = 1}) end,
    "clamp: unknown option 'mn' (expected one of: max, min; did you mean 'min'?)",
    function() return x23:clamp({min = 1}) end,
    function(t) close(t:flatten(), {1, 1, 2, 3, 4, 5}) end},
  {"gelu", function() return x23:gelu({approx = "tanh"}) end,
    "gelu: unknown option 'approx' (expected one of: approximate)",
    function() local r = torch.tensor({1.0}):gelu({approximate = "tanh"}) return r end,
    function(t) close(t:item(), 0.5 * (1 + math.tanh(math.sqrt(2 / math.pi) * (1 + 0.044715))), 1e-5) end},
  {"add", function() return x23:add(1, {alpah = 2}) end,
    "add: unknown option 'alpah' (expected one of: alpha; did you mean 'alpha'?)",
    function() return x23:add(1, {alpha = 2}) end,
    function(t) close(t:flatten(), {2, 3, 4, 5, 6, 7}) end},
  {"div", function() return torch.div(x23, 4, {roundingmode = "floor"}) end,
    "div: unknown option 'roundingmode' (expected one of: rounding_mode; did you mean 'rounding_mode'?)",
    function() return torch.div(x23, 4, {rounding_mode = "floor"}) end,
    function(t) close(t:flatten(), {0, 0, 0, 0, 1, 1}) end},
  {"mul", function() return torch.mul(x23, 4, {rounding_mode = "floor"}) end,
    "mul: unknown option 'rounding_mode' (mul takes no options)",
    function() return torch.mul(x23, 4) end,
    function(t) close(t:flatten(), {0, 4, 8, 12, 16, 20}) end},
  {"exp", function() return torch.exp(x23, {out = x23}) end,
    "exp: unknown option 'out' (exp takes no options)",
    function() return torch.exp(x23) end,
    function(t) close(t:flatten():narrow(0, 0, 2), {1, math.exp(1)}, 1e-6) end},
  -- llinalg.c
  {"addmm", function() return torch.addmm(torch.ones(2, 2), x23, x23:t(), {beat = 0}) end,
    "addmm: unknown option 'beat' (expected one of: alpha, beta; did you mean 'beta'?)",
    function() return torch.addmm(torch.ones(2, 2), x23, x23:t(), {beta = 0}) end,
    function(t) close(t:flatten(), {5, 14, 14, 50}) end},
  -- lnn.c
  {"conv2d", function() return torch.conv2d(torch.ones(1, 1, 4, 4), torch.ones(1, 1, 2, 2), nil, {stirde = 2}) end,
    "conv2d: unknown option 'stirde' (expected one of: dilation, groups, padding, stride; did you mean 'stride'?)",
    function() return torch.conv2d(torch.ones(1, 1, 4, 4), torch.ones(1, 1, 2, 2), nil, {stride = 2}) end,
    function(t) eq(shape(t), "1x1x2x2") eq(t:sum():item(), 16) end},
  {"max_pool2d", function() return torch.max_pool2d(torch.ones(1, 1, 4, 4), 2, {count_include_pad = true}) end,
    "max_pool2d: unknown option 'count_include_pad' (expected one of: ceil_mode, dilation, padding, return_indices, stride)",
    function() return torch.max_pool2d(torch.ones(1, 1, 4, 4), 2, {stride = 1}) end,
    function(t) eq(shape(t), "1x1x3x3") end},
  {"avg_pool2d", function() return torch.avg_pool2d(torch.ones(1, 1, 4, 4), 2, {ceilmode = true}) end,
    "avg_pool2d: unknown option 'ceilmode' (expected one of: ceil_mode, count_include_pad, dilation, padding, stride; did you mean 'ceil_mode'?)",
    function() return torch.avg_pool2d(torch.ones(1, 1, 4, 4), 2, {padding = 1, count_include_pad = false}) end,
    function(t) eq(shape(t), "1x1x3x3") eq(t:sum():item(), 9) end},
  {"embedding", function() return torch.embedding(x23, torch.tensor({1}), {padding_ix = 0}) end,
    "embedding: unknown option 'padding_ix' (expected one of: padding_idx; did you mean 'padding_idx'?)",
    function() return torch.embedding(x23, torch.tensor({1}), {padding_idx = 0}) end,
    function(t) close(t:flatten(), {3, 4, 5}) end},
  -- lattention.c: causal attention's first row is v's first row
  {"_sdpa", function() return torch._sdpa(torch.ones(1, 2, 2), torch.ones(1, 2, 2), x23:view(1, 3, 2):narrow(1, 0, 2), {is_casual = true}) end,
    "_sdpa: unknown option 'is_casual' (expected one of: dropout_p, is_causal, mask, scale; did you mean 'is_causal'?)",
    function() return torch._sdpa(torch.ones(1, 2, 2), torch.ones(1, 2, 2), x23:view(1, 3, 2):narrow(1, 0, 2), {is_causal = true}) end,
    function(o) close(o[0][0], {0, 1}) end},
  -- lrnn.c: with h0 = 0 the reversed run's last output is tanh of the last input
  {"_rnn_layer", function() return torch._rnn_layer("rnn_tanh", torch.ones(2, 1, 1), torch.ones(1, 1), {revers = true}) end,
    "_rnn_layer: unknown option 'revers' (expected one of: b_hh, batch_sizes, c0, h0, reverse, scratch, w_hr; did you mean 'reverse'?)",
    function() return torch._rnn_layer("rnn_tanh", torch.tensor({{{0.5}}, {{-1.0}}}), torch.ones(1, 1), {reverse = true}) end,
    function(o) close(o[1]:item(), math.tanh(-1), 1e-6) end},
  -- loptim.c
  {"_sgd_step", function() return torch._sgd_step({torch.ones(2)}, {torch.ones(2)}, nil, nil, {lr = 0.5, wieght_decay = 0}) end,
    "_sgd_step: unknown option 'wieght_decay' (expected one of: dampening, lr, maximize, momentum, nesterov, weight_decay; did you mean 'weight_decay'?)",
    function() local p = torch.ones(2) torch._sgd_step({p}, {torch.ones(2)}, nil, nil, {lr = 0.5, maximize = true}) return p end,
    function(p) close(p, {1.5, 1.5}) end},
  {"_adam_step", function()
      return torch._adam_step({torch.ones(1)}, {torch.ones(1)}, {torch.zeros(1)}, {torch.zeros(1)}, nil, {betas = {0.9, 0.999}})
    end,
    "_adam_step: unknown option 'betas' (expected one of: amsgrad, beta1, beta2, decoupled, eps, lr, maximize, step, steps, weight_decay; did you mean 'beta1'?)",
    function()
      local p = torch.ones(1)
      torch._adam_step({p}, {torch.ones(1)}, {torch.zeros(1)}, {torch.zeros(1)}, nil, {lr = 0.25})
      return p
    end,
    function(p) close(p:item(), 0.75, 1e-6) end},
  -- lautograd.c
  {"backward", function() local w = torch.ones(2, {requires_grad = true}); (w * 2):sum():backward({retain_grap = true}) end,
    "backward: unknown option 'retain_grap' (expected one of: create_graph, retain_graph; did you mean 'retain_graph'?)",
    function()
      local w = torch.ones(2, {requires_grad = true})
      local y = (w * w):sum()
      y:backward({retain_graph = true, create_graph = false})
      y:backward() -- the graph was kept
      return w.grad
    end,
    function(g) close(g, {4, 4}) end},
  {"autograd.grad", function() local w = torch.ones(2, {requires_grad = true}) torch.autograd.grad((w * 2):sum(), {w}, {allow_unsued = true}) end,
    "autograd.grad: unknown option 'allow_unsued' (expected one of: allow_unused, create_graph, grad_outputs, retain_graph; did you mean 'allow_unused'?)",
    function()
      local w, u = torch.ones(2, {requires_grad = true}), torch.ones(1, {requires_grad = true})
      return torch.autograd.grad((w * 3):sum(), {w, u}, {allow_unused = true, create_graph = false})
    end,
    function(g) close(g[1], {3, 3}) eq(g[2], nil) end},
  {"autograd.backward", function() local w = torch.ones(2, {requires_grad = true}) torch.autograd.backward({(w * 2):sum()}, {retian_graph = true}) end,
    "autograd.backward: unknown option 'retian_graph' (expected one of: create_graph, grad_tensors, retain_graph; did you mean 'retain_graph'?)",
    function()
      local w = torch.ones(2, {requires_grad = true})
      local y = (w * 5):sum()
      torch.autograd.backward({y}, {retain_graph = true, grad_tensors = {torch.tensor(2.0)}})
      torch.autograd.backward({y}, nil, {retain_graph = false}) -- kept by the first
      return w.grad
    end,
    function(g) close(g, {15, 15}) end},
  -- lprint.c
  {"set_printoptions", function() torch.set_printoptions({precison = 2}) end,
    "set_printoptions: unknown option 'precison' (expected one of: edgeitems, linewidth, precision, profile, sci_mode, threshold; did you mean 'precision'?)",
    function() torch.set_printoptions({precision = 2}) local p = torch.get_printoptions().precision torch.set_printoptions({profile = "default"}) return p end,
    function(p) eq(p, 2) end},
}

for _, c in ipairs(cases) do
  test("option of " .. c[1] .. ": a misspelt key is an error; the right one takes effect", function()
    eq(message(c[2]), c[3], "message")
    eq(torch.ones(2):sum():item(), 2, "the session goes on")
    if c[4] then c[5](c[4]()) end
  end)
end

test("keys that are not strings are named too", function()
  eq(message(function() local r = torch.zeros(2, {[true] = 1}) return r end),
    "zeros: unknown option [true] (options are named; expected one of: device, dtype, requires_grad)")
  eq(message(function() local r = torch.zeros(2, {[2.5] = 1}) return r end),
    "zeros: unknown option [2.5] (options are named; expected one of: device, dtype, requires_grad)")
  eq(message(function() return x23:sum({[x23] = 1}) end),
    "sum: unknown option [userdata] (options are named; expected one of: dim, dtype, keepdim)")
  eq(message(function() local r = torch.zeros(2, {dtype = "float64", xyzzy = 1}) return r end),
    "zeros: unknown option 'xyzzy' (expected one of: device, dtype, requires_grad)", "no near name, no suggestion")
end)

test("the C bindings and the Lua library word an unknown option alike", function()
  local known = {dtype = true, device = true, requires_grad = true}
  for _, bad in ipairs({{dtyp = 1}, {xyzzy = 1}, {[true] = 1}, {[2.5] = 1}, {DTYPE = 1}}) do
    eq(message(function() A.check_opts("zeros", bad, known) end), message(function() local r = torch.zeros(1, bad) return r end))
  end
  eq(message(function() A.check_opts("mul", {rounding_mode = 1}, {}) end),
    message(function() return torch.mul(x23, 2, {rounding_mode = 1}) end), "no options")
  -- Lua functions: nn, optim
  eq(message(function() nn.Linear(2, 3, {bais = false}) end),
    "Linear: unknown option 'bais' (expected one of: bias, device, dtype; did you mean 'bias'?)")
  eq(message(function() optim.SGD({torch.zeros(1, {requires_grad = true})}, {lr = 0.1, momentun = 0.9}) end),
    "SGD: unknown option 'momentun' (expected one of: dampening, lr, maximize, momentum, nesterov, weight_decay; did you mean 'momentum'?)")
end)

test("create_graph = true says second derivatives are not supported", function()
  local w = torch.ones(2, {requires_grad = true})
  local why = ": create_graph = true is not supported yet in tensh: backward functions are not recorded, so a gradient "
    .. "cannot be differentiated again (no second derivatives); estimate them with finite differences of first derivatives"
  eq(message(function() torch.autograd.grad((w * w):sum(), {w}, {create_graph = true}) end), "autograd.grad" .. why)
  eq(message(function() (w * w):sum():backward({create_graph = true}) end), "backward" .. why)
  eq(message(function() torch.autograd.backward({(w * w):sum()}, {create_graph = true}) end), "autograd.backward" .. why)
  eq(w.grad, nil, "nothing was accumulated")
  eq(message(function() torch.autograd.backward({(w * w):sum()}, {torch.tensor(1.0)}, {grad_tensors = {torch.tensor(1.0)}}) end),
    "autograd.backward: 'grad_tensors' given both as an argument and as an option")
  -- and what it would have hidden: without a graph, a gradient has none
  local g = torch.autograd.grad((w * w):sum(), {w})[1]
  eq(g.requires_grad, false, "the engine records no graph of a gradient")
  close(g, {2, 2})
end)

-- The Lua library's option-taking functions that once ignored an unknown key
-- (nn.CrossEntropyLoss({reductio = "sum"}) gave a mean): each refuses it in
-- check_opts' words, at the user's line; the right key still takes effect.
local lua_cases = {
  {"CrossEntropyLoss", function() return nn.CrossEntropyLoss({reductio = "sum"}) end,
    "CrossEntropyLoss: unknown option 'reductio' (expected one of: ignore_index, label_smoothing, reduction, weight; did you mean 'reduction'?)",
    function() return nn.CrossEntropyLoss({reduction = "sum", label_smoothing = 0.1}) end,
    function(l) eq(l.reduction, "sum") end},
  {"NLLLoss(weight, opts)", function() return nn.NLLLoss(torch.ones(3), {ignore_idx = 1}) end,
    "NLLLoss: unknown option 'ignore_idx' (expected one of: ignore_index, reduction, weight; did you mean 'ignore_index'?)"},
  {"MSELoss(weight)", function() return nn.MSELoss(torch.ones(3)) end,
    "bad argument #1 to 'MSELoss' (options table expected, got Tensor)"},
  {"L1Loss(nil, opts)", function() return nn.L1Loss(nil, {reduce = false}) end,
    "L1Loss: unknown option 'reduce' (expected one of: reduction)",
    function() return nn.L1Loss(nil, {reduction = "none"}) end,
    function(l) eq(l.reduction, "none") end},
  {"SmoothL1Loss", function() return nn.SmoothL1Loss({beat = 0.5}) end,
    "SmoothL1Loss: unknown option 'beat' (expected one of: beta, reduction; did you mean 'beta'?)",
    function() return nn.SmoothL1Loss({beta = 0.5})(torch.zeros(1), torch.ones(1)) end,
    function(t) close(t:item(), 0.75) end},
  {"BCELoss", function() return nn.BCELoss({size_average = true}) end,
    "BCELoss: unknown option 'size_average' (expected one of: reduction, weight)"},
  {"BCEWithLogitsLoss", function() return nn.BCEWithLogitsLoss({pos_wieght = torch.ones(1)}) end,
    "BCEWithLogitsLoss: unknown option 'pos_wieght' (expected one of: pos_weight, reduction, weight; did you mean 'pos_weight'?)"},
  {"torch.diff", function() return torch.diff(x23, {dmi = 0}) end,
    "diff: unknown option 'dmi' (expected one of: append, dim, n, prepend; did you mean 'dim'?)",
    function() return torch.diff(x23, 1, {dim = 0}) end,
    function(t) eq(shape(t), "1x3") close(t:flatten(), {3, 3, 3}) end},
  {"Tensor:diagonal", function() return x23:diagonal({ofset = 1}) end,
    "diagonal: unknown option 'ofset' (expected one of: dim1, dim2, offset; did you mean 'offset'?)",
    function() return x23:diagonal({offset = 1}) end,
    function(t) close(t, {1, 5}) end},
  {"torch.cosine_similarity", function() return torch.cosine_similarity(x23, x23, {dmi = 0}) end,
    "cosine_similarity: unknown option 'dmi' (expected one of: dim, eps; did you mean 'dim'?)",
    function() return nn.functional.cosine_similarity(x23, x23, {dim = 0}) end,
    function(t) eq(shape(t), "3") close(t, {1, 1, 1}, 1e-6) end},
  {"torch.cdist", function() return torch.cdist(x23, x23, {P = 1}) end,
    "cdist: unknown option 'P' (expected one of: compute_mode, p; did you mean 'p'?)",
    function() return torch.cdist(x23, x23, {p = 1}) end,
    function(t) close(t:flatten(), {0, 9, 9, 0}) end},
  {"torch.multinomial", function() return torch.multinomial(torch.ones(3), 2, {replace = true}) end,
    "multinomial: unknown option 'replace' (expected one of: num_samples, replacement)"},
  {"torch.normal", function() return torch.normal(0, 1, {2}, {dtpye = "float64"}) end,
    "normal: unknown option 'dtpye' (expected one of: device, dtype; did you mean 'dtype'?)",
    function() return torch.normal(0, 1, {2}, {dtype = "float64"}) end,
    function(t) eq(t.dtype, torch.float64) end},
  {"data.transforms.RandomCrop", function() return data.transforms.RandomCrop(4, {pading = 2}) end,
    "RandomCrop: unknown option 'pading' (expected one of: padding; did you mean 'padding'?)",
    function() return data.transforms.RandomCrop(4, {padding = 2}) end,
    function(tf) eq(tf._specs[1].pad, 2) end},
  {"data.FashionMNIST", function() return data.FashionMNIST({trian = false}) end,
    "FashionMNIST: unknown option 'trian' (expected one of: download, raw, train, transform; did you mean 'train'?)"},
  {"data.MNIST", function() return data.MNIST("/nonexistent", {transfrom = data.transforms.ToTensor()}) end,
    "MNIST: unknown option 'transfrom' (expected one of: download, raw, train, transform; did you mean 'transform'?)"},
  {"data.CIFAR10", function() return data.CIFAR10("/nonexistent", {tain = true}) end,
    "CIFAR10: unknown option 'tain' (expected one of: download, raw, train, transform; did you mean 'train'?)"},
  {"data.TensorDataset", function() return data.TensorDataset(torch.ones(2), {tranform = 1}) end,
    "TensorDataset: unknown option 'tranform' (expected one of: transform; did you mean 'transform'?)"},
  {"data.random_split", function() return data.random_split(data.TensorDataset(torch.ones(4)), {2, 2}, {generator = 1}) end,
    "random_split: unknown option 'generator' (expected one of: seed)"},
  {"data.RandomSampler", function() return data.RandomSampler(data.TensorDataset(torch.ones(4)), {num_sample = 2}) end,
    "RandomSampler: unknown option 'num_sample' (expected one of: num_samples, replacement, seed; did you mean 'num_samples'?)",
    function() return data.RandomSampler(data.TensorDataset(torch.ones(4)), {num_samples = 2}) end,
    function(s) eq(#s, 2) end},
  -- nn.Module's methods whose options are PyTorch's keywords
  {"Module:zero_grad", function() return nn.Linear(2, 2):zero_grad({set_to_non = false}) end,
    "zero_grad: unknown option 'set_to_non' (expected one of: set_to_none; did you mean 'set_to_none'?)"},
  {"Module:parameters", function() return nn.Linear(2, 2):parameters({recursive = false}) end,
    "parameters: unknown option 'recursive' (expected one of: recurse; did you mean 'recurse'?)",
    function() return nn.Sequential(nn.Linear(2, 2)):parameters({recurse = false}) end,
    function(l) eq(#l, 0) end},
  {"Module:named_parameters", function() return nn.Linear(2, 2):named_parameters({prefx = "m"}) end,
    "named_parameters: unknown option 'prefx' (expected one of: prefix, recurse; did you mean 'prefix'?)"},
  {"Module:state_dict", function() return nn.Linear(2, 2):state_dict({keep_vars = true}) end,
    "state_dict: unknown option 'keep_vars' (expected one of: prefix)"},
  {"Module:load_state_dict", function() local m = nn.Linear(2, 2) return m:load_state_dict(m:state_dict(), {stric = false}) end,
    "load_state_dict: unknown option 'stric' (expected one of: strict; did you mean 'strict'?)"},
  {"Module:register_buffer", function() return nn.Linear(2, 2):register_buffer("b", torch.ones(1), {persistant = false}) end,
    "register_buffer: unknown option 'persistant' (expected one of: persistent; did you mean 'persistent'?)"},
  {"Module:to", function() return nn.Linear(2, 2):to({dtyp = "float64"}) end,
    "to: unknown option 'dtyp' (expected one of: device, dtype; did you mean 'dtype'?)",
    function() return nn.Linear(2, 2):to({dtype = "float64"}) end,
    function(m) eq(m.weight.dtype, torch.float64) end},
}

for _, c in ipairs(lua_cases) do
  test("option of " .. c[1] .. " (Lua): a misspelt key is an error; the right one takes effect", function()
    eq(message(c[2]), c[3], "message")
    if c[4] then c[5](c[4]()) end
  end)
end

test("FashionMNIST takes the right option (when the dataset is installed)", function()
  local f = io.open("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz", "rb")
  if not f then T.skip("dataset-fashion-mnist is not installed") end
  f:close()
  local ds = data.FashionMNIST({train = false})
  eq(#ds, 10000, "the test split")
end)

-- These once worded an unknown option their own way ("unknown option 'sed'
-- (num_replicas, rank, ...)", "(options: device_ids, ...)", none at all for
-- Timer); now check_opts words them, with the nearest key.
test("DistributedSampler, DataParallel, bench and the profiler word an unknown option as check_opts", function()
  local ds = data.TensorDataset(torch.ones(4))
  eq(message(function() return data.DistributedSampler(ds, {sed = 1, num_replicas = 2, rank = 0}) end),
    "DistributedSampler: unknown option 'sed' (expected one of: drop_last, num_replicas, rank, seed, shuffle; did you mean 'seed'?)")
  eq(#data.DistributedSampler(ds, {seed = 1, num_replicas = 2, rank = 0}), 2, "the right keys still work")
  eq(message(function() return nn.DataParallel(nn.Linear(2, 2), {device_idz = {0}}) end),
    "DataParallel: unknown option 'device_idz' (expected one of: device_ids, dim, output_device; did you mean 'device_ids'?)")
  eq(message(function() return nn.DataParallel(nn.Linear(2, 2), {dim = 0, outptu_device = 0}) end),
    "DataParallel: unknown option 'outptu_device' (expected one of: device_ids, dim, output_device; did you mean 'output_device'?)")
  eq(message(function() return bench.Timer({stmt = "local y = 1", setpu = "x = 1"}) end),
    "Timer: unknown option 'setpu' (expected one of: description, device, env, globals, label, num_threads, setup, " ..
    "stmt, sub_label, timer; did you mean 'setup'?)")
  local t = bench.Timer({stmt = function() end, device = "cpu", timer = function() return 1 end})
  eq(message(function() return t:blocked_autorange({min_runtime = 0.1}) end),
    "Timer.blocked_autorange: unknown option 'min_runtime' (expected one of: callback, min_run_time; did you mean 'min_run_time'?)")
  eq(message(function() return bench.case("c", function() end, {param = {}}) end),
    "bench.case: unknown option 'param' (expected one of: device, min_run_time, num_threads, params, setup; did you mean 'params'?)")
  eq(message(function() return profiler.profile({record_shape = true}, function() end) end),
    "profiler.profile: unknown option 'record_shape' (expected one of: activities, profile_memory, record_shapes, with_stack; did you mean 'record_shapes'?)")
  local prof = profiler.profile({}, function() end)
  eq(message(function() return prof:key_averages({group_by_shape = true}) end),
    "key_averages: unknown option 'group_by_shape' (expected one of: group_by_input_shape)")
  eq(message(function() return prof:key_averages():table({row_limt = 3}) end),
    "table: unknown option 'row_limt' (expected one of: max_name_column_width, names, row_limit, sort_by; did you mean 'row_limit'?)")
end)

test("torch.load and tb.SummaryWriter check their options", function()
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p '" .. dir .. "'"))
  local path = dir .. "/t.safetensors"
  torch.save({a = x23}, path)
  eq(message(function() return torch.load(path, {map_locaton = "cpu"}) end),
    "torch.load: unknown option 'map_locaton' (expected one of: flat, map_location, metadata; did you mean 'map_location'?)")
  eq(torch.load(path, {map_location = "cpu"}).a:sum():item(), 15)
  eq(message(function() return tb.SummaryWriter(dir .. "/runs", {flush_sec = 1}) end),
    "SummaryWriter: unknown option 'flush_sec' (expected one of: comment, flush_secs, log_dir; did you mean 'flush_secs'?)")
  local w = tb.SummaryWriter(dir .. "/runs", {flush_secs = 1})
  eq(message(function() w:add_histogram("h", x23, 0, {bin = 3}) end),
    "add_histogram: unknown option 'bin' (expected one of: bins, walltime; did you mean 'bins'?)")
  w:add_histogram("h", x23, 0, {bins = 3})
  w:close()
  os.execute("rm -rf '" .. dir .. "'")
end)

test("cuda.Stream and cuda.Event check their options (CUDA builds)", function()
  local cuda = rawget(_G, "cuda")
  local _, err = pcall(cuda.Event)
  if tostring(err):find("built without CUDA", 1, true) then T.skip("tensh was built without CUDA") end
  eq(message(function() return cuda.Event({enable_timming = true}) end),
    "cuda.Event: unknown option 'enable_timming' (expected one of: blocking, enable_timing; did you mean 'enable_timing'?)")
  eq(message(function() return cuda.Stream({priorty = 0}) end),
    "cuda.Stream: unknown option 'priorty' (expected one of: device, priority; did you mean 'priority'?)")
  if cuda.is_available() then
    local e = cuda.Event({enable_timing = true})
    ok(e ~= nil, "an event")
  end
end)

T.run()
