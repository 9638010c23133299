-- The direct convolution kernels (one input channel per group: depthwise, and a
-- one-channel first layer) against the im2col + GEMM path in float64: the same
-- convolution as groups = 1 with a block-diagonal weight (zeros off the group),
-- forward and the weight gradient; stride 1 (the padded-plane loop) and not.
local T = require "harness"
local test, close = T.test, T.close

-- (C*m, 1, kh, kw) -> the (C*m, C, kh, kw) weight with channel o reading only o // m
local function dense(w, C)
  local O = w:size(0)
  local m = O // C
  local d = torch.zeros(O, C, w:size(2), w:size(3), {dtype = "float64"})
  for o = 0, O - 1 do d:select(0, o):select(0, o // m):copy_(w:select(0, o):select(0, 0)) end
  return d
end

local cases = {
  {C = 1, O = 32, opts = {padding = 1}, k = 3},
  {C = 4, O = 8, opts = {padding = 2, dilation = 2}, k = 3},
  {C = 3, O = 3, opts = {padding = {1, 2}}, k = 5},
  {C = 2, O = 4, opts = {}, k = 3},
  {C = 1, O = 5, opts = {padding = 3, stride = 2}, k = 3},
  {C = 3, O = 6, opts = {padding = {0, 1}, stride = {1, 2}, dilation = {2, 1}}, k = 3},
}

test("direct convolution forward and weight gradient match the GEMM path", function()
  torch.manual_seed(11)
  for n, c in ipairs(cases) do
    for _, dt in ipairs({"float32", "float64"}) do
      local x = torch.randn(3, c.C, 11, 13, {dtype = dt})
      local w = torch.randn(c.O, 1, c.k, c.k, {dtype = dt})
      local b = torch.randn(c.O, {dtype = dt})
      w.requires_grad = true
      local o = {groups = c.C}
      for k, v in pairs(c.opts) do o[k] = v end
      local y = torch.conv2d(x, w, b, o)
      local wd = dense(w:detach():double(), c.C)
      wd.requires_grad = true
      local yd = torch.conv2d(x:double(), wd, b:double(), c.opts)
      local tol = dt == "float32" and 1e-5 or 1e-12
      close(y:double(), yd, tol, tol, ("case %d %s forward"):format(n, dt))
      local g = torch.randn(y:size(), {dtype = dt})
      y:backward(g)
      yd:backward(g:double())
      -- the diagonal of the dense gradient is the direct kernel's
      local gd = torch.zeros(c.O, 1, c.k, c.k, {dtype = "float64"})
      local m = c.O // c.C
      for oc = 0, c.O - 1 do gd:select(0, oc):select(0, 0):copy_(wd.grad:select(0, oc):select(0, oc // m)) end
      close(w.grad:double(), gd, tol * 10, tol * 10, ("case %d %s grad_weight"):format(n, dt))
    end
  end
end)

T.run()
