-- Progress bars for training loops, in the spirit of tqdm.
--
--   local progress = require "tensh.progress"
--   for i, batch in progress.wrap(batches, {desc = "epoch 1"}) do ... end
--   local bar = progress.new({total = n, desc = "train"})
--   bar:update(1, {loss = 0.123}); bar:close()
--
-- On a terminal one line is redrawn in place with '\r' (at most ~10 times a
-- second); elsewhere (a log file, a pipe) plain lines are printed at every
-- 10% and every `interval` seconds, so logs stay short. The clock, the output
-- file and the terminal test can be injected (tests use a fake clock).
local progress = {}

local BLOCKS = {"▏", "▎", "▍", "▌", "▋", "▊", "▉"}

-- 75 -> "1:15", 3725 -> "1:02:05"
function progress.format_interval(t)
  t = math.max(0, math.floor(t + 0.5))
  local h, m, s = t // 3600, t % 3600 // 60, t % 60
  if h > 0 then return ("%d:%02d:%02d"):format(h, m, s) end
  return ("%d:%02d"):format(m, s)
end

-- 36.52 -> "36.5 it/s"; below one per second, seconds per item: "2.50 s/it"
function progress.format_rate(rate, unit)
  unit = unit or "it"
  if not rate or rate ~= rate or rate <= 0 or rate == math.huge then return "? " .. unit .. "/s" end
  local function num(v)
    if v >= 100 then return ("%.0f"):format(v) elseif v >= 10 then return ("%.1f"):format(v) end
    return ("%.2f"):format(v)
  end
  if rate < 1 then return num(1 / rate) .. " s/" .. unit end
  return num(rate) .. " " .. unit .. "/s"
end

-- counts: 12 -> "12", 1.5 -> "1.5" (update takes fractions, e.g. MB)
local function count(v)
  if v == math.floor(v) and math.abs(v) < 2 ^ 53 then return ("%d"):format(math.floor(v)) end
  return ("%.4g"):format(v)
end

local function format_value(v)
  if torch and torch.is_tensor and torch.is_tensor(v) then v = v:item() end
  if math.type(v) == "float" then return ("%.4g"):format(v) end
  return tostring(v)
end

