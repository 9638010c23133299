-- The direct convolution kernels (one input channel per group: depthwise, and a
-- one-channel first layer) against the im2col + GEMM path in float64: the same
-- convolution as groups = 1 with a block-diagonal weight (zeros off the group),
-- forward and the weight gradient; stride 1 (the padded-plane loop) and not; and
-- the tiny-map kernels (outputs of at most 2x2 pixels, channels innermost) with
-- the input gradient too, in float32 (oneDNN declines those) and float64.
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

-- outputs of 1x1 and 2x2 pixels (a MobileNet's last stages): the channel-inner kernels
local tiny_cases = {
  {C = 24, O = 24, H = 1, W = 1, opts = {padding = 2}, k = 5},
  {C = 20, O = 20, H = 2, W = 2, opts = {padding = 2}, k = 5},
  {C = 18, O = 18, H = 4, W = 3, opts = {padding = 2, stride = 2}, k = 5},
  {C = 5, O = 10, H = 2, W = 2, opts = {padding = 1}, k = 3},
  {C = 6, O = 12, H = 3, W = 3, opts = {padding = 2, dilation = 2, stride = 2}, k = 3},
  {C = 7, O = 7, H = 1, W = 2, opts = {padding = {1, 2}}, k = 3, noncontig = true},
}

test("tiny maps: direct depthwise forward, input and weight gradients match the GEMM path", function()
  torch.manual_seed(12)
  for n, c in ipairs(tiny_cases) do
    for _, dt in ipairs({"float32", "float64"}) do
      local x
      if c.noncontig then -- (N, C, H, W) as a permuted view of a (N, W, C, H) tensor
        x = torch.randn(4, c.W, c.C, c.H, {dtype = dt}):permute(0, 2, 3, 1)
      else
        x = torch.randn(4, c.C, c.H, c.W, {dtype = dt})
      end
      x.requires_grad = true
      local w = torch.randn(c.O, 1, c.k, c.k, {dtype = dt})
      local b = torch.randn(c.O, {dtype = dt})
      w.requires_grad = true
      local o = {groups = c.C}
      for k, v in pairs(c.opts) do o[k] = v end
      local y = torch.conv2d(x, w, b, o)
      T.ok(y:size(2) * y:size(3) <= 4, ("tiny case %d: a map of at most 4 pixels"):format(n))
      local xd = x:detach():double()
      xd.requires_grad = true
      local wd = dense(w:detach():double(), c.C)
      wd.requires_grad = true
      local yd = torch.conv2d(xd, wd, b:double(), c.opts)
      local tol = dt == "float32" and 1e-5 or 1e-12
      close(y:double(), yd, tol, tol, ("tiny case %d %s forward"):format(n, dt))
      local g = torch.randn(y:size(), {dtype = dt})
      y:backward(g)
      yd:backward(g:double())
      close(x.grad:double(), xd.grad, tol * 10, tol * 10, ("tiny case %d %s grad_input"):format(n, dt))
      local gd = torch.zeros(c.O, 1, c.k, c.k, {dtype = "float64"})
      local m = c.O // c.C
      for oc = 0, c.O - 1 do gd:select(0, oc):select(0, 0):copy_(wd.grad:select(0, oc):select(0, oc // m)) end
      close(w.grad:double(), gd, tol * 10, tol * 10, ("tiny case %d %s grad_weight"):format(n, dt))
    end
  end
end)

T.run()
