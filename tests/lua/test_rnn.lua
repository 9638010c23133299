-- Recurrent layers: nn.RNN/LSTM/GRU and their cells against PyTorch's outputs
-- and gradients on fixed weights (tests/fixtures/rnn/rnn_torch.lua, made by
-- gen_rnn_fixture.py next to it), the recurrent op's backward against finite
-- differences in float64, nn.utils.rnn, parameter names, initialisation,
-- printing, and the error messages. On the cuda pass (TENSH_TEST_DEVICE) the
-- same cases run on the GPU against the same PyTorch values.
local T = require "harness"
local G = require "gradcheck"
local test, close, eq, raises, ok = T.test, T.close, T.eq, T.raises, T.ok
local F64 = {dtype = "float64"}
local R = nn.utils.rnn

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local fixture = dofile(here .. "../fixtures/rnn/rnn_torch.lua")

local function shape(t) return table.concat(t.shape:totable(), "x") end
local function dims(list) return table.concat(list, "x") end
local function tensor(f) return torch.tensor(f.data, F64):view(table.unpack(f.shape)) end

local function opts_of(case)
  local o = {dtype = "float64"}
  for k, v in pairs(case.opts) do o[k] = v end
  return o
end

-- ---- against PyTorch ---------------------------------------------------------------

local function check_grads(case, m, x, h0, c0)
  close(x.grad, tensor(case.grad_x), 1e-9, 1e-10, case.name .. ": grad x")
  if h0 then close(h0.grad, tensor(case.grad_h0), 1e-9, 1e-10, case.name .. ": grad h0") end
  if c0 then close(c0.grad, tensor(case.grad_c0), 1e-9, 1e-10, case.name .. ": grad c0") end
  for _, name in ipairs(case.param_order) do
    close(m[name].grad, tensor(case.grads[name]), 1e-9, 1e-10, case.name .. ": grad " .. name)
  end
end

