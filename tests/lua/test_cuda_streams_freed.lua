-- A stream collected while another stream still has a wait for it queued
-- (s:wait_stream(b), s:wait_event(e recorded on b), then b dropped): on a GPU
-- the wait is met once b's work is done. The simulated device once freed b
-- with the wait still pointing at it and read it later, when the waiting
-- stream ran (a heap use after free under `make asan`, found in
-- test_cuda_graphs; a silent read of freed memory elsewhere). The values
-- check the order the waits give.
local T = require "harness"
local test, ok = T.test, T.ok

local function need_gpu()
  if not (cuda and cuda.is_available()) then T.skip("no CUDA device") end
end

-- x (ones on the current stream) doubled on a side stream b, then waited
-- for by stream a (how: "stream" or "event"), which adds 1; b is collected
-- before anything runs. Returns x's first value after a device synchronize.
local function run(how)
  local x = torch.ones(1024, {device = "cuda"})
  local a, b = cuda.Stream(), cuda.Stream()
  b:wait_stream(cuda.current_stream()) -- (x's fill first)
  local ev = cuda.Event()
  cuda.stream(b, function()
    x:mul_(2)
    ev:record()
  end)
  if how == "stream" then a:wait_stream(b) else a:wait_event(ev) end
  cuda.stream(a, function() x:add_(1) end)
  b = nil
  collectgarbage()
  collectgarbage() -- b is destroyed: its work is drained, then it is freed
  cuda.synchronize() -- a runs, and its wait for b with it
  return x[0]:item()
end

test("a stream collected while another waits for it (wait_stream): the wait is met, nothing reads it after", function()
  need_gpu()
  T.eq(run("stream"), 3.0, "(1 * 2) + 1")
end)

test("a stream collected while another waits for an event recorded on it: the same", function()
  need_gpu()
  T.eq(run("event"), 3.0, "(1 * 2) + 1")
  ok(torch.ones(2, {device = "cuda"}):sum():item() == 2, "the device goes on")
end)

T.run()