-- "loss=0.123 lr=0.001": keys sorted, so the line does not reorder itself
function progress.format_postfix(postfix)
  if not postfix then return "" end
  local keys = {}
  for k in pairs(postfix) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  local parts = {}
  for _, k in ipairs(keys) do parts[#parts + 1] = tostring(k) .. "=" .. format_value(postfix[k]) end
  return table.concat(parts, " ")
end

-- The numbers a line shows: rate is the average since the start, left is
-- the remaining items at that rate (nil when unknown).
function progress.stats(n, total, elapsed)
  local rate = elapsed > 0 and n / elapsed or nil
  local left
  if total and rate and rate > 0 then left = math.max(0, total - n) / rate end
  local pct = total and total > 0 and math.min(100, 100 * n / total) or nil
  return {rate = rate, left = left, percent = pct}
end

local function bar_text(frac, width)
  frac = math.min(1, math.max(0, frac))
  local cells = frac * width
  local full = math.floor(cells)
  local s = ("█"):rep(full)
  if full < width then
    local part = math.floor((cells - full) * 8)
    s = s .. (part > 0 and BLOCKS[part] or " ") .. (" "):rep(width - full - 1)
  end
  return s
end

-- The plain (non-terminal) line:
--   "epoch 1: 50% 500/1000 [12.3 it/s, 0:40 elapsed, 0:40 left] loss=0.123"
function progress.format_line(n, total, elapsed, opts)
  opts = opts or {}
  local st = progress.stats(n, total, elapsed)
  local unit = opts.unit or "it"
  local head = opts.desc and opts.desc ~= "" and (opts.desc .. ": ") or ""
  local counts = total and ("%d%% %s/%s"):format(math.floor(st.percent or 0), count(n), count(total))
                 or (count(n) .. " " .. unit)
  local times = progress.format_rate(st.rate, unit) .. ", " .. progress.format_interval(elapsed) .. " elapsed"
  if total then times = times .. ", " .. (st.left and progress.format_interval(st.left) or "?") .. " left" end
  local post = progress.format_postfix(opts.postfix)
  return head .. counts .. " [" .. times .. "]" .. (post ~= "" and " " .. post or "")
end

-- The terminal line, tqdm's layout:
--   "epoch 1:  45%|█████▍      | 450/1000 [0:12<0:15, 36.5 it/s, loss=0.123]"
function progress.format_meter(n, total, elapsed, opts)
  opts = opts or {}
  local st = progress.stats(n, total, elapsed)
  local unit = opts.unit or "it"
  local head = opts.desc and opts.desc ~= "" and (opts.desc .. ": ") or ""
  local post = progress.format_postfix(opts.postfix)
  local times = progress.format_interval(elapsed)
  if total then times = times .. "<" .. (st.left and progress.format_interval(st.left) or "?") end
  local tail = " [" .. times .. ", " .. progress.format_rate(st.rate, unit) .. (post ~= "" and ", " .. post or "") .. "]"
  if not total then return head .. count(n) .. " " .. unit .. tail end
  local pct = ("%3d%%|"):format(math.floor(st.percent or 0))
  local ct = count(total)
  local counts = ("| %" .. #ct .. "s/%s"):format(count(n), ct) -- n padded: the bar keeps its width
  local ncols = opts.ncols or 80
  local width = ncols - utf8.len(head .. pct .. counts .. tail)
  width = math.max(10, math.min(width, 60))
  return head .. pct .. bar_text(total > 0 and n / total or 1, width) .. counts .. tail
end

local Bar = {}
Bar.__index = Bar

local function default_clock()
  if torch and torch._clock then return torch._clock end
  return os.clock
end

local function terminal_columns()
  local c = tonumber(os.getenv("COLUMNS") or "")
  return c and c >= 20 and c or 80
end

-- progress.new({total =, desc =, unit = "it", file = io.stdout, isatty =,
--               clock =, mininterval = 0.1, interval = 10, ncols =})
function progress.new(opts)
  opts = opts or {}
  if type(opts) ~= "table" then error("progress.new: options must be a table, got " .. type(opts), 2) end
  local total = opts.total
  if total ~= nil and (type(total) ~= "number" or total < 0) then
    error("progress.new: total must be a non-negative number, got " .. tostring(total), 2)
  end
  local file = opts.file or io.stdout
  local isatty = opts.isatty
  if isatty == nil then isatty = file == io.stdout and torch ~= nil and torch._isatty ~= nil and torch._isatty(1) end
  local clock = opts.clock or default_clock()
  local self = setmetatable({
    n = 0, total = total, desc = opts.desc, unit = opts.unit or "it", postfix = nil,
    file = file, isatty = isatty, clock = clock,
    mininterval = opts.mininterval or 0.1, interval = opts.interval or 10,
    ncols = opts.ncols or (isatty and terminal_columns() or 80),
    closed = false, last_len = 0,
  }, Bar)
  self.start = clock()
  self.last_print = self.start
  self.last_decile = 0
  self.printed_n = nil
  if isatty then self:refresh() end
  return self
end

function Bar:elapsed() return self.clock() - self.start end

-- The line as it would be shown now.
function Bar:format()
  local o = {desc = self.desc, unit = self.unit, postfix = self.postfix, ncols = self.ncols}
  if self.isatty then return progress.format_meter(self.n, self.total, self:elapsed(), o) end
  return progress.format_line(self.n, self.total, self:elapsed(), o)
end

function Bar:refresh()
  local line = self:format()
  if self.isatty then
    local len = utf8.len(line) or #line
    local pad = self.last_len > len and (" "):rep(self.last_len - len) or ""
    self.file:write("\r" .. line .. pad)
    self.last_len = len
  else
    self.file:write(line .. "\n")
  end
  if self.file.flush then self.file:flush() end
  self.last_print = self.clock()
  self.printed_n = self.n
end

-- bar:update([n = 1] [, postfix]): n more items done; postfix replaces the
-- values shown after the counts ({loss = 0.123})
function Bar:update(n, postfix)
  if self.closed then error("progress: update on a closed bar", 2) end
  if type(n) == "table" and postfix == nil then n, postfix = 1, n end
  n = n or 1
  if type(n) ~= "number" then error("progress: update expects a number of items, got " .. type(n), 2) end
  self.n = self.n + n
  if postfix ~= nil then self.postfix = postfix end
  local now = self.clock()
  if self.isatty then
    if now - self.last_print >= self.mininterval or (self.total and self.n >= self.total) then self:refresh() end
  else
    local decile = self.total and self.total > 0 and math.floor(10 * math.min(self.n, self.total) / self.total) or 0
    if decile > self.last_decile or now - self.last_print >= self.interval then
      self.last_decile = math.max(self.last_decile, decile)
      self:refresh()
    end
  end
end

function Bar:set_postfix(postfix) self.postfix = postfix end
function Bar:set_description(desc) self.desc = desc end

-- Shows the final state (once) and ends the line; closing twice is harmless.
function Bar:close()
  if self.closed then return end
  self.closed = true
  if self.isatty then
    self:refresh()
    self.file:write("\n")
    if self.file.flush then self.file:flush() end
  elseif self.printed_n ~= self.n then
    self:refresh()
  end
end
Bar.__close = Bar.close
Bar.__tostring = function(self) return self:format() end
require("tensh.classes").setup(Bar, {what = "progress bar", var = "bar"}) -- bar.update() for bar:update() says so

-- for i, item in progress.wrap(iterable_or_count [, opts]) do ... end
-- A count n yields i, i for i = 1..n; a list (anything with # and [i])
-- yields i, list[i]; a function is called until it returns nil and yields
-- i, value. The bar closes when the loop ends, a break included (the
-- generic for's closing value).
function progress.wrap(iterable, opts)
  opts = opts or {}
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  local kind = type(iterable)
  local get
  if kind == "number" then
    if iterable < 0 or math.type(iterable) == "float" and iterable ~= math.floor(iterable) then
      error("progress.wrap: a count must be a non-negative integer, got " .. iterable, 2)
    end
    o.total = o.total or iterable
    get = function(i) if i <= iterable then return i end end
  elseif kind == "function" then
    get = function() return iterable() end
  elseif kind == "table" or kind == "userdata" then
    local ok, len = pcall(function() return #iterable end)
    if not ok then error("progress.wrap: expected a count, a list or an iterator function, got " .. kind, 2) end
    o.total = o.total or len
    get = function(i) if i <= len then return iterable[i] end end
  else
    error("progress.wrap: expected a count, a list or an iterator function, got " .. kind, 2)
  end
  local bar = progress.new(o)
  local i, started = 0, false
  local function step()
    if started then bar:update(1) end
    started = true
    i = i + 1
    local v = get(i)
    if v == nil then bar:close() return nil end
    return i, v
  end
  return step, nil, nil, bar
end

return progress
