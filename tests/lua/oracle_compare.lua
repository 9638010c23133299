-- How test_oracle.lua replays one case of tests/fixtures/ops (the format is
-- described in tests/fixtures/ops/oracle.py): builds the inputs, calls the
-- documented name, compares results and gradients with PyTorch's.
local O = {}

-- Tolerances per dtype, |actual - expected| <= atol + rtol * |expected|:
-- torch.testing.assert_close's defaults for float32; float64 tighter
-- (tensh computes float64 in float64: anything coarser is a bug, not
-- rounding); the half types within 2 units in the last place of the
-- correctly rounded value (PyTorch's CPU lacks many half kernels, so their
-- reference is its float32 answer rounded once), gradients within 4 (a
-- backward in half rounds its saved output and its intermediates), and
-- near zero within that many units of the tensor's largest element (a
-- difference of rounded terms, as gelu's slope near its zero, keeps no
-- relative precision in half).
local TOL = {
  float64 = {1e-10, 1e-12},
  float32 = {1.3e-6, 1e-5},
  float16 = {2e-3, 1e-5},
  bfloat16 = {1.6e-2, 1e-5},
}
local GRAD_TOL = {
  float64 = TOL.float64,
  float32 = TOL.float32,
  float16 = {4e-3, 1e-4},
  bfloat16 = {3.2e-2, 1e-4},
}

local function is_spec(v) return type(v) == "table" and v.tensor ~= nil end

