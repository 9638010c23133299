-- tensh.progress: the plain-line and terminal formats, the rate and
-- time-left arithmetic against formulas computed here, when lines are
-- printed (a fake clock and a fake output file), wrap over counts, lists and
-- iterator functions, closing on break, and the error paths.
local T = require "harness"
local test, eq, raises = T.test, T.eq, T.raises
local progress = require "tensh.progress"

-- A fake clock the test advances, and a file that records writes.
local function fake_clock(start)
  local c = {t = start or 1000}
  c.fn = function() return c.t end
  return c
end
local function fake_file()
  local f = {writes = {}}
  function f:write(s) self.writes[#self.writes + 1] = s end
  function f:flush() self.flushed = (self.flushed or 0) + 1 end
  function f:text() return table.concat(self.writes) end
  function f:lines()
    local t = {}
    for l in self:text():gmatch("([^\n]*)\n") do t[#t + 1] = l end
    return t
  end
  return f
end

test("format_interval and format_rate", function()
  eq(progress.format_interval(0), "0:00", "0 s")
  eq(progress.format_interval(75), "1:15", "75 s")
  eq(progress.format_interval(59.6), "1:00", "rounds to the second")
  eq(progress.format_interval(3725), "1:02:05", "hours")
  eq(progress.format_interval(-3), "0:00", "negative clamps")
  eq(progress.format_rate(36.52), "36.5 it/s", "tens")
  eq(progress.format_rate(250.4), "250 it/s", "hundreds")
  eq(progress.format_rate(3.14159), "3.14 it/s", "units")
  eq(progress.format_rate(0.4), "2.50 s/it", "slow: seconds per item")
  eq(progress.format_rate(12, "batch"), "12.0 batch/s", "unit")
  eq(progress.format_rate(nil), "? it/s", "unknown")
  eq(progress.format_rate(0), "? it/s", "zero")
end)

test("rate, time left and percent against their formulas", function()
  for _ = 1, 50 do
    local total = math.random(1, 100000)
    local n = math.random(0, total)
    local elapsed = math.random() * 1000 + 1e-3
    local st = progress.stats(n, total, elapsed)
    local rate = n / elapsed
    T.close({st.rate, st.percent}, {rate, 100 * n / total}, 1e-12, 0, "rate/percent")
    if n > 0 then T.close({st.left}, {(total - n) * elapsed / n}, 1e-9, 1e-12, "left")
    else eq(st.left, nil, "left unknown with no items done") end
  end
  local st = progress.stats(5, nil, 2)
  eq(st.rate, 2.5, "rate without total")
  eq(st.left, nil, "no time left without total")
  eq(progress.stats(0, 10, 0).rate, nil, "no rate at time 0")
  eq(progress.stats(12, 10, 1).left, 0.0, "past the total: nothing left")
  eq(progress.stats(12, 10, 1).percent, 100, "percent caps at 100")
end)

test("the plain line format", function()
  eq(progress.format_line(500, 1000, 40, {desc = "epoch 1", postfix = {loss = 0.123}}),
     "epoch 1: 50% 500/1000 [12.5 it/s, 0:40 elapsed, 0:40 left] loss=0.123", "the example")
  eq(progress.format_line(1, 3, 2, {}), "33% 1/3 [2.00 s/it, 0:02 elapsed, 0:04 left]", "no desc, no postfix (slow: s/it)")
  eq(progress.format_line(0, 3, 0, {desc = "d"}), "d: 0% 0/3 [? it/s, 0:00 elapsed, ? left]", "at the start")
  eq(progress.format_line(7, nil, 2, {desc = "d", unit = "batch"}), "d: 7 batch [3.50 batch/s, 0:02 elapsed]", "no total")
  eq(progress.format_postfix({lr = 0.001, loss = 1 / 3, name = "x", epoch = 3}),
     "epoch=3 loss=0.3333 lr=0.001 name=x", "postfix: sorted, %.4g floats")
  eq(progress.format_postfix({loss = torch.tensor(0.25)}), "loss=0.25", "postfix: a tensor value")
end)

test("the terminal meter format", function()
  local line = progress.format_meter(450, 1000, 12, {desc = "epoch 1", postfix = {loss = 0.123}, ncols = 80})
  local head, bar, tail = line:match("^(epoch 1:  45%%|)(.-)(|  450/1000 %[0:12<0:15, 37.5 it/s, loss=0.123%])$")
  T.ok(head, "layout: " .. line)
  eq(utf8.len(line), 80, "fills ncols")
  local w = utf8.len(bar)
  local full = select(2, bar:gsub("█", ""))
  eq(full, math.floor(0.45 * w), "full cells for 45% of " .. w)
  eq(progress.format_meter(0, 10, 0, {ncols = 40}):match("^  0%%|( +)|  0/10 %[0:00<%?, %? it/s%]$") ~= nil, true,
     "empty bar: " .. progress.format_meter(0, 10, 0, {ncols = 40}))
  eq(progress.format_meter(10, 10, 5, {ncols = 40}), "100%|" .. ("█"):rep(10) .. "| 10/10 [0:05<0:00, 2.00 it/s]",
     "full bar, at its minimum width of 10")
  local w1 = utf8.len(progress.format_meter(1, 1000, 0.01, {ncols = 80}):match("|(.-)|"))
  local w2 = utf8.len(progress.format_meter(500, 1000, 5, {ncols = 80}):match("|(.-)|"))
  eq(w1, w2, "the bar keeps its width as the count grows")
  eq(progress.format_meter(3, nil, 1, {desc = "x"}), "x: 3 it [0:01, 3.00 it/s]", "no total: no bar")
end)

test("non-terminal: a line at every 10%, none repeated at close", function()
  local clk, f = fake_clock(), fake_file()
  local bar = progress.new({total = 1000, desc = "epoch 1", file = f, isatty = false, clock = clk.fn})
  eq(#f.writes, 0, "nothing printed at the start")
  for i = 1, 1000 do
    clk.t = clk.t + 0.08
    bar:update(1, {loss = 1 / i})
    if i == 500 then eq(f:lines()[5], "epoch 1: 50% 500/1000 [12.5 it/s, 0:40 elapsed, 0:40 left] loss=0.002",
                         "the 50% line") end
  end
  bar:close()
  bar:close()
  local lines = f:lines()
  eq(#lines, 10, "one line per 10%")
  for k = 1, 10 do
    local pct, n = lines[k]:match("^epoch 1: (%d+)%% (%d+)/1000 ")
    eq(tonumber(pct), 10 * k, "percent of line " .. k)
    eq(tonumber(n), 100 * k, "count of line " .. k)
  end
  eq(lines[10], "epoch 1: 100% 1000/1000 [12.5 it/s, 1:20 elapsed, 0:00 left] loss=0.001", "the last line")
  T.ok(not f:text():find("\r", 1, true), "no carriage returns in a log")
  raises(function() bar:update(1) end, "progress: update on a closed bar")
end)

test("non-terminal: a line every `interval` seconds when progress is slow", function()
  local clk, f = fake_clock(), fake_file()
  local bar = progress.new({desc = "slow", file = f, isatty = false, clock = clk.fn, interval = 10})
  for _ = 1, 25 do
    clk.t = clk.t + 1
    bar:update()
  end
  eq(#f:lines(), 2, "at 10 s and 20 s")
  eq(f:lines()[1], "slow: 10 it [1.00 it/s, 0:10 elapsed]", "line at 10 s")
  bar:close()
  eq(f:lines()[3], "slow: 25 it [1.00 it/s, 0:25 elapsed]", "close prints the final state")
  -- big steps: update(n) jumps past several deciles, one line
  local f2 = fake_file()
  local b2 = progress.new({total = 10, file = f2, isatty = false, clock = clk.fn})
  clk.t = clk.t + 2
  b2:update(7)
  eq(#f2:lines(), 1, "one line for a jump")
  eq(f2:lines()[1], "70% 7/10 [3.50 it/s, 0:02 elapsed, 0:01 left]", "jump line")
  b2:close()
  eq(#f2:lines(), 1, "close does not repeat the 7/10 line")
  local f3 = fake_file()
  local b3 = progress.new({total = 10, file = f3, isatty = false, clock = clk.fn})
  b3:update(1)
  b3:update(0.5)
  b3:close()
  eq(#f3:lines(), 2, "close shows a state not yet printed")
  eq(f3:lines()[1]:match("^10%% 1/10 "), "10% 1/10 ", "whole counts print as integers")
  eq(f3:lines()[2]:match("^15%% 1.5/10 "), "15% 1.5/10 ", "fractional counts print as numbers")
end)

test("terminal: redrawn with \\r at most every 0.1 s, newline at close", function()
  local clk, f = fake_clock(), fake_file()
  local bar = progress.new({total = 100, desc = "train", file = f, isatty = true, clock = clk.fn, ncols = 70})
  eq(#f.writes, 1, "drawn at the start")
  for _ = 1, 100 do
    clk.t = clk.t + 0.03
    bar:update(1, {loss = 0.5})
  end
  -- 3 s of updates at most 10 redraws a second, plus the start and the end
  T.ok(#f.writes <= 32 and #f.writes >= 25, "redraws: " .. #f.writes)
  for _, w in ipairs(f.writes) do
    eq(w:sub(1, 1), "\r", "each redraw starts with \\r")
    T.ok(not w:find("\n", 1, true), "no newline while running")
  end
  eq(f.writes[#f.writes], "\rtrain: 100%|" .. ("█"):rep(utf8.len(f.writes[#f.writes]) - 1 - utf8.len("train: 100%|| 100/100 [0:03<0:00, 33.3 it/s, loss=0.5]"))
     .. "| 100/100 [0:03<0:00, 33.3 it/s, loss=0.5]", "the final redraw")
  bar:close()
  eq(f.writes[#f.writes], "\n", "close ends the line")
  -- a shorter line pads over the longer one it replaces
  local f2 = fake_file()
  local b2 = progress.new({file = f2, isatty = true, clock = clk.fn, desc = "a long description"})
  b2:set_description("x")
  clk.t = clk.t + 1
  b2:update()
  local first, second = f2.writes[1], f2.writes[2]
  eq(utf8.len(second), utf8.len(first), "padded to the old length")
  T.ok(second:match("^\rx: 1 it %[0:01, 1.00 it/s%] +$"), "padded line: " .. second)
  b2:close()
end)

test("wrap: counts, lists, iterator functions, and break closes the bar", function()
  local clk, f = fake_clock(), fake_file()
  local seen = {}
  for i, v in progress.wrap(5, {file = f, isatty = false, clock = clk.fn}) do
    seen[#seen + 1] = i .. "=" .. v
    clk.t = clk.t + 1
  end
  eq(table.concat(seen, " "), "1=1 2=2 3=3 4=4 5=5", "count yields i, i")
  eq(f:lines()[#f:lines()], "100% 5/5 [1.00 it/s, 0:05 elapsed, 0:00 left]", "count: the last line")
  local list = {"a", "b", "c", "d"}
  local f2 = fake_file()
  seen = {}
  for i, v in progress.wrap(list, {desc = "list", file = f2, isatty = false, clock = clk.fn}) do seen[#seen + 1] = i .. v end
  eq(table.concat(seen, " "), "1a 2b 3c 4d", "list yields i, item")
  T.ok(f2:lines()[#f2:lines()]:find("^list: 100%% 4/4 "), "list: total from #list: " .. f2:lines()[#f2:lines()])
  local k = 0
  local f3 = fake_file()
  seen = {}
  for i, v in progress.wrap(function() k = k + 1; if k <= 3 then return k * 10 end end,
                            {file = f3, isatty = false, clock = clk.fn}) do seen[#seen + 1] = i .. ":" .. v end
  eq(table.concat(seen, " "), "1:10 2:20 3:30", "function yields i, value")
  eq(f3:lines()[#f3:lines()]:match("^3 it "), "3 it ", "function: no total")
  -- break: the generic for's closing value closes the bar (a line is printed)
  local f4 = fake_file()
  for i in progress.wrap(100, {file = f4, isatty = true, clock = clk.fn}) do
    if i == 3 then break end
  end
  eq(f4.writes[#f4.writes], "\n", "break ends the terminal line")
  T.ok(f4.writes[#f4.writes - 1]:find(" 2/100 ", 1, true), "two items done at the break: " .. f4.writes[#f4.writes - 1])
  -- the bar object with <close>
  local f5 = fake_file()
  do
    local bar <close> = progress.new({total = 2, file = f5, isatty = false, clock = clk.fn})
    bar:update(1)
  end
  eq(f5:lines()[#f5:lines()]:match("^50%% 1/2"), "50% 1/2", "<close> prints the final state")
  local runs = 0
  for _ in progress.wrap(0, {file = fake_file(), isatty = false, clock = clk.fn}) do runs = runs + 1 end
  eq(runs, 0, "wrap(0) runs no iteration")
end)

test("errors", function()
  raises(function() progress.new("x") end, "progress.new: options must be a table, got string")
  raises(function() progress.new({total = -1}) end, "progress.new: total must be a non-negative number, got -1")
  raises(function() progress.new({total = "5"}) end, "total must be a non-negative number, got 5")
  raises(function() progress.wrap(true) end, "progress.wrap: expected a count, a list or an iterator function, got boolean")
  raises(function() progress.wrap(2.5) end, "progress.wrap: a count must be a non-negative integer, got 2.5")
  raises(function() progress.wrap(-1) end, "a count must be a non-negative integer, got -1")
  local bar = progress.new({total = 3, file = fake_file(), isatty = false})
  raises(function() bar:update("x") end, "progress: update expects a number of items, got string")
  eq(type(torch._isatty(1)), "boolean", "torch._isatty is there for the default")
end)

T.run()
