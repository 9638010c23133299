-- nn layers, one family a file: the recurrent layers (RNN, LSTM, GRU and
-- their cells), and nn.utils.rnn (PackedSequence, pack_padded_sequence,
-- pad_packed_sequence, pad_sequence), with PyTorch's constructors, parameter
-- names, shapes, initialisation and errors.
-- Each layer and direction is one input-projection GEMM over all steps and
-- one torch._rnn_layer call: the recurrence in C, one GEMM and one fused cell
-- kernel per step, recorded as one autograd node (src/ops/op_rnn.c). A
-- PackedSequence runs as its padded time-major form with its batch sizes:
-- the projection is computed on the packed rows only, then laid out padded.
-- nn.lua copies the classes this returns into nn; the utilities go to
-- nn.utils.rnn from here.
local torch = torch
local nn = require "tensh.nn"
local C = require "tensh.nn.common"
local Module, Parameter, F, init = nn.Module, nn.Parameter, nn.functional, nn.init
local raise, args, pyval, tuple, shape_str = C.raise, C.args, C.pyval, C.tuple, C.shape_str
local check_module = C.check_module -- self is a module, not the class (nn.GRU:forward(x))
local check_int, factory = C.check_int, C.factory
local is_tensor = torch.is_tensor

local M = {}

local GATES = {RNN_TANH = 1, RNN_RELU = 1, LSTM = 4, GRU = 3}
local OP_MODE = {RNN_TANH = "rnn_tanh", RNN_RELU = "rnn_relu", LSTM = "lstm", GRU = "gru"}

-- ---- PackedSequence and its index maps ---------------------------------------------

local PackedSequence = {}
PackedSequence.__index = PackedSequence
PackedSequence.__name = "PackedSequence"
local function packed(data, batch_sizes, sorted_indices, unsorted_indices)
  return setmetatable({data = data, batch_sizes = batch_sizes, sorted_indices = sorted_indices,
    unsorted_indices = unsorted_indices}, PackedSequence)
end
local function is_packed(v) return getmetatable(v) == PackedSequence end
function PackedSequence:__tostring()
  if getmetatable(self) ~= PackedSequence then
    raise("PackedSequence.__tostring: expected a PackedSequence, got %s", require("tensh.args").show(self))
  end
  return ("PackedSequence(data=%s, batch_sizes=%s)"):format(shape_str(self.data), tuple(self.batch_sizes:tolist()))
end
function PackedSequence:to(...)
  local d = self.data:to(...)
  if rawequal(d, self.data) then return self end
  local function mv(t) return t and t:to(d.device) or nil end
  return packed(d, self.batch_sizes, mv(self.sorted_indices), mv(self.unsorted_indices))
end
function PackedSequence:cuda(...) return self:to(self.data:cuda(...).device) end
function PackedSequence:cpu() return self:to("cpu") end
function PackedSequence:is_cuda() return self.data.is_cuda end
require("tensh.classes").setup(PackedSequence, {var = "packed"}) -- packed.to() for packed:to() says so

