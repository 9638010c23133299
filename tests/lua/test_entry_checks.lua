-- Calls the API fuzzer (tests/fuzz) found failing inside the library, in
-- Lua's own words ("bad argument #1 to 'sqrt'"): each now raises at the
-- entry point, naming what was wrong (issue 26). Their lines in
-- tests/fuzz/inside_allowed.tsv are gone.
local T = require "harness"
local test, eq, raises, close = T.test, T.eq, T.raises, T.close

-- a function of Lua's standard library (a "bad argument" naming it is Lua's words)
local function is_std(name)
  for _, lib in ipairs({_G, string, math, table, utf8}) do
    if type(rawget(lib, name)) == "function" then return true end
  end
  return false
end

-- not Lua's words and not a position inside the library (tests/fuzz/child.lua's test)
local function clear(fn, pattern, what)
  local ok, err = pcall(fn)
  T.ok(not ok, what .. ": expected an error")
  err = tostring(err)
  local std = err:match("bad argument #%d+ to '([^']*)'")
  T.ok(not err:find("lua/tensh/", 1, true) and not (std and is_std(std)) and not err:find("attempt to"),
    what .. ": a message from inside the library: " .. err)
  T.ok(err:find(pattern, 1, true), ("%s: expected a message with '%s', got: %s"):format(what, pattern, err))
end

test("a recurrent layer whose attributes were changed by hand names the attribute in every method", function()
  for _, kind in ipairs({"RNN", "LSTM", "GRU"}) do
    local m = nn[kind](3, 4)
    local x = torch.randn(5, 2, 3)
    getmetatable(m).__newindex(m, "input_size", nil) -- Python's del m.input_size
    for _, method in ipairs({"extra_repr", "reset_parameters"}) do
      clear(function() return m[method](m) end, kind .. ":" .. method .. ": attribute 'input_size' is nil, expected an integer >= 0",
        kind .. ":" .. method)
    end
    clear(function() return m(x) end, kind .. ":forward: attribute 'input_size' is nil", kind .. " forward")
    m.input_size = 3
    m.hidden_size = "4"
    clear(function() return m(x) end, "attribute 'hidden_size' is \"4\", expected an integer >= 1", kind .. " a string")
    m.hidden_size = 4
    m.dropout = nil
    clear(function() return tostring(m) end, "attribute 'dropout' is nil, expected a number", kind .. " printing")
    m.dropout = 0.0
    m.weight_hh_l0 = nil
    clear(function() return m(x) end, kind .. ":forward: parameter 'weight_hh_l0' is nil", kind .. " a weight")
  end
  for _, kind in ipairs({"RNNCell", "LSTMCell", "GRUCell"}) do
    local c = nn[kind](3, 4)
    c.hidden_size = nil
    for _, method in ipairs({"extra_repr", "reset_parameters"}) do
      clear(function() return c[method](c) end, kind .. ":" .. method .. ": attribute 'hidden_size' is nil", kind)
    end
    clear(function() return c(torch.randn(2, 3)) end, kind .. ":forward: attribute 'hidden_size' is nil", kind)
    c.hidden_size = 4
    c.weight_ih = nil
    clear(function() return c(torch.randn(2, 3)) end, kind .. ":forward: parameter 'weight_ih' is nil", kind)
  end
  -- untouched layers are unaffected
  local g = nn.GRU(3, 4, {num_layers = 2})
  eq(tostring(g), "GRU(3, 4, num_layers=2)", "printing")
  eq(g(torch.randn(5, 2, 3)).shape, torch.Size({5, 2, 4}), "forward")
end)

test("repeat_interleave takes int64 or int32 repeats, as PyTorch; others are named", function()
  local x = torch.tensor({5, 6})
  close(torch.repeat_interleave(x, torch.tensor({1, 2}, {dtype = torch.int32})):tolist(), {5, 6, 6}, 0, 0, "int32")
  close(torch.repeat_interleave(x, torch.tensor({0, 3})):tolist(), {6, 6, 6}, 0, 0, "int64")
  -- PyTorch: "repeat_interleave_cpu" not implemented for 'Bool' (and Byte, Short, Float)
  for _, dtype in ipairs({"torch.bool", "torch.uint8", "torch.int16", "torch.float32"}) do
    clear(function() return torch.repeat_interleave(x, torch.tensor({1, 0}, {dtype = dtype})) end,
      "repeat_interleave: repeats must be an int64 or int32 tensor, got " .. dtype, dtype)
  end
end)

test("a module's printed attributes: an object prints as it prints, a table that raises on reads still prints", function()
  local ln = nn.LayerNorm(3)
  ln.normalized_shape = data.TensorDataset(torch.randn(2, 2)) -- its __index raises past the last sample
  eq(ln:extra_repr(), "(), eps=1e-05, elementwise_affine=True", "a dataset in a tuple's place")
  ln.normalized_shape = torch.device("cpu")
  eq(ln:extra_repr(), "cpu, eps=1e-05, elementwise_affine=True", "an object with __tostring")
  ln.normalized_shape = nn.ReLU()
  eq(ln:extra_repr(), "ReLU(), eps=1e-05, elementwise_affine=True", "a module")
  eq(nn.LayerNorm({2, 3}):extra_repr(), "(2, 3), eps=1e-05, elementwise_affine=True", "a list is still a tuple")
end)

test("a module class's init called by hand on something else says what it expected", function()
  -- the fuzzer's "attempt to index a number value (local 'self')" in every layer's init
  for _, name in ipairs({"Linear", "Conv2d", "GRU", "AvgPool2d", "BCELoss", "Dropout", "Transformer", "Upsample"}) do
    for _, bad in ipairs({5, "x", torch.zeros(1), {}}) do
      clear(function() return nn[name].init(bad, 2, 2) end, "bad argument #1 to 'init' (", name .. " on " .. type(bad))
    end
  end
  clear(function() return nn.ModuleList.extend(5, {}) end, "ModuleList:extend: expected a module", "ModuleList.extend")
  -- construction, keyword arguments and a subclass calling its parent's init still work
  eq(tostring(nn.Linear({in_features = 2, out_features = 3})), "Linear(in_features=2, out_features=3, bias=True)",
    "keywords bound to init's parameters")
  local Net = nn.Linear:extend("Net")
  function Net:init(width, opts) nn.Linear.init(self, width, width, opts) end
  eq(Net(4, {bias = false})(torch.ones(2, 4)).shape, torch.Size({2, 4}), "a parent's init on the child")
  eq(#Net({width = 3}):parameters(), 2, "a user's init takes keywords too")
end)

T.run()
