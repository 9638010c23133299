-- split, chunk and unbind: one backward node per op (SplitBackward0,
-- SplitWithSizesBackward0, UnbindBackward0, as PyTorch names them), whose
-- gradient is every piece's joined in one cat or stack, zeros where a piece
-- got none. Checked against finite differences, against the same pieces taken
-- with narrow/select (one SliceBackward0 each), and on cuda against the CPU.
local T = require "harness"
local G = require "gradcheck"
local test, eq, ok, close = T.test, T.eq, T.ok, T.close
local R = T.rand_list

test("split, chunk and unbind name their backward as PyTorch does", function()
  local x = torch.randn(6, 4, {requires_grad = true})
  eq(tostring(x:split(2)[1].grad_fn), "<SplitBackward0>", "split(int)")
  eq(tostring(x:split({2, 4})[2].grad_fn), "<SplitWithSizesBackward0>", "split(sizes)")
  eq(tostring(x:chunk(3, 1)[1].grad_fn), "<SplitBackward0>", "chunk")
  eq(tostring(torch.zeros(0, 3, {requires_grad = true}):chunk(2)[1].grad_fn), "<SplitWithSizesBackward0>",
     "chunk of an empty dim (torch's split_with_sizes)")
  eq(tostring(x:unbind(1)[3].grad_fn), "<UnbindBackward0>", "unbind")
  eq(x:detach():split(2)[1].grad_fn, nil, "no grad_fn without requires_grad")
  torch.no_grad(function() eq(x:split(2)[1].grad_fn, nil, "none under no_grad") end)
end)

test("split, chunk and unbind gradients match finite differences", function()
  G.check("split with a piece unused", function(a) local p = a:split(2, 1) return p[1] * 2 + p[3] end, {R({3, 5})})
  G.check("split sizes, pieces reused", function(a)
    local p = a:split({1, 3, 1}) return p[2] * p[2]:sum() + p[1]:sum() * p[3]:sum() end, {R({5, 2})})
  G.check("chunk of odd sizes", function(a) local p = a:chunk(3, -1) return torch.cat({p[3], p[1]}, 1) end, {R({2, 7})})
  G.check("unbind, one piece unused", function(a) local u = a:unbind(1) return u[1] * u[3] + u[4] end, {R({3, 4})})
  G.check("split of a transposed input", function(a) local p = a:t():split(2) return p[2] * 3 + p[1] end, {R({3, 4})})
  G.check("unbind of an expanded input", function(a) local u = a:expand(3, 4):unbind() return u[1] * u[2] end, {R({1, 4})})
end)

-- the same pieces through narrow/select (SliceBackward0 / SelectBackward0 each): the gradients agree exactly
local function old_path(x, kind, arg, dim)
  if kind == "unbind" then
    local out = {}
    for i = 0, x.shape[dim] - 1 do out[#out + 1] = x:select(dim, i) end
    return out
  end
  local lens = arg
  if type(arg) == "number" then
    lens = {}
    local left = x.shape[dim]
    if kind == "chunk" then arg = (left + arg - 1) // arg end
    repeat lens[#lens + 1] = math.min(arg, left); left = left - arg until left <= 0
  end
  local out, start = {}, 0
  for _, n in ipairs(lens) do out[#out + 1] = x:narrow(dim, start, n); start = start + n end
  return out
end

local function use(pieces)
  local s -- each used piece scaled differently; every third piece unused
  for k, p in ipairs(pieces) do
    if k % 3 ~= 2 then s = (s and s + (p * k):sum() or (p * p):sum()) end
  end
  return s
end

local cases = {
  {"split", 2, 0, {5, 3}}, {"split", {1, 0, 4}, 0, {5, 3}}, {"chunk", 3, 1, {2, 7, 3}}, {"unbind", nil, 1, {3, 4, 2}},
  {"split", 3, -1, {4, 5}, true}, {"unbind", nil, 0, {5, 3}, true},
}

test("split, chunk and unbind gradients equal the narrow/select path's", function()
  for _, c in ipairs(cases) do
    local kind, arg, dim, shape, transposed = table.unpack(c)
    local base = torch.randn(shape, {dtype = torch.float64})
    if transposed then base = base:t():contiguous():t() end -- non-contiguous, same values
    local x1, x2 = base:clone():requires_grad_(), base:clone():requires_grad_()
    local d = dim < 0 and dim + #shape or dim
    local fn = kind == "unbind" and x1:unbind(dim) or x1[kind](x1, arg, dim)
    use(fn):backward()
    use(old_path(x2, kind, arg, d)):backward()
    ok(torch.equal(x1.grad, x2.grad), kind .. " along " .. dim .. ": " .. tostring(x1.grad - x2.grad))
  end
end)

test("split pieces on cuda give the CPU's gradients", function()
  if T.device == "cpu" then T.skip("runs on the cuda pass") end
  for _, c in ipairs(cases) do
    local kind, arg, dim, shape = table.unpack(c)
    local base = torch.randn(shape, {device = "cpu"})
    local grads = {}
    for _, dev in ipairs({"cpu", "cuda"}) do
      local x = base:to(dev):transpose(0, -1):contiguous():transpose(0, -1):requires_grad_() -- strided for 2+ dims
      use(kind == "unbind" and x:unbind(dim) or x[kind](x, arg, dim)):backward()
      grads[dev] = x.grad:cpu()
    end
    close(grads.cuda, grads.cpu, 1e-5, 1e-6, kind .. " cuda vs cpu")
  end
end)

test("split pieces keep hooks, autograd.grad and retain_graph per piece", function()
  local x = torch.randn(6, 2, {requires_grad = true})
  local p = x:split(2)
  local seen
  p[2]:register_hook(function(g) seen = g:clone() return g * 10 end)
  local l = (p[1] * 2):sum() + (p[2] * 3):sum()
  local ga, gp = table.unpack(torch.autograd.grad({l}, {x, p[1]}, {retain_graph = true}))
  close(gp, torch.full({2, 2}, 2), 0, 0, "autograd.grad of a piece: its own gradient")
  close(ga[{{0, 2}}], torch.full({2, 2}, 2), 0, 0, "piece 1's part")
  close(ga[{{2, 4}}], torch.full({2, 2}, 30), 0, 0, "piece 2's part through its hook")
  close(ga[{{4, 6}}], torch.zeros(2, 2), 0, 0, "the unused piece's part is zero")
  close(seen, torch.full({2, 2}, 3), 0, 0, "the hook saw its piece's gradient alone")
  l:backward()
  close(x.grad[{{2, 4}}], torch.full({2, 2}, 30), 0, 0, "backward after autograd.grad (retain_graph)")
end)

test("split of empty dims and an in-place change of a piece", function()
  local e = torch.zeros(0, 3, {requires_grad = true})
  local parts = e:chunk(2)
  ;(parts[1]:sum() + parts[2]:sum()):backward()
  eq(e.grad.shape, {0, 3}, "chunk of an empty dim: an empty gradient")
  local v = torch.zeros(0, {requires_grad = true})
  v:split(2)[1]:sum():backward()
  eq(v.grad.shape, {0}, "split of (0,)")
  local x = torch.randn(4, 3, {requires_grad = true})
  local y = x * 1
  local p = y:split(2)
  p[1]:mul_(5)
  ;(y * 1):sum():backward()
  close(x.grad[{{0, 2}}], torch.full({2, 3}, 5), 0, 0, "an in-place op on a piece rewrites its base's history")
  close(x.grad[{{2, 4}}], torch.ones(2, 3), 0, 0, "the rest of the base")
end)

T.run()
