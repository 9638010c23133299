-- Finite-difference gradient checks, computed from Lua lists so the
-- reference never goes through the autograd under test.
local G = {}

local function flat(v, out)
  out = out or {}
  if type(v) ~= "table" then out[#out + 1] = v return out end
  for _, x in ipairs(v) do flat(x, out) end
  return out
end

-- Rebuilds a nested list shaped like `like` from the flat values.
local function unflat(like, vals, pos)
  pos = pos or {1}
  if type(like) ~= "table" then
    local v = vals[pos[1]]
    pos[1] = pos[1] + 1
    return v
  end
  local t = {}
  for i, x in ipairs(like) do t[i] = unflat(x, vals, pos) end
  return t
end

-- f(t1, t2, ...) -> tensor. lists: the inputs as nested Lua lists (float64).
-- Checks d(sum(f * R))/d(input k) for every k against central differences.
-- opts: eps, tol, dtype, no_grad_inputs = {k = true} (passed without requires_grad)
function G.check(name, f, lists, opts)
  opts = opts or {}
  local eps, tol = opts.eps or 1e-6, opts.tol or 1e-5
  local skip = opts.no_grad_inputs or {}
  local function make(k, l, rg)
    if type(l) ~= "table" and type(l) ~= "number" then return l end -- non-tensor arguments pass through
    return torch.tensor(l, {dtype = "float64", requires_grad = rg})
  end
  local inputs = {}
  for k, l in ipairs(lists) do inputs[k] = make(k, l, not skip[k] and type(l) == "table") end
  local out = f(table.unpack(inputs, 1, #lists))
  local outv = flat(out:tolist())
  local R = {}
  for i = 1, #outv do R[i] = math.sin(i * 1.7) + 0.5 end -- fixed, irregular weights
  local Rt = torch.tensor(#outv > 0 and R or {}, {dtype = "float64"}):reshape(out.shape)
  out:backward(Rt)
  local function objective(ls)
    local ins = {}
    for k, l in ipairs(ls) do ins[k] = make(k, l, false) end
    local o = torch.no_grad(function() return f(table.unpack(ins, 1, #ls)) end)
    local v, s = flat(o:tolist()), 0
    for i = 1, #v do s = s + v[i] * R[i] end
    return s
  end
  for k, l in ipairs(lists) do
    if type(l) == "table" and not skip[k] then
      local vals = flat(l)
      local grad = inputs[k].grad
      if not grad then error(("%s: input %d got no gradient"):format(name, k), 2) end
      local g = flat(grad:tolist())
      for j = 1, #vals do
        local saved = vals[j]
        local ls = {}
        for kk, ll in ipairs(lists) do ls[kk] = ll end
        vals[j] = saved + eps
        ls[k] = unflat(l, vals)
        local up = objective(ls)
        vals[j] = saved - eps
        ls[k] = unflat(l, vals)
        local down = objective(ls)
        vals[j] = saved
        local num = (up - down) / (2 * eps)
        if math.abs(num - g[j]) > tol * math.max(1, math.abs(num)) then
          error(("%s: d/d input %d element %d: autograd %.9g, finite differences %.9g"):format(name, k, j - 1, g[j], num), 2)
        end
      end
    end
  end
end

return G
