-- Tensor:register_post_accumulate_grad_hook and autograd._queue_callback:
-- the engine's per-parameter "gradient ready" signal DistributedDataParallel
-- builds its buckets on.
local T = require "harness"

T.test("a hook runs once per backward, after every contribution is summed into .grad", function()
  local w = torch.randn(3, {requires_grad = true})
  local seen = {}
  w:register_post_accumulate_grad_hook(function(p)
    T.eq(p:data_ptr(), w:data_ptr(), "the hook gets the tensor itself")
    seen[#seen + 1] = p.grad:clone()
  end)
  local y = (w * 2):sum() + (w * 3):sum() + (w * w):sum()
  y:backward()
  T.eq(#seen, 1, "calls")
  T.close(seen[1], (w:detach() * 2 + 5):tolist(), 1e-6, 1e-6, "grad when the hook ran")
  ;(w * 4):sum():backward()
  T.eq(#seen, 2, "calls after the second backward")
  T.close(seen[2], (w:detach() * 2 + 9):tolist(), 1e-6, 1e-6, "accumulated grad")
end)

T.test("hooks run in the order gradients become ready; callbacks after the whole backward", function()
  local a = torch.randn(2, {requires_grad = true})
  local b = torch.randn(2, {requires_grad = true})
  local events = {}
  a:register_post_accumulate_grad_hook(function() events[#events + 1] = "a" end)
  b:register_post_accumulate_grad_hook(function()
    events[#events + 1] = "b"
    torch.autograd._queue_callback(function() events[#events + 1] = "end" end)
  end)
  local h = (a * 2):tanh()            -- a's gradient comes last: it is deepest
  local y = (h * b):sum()
  y:backward()
  T.eq(table.concat(events, " "), "b a end", "events")
end)

T.test("a leaf the backward does not reach runs no hook; remove() takes a hook off", function()
  local a = torch.randn(2, {requires_grad = true})
  local unused = torch.randn(2, {requires_grad = true})
  local n = 0
  local hu = unused:register_post_accumulate_grad_hook(function() n = n + 100 end)
  local ha = a:register_post_accumulate_grad_hook(function() n = n + 1 end)
  local _ = unused * 2 -- in no graph backward walks
  a:sum():backward()
  T.eq(n, 1, "calls")
  ha:remove()
  ha:remove() -- twice is harmless
  hu:remove()
  a:sum():backward()
  T.eq(n, 1, "calls after remove")
end)

T.test("autograd.grad runs no hook", function()
  local a = torch.randn(2, {requires_grad = true})
  local n = 0
  a:register_post_accumulate_grad_hook(function() n = n + 1 end)
  local g = torch.autograd.grad({(a * 3):sum()}, {a})
  T.close(g[1], {3, 3}, 0, 0)
  T.eq(n, 0, "calls")
end)

T.test("an error in a hook is the backward's error; the session goes on", function()
  local a = torch.randn(2, {requires_grad = true})
  local h = a:register_post_accumulate_grad_hook(function() error("hook says no") end)
  T.raises(function() a:sum():backward() end, "hook says no")
  h:remove()
  a.grad = nil
  a:sum():backward()
  T.close(a.grad, {1, 1}, 0, 0)
end)

T.test("bad arguments", function()
  local a = torch.randn(2, {requires_grad = true})
  T.raises(function() (a * 2):register_post_accumulate_grad_hook(function() end) end,
    "only a leaf tensor that requires grad can have one (this one has a grad_fn)")
  T.raises(function() torch.randn(2):register_post_accumulate_grad_hook(function() end) end,
    "(this one does not require grad)")
  T.raises(function() a:register_post_accumulate_grad_hook(42) end, "function expected")
  T.raises(function() torch.autograd._queue_callback(function() end) end, "only valid during a backward")
end)

T.run()