-- For batch sizes bs (a Lua list, non-increasing, bs[1] = B): the rows of the
-- flat padded (L*B) layout that the packed rows come from (pack), and for each
-- padded row its packed row, or S (one past the last: a padding row) (pad).
local function index_maps(bs, device)
  local L, B = #bs, bs[1] or 0
  local pack, pad, s = {}, {}, 0
  for t = 1, L do
    for b = 1, B do
      if b <= bs[t] then
        pack[#pack + 1] = (t - 1) * B + (b - 1)
        pad[(t - 1) * B + b] = s
        s = s + 1
      else
        pad[(t - 1) * B + b] = -1
      end
    end
  end
  for i = 1, L * B do if pad[i] < 0 then pad[i] = s end end
  local function idx(list) return torch.tensor(list, {dtype = "int64", device = device}) end
  return idx(pack), idx(pad), s
end

-- packed rows (S, F) -> padded (L, B, F); padding rows get value
local function to_padded(data, pad_idx, L, B, value)
  local F = data:size(1)
  local fill = torch.full({1, F}, value or 0, {dtype = data.dtype, device = data.device})
  return torch.cat({data, fill}, 0):index_select(0, pad_idx):view(L, B, F)
end
local function to_packed(x, pack_idx)
  local L, B, F = x:size(0), x:size(1), x:size(2)
  return x:reshape(L * B, F):index_select(0, pack_idx)
end

local function batch_sizes_list(t)
  local list = t:tolist()
  for i, v in ipairs(list) do list[i] = math.tointeger(v) end
  return list
end

-- ---- the layers -----------------------------------------------------------------------

-- The attributes a layer's constructor set and its methods compute with. A
-- user may set one to nil or to anything (m.hidden_size = nil, as Python's
-- del m.hidden_size); each method checks them where it starts, so the error
-- names the attribute instead of coming from deep inside ("bad argument #1
-- to 'sqrt'"). {name, what: "int" (with a minimum) or "number" or "mode"}
local LAYER_ATTRS = {{"mode", "mode"}, {"input_size", "int", 0}, {"hidden_size", "int", 1}, {"num_layers", "int", 1},
  {"proj_size", "int", 0}, {"dropout", "number"}}
local CELL_ATTRS = {{"mode", "mode"}, {"input_size", "int", 0}, {"hidden_size", "int", 1}}

local function check_attrs(self, method, spec)
  local attrs = rawget(self, "_attrs")
  for _, s in ipairs(spec) do
    local k, what, min = s[1], s[2], s[3]
    local v = attrs[k]
    local good, want
    if what == "int" then
      good, want = math.type(v) == "integer" and v >= min, ("an integer >= %d"):format(min)
    elseif what == "number" then
      good, want = type(v) == "number", "a number"
    else
      good, want = GATES[v] ~= nil, "one of 'RNN_TANH', 'RNN_RELU', 'LSTM', 'GRU'"
    end
    if not good then
      raise("%s:%s: attribute '%s' is %s, expected %s (the constructor sets it; was it changed by hand?)",
        self:_get_name(), method, k, require("tensh.args").show(v), want)
    end
  end
end

-- the parameters forward computes with: each must still be a tensor
local function check_weights(self, names)
  for _, name in ipairs(names) do
    if not is_tensor(self[name]) then
      raise("%s:forward: parameter '%s' is %s; the layer needs it (was it set to nil?)", self:_get_name(), name,
        require("tensh.args").show(self[name]))
    end
  end
end

local RNNBase = Module:extend("RNNBase")
M.RNNBase = RNNBase

local KEYS = {
  RNN = {"input_size", "hidden_size", "num_layers", "nonlinearity", "bias", "batch_first", "dropout",
    "bidirectional", "device", "dtype"},
  LSTM = {"input_size", "hidden_size", "num_layers", "bias", "batch_first", "dropout", "bidirectional",
    "proj_size", "device", "dtype"},
  GRU = {"input_size", "hidden_size", "num_layers", "bias", "batch_first", "dropout", "bidirectional",
    "device", "dtype"},
}

-- kind: "RNN", "LSTM" or "GRU"
local function base_init(self, kind, ...)
  local a = args(kind, KEYS[kind], ...)
  local mode = kind
  if kind == "RNN" then
    local nl = a.nonlinearity == nil and "tanh" or a.nonlinearity
    if nl == "tanh" then mode = "RNN_TANH" elseif nl == "relu" then mode = "RNN_RELU"
    else raise("%s: Unknown nonlinearity '%s'", kind, tostring(nl)) end
    self.nonlinearity = nl
  end
  self.mode = mode
  self.input_size = check_int(kind, "input_size", a.input_size, 0)
  self.hidden_size = check_int(kind, "hidden_size", a.hidden_size, 1)
  self.num_layers = check_int(kind, "num_layers", a.num_layers == nil and 1 or a.num_layers, 1)
  self.bias = a.bias == nil and true or a.bias
  self.batch_first = a.batch_first or false
  self.bidirectional = a.bidirectional or false
  local dropout = a.dropout == nil and 0 or a.dropout
  if type(dropout) ~= "number" or dropout < 0 or dropout > 1 then
    raise("%s: dropout should be a number in range [0, 1] representing the probability of an element being zeroed",
      kind)
  end
  self.dropout = dropout + 0.0
  if dropout > 0 and self.num_layers == 1 then
    io.stderr:write(("UserWarning: dropout option adds dropout after all but last recurrent layer, so non-zero "
      .. "dropout expects num_layers greater than 1, but got dropout=%s and num_layers=1\n"):format(pyval(dropout)))
  end
  local proj = a.proj_size == nil and 0 or check_int(kind, "proj_size", a.proj_size)
  if proj < 0 then raise("%s: proj_size should be a positive integer or zero to disable projections", kind) end
  if proj >= self.hidden_size and proj > 0 then raise("%s: proj_size has to be smaller than hidden_size", kind) end
  self.proj_size = proj
  local H, G = self.hidden_size, GATES[mode]
  local real = proj > 0 and proj or H
  local dirs = self.bidirectional and 2 or 1
  local fo = factory(a)
  local names = {}
  for layer = 0, self.num_layers - 1 do
    for dir = 0, dirs - 1 do
      local sfx = ("_l%d%s"):format(layer, dir == 1 and "_reverse" or "")
      local in_size = layer == 0 and self.input_size or real * dirs
      local list = {{"weight_ih" .. sfx, {G * H, in_size}}, {"weight_hh" .. sfx, {G * H, real}}}
      if self.bias then
        list[#list + 1] = {"bias_ih" .. sfx, {G * H}}
        list[#list + 1] = {"bias_hh" .. sfx, {G * H}}
      end
      if proj > 0 then list[#list + 1] = {"weight_hr" .. sfx, {proj, H}} end
      for _, p in ipairs(list) do
        self[p[1]] = Parameter(torch.empty(p[2], fo))
        names[#names + 1] = p[1]
      end
    end
  end
  rawset(self, "_flat_weights_names", names)
  self:reset_parameters()
end

function RNNBase:reset_parameters()
  check_module("reset_parameters", self)
  check_attrs(self, "reset_parameters", LAYER_ATTRS)
  local stdv = 1 / math.sqrt(self.hidden_size)
  for _, name in ipairs(self._flat_weights_names) do init.uniform_(self[name], -stdv, stdv) end
end

function RNNBase:extra_repr()
  check_module("extra_repr", self)
  check_attrs(self, "extra_repr", LAYER_ATTRS)
  local s = ("%d, %d"):format(self.input_size, self.hidden_size)
  if self.proj_size ~= 0 then s = s .. (", proj_size=%d"):format(self.proj_size) end
  if self.num_layers ~= 1 then s = s .. (", num_layers=%d"):format(self.num_layers) end
  if self.bias ~= true then s = s .. ", bias=" .. pyval(self.bias) end
  if self.batch_first ~= false then s = s .. ", batch_first=" .. pyval(self.batch_first) end
  if self.dropout ~= 0 then s = s .. ", dropout=" .. pyval(self.dropout) end
  if self.bidirectional ~= false then s = s .. ", bidirectional=" .. pyval(self.bidirectional) end
  if self.mode == "RNN_RELU" then s = s .. ", nonlinearity='relu'" end
  return s
end

local function hidden_check(name, hx, want, what)
  local got = hx.shape:totable()
  if #got ~= #want or got[1] ~= want[1] or got[2] ~= want[2] or got[3] ~= want[3] then
    raise("%s: Expected %s size %s, got [%s]", name, what, tuple(want), table.concat(got, ", "))
  end
end

local function same_device(name, x, t, what)
  if tostring(t.device) ~= tostring(x.device) then
    raise("%s: input is on %s but %s is on %s", name, tostring(x.device), what, tostring(t.device))
  end
  if t.dtype ~= x.dtype then
    raise("%s: input is %s but %s is %s", name, tostring(x.dtype), what, tostring(t.dtype))
  end
end

-- runs the layers over x (L, B, F) time-major, or over packed rows (S, F) when
-- bs (the batch sizes, a list) is given; h0/c0 (layers*dirs, B, *) or nil.
-- Returns the last layer's output (same layout as x), h_n, c_n.
local function run_layers(self, x, bs, h0, c0)
  local name = self:_get_name()
  local H, G, mode = self.hidden_size, GATES[self.mode], self.mode
  local real = self.proj_size > 0 and self.proj_size or H
  local dirs = self.bidirectional and 2 or 1
  local L, B, pack_idx, pad_idx
  if bs then
    L, B = #bs, bs[1] or 0
    pack_idx, pad_idx = index_maps(bs, x.device)
  else
    L, B = x:size(0), x:size(1)
  end
  local hs, cs = {}, {}
  local layer_in = x
  for layer = 0, self.num_layers - 1 do
    local outs = {}
    for dir = 0, dirs - 1 do
      local sfx = ("_l%d%s"):format(layer, dir == 1 and "_reverse" or "")
      local w_ih, w_hh = self["weight_ih" .. sfx], self["weight_hh" .. sfx]
      local b_ih, b_hh = self["bias_ih" .. sfx], self["bias_hh" .. sfx]
      local bias = b_ih
      if b_ih ~= nil and mode ~= "GRU" then bias = b_ih + b_hh end
      -- the input projection of every step: one GEMM
      local rows = layer_in:reshape(-1, layer_in:size(-1))
      local xp = bias ~= nil and torch.addmm(bias, rows, w_ih:t()) or rows:mm(w_ih:t())
      -- under autocast the projection may come out in a lower precision: the
      -- recurrence runs in the weights' dtype
      if xp.dtype ~= w_hh.dtype then xp = xp:to(w_hh.dtype) end
      if bs then xp = to_padded(xp, pad_idx, L, B, 0)
      else xp = xp:view(L, B, G * H) end
      local k = layer * dirs + dir
      -- xp is this loop's own temporary: the layer computes its gates in it (scratch)
      local opts = {reverse = dir == 1, batch_sizes = bs, w_hr = self["weight_hr" .. sfx],
        b_hh = mode == "GRU" and b_hh or nil, h0 = h0 and h0[k] or nil, c0 = c0 and c0[k] or nil, scratch = true}
      local out, hn, cn = torch._rnn_layer(OP_MODE[mode], xp, w_hh, opts)
      if bs then out = to_packed(out, pack_idx) end
      outs[#outs + 1] = out
      hs[#hs + 1], cs[#cs + 1] = hn, cn
    end
    layer_in = dirs == 2 and torch.cat(outs, -1) or outs[1]
    if self.dropout > 0 and self.training and layer < self.num_layers - 1 then
      layer_in = F.dropout(layer_in, self.dropout, true)
    end
  end
  local h_n = torch.stack(hs, 0)
  local c_n = mode == "LSTM" and torch.stack(cs, 0) or nil
  return layer_in, h_n, c_n, real
end

function RNNBase:forward(input, hx)
  check_module("forward", self)
  check_attrs(self, "forward", LAYER_ATTRS)
  check_weights(self, rawget(self, "_flat_weights_names"))
  local name = self:_get_name()
  local lstm = self.mode == "LSTM"
  local dirs = self.bidirectional and 2 or 1
  local real = self.proj_size > 0 and self.proj_size or self.hidden_size
  local w = self.weight_ih_l0
  local hx0, cx0
  if hx ~= nil then
    if lstm then
      if type(hx) ~= "table" or is_tensor(hx) or not is_tensor(hx[1]) or not is_tensor(hx[2]) then
        raise("%s: hx must be a pair of tensors {h_0, c_0}, got %s", name, is_tensor(hx) and "a tensor" or type(hx))
      end
      hx0, cx0 = hx[1], hx[2]
    else
      if not is_tensor(hx) then raise("%s: hx must be a tensor, got %s", name, type(hx)) end
      hx0 = hx
    end
  end
  if is_packed(input) then
    local data = input.data
    if data:dim() ~= 2 then raise("%s: input must have 2 dimensions, got %d", name, data:dim()) end
    if data:size(-1) ~= self.input_size then
      raise("%s: input.size(-1) must be equal to input_size. Expected %d, got %d", name, self.input_size,
        data:size(-1))
    end
    local bs = batch_sizes_list(input.batch_sizes)
    local B = bs[1] or 0
    local si = input.sorted_indices
    if hx0 then
      hidden_check(name, hx0, {self.num_layers * dirs, B, real}, lstm and "hidden[0]" or "hidden")
      same_device(name, data, hx0, "hx")
      if si then hx0 = hx0:index_select(1, si) end
    end
    if cx0 then
      hidden_check(name, cx0, {self.num_layers * dirs, B, self.hidden_size}, "hidden[1]")
      same_device(name, data, cx0, "cx")
      if si then cx0 = cx0:index_select(1, si) end
    end
    same_device(name, data, w, "the layer's parameters")
    local out, h_n, c_n = run_layers(self, data, bs, hx0, cx0)
    local ui = input.unsorted_indices
    if ui then
      h_n = h_n:index_select(1, ui)
      if c_n then c_n = c_n:index_select(1, ui) end
    end
    local po = packed(out, input.batch_sizes, input.sorted_indices, input.unsorted_indices)
    if lstm then return po, {h_n, c_n} end
    return po, h_n
  end
  if not is_tensor(input) then raise("%s: expected a tensor or a PackedSequence input, got %s", name, type(input)) end
  local nd = input:dim()
  if nd ~= 2 and nd ~= 3 then
    raise("%s: Expected input to be 2-D or 3-D but received %d-D tensor", name, nd)
  end
  local batched = nd == 3
  if input:size(-1) ~= self.input_size then
    raise("%s: input.size(-1) must be equal to input_size. Expected %d, got %d", name, self.input_size,
      input:size(-1))
  end
  same_device(name, input, w, "the layer's parameters")
  local want = batched and 3 or 2
  for i, t in ipairs({hx0 or false, cx0 or false}) do
    if t and t:dim() ~= want then
      if lstm then
        raise("%s: For %s input, hx and cx should also be %d-D but got (%d-D, %d-D) tensors", name,
          batched and "batched 3-D" or "unbatched 2-D", want, hx0:dim(), cx0:dim())
      end
      raise("%s: For %s input, hx should also be %d-D but got %d-D tensor", name,
        batched and "batched 3-D" or "unbatched 2-D", want, t:dim())
    end
    if t then same_device(name, input, t, i == 1 and "hx" or "cx") end
  end
  local x = input
  if not batched then
    x = x:unsqueeze(1)
    if hx0 then hx0 = hx0:unsqueeze(1) end
    if cx0 then cx0 = cx0:unsqueeze(1) end
  elseif self.batch_first then
    x = x:transpose(0, 1)
  end
  local B = x:size(1)
  if hx0 then hidden_check(name, hx0, {self.num_layers * dirs, B, real}, lstm and "hidden[0]" or "hidden") end
  if cx0 then hidden_check(name, cx0, {self.num_layers * dirs, B, self.hidden_size}, "hidden[1]") end
  local out, h_n, c_n = run_layers(self, x, nil, hx0, cx0)
  if not batched then
    out = out:squeeze(1)
    h_n = h_n:squeeze(1)
    if c_n then c_n = c_n:squeeze(1) end
  elseif self.batch_first then
    out = out:transpose(0, 1)
  end
  if lstm then return out, {h_n, c_n} end
  return out, h_n
end

for _, kind in ipairs({"RNN", "LSTM", "GRU"}) do
  local cls = RNNBase:extend(kind)
  M[kind] = cls
  function cls:init(...) base_init(self, kind, ...) end
end

-- ---- cells: one step, the same op with L = 1 ----------------------------------------------

local CELL_KEYS = {
  RNNCell = {"input_size", "hidden_size", "bias", "nonlinearity", "device", "dtype"},
  LSTMCell = {"input_size", "hidden_size", "bias", "device", "dtype"},
  GRUCell = {"input_size", "hidden_size", "bias", "device", "dtype"},
}
local CELL_MODE = {LSTMCell = "LSTM", GRUCell = "GRU"}

local RNNCellBase = Module:extend("RNNCellBase")
M.RNNCellBase = RNNCellBase

local function cell_init(self, kind, ...)
  local a = args(kind, CELL_KEYS[kind], ...)
  local mode = CELL_MODE[kind]
  if kind == "RNNCell" then
    local nl = a.nonlinearity == nil and "tanh" or a.nonlinearity
    if nl == "tanh" then mode = "RNN_TANH" elseif nl == "relu" then mode = "RNN_RELU"
    else raise("%s: Unknown nonlinearity: %s", kind, tostring(nl)) end
    self.nonlinearity = nl
  end
  self.mode = mode
  self.input_size = check_int(kind, "input_size", a.input_size, 0)
  self.hidden_size = check_int(kind, "hidden_size", a.hidden_size, 1)
  self.bias = a.bias == nil and true or a.bias
  local GH = GATES[mode] * self.hidden_size
  local fo = factory(a)
  self.weight_ih = Parameter(torch.empty(GH, self.input_size, fo))
  self.weight_hh = Parameter(torch.empty(GH, self.hidden_size, fo))
  if self.bias then
    self.bias_ih = Parameter(torch.empty(GH, fo))
    self.bias_hh = Parameter(torch.empty(GH, fo))
  else
    self:register_parameter("bias_ih", nil)
    self:register_parameter("bias_hh", nil)
  end
  self:reset_parameters()
end

function RNNCellBase:reset_parameters()
  check_module("reset_parameters", self)
  check_attrs(self, "reset_parameters", CELL_ATTRS)
  local stdv = 1 / math.sqrt(self.hidden_size)
  for _, p in ipairs(self:parameters()) do init.uniform_(p, -stdv, stdv) end
end

function RNNCellBase:extra_repr()
  check_module("extra_repr", self)
  check_attrs(self, "extra_repr", CELL_ATTRS)
  local s = ("%d, %d"):format(self.input_size, self.hidden_size)
  if self.bias ~= true then s = s .. ", bias=" .. pyval(self.bias) end
  if self.nonlinearity and self.nonlinearity ~= "tanh" then s = s .. ", nonlinearity=" .. tostring(self.nonlinearity) end
  return s
end

local CELL_WEIGHTS = {"weight_ih", "weight_hh"}
function RNNCellBase:forward(input, hx)
  check_module("forward", self)
  check_attrs(self, "forward", CELL_ATTRS)
  check_weights(self, CELL_WEIGHTS)
  local name = self:_get_name()
  local lstm = self.mode == "LSTM"
  if not is_tensor(input) then raise("%s: expected a tensor input, got %s", name, type(input)) end
  local nd = input:dim()
  if nd ~= 1 and nd ~= 2 then
    raise("%s: Expected input to be 1-D or 2-D but received %d-D tensor", name, nd)
  end
  if input:size(-1) ~= self.input_size then
    raise("%s: input has inconsistent input_size: got %d expected %d", name, input:size(-1), self.input_size)
  end
  same_device(name, input, self.weight_ih, "the layer's parameters")
  local batched = nd == 2
  local x = batched and input or input:unsqueeze(0)
  local B, H = x:size(0), self.hidden_size
  local h0, c0
  if hx ~= nil then
    if lstm then
      if type(hx) ~= "table" or is_tensor(hx) or not is_tensor(hx[1]) or not is_tensor(hx[2]) then
        raise("%s: hx must be a pair of tensors {h_0, c_0}, got %s", name, is_tensor(hx) and "a tensor" or type(hx))
      end
      h0, c0 = hx[1], hx[2]
    else
      if not is_tensor(hx) then raise("%s: hx must be a tensor, got %s", name, type(hx)) end
      h0 = hx
    end
    for i, t in ipairs({h0, c0}) do
      local what = lstm and ("hx[%d]"):format(i - 1) or "hx"
      if t:dim() ~= nd then
        raise("%s: Expected %s to be %d-D for a %d-D input, got %d-D", name, what, nd, nd, t:dim())
      end
      local tb = batched and t or t:unsqueeze(0)
      if tb:size(0) ~= B then
        raise("%s: Input batch size %d doesn't match hidden%s batch size %d", name, B,
          lstm and tostring(i - 1) or "", tb:size(0))
      end
      if tb:size(1) ~= H then
        raise("%s: hidden%s has inconsistent hidden_size: got %d, expected %d", name, lstm and tostring(i - 1) or "",
          tb:size(1), H)
      end
      same_device(name, input, t, what)
    end
    if not batched then
      h0 = h0:unsqueeze(0)
      if c0 then c0 = c0:unsqueeze(0) end
    end
  end
  local bias = self.bias_ih
  if bias ~= nil and self.mode ~= "GRU" then bias = bias + self.bias_hh end
  local xp = bias ~= nil and torch.addmm(bias, x, self.weight_ih:t()) or x:mm(self.weight_ih:t())
  if xp.dtype ~= self.weight_hh.dtype then xp = xp:to(self.weight_hh.dtype) end -- autocast, as in the layers
  local _, hn, cn = torch._rnn_layer(OP_MODE[self.mode], xp:unsqueeze(0), self.weight_hh,
    {h0 = h0, c0 = c0, b_hh = self.mode == "GRU" and self.bias_hh or nil, scratch = true})
  if not batched then
    hn = hn:squeeze(0)
    if cn then cn = cn:squeeze(0) end
  end
  if lstm then return {hn, cn} end
  return hn
end

for _, kind in ipairs({"RNNCell", "LSTMCell", "GRUCell"}) do
  local cls = RNNCellBase:extend(kind)
  M[kind] = cls
  function cls:init(...) cell_init(self, kind, ...) end
end

-- ---- nn.utils.rnn ----------------------------------------------------------------------------

local R = {PackedSequence = PackedSequence}

local function lengths_list(fn, lengths)
  local list
  if is_tensor(lengths) then
    if lengths:dim() ~= 1 then raise("%s: 'lengths' must be a 1-D tensor or a list, got shape %s", fn, shape_str(lengths)) end
    list = lengths:cpu():tolist()
  elseif type(lengths) == "table" then
    list = lengths
  else
    raise("%s: 'lengths' must be a 1-D tensor or a list of integers, got %s", fn, type(lengths))
  end
  local out = {}
  for i, v in ipairs(list) do
    local n = math.tointeger(v)
    if not n then raise("%s: 'lengths' must hold integers, got %s at position %d", fn, tostring(v), i - 1) end
    out[i] = n
  end
  return out
end

-- pack_padded_sequence(input, lengths, {batch_first = false, enforce_sorted = true})
function R.pack_padded_sequence(input, lengths, ...)
  local fn = "pack_padded_sequence"
  local a = args(fn, {"batch_first", "enforce_sorted"}, ...)
  if not is_tensor(input) then raise("%s: expected a tensor input, got %s", fn, type(input)) end
  if input:dim() < 2 then raise("%s: expected an input of at least 2 dims (L, B, *), got %d-D", fn, input:dim()) end
  local lens = lengths_list(fn, lengths)
  local x = a.batch_first and input:transpose(0, 1) or input
  local T, B = x:size(0), x:size(1)
  if #lens ~= B then
    raise("%s: Expected `len(lengths)` to be equal to batch_size, but got %d (batch_size=%d)", fn, #lens, B)
  end
  local enforce = a.enforce_sorted == nil and true or a.enforce_sorted
  local sorted_indices, unsorted_indices
  local order = {}
  for i = 1, B do order[i] = i end
  if enforce then
    for i = 2, B do
      if lens[i] > lens[i - 1] then
        raise("%s: `lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You can pass "
          .. "`enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep this requirement if "
          .. "you do not need ONNX exportability.", fn)
      end
    end
  else
    table.sort(order, function(i, j) if lens[i] ~= lens[j] then return lens[i] > lens[j] end return i < j end)
    local inv = {}
    for r, i in ipairs(order) do inv[i] = r - 1 end
    local so = {}
    for r, i in ipairs(order) do so[r] = i - 1 end
    sorted_indices = torch.tensor(so, {dtype = "int64", device = input.device})
    unsorted_indices = torch.tensor(inv, {dtype = "int64", device = input.device})
    x = x:index_select(1, sorted_indices)
  end
  local sl = {}
  for r, i in ipairs(order) do sl[r] = lens[i] end
  for r = 1, B do
    if sl[r] <= 0 then
      raise("%s: Length of all samples has to be greater than 0, but found an element in 'lengths' that is <= 0", fn)
    end
    if sl[r] > T then raise("%s: a length (%d) exceeds the padded sequence length %d", fn, sl[r], T) end
  end
  local maxlen = B > 0 and sl[1] or 0
  local bs = {}
  for t = 1, maxlen do
    local n = 0
    while n < B and sl[n + 1] >= t do n = n + 1 end
    bs[t] = n
  end
  local rest = x.shape:totable()
  table.remove(rest, 1); table.remove(rest, 1)
  local F = 1
  for _, v in ipairs(rest) do F = F * v end
  local pack_idx = index_maps(bs, input.device)
  local flat = x:narrow(0, 0, maxlen):reshape(maxlen * B, F):index_select(0, pack_idx)
  local dshape = {flat:size(0)}
  for _, v in ipairs(rest) do dshape[#dshape + 1] = v end
  return packed(flat:view(table.unpack(dshape)), torch.tensor(bs, {dtype = "int64", device = "cpu"}), sorted_indices,
    unsorted_indices)
end

-- pad_packed_sequence(sequence, {batch_first = false, padding_value = 0, total_length =}) -> padded, lengths
function R.pad_packed_sequence(sequence, ...)
  local fn = "pad_packed_sequence"
  local a = args(fn, {"batch_first", "padding_value", "total_length"}, ...)
  if not is_packed(sequence) then raise("%s: expected a PackedSequence, got %s", fn, type(sequence)) end
  local bs = batch_sizes_list(sequence.batch_sizes)
  local L, B = #bs, bs[1] or 0
  local total = a.total_length
  if total ~= nil then
    if math.type(total) ~= "integer" then raise("%s: total_length must be an integer, got %s", fn, tostring(total)) end
    if total < L then
      raise("%s: Expected total_length to be at least the length of the longest sequence in input, but got "
        .. "total_length=%d and max sequence length being %d", fn, total, L)
    end
  end
  local data = sequence.data
  local rest = data.shape:totable()
  table.remove(rest, 1)
  local F = 1
  for _, v in ipairs(rest) do F = F * v end
  local _, pad_idx = index_maps(bs, data.device)
  local out = to_padded(data:reshape(data:size(0), F), pad_idx, L, B, a.padding_value or 0)
  if total and total > L then
    local fill = torch.full({total - L, B, F}, a.padding_value or 0, {dtype = data.dtype, device = data.device})
    out = torch.cat({out, fill}, 0)
  end
  local lens = {}
  for b = 1, B do
    local n = 0
    for t = 1, L do if bs[t] >= b then n = t end end
    lens[b] = n
  end
  local lengths = torch.tensor(lens, {dtype = "int64", device = "cpu"})
  local ui = sequence.unsorted_indices
  if ui then
    out = out:index_select(1, ui)
    lengths = lengths:index_select(0, ui:cpu())
  end
  local shape = {out:size(0), B}
  for _, v in ipairs(rest) do shape[#shape + 1] = v end
  out = out:view(table.unpack(shape))
  if a.batch_first then out = out:transpose(0, 1) end
  return out, lengths
end

-- pad_sequence(sequences, {batch_first = false, padding_value = 0}): a list of (L_i, *) -> (max L, B, *)
function R.pad_sequence(sequences, ...)
  local fn = "pad_sequence"
  local a = args(fn, {"batch_first", "padding_value"}, ...)
  local A = require "tensh.args"
  if type(sequences) ~= "table" or is_tensor(sequences) or A.is_size(sequences) or #sequences == 0 then
    raise("%s: expected a non-empty list of tensors, got %s", fn,
      A.is_plain_table(sequences) and "an empty list" or A.show(sequences))
  end
  local maxlen, first = 0, sequences[1]
  for i, s in ipairs(sequences) do
    if not is_tensor(s) then raise("%s: sequences[%d] is %s, expected a tensor", fn, i - 1, type(s)) end
    if s:dim() < 1 then raise("%s: sequences[%d] is 0-D, expected (L, *)", fn, i - 1) end
    local ta, tb = s.shape:totable(), first.shape:totable()
    table.remove(ta, 1); table.remove(tb, 1)
    if #ta ~= #tb or table.concat(ta, ",") ~= table.concat(tb, ",") then
      raise("%s: sequences[%d] has shape %s, its trailing dims must match sequences[0]'s %s", fn, i - 1,
        shape_str(s), shape_str(first))
    end
    maxlen = math.max(maxlen, s:size(0))
  end
  local padded = {}
  for i, s in ipairs(sequences) do
    local n = s:size(0)
    if n < maxlen then
      local shape = s.shape:totable()
      shape[1] = maxlen - n
      s = torch.cat({s, torch.full(shape, a.padding_value or 0, {dtype = s.dtype, device = s.device})}, 0)
    end
    padded[i] = s
  end
  return torch.stack(padded, a.batch_first and 0 or 1)
end

nn.utils.rnn = R

return M