local function build(case)
  local m = nn[case.kind](case.args[1], case.args[2], opts_of(case))
  local names = {}
  for name in m:named_parameters() do names[#names + 1] = name end
  eq(table.concat(names, " "), table.concat(case.param_order, " "), case.name .. ": parameter names")
  torch.no_grad(function()
    for _, name in ipairs(case.param_order) do m[name]:copy_(tensor(case.params[name])) end
  end)
  return m
end

for _, case in ipairs(fixture) do
  if not case.kind:find("Cell") then
    test("torch fixture: " .. case.name, function()
      local m = build(case)
      local lstm = case.kind == "LSTM"
      local x = tensor(case.x):requires_grad_()
      local h0 = case.h0 and tensor(case.h0):requires_grad_()
      local c0 = case.c0 and tensor(case.c0):requires_grad_()
      local hx = h0
      if lstm and h0 then hx = {h0, c0} end
      local input = x
      if case.lengths then
        input = R.pack_padded_sequence(x, case.lengths, {batch_first = case.opts.batch_first, enforce_sorted = false})
      end
      local out, hn = m(input, hx)
      local cn
      if lstm then hn, cn = hn[1], hn[2] end
      if case.lengths then out = R.pad_packed_sequence(out, {batch_first = case.opts.batch_first}) end
      eq(shape(out), dims(case.out.shape), case.name .. ": output shape")
      close(out, tensor(case.out), 1e-10, 1e-12, case.name .. ": output")
      close(hn, tensor(case.h_n), 1e-10, 1e-12, case.name .. ": h_n")
      if lstm then close(cn, tensor(case.c_n), 1e-10, 1e-12, case.name .. ": c_n") end
      local loss = (out * tensor(case.r_out)):sum() + (hn * tensor(case.r_h)):sum()
      if lstm then loss = loss + (cn * tensor(case.r_c)):sum() end
      loss:backward()
      check_grads(case, m, x, h0, c0)
    end)
  else
    test("torch fixture: " .. case.name, function()
      local m = build(case)
      local lstm = case.kind == "LSTMCell"
      local xs = tensor(case.x):requires_grad_()
      local h0 = tensor(case.h0):requires_grad_()
      local c0 = case.c0 and tensor(case.c0):requires_grad_()
      local state = lstm and {h0, c0} or h0
      local hs = {}
      for t = 0, xs:size(0) - 1 do
        state = m(xs[t], state)
        hs[#hs + 1] = lstm and state[1] or state
      end
      local out = torch.stack(hs)
      close(out, tensor(case.out), 1e-10, 1e-12, case.name .. ": output")
      local loss = (out * tensor(case.r_out)):sum()
      if lstm then
        close(state[2], tensor(case.c_n), 1e-10, 1e-12, case.name .. ": c")
        loss = loss + (state[2] * tensor(case.r_c)):sum()
      end
      loss:backward()
      check_grads(case, m, xs, h0, c0)
    end)
  end
end

-- ---- the op's backward against finite differences ----------------------------------

local function rlist(...) return T.rand_list({...}, -1, 1) end

local function op_check(mode, name, opts)
  opts = opts or {}
  local L, N, H, P = 4, 3, 3, opts.proj or 3
  local Gw = ({lstm = 4, gru = 3})[mode] or 1
  local lists = {rlist(L, N, Gw * H), rlist(N, P), mode == "lstm" and rlist(N, H) or false, rlist(Gw * H, P),
    mode == "gru" and rlist(Gw * H) or false, opts.proj and rlist(P, H) or false}
  G.check(name, function(xp, h0, c0, w, b, wr)
    local o = {h0 = h0, reverse = opts.reverse, batch_sizes = opts.batch_sizes}
    if torch.is_tensor(c0) then o.c0 = c0 end
    if torch.is_tensor(b) then o.b_hh = b end
    if torch.is_tensor(wr) then o.w_hr = wr end
    local out, hn, cn = torch._rnn_layer(mode, xp, w, o)
    local parts = {out:reshape(-1), hn:reshape(-1)}
    if cn then parts[3] = cn:reshape(-1) end
    return torch.cat(parts)
  end, lists, {tol = 1e-6})
end

for _, mode in ipairs({"rnn_tanh", "rnn_relu", "lstm", "gru"}) do
  test("gradcheck float64: " .. mode, function() op_check(mode, mode) end)
  test("gradcheck float64: " .. mode .. " reverse, batch sizes", function()
    op_check(mode, mode .. " reverse", {reverse = true, batch_sizes = {3, 2, 2, 1}})
  end)
  test("gradcheck float64: " .. mode .. " forward, batch sizes", function()
    op_check(mode, mode .. " batch sizes", {batch_sizes = {3, 3, 1, 0}})
  end)
end
test("scratch: the gates are computed in xproj's memory, with the same values and gradients", function()
  for _, mode in ipairs({"rnn_tanh", "rnn_relu", "lstm", "gru"}) do
    local Gw = ({lstm = 4, gru = 3})[mode] or 1
    local L, N, H = 5, 3, 4
    local x0, w = torch.randn(L, N, Gw * H, F64), torch.randn(Gw * H, H, F64)
    local function run(scratch, strided)
      local x, wl = x0:clone():requires_grad_(), w:clone():requires_grad_()
      local xp = x * 1 -- a temporary of the caller's own, as nn.LSTM's projection
      if strided then xp = x:transpose(0, 1):contiguous():transpose(0, 1) end
      local out, hn, cn = torch._rnn_layer(mode, xp, wl, {scratch = scratch, reverse = mode == "gru"})
      local loss = out:sum() + hn:pow(2):sum() + (cn and cn:pow(3):sum() or 0)
      loss:backward()
      return xp, out, x.grad, wl.grad
    end
    local xp1, out1, gx1, gw1 = run(false)
    local xp2, out2, gx2, gw2 = run(true)
    close(xp1, x0, 0, 0, mode .. ": without scratch xproj is kept")
    ok((xp2 - x0):abs():max():item() > 0 == (mode ~= "gru"), mode .. ": with scratch the gates overwrite xproj (not the GRU's)")
    close(out2, out1, 0, 0, mode .. ": output")
    close(gx2, gx1, 0, 0, mode .. ": grad xproj")
    close(gw2, gw1, 0, 0, mode .. ": grad w_hh")
    -- a strided xproj: its contiguous copy holds the gates, scratch or not
    for _, scratch in ipairs({false, true}) do
      local xp3, out3, gx3, gw3 = run(scratch, true)
      local what = ("%s, strided xproj, scratch %s: "):format(mode, scratch)
      ok(not xp3:is_contiguous(), what .. "the input is strided")
      close(xp3, x0, 0, 0, what .. "xproj is kept")
      close(out3, out1, 0, 0, what .. "output")
      close(gx3, gx1, 0, 0, what .. "grad xproj")
      close(gw3, gw1, 0, 0, what .. "grad w_hh")
    end
  end
  -- the version bump: a tensor saved for another backward, then given up as scratch
  local a = torch.randn(2, 1, 4, F64):requires_grad_()
  local e = a:exp() -- exp saves its output
  torch._rnn_layer("lstm", e, torch.randn(4, 1, F64), {scratch = true})
  raises(function() e:sum():backward() end, "inplace", "scratch bumps xproj's version")
end)
-- float32 step GEMMs pack W_hh once a layer (src/cpu/gemm_reused.c): W_hh read
-- transposed (forward), as is (backward), column-major and strided, each packed its own way
test("float32 W_hh in every layout: the same values and gradients, close to float64", function()
  torch.manual_seed(13)
  for _, mode in ipairs({"lstm", "gru", "rnn_tanh"}) do
    local Gw = ({lstm = 4, gru = 3})[mode] or 1
    local L, N, H = 5, 3, 13
    local x0, w0 = torch.randn(L, N, Gw * H), torch.randn(Gw * H, H) * 0.3
    local function run(w, dt)
      local x, wl = x0:to(dt):clone():requires_grad_(), w:to(dt):detach():requires_grad_()
      eq(wl:stride(1), w:stride(1), "w_hh keeps its layout")
      eq(wl:stride(0), w:stride(0), "w_hh keeps its layout")
      local out, hn = torch._rnn_layer(mode, x, wl, {})
      local loss = (out * out):sum() + hn:sum()
      loss:backward()
      return out, x.grad, wl.grad
    end
    local layouts = {
      ["column-major"] = w0:t():contiguous():t(),
      strided = torch.stack({w0, torch.full(w0.shape, 7)}, 2):select(2, 0), -- strides (2H, 2)
    }
    local out1, gx1, gw1 = run(w0, "float32")
    local out64, gx64, gw64 = run(w0, "float64")
    close(out1:double(), out64, 1e-5, 1e-5, mode .. ": output against float64")
    close(gx1:double(), gx64, 1e-4, 1e-5, mode .. ": grad xproj against float64")
    close(gw1:double(), gw64, 1e-4, 1e-4, mode .. ": grad w_hh against float64")
    for name, w in pairs(layouts) do
      ok(not w:is_contiguous(), name .. " is not contiguous")
      local out2, gx2, gw2 = run(w, "float32")
      close(out2, out1, 0, 0, mode .. ", " .. name .. ": output")
      close(gx2, gx1, 0, 0, mode .. ", " .. name .. ": grad xproj")
      close(gw2, gw1, 0, 0, mode .. ", " .. name .. ": grad w_hh")
    end
  end
end)
test("gradcheck float64: lstm with projection", function()
  op_check("lstm", "lstm proj", {proj = 2})
  op_check("lstm", "lstm proj reverse packed", {proj = 2, reverse = true, batch_sizes = {3, 2, 1, 1}})
end)

-- ---- layers: names, init, shapes, repr ---------------------------------------------------

test("parameter names and shapes are PyTorch's", function()
  local m = nn.LSTM(10, 20, {num_layers = 2, bidirectional = true, proj_size = 5})
  local got = {}
  for name, p in m:named_parameters() do got[#got + 1] = name .. shape(p) end
  eq(table.concat(got, " "), table.concat({
    "weight_ih_l080x10", "weight_hh_l080x5", "bias_ih_l080", "bias_hh_l080", "weight_hr_l05x20",
    "weight_ih_l0_reverse80x10", "weight_hh_l0_reverse80x5", "bias_ih_l0_reverse80", "bias_hh_l0_reverse80",
    "weight_hr_l0_reverse5x20",
    "weight_ih_l180x10", "weight_hh_l180x5", "bias_ih_l180", "bias_hh_l180", "weight_hr_l15x20",
    "weight_ih_l1_reverse80x10", "weight_hh_l1_reverse80x5", "bias_ih_l1_reverse80", "bias_hh_l1_reverse80",
    "weight_hr_l1_reverse5x20"}, " "), "names")
  local g = nn.GRU(3, 4, {bias = false})
  local keys = {}
  for k in pairs(g:state_dict()) do keys[#keys + 1] = k end
  table.sort(keys)
  eq(table.concat(keys, " "), "weight_hh_l0 weight_ih_l0", "GRU without bias")
  local c = nn.LSTMCell(3, 4)
  eq(shape(c.weight_ih), dims({16, 3}), "LSTMCell weight_ih")
  eq(shape(c.weight_hh), dims({16, 4}), "LSTMCell weight_hh")
  eq(shape(nn.GRUCell(3, 4).bias_hh), dims({12}), "GRUCell bias_hh")
end)

test("second layer input size is hidden (or proj) times directions", function()
  eq(shape(nn.LSTM(10, 20, {num_layers = 2, bidirectional = true, proj_size = 5}).weight_ih_l1), dims({80, 10}), "proj")
  eq(shape(nn.GRU(7, 6, 2).weight_ih_l1), dims({18, 6}), "positional num_layers")
  eq(shape(nn.RNN(7, 6, 2, "relu", false, true, 0, true).weight_ih_l1_reverse), dims({6, 12}), "positional")
end)

test("initialisation is uniform(-1/sqrt(H), 1/sqrt(H))", function()
  torch.manual_seed(3)
  local m = nn.GRU(50, 64)
  local b = 1 / math.sqrt(64)
  for name, p in m:named_parameters() do
    ok(p:max():item() <= b and p:min():item() >= -b, name .. " within the bound")
    ok(p:max():item() > 0.9 * b and p:min():item() < -0.9 * b, name .. " spreads over the bound")
  end
end)

test("repr", function()
  eq(tostring(nn.LSTM(10, 20, {num_layers = 2, batch_first = true})), "LSTM(10, 20, num_layers=2, batch_first=True)",
    "LSTM")
  eq(tostring(nn.GRU(3, 4, {bidirectional = true, dropout = 0.5, num_layers = 2})),
    "GRU(3, 4, num_layers=2, dropout=0.5, bidirectional=True)", "GRU")
  eq(tostring(nn.LSTM(10, 20, {proj_size = 5})), "LSTM(10, 20, proj_size=5)", "proj")
  eq(tostring(nn.LSTMCell(3, 4)), "LSTMCell(3, 4)", "cell")
  eq(tostring(nn.GRUCell(3, 4, {bias = false})), "GRUCell(3, 4, bias=False)", "cell without bias")
end)

test("shapes: batch_first, unbatched, bidirectional, proj", function()
  local m = nn.LSTM(3, 5, {num_layers = 2, bidirectional = true, batch_first = true, proj_size = 2})
  local out, hc = m(torch.randn(4, 7, 3))
  eq(shape(out), dims({4, 7, 4}), "output (N, L, 2*proj)")
  eq(shape(hc[1]), dims({4, 4, 2}), "h_n")
  eq(shape(hc[2]), dims({4, 4, 5}), "c_n")
  local g = nn.GRU(3, 5)
  local o2, h2 = g(torch.randn(7, 3))
  eq(shape(o2), dims({7, 5}), "unbatched output")
  eq(shape(h2), dims({1, 5}), "unbatched h_n")
  local o3 = g(torch.randn(0, 2, 3))
  eq(shape(o3), dims({0, 2, 5}), "empty sequence")
end)

test("dropout between layers: train zeroes, eval is deterministic", function()
  torch.manual_seed(5)
  local m = nn.GRU(4, 8, {num_layers = 2, dropout = 0.5})
  local x = torch.randn(5, 3, 4)
  m:eval()
  local a, b = m(x), m(x)
  close(a, b, 0, 0, "eval twice")
  m:train()
  local c = m(x)
  ok((c - a):abs():max():item() > 1e-4, "training differs from eval")
  local m1 = nn.GRU(4, 8, {num_layers = 2, dropout = 1.0})
  local out = m1(x)
  -- with every first-layer output dropped, the second layer sees zeros: its output is the same for every batch row
  close(out:select(1, 0), out:select(1, 2), 1e-6, 1e-7, "p=1 feeds zeros to layer 2")
end)

test("LSTM hx defaults to zeros; hx and the cell agree with the layer", function()
  torch.manual_seed(7)
  local m = nn.LSTM(3, 4, {dtype = "float64"})
  local x = torch.randn(5, 2, 3, F64)
  local z = torch.zeros(1, 2, 4, F64)
  local o1, s1 = m(x)
  local o2, s2 = m(x, {z, z})
  close(o1, o2, 0, 0, "zeros")
  close(s1[1], s2[1], 0, 0, "h_n")
  local cell = nn.LSTMCell(3, 4, {dtype = "float64"})
  torch.no_grad(function()
    cell.weight_ih:copy_(m.weight_ih_l0); cell.weight_hh:copy_(m.weight_hh_l0)
    cell.bias_ih:copy_(m.bias_ih_l0); cell.bias_hh:copy_(m.bias_hh_l0)
  end)
  local st = {z[0], z[0]}
  for t = 0, 4 do
    st = cell(x[t], st)
    close(st[1], o1[t], 1e-12, 1e-12, "step " .. t)
  end
  close(st[2], s1[2][0], 1e-12, 1e-12, "c")
end)

test("float32 layer agrees with float64", function()
  torch.manual_seed(11)
  for _, kind in ipairs({"RNN", "LSTM", "GRU"}) do
    local m = nn[kind](6, 8, {num_layers = 2, bidirectional = true})
    local x = torch.randn(9, 4, 6)
    local o32 = m(x)
    local o64 = m:double()(x:double())
    close(o32, o64, 1e-4, 1e-5, kind)
  end
end)

-- the float32 cell kernels run H in vector lanes and a tail (H = 13, 21), forward
-- and backward, on a batch_first non-contiguous input, against the float64 layer
test("float32 LSTM forward and backward agree with float64 (odd H, batch_first, strided input)", function()
  torch.manual_seed(12)
  for _, H in ipairs({13, 21}) do
    local m = nn.LSTM(5, H, {num_layers = 2, batch_first = true})
    local xs = torch.randn(7, 3, 10):transpose(0, 1):narrow(2, 1, 5) -- (3, 7, 5), strided
    ok(not xs:is_contiguous(), "strided input")
    local x32 = xs:clone():requires_grad_()
    local o32 = m(x32)
    local g = torch.randn(o32.shape)
    o32:backward(g)
    local grads32 = {}
    for name, prm in m:named_parameters() do grads32[name] = prm.grad:double() end
    m:zero_grad()
    local m64 = m:double()
    local x64 = xs:double():requires_grad_()
    local o64 = m64(x64)
    o64:backward(g:double())
    close(o32:double(), o64, 1e-5, 1e-6, "H " .. H .. ": output")
    close(x32.grad:double(), x64.grad, 1e-4, 1e-5, "H " .. H .. ": input grad")
    for name, prm in m64:named_parameters() do close(grads32[name], prm.grad, 1e-4, 1e-5, "H " .. H .. ": " .. name) end
  end
end)

test("a PyTorch-shaped state dict loads", function()
  local a = nn.LSTM(3, 4, {num_layers = 2, proj_size = 2})
  local b = nn.LSTM(3, 4, {num_layers = 2, proj_size = 2})
  b:load_state_dict(a:state_dict())
  local x = torch.randn(5, 2, 3)
  close(b(x), a(x), 0, 0, "same outputs")
end)

test("cuda gives the CPU's answers (float32, every layer kind, packed, backward)", function()
  if not (cuda and cuda.is_available()) then T.skip("no CUDA device") end
  torch.manual_seed(17)
  for _, kind in ipairs({"RNN", "LSTM", "GRU"}) do
    local o = {num_layers = 2, bidirectional = true, device = "cpu"}
    if kind == "LSTM" then o.proj_size = 5 end
    local m = nn[kind](12, 16, o)
    local g = nn[kind](12, 16, {num_layers = 2, bidirectional = true, proj_size = o.proj_size, device = "cuda"})
    g:load_state_dict(m:state_dict())
    local x = torch.randn(7, 5, 12, {device = "cpu"})
    local p = R.pack_padded_sequence(x, {7, 6, 6, 3, 1})
    local oc = m(p)
    local og = g(p:to("cuda"))
    close(og.data, oc.data, 1e-4, 1e-5, kind .. " packed output")
    local yc, yg = m(x), g(x:cuda())
    close(yg, yc, 1e-4, 1e-5, kind .. " output")
    local lc, lg = (yc * yc):sum(), (yg * yg):sum()
    lc:backward()
    lg:backward()
    for name, q in m:named_parameters() do close(g[name].grad, q.grad, 1e-3, 1e-4, kind .. " grad " .. name) end
  end
end)

test("under CPU autocast (bfloat16 projections) the recurrence runs in float32", function()
  if not torch.autocast then T.skip("no torch.autocast in this build") end
  torch.manual_seed(19)
  local m = nn.LSTM(4, 6, {device = "cpu"})
  local c = nn.GRUCell(4, 6, {device = "cpu"})
  local x = torch.randn(5, 2, 4, {device = "cpu"})
  local want, wc = m(x), c(x[0])
  local _ <close> = torch.autocast("cpu", {dtype = torch.bfloat16})
  local got, gc = m(x), c(x[0])
  eq(got.dtype, torch.float32, "output dtype")
  close(got, want, 5e-2, 5e-2, "close to float32")
  close(gc, wc, 5e-2, 5e-2, "cell")
end)

-- ---- nn.utils.rnn --------------------------------------------------------------------------

test("pad_sequence", function()
  local a, b, c = torch.ones(3, 2), torch.ones(1, 2) * 2, torch.ones(2, 2) * 3
  local p = R.pad_sequence({a, b, c})
  eq(shape(p), dims({3, 3, 2}), "time-major")
  close(p:select(2, 0), {{1, 2, 3}, {1, 0, 3}, {1, 0, 0}}, 0, 0, "values")
  local q = R.pad_sequence({a, b, c}, {batch_first = true, padding_value = -1})
  eq(shape(q), dims({3, 3, 2}), "batch first")
  close(q:select(2, 1), {{1, 1, 1}, {2, -1, -1}, {3, 3, -1}}, 0, 0, "padding value")
  raises(function() R.pad_sequence({a, torch.ones(2, 3)}) end, "trailing dims must match", "mismatched")
end)

test("pack_padded_sequence and pad_packed_sequence", function()
  local x = torch.arange(12, F64):view(4, 3, 1) -- (L, B, 1): value = 3*t + b
  local p = R.pack_padded_sequence(x, {4, 2, 1})
  close(p.data:view(-1), {0, 1, 2, 3, 4, 6, 9}, 0, 0, "data: step by step, longest first")
  close(p.batch_sizes, {3, 2, 1, 1}, 0, 0, "batch_sizes")
  eq(p.batch_sizes.dtype, torch.int64, "batch_sizes dtype")
  eq(p.sorted_indices, nil, "sorted_indices when enforce_sorted")
  local y, lens = R.pad_packed_sequence(p)
  close(lens, {4, 2, 1}, 0, 0, "lengths")
  close(y:view(4, 3), {{0, 1, 2}, {3, 4, 0}, {6, 0, 0}, {9, 0, 0}}, 0, 0, "padded back")
  local u = R.pack_padded_sequence(x, torch.tensor({1, 4, 2}), {enforce_sorted = false})
  close(u.sorted_indices, {1, 2, 0}, 0, 0, "sorted_indices")
  close(u.unsorted_indices, {2, 0, 1}, 0, 0, "unsorted_indices")
  close(u.data:view(-1), {1, 2, 0, 4, 5, 7, 10}, 0, 0, "unsorted data")
  local z, l2 = R.pad_packed_sequence(u, {batch_first = true, total_length = 5, padding_value = -1})
  eq(shape(z), dims({3, 5, 1}), "batch_first, total_length")
  close(l2, {1, 4, 2}, 0, 0, "lengths in the caller's order")
  close(z:view(3, 5), {{0, -1, -1, -1, -1}, {1, 4, 7, 10, -1}, {2, 5, -1, -1, -1}}, 0, 0, "values")
  raises(function() R.pack_padded_sequence(x, {1, 4, 2}) end, "must be sorted in decreasing order", "unsorted")
  raises(function() R.pack_padded_sequence(x, {4, 2, 0}) end, "greater than 0", "zero length")
  raises(function() R.pack_padded_sequence(x, {4, 2}) end, "batch_size", "count")
  raises(function() R.pad_packed_sequence(p, {total_length = 2}) end, "total_length", "too short")
end)

test("packing is differentiable", function()
  local x = torch.randn(4, 3, 2, F64):requires_grad_()
  local p = R.pack_padded_sequence(x, {4, 2, 1})
  local y = R.pad_packed_sequence(p)
  y:sum():backward()
  local mask = {{1, 1, 1}, {1, 1, 0}, {1, 0, 0}, {1, 0, 0}}
  close(x.grad:select(2, 0), mask, 0, 0, "ones where the sequences are")
end)

test("packed input: padding does not leak into the result", function()
  torch.manual_seed(13)
  local m = nn.LSTM(3, 4, {bidirectional = true, num_layers = 2, dtype = "float64"})
  local x = torch.randn(5, 2, 3, F64)
  local x2 = x:clone()
  x2[{{3, 5}, 1}] = 100 -- past the second sequence's length 3
  local p1 = R.pack_padded_sequence(x, {5, 3})
  local p2 = R.pack_padded_sequence(x2, {5, 3})
  local o1, s1 = m(p1)
  local o2, s2 = m(p2)
  close(o1.data, o2.data, 0, 0, "output")
  close(s1[1], s2[1], 0, 0, "h_n")
  -- the short sequence alone gives the same answer
  local o3, s3 = m(x:narrow(0, 0, 3):narrow(1, 1, 1))
  local y1 = R.pad_packed_sequence(o1)
  close(y1:narrow(0, 0, 3):narrow(1, 1, 1), o3, 1e-12, 1e-12, "short sequence output")
  close(s1[1]:narrow(1, 1, 1), s3[1], 1e-12, 1e-12, "short sequence h_n")
end)

-- ---- errors -----------------------------------------------------------------------------------

test("errors: input rank and size, hidden shapes, options", function()
  local m = nn.LSTM(3, 4)
  raises(function() m(torch.randn(2, 2, 2, 3)) end, "LSTM: Expected input to be 2-D or 3-D but received 4-D tensor",
    "rank")
  raises(function() m(torch.randn(5, 2, 7)) end,
    "LSTM: input.size(-1) must be equal to input_size. Expected 3, got 7", "feature size")
  raises(function() m(torch.randn(5, 2, 3), {torch.zeros(1, 3, 4), torch.zeros(1, 2, 4)}) end,
    "Expected hidden[0] size (1, 2, 4), got [1, 3, 4]", "h0 shape")
  raises(function() m(torch.randn(5, 2, 3), {torch.zeros(1, 2, 4), torch.zeros(1, 2, 5)}) end,
    "Expected hidden[1] size (1, 2, 4), got [1, 2, 5]", "c0 shape")
  raises(function() m(torch.randn(5, 2, 3), {torch.zeros(2, 4), torch.zeros(2, 4)}) end,
    "For batched 3-D input, hx and cx should also be 3-D but got (2-D, 2-D) tensors", "h0 rank")
  raises(function() m(torch.randn(5, 2, 3), torch.zeros(1, 2, 4)) end, "hx must be a pair of tensors", "LSTM hx")
  local g = nn.GRU(3, 4, {num_layers = 2})
  raises(function() g(torch.randn(5, 2, 3), torch.zeros(1, 2, 4)) end, "Expected hidden size (2, 2, 4), got [1, 2, 4]",
    "GRU h0")
  raises(function() g(torch.randn(5, 3), torch.zeros(2, 1, 4)) end,
    "For unbatched 2-D input, hx should also be 2-D but got 3-D tensor", "unbatched h0")
  raises(function() g(torch.randn(5, 2, 3, F64)) end, "GRU: input is torch.float64", "dtype")
  raises(function() nn.LSTM(3, 4, {proj_size = 4}) end, "proj_size has to be smaller than hidden_size", "proj")
  raises(function() nn.GRU(3, 4, {proj_size = 2}) end, "proj_size", "proj on GRU")
  raises(function() nn.RNN(3, 4, {nonlinearity = "sigmoid"}) end, "Unknown nonlinearity 'sigmoid'", "nonlinearity")
  raises(function() nn.LSTM(3, 4, {dropout = 2}) end, "dropout should be a number in range [0, 1]", "dropout")
  raises(function() nn.LSTM(3, 4, {hiden_size = 2}) end, "hiden_size", "unknown option")
  local c = nn.GRUCell(3, 4)
  raises(function() c(torch.randn(2, 2, 3)) end, "GRUCell: Expected input to be 1-D or 2-D but received 3-D tensor",
    "cell rank")
  raises(function() c(torch.randn(2, 5)) end, "input has inconsistent input_size: got 5 expected 3", "cell size")
  raises(function() c(torch.randn(2, 3), torch.zeros(3, 4)) end, "Input batch size 2 doesn't match hidden batch size 3",
    "cell hx batch")
  raises(function() c(torch.randn(2, 3), torch.zeros(2, 5)) end, "hidden has inconsistent hidden_size: got 5, expected 4",
    "cell hx size")
end)

test("errors: the op checks its arguments", function()
  local w = torch.randn(6, 2)
  raises(function() torch._rnn_layer("lstm", torch.randn(3, 2, 8), w) end, "weight_hh of shape", "w_hh gates")
  raises(function() torch._rnn_layer("gru", torch.randn(3, 2), torch.randn(6, 2)) end, "3-D", "rank")
  raises(function() torch._rnn_layer("gru", torch.randn(3, 2, 5), torch.randn(6, 2)) end, "6", "features")
  raises(function() torch._rnn_layer("rnn_tanh", torch.randn(3, 2, 2), torch.randn(2, 2), {h0 = torch.randn(3, 2)}) end,
    "expected hx of shape (2, 2), got (3, 2)", "h0")
  raises(function()
    torch._rnn_layer("rnn_tanh", torch.randn(3, 2, 2), torch.randn(2, 2), {batch_sizes = {2, 3, 1}})
  end, "non-increasing", "batch sizes")
  raises(function() torch._rnn_layer("rnn_tanh", torch.randint(0, 3, {3, 2, 2}), torch.randn(2, 2)) end,
    "float32 or float64", "dtype")
  raises(function() torch._rnn_layer("lstm2", torch.randn(3, 2, 2), torch.randn(2, 2)) end, "invalid option", "mode")
end)

T.run()