-- The loosest tolerance of the floating dtypes in a case: a float64 result
-- computed from float32 values (a 0-dim float64 input's gradient, say) is
-- only as exact as float32.
local function loosest(v, dt)
  if type(v) ~= "table" then return dt end
  if is_spec(v) and TOL[v.tensor] and (not dt or TOL[v.tensor][1] > TOL[dt][1]) then dt = v.tensor end
  for _, x in pairs(v) do dt = loosest(x, dt) end
  return dt
end

local function shape_str(s) return "(" .. table.concat(s, ", ") .. ")" end

-- A tensor from a fixture spec {tensor = dtype, shape, data}, on the test device.
local function make(spec, requires_grad)
  local dtype, data, n = spec.tensor, spec.data, #spec.data
  if dtype == "bool" then
    local b = {}
    for i = 1, n do b[i] = data[i] ~= 0 end
    data = b
  end
  local opts = {dtype = dtype, requires_grad = requires_grad or nil}
  if #spec.shape == 0 then return torch.tensor(data[1], opts) end
  if n == 0 then return torch.zeros(spec.shape, opts) end
  local t = torch.tensor(data, {dtype = dtype})
  t = t:reshape(spec.shape)
  if requires_grad then t:requires_grad_(true) end
  return t
end
O.make = make

local function view(x, step)
  local op = step[1]
  if op == "t" then return x:transpose(step[2], step[3]) end
  if op == "narrow" then return x:narrow(step[2], step[3], step[4]) end
  if op == "slice" then -- dim d, elements start, start + step, ... before stop
    local idx = {}
    for i = 1, step[2] do idx[i] = {} end
    idx[step[2] + 1] = {step[3], step[4], step[5]}
    return x[idx]
  end
  if op == "expand" then return x:expand(table.unpack(step[2])) end
  if op == "permute" then return x:permute(table.unpack(step[2])) end
  if op == "select" then return x:select(step[2], step[3]) end
  if op == "clone" then return x:clone() end
  error("unknown view step " .. tostring(op))
end

-- The arguments of a case as Lua values; inputs (specs) become tensors,
-- recorded in `inputs` in the order gen.py walked them.
local function arg(v, inputs)
  if type(v) ~= "table" then return v end
  if v.none then return nil end
  if is_spec(v) then
    local base = make(v, v.rg)
    local x = base
    for _, st in ipairs(v.view or {}) do x = view(x, st) end
    inputs[#inputs + 1] = {spec = v, base = base}
    return x
  end
  local t = {}
  for k, x in pairs(v) do t[k] = arg(x, inputs) end
  return t
end

-- Lua's operators, as "operator +" (unm: unary minus)
local OPERATORS = {
  ["+"] = function(a, b) return a + b end, ["-"] = function(a, b) return a - b end,
  ["*"] = function(a, b) return a * b end, ["/"] = function(a, b) return a / b end,
  ["%"] = function(a, b) return a % b end, ["^"] = function(a, b) return a ^ b end,
  ["//"] = function(a, b) return a // b end, unm = function(a) return -a end,
  ["[]"] = function(a, i) return a[i] end,
}

local function resolve(call)
  local sym = call:match("^operator (.+)$")
  if sym then return OPERATORS[sym] end
  local method = call:match("^Tensor:(.+)$")
  if method then
    return function(self, ...)
      local f = self[method]
      if f == nil then error("no method Tensor:" .. method) end
      return f(self, ...)
    end
  end
  local prop = call:match("^Tensor%.(.+)$")
  if prop then return function(self) return self[prop] end end
  local f = _G
  for part in call:gmatch("[^.]+") do
    f = type(f) == "table" and f[part] or nil
    if f == nil then error("no function " .. call) end
  end
  return f
end

local function flat(v, out)
  if torch.is_tensor(v) then v = v:cpu():reshape(-1):tolist() end
  if type(v) ~= "table" then out[#out + 1] = v return out end
  for _, x in ipairs(v) do flat(x, out) end
  return out
end

local function f32(x) return (string.unpack("f", string.pack("f", x))) end

-- Values of `actual` (a tensor) against a spec; what: where in the result.
local floor -- the current case's loosest floating dtype

-- tol: the case's own {rtol, atol}, false for shape and dtype only, "exact"
-- for equal values, or nil for the dtype's (from `tols`, TOL or GRAD_TOL)
local function compare_tensor(actual, spec, tol, what, tols)
  if not torch.is_tensor(actual) then
    error(("%s: expected a tensor, got %s"):format(what, type(actual)), 0)
  end
  local dt = tostring(actual.dtype):gsub("^torch%.", "")
  if dt ~= spec.tensor then error(("%s: dtype %s, expected %s"):format(what, dt, spec.tensor), 0) end
  local shape = actual.shape:totable()
  if #shape ~= #spec.shape then
    error(("%s: shape %s, expected %s"):format(what, shape_str(shape), shape_str(spec.shape)), 0)
  end
  for i = 1, #shape do
    if shape[i] ~= spec.shape[i] then
      error(("%s: shape %s, expected %s"):format(what, shape_str(shape), shape_str(spec.shape)), 0)
    end
  end
  if tol == false then return end -- random: shape and dtype only
  local a = flat(actual, {})
  local e = spec.data
  local rtol, atol = 0, 0
  tols = tols or TOL
  if tols[dt] and tol ~= "exact" then -- the dtype's, the case's loosest dtype's, the case's own: whichever is loosest
    rtol, atol = table.unpack(tols[dt])
    for _, t in pairs({floor and tols[floor] or false, tol or false}) do
      if t then rtol, atol = math.max(rtol, t[1]), math.max(atol, t[2]) end
    end
  end
  if (dt == "float16" or dt == "bfloat16") and tol ~= "exact" then
    local big = 0
    for _, y in ipairs(e) do
      if y == y and math.abs(y) ~= math.huge then big = math.max(big, math.abs(y)) end
    end
    atol = math.max(atol, rtol * big)
  end
  for i = 1, #e do
    local x, y = a[i], e[i]
    if dt == "bool" then x = x and 1 or 0 end
    if dt == "float32" then y = f32(y) end
    local good = x == y or (x ~= x and y ~= y) or
      (rtol > 0 and math.abs(x - y) <= atol + rtol * math.abs(y))
    if not good then
      error(("%s: element %d (of %s): got %.17g, expected %.17g (%s rtol %g atol %g)"):format(what, i - 1,
        shape_str(shape), x, y, dt, rtol, atol), 0)
    end
  end
end

-- Any expected value (tensor spec, list, number, boolean, string) against the actual one.
-- A list (several results, a Lua list of tensors, a torch.Size, tolist's
-- nested lists) is compared element by element; None must be nil; a 0-dim
-- bool tensor may be a Lua boolean (any and all over everything give one).
local function compare(actual, expected, tol, what)
  if type(expected) == "table" and expected.none then
    if actual ~= nil then error(("%s: expected nil (None), got %s"):format(what, tostring(actual)), 0) end
    return
  end
  if is_spec(expected) and expected.tensor == "bool" and #expected.shape == 0 and type(actual) == "boolean" then
    return compare(actual, expected.data[1] == 1, tol, what)
  end
  if is_spec(expected) then return compare_tensor(actual, expected, tol, what) end
  if type(expected) == "table" then
    if torch.is_tensor(actual) and #expected == 1 then return compare(actual, expected[1], tol, what) end
    if type(actual) == "table" and type(actual.totable) == "function" then actual = actual:totable() end
    if type(actual) ~= "table" then error(("%s: expected a list, got %s"):format(what, tostring(actual)), 0) end
    local n = actual.n or #actual
    if n ~= #expected then
      error(("%s: %d values, expected %d"):format(what, n, #expected), 0)
    end
    for i = 1, #expected do compare(actual[i], expected[i], tol, ("%s[%d]"):format(what, i)) end
    return
  end
  if tol == false then return end
  if type(expected) == "number" and type(actual) == "number" then
    if actual == expected or (actual ~= actual and expected ~= expected) or
      (tol ~= "exact" and math.abs(actual - expected) <= 1e-6 * math.abs(expected)) then return end
  elseif expected == actual or (type(expected) == "string" and tostring(actual) == expected) then
    return
  end
  error(("%s: got %s, expected %s"):format(what, tostring(actual), tostring(expected)), 0)
end

-- the tensors of a result in order, as gen.py's flat_tensors
local function tensors(v, out)
  if torch.is_tensor(v) then out[#out + 1] = v
  elseif type(v) == "table" then
    for _, x in ipairs(v) do tensors(x, out) end
  end
  return out
end

function O.check(c)
  floor = loosest(c, nil)
  local inputs = {}
  local args = {}
  for i = 1, c.n do args[i] = arg(c.args[i], inputs) end
  local n = c.n
  if c.kw then n = n + 1; args[n] = arg(c.kw, inputs) end
  local f = resolve(c.call)
  local r = table.pack(pcall(f, table.unpack(args, 1, n)))
  if c.raises then
    if r[1] then error("expected an error, as PyTorch raises; got none", 0) end
    return
  end
  if not r[1] then error(tostring(r[2]), 0) end
  local res = r[2]
  if r.n > 2 then res = {n = r.n - 1, table.unpack(r, 2, r.n)} end
  local tol = c.tol
  if c.random then tol = false elseif c.exact then tol = "exact" end
  compare(res, c.out, tol, "result")
  if c.after then compare(inputs[1].base, c.after, tol, "input after the in-place op") end
  if not c.g then return end
  local outs = tensors(res, {})
  local loss
  for i, g in ipairs(c.g) do
    if g then
      local o = outs[i]
      local term = (o * make(g):to(o.device)):sum()
      loss = loss and loss + term or term
    end
  end
  loss:backward()
  for k, inp in ipairs(inputs) do
    if inp.spec.rg then
      local what = ("grad of input %d"):format(k)
      local grad = inp.base.grad
      local zero = true -- PyTorch's zeros and tensh's nil are the same gradient
      for _, v in ipairs(inp.spec.grad and inp.spec.grad.data or {}) do zero = zero and v == 0 end
      if inp.spec.grad and not (grad == nil and zero) then
        if grad == nil then error(what .. ": none, expected one", 0) end
        compare_tensor(grad, inp.spec.grad, c.gtol or c.tol, what, GRAD_TOL)
      elseif grad ~= nil and grad:ne(0):any() then
        error(what .. ": PyTorch gives none, tensh a non-zero one", 0)
      end
    end
  end
end

-- The names under docs/api.md's ### headings in the tensor-op sections
-- (Creating tensors ... Neural-network functions on tensors) and the
-- nn.functional entries of its nn.functional section.
function O.documented_ops(path)
  local names, section = {}, nil
  local in_ops, seen_first, seen_last = false, false, false
  for line in io.lines(path) do
    local s = line:match("^## (.*)$")
    if s then
      if section == "Neural-network functions on tensors" then in_ops = false end
      section = s
      if s == "Creating tensors" then in_ops, seen_first = true, true end
      if s == "Neural-network functions on tensors" then seen_last = true end
    end
    if line:match("^### ") then
      for chunk in line:gmatch("`([^`]*)`") do
        local name = chunk:match("^[%w_.:]+")
        local functional = section and section:find("nn.functional", 1, true) and name and
          name:match("^nn%.functional%.")
        if name and (in_ops or functional) then
          names[#names + 1] = name
        end
      end
    end
  end
  if not (seen_first and seen_last) then
    error(path .. ": no sections 'Creating tensors' ... 'Neural-network functions on tensors' (renamed?)")
  end
  return names
end

return O
