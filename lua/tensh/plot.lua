-- Pictures in the terminal: plot() draws line plots with Unicode braille
-- (2 x 4 dots a character), axes and tick labels, each series in its own
-- colour; imshow() shows images with half blocks ("▀": the top pixel as the
-- foreground colour, the bottom one as the background), 24-bit colour (or
-- the 256-colour palette), scaled to the terminal. The REPL has both as
-- globals; scripts use require("tensh.plot").
--
-- Colour: the `color` option or TENSH_COLOR ("truecolor", "256", "16",
-- "none", "auto") says what the terminal shows; "auto" looks at stdout
-- (a terminal?), NO_COLOR, TERM and COLORTERM. Without colour nothing prints
-- an escape code: plot draws plain braille and says so when colour would
-- have told series apart, imshow says why it shows nothing.
--
-- Where a front end shows pictures itself (the Jupyter kernel), it sets
-- M.display(kind, picture): then imshow and plot hand it the picture.
local A = require "tensh.args"
local image = require "tensh.image"
local raise = A.raise
local M = {}

-- ---- colour and the terminal ---------------------------------------------------

local MODES = {truecolor = true, ["256"] = true, ["16"] = true, none = true}

-- The colour mode and, for "none", why.
function M.color_mode(fn, requested)
  local m = requested
  if m == nil then
    m = os.getenv("TENSH_COLOR")
    if m == "" then m = nil end
  end
  if m ~= nil and m ~= "auto" then
    if type(m) ~= "string" or not MODES[m] then
      raise("%s: color must be 'auto', 'truecolor', '256', '16' or 'none', got %s", fn, A.show(m))
    end
    return m, m == "none" and "colour is turned off (color = 'none')" or nil
  end
  if (os.getenv("NO_COLOR") or "") ~= "" then return "none", "NO_COLOR is set" end
  if not torch._isatty(1) then return "none", "stdout is not a terminal" end
  local term = os.getenv("TERM") or ""
  if term == "" or term == "dumb" then return "none", "the terminal (TERM=" .. term .. ") shows no colour" end
  local ct = (os.getenv("COLORTERM") or ""):lower()
  if ct == "truecolor" or ct == "24bit" then return "truecolor" end
  if term:find("256color", 1, true) or term:find("direct", 1, true) then return "256" end
  return "16"
end

-- The terminal's columns and rows (80 x 24 when stdout is not a terminal).
function M.terminal_size()
  local cols, rows = torch._image.terminal_size()
  cols = tonumber(os.getenv("COLUMNS") or "") or cols or 80
  rows = tonumber(os.getenv("LINES") or "") or rows or 24
  return math.max(math.floor(cols), 1), math.max(math.floor(rows), 1)
end

-- xterm's 256-colour palette: the nearer of the 6x6x6 cube and the gray ramp.
local CUBE = {0, 95, 135, 175, 215, 255}
local function cube_index(v)
  if v < 48 then return 0 end
  if v < 115 then return 1 end
  return (v - 35) // 40
end
function M.rgb_to_256(r, g, b)
  local ir, ig, ib = cube_index(r), cube_index(g), cube_index(b)
  local cr, cg, cb = CUBE[ir + 1], CUBE[ig + 1], CUBE[ib + 1]
  local avg = (r + g + b) // 3
  local gi = avg > 238 and 23 or math.max(0, (avg - 3) // 10)
  local gv = 8 + 10 * gi
  local dc = (cr - r) ^ 2 + (cg - g) ^ 2 + (cb - b) ^ 2
  local dg = (gv - r) ^ 2 + (gv - g) ^ 2 + (gv - b) ^ 2
  if dg < dc then return 232 + gi end
  return 16 + 36 * ir + 6 * ig + ib
end

local function fg(mode, rgb, ansi)
  if mode == "truecolor" then return ("\27[38;2;%d;%d;%dm"):format(rgb[1], rgb[2], rgb[3]) end
  if mode == "256" then return ("\27[38;5;%dm"):format(M.rgb_to_256(rgb[1], rgb[2], rgb[3])) end
  return ("\27[%dm"):format(ansi)
end
local function bg(mode, rgb)
  if mode == "truecolor" then return ("\27[48;2;%d;%d;%dm"):format(rgb[1], rgb[2], rgb[3]) end
  return ("\27[48;5;%dm"):format(M.rgb_to_256(rgb[1], rgb[2], rgb[3]))
end
local RESET = "\27[0m"

-- matplotlib's default colour cycle (tab10), with the nearest of the 16 ANSI colours
M.COLORS = {
  {31, 119, 180, 34}, {255, 127, 14, 33}, {44, 160, 44, 32}, {214, 39, 40, 31}, {148, 103, 189, 35},
  {140, 86, 75, 91}, {227, 119, 194, 95}, {127, 127, 127, 90}, {188, 189, 34, 93}, {23, 190, 207, 36},
}
local function series_color(i) return M.COLORS[(i - 1) % #M.COLORS + 1] end

local function out(s)
  io.write(s)
  io.flush()
end

-- ---- plot: reading the series ------------------------------------------------------

local function is_number_list(v)
  if not A.is_plain_table(v) then return false end
  for _, x in ipairs(v) do if type(x) ~= "number" then return false end end
  return true
end

-- A series' values as a Lua list of floats.
local function values_of(fn, v, what)
  if torch.is_tensor(v) then
    if v:dim() > 1 then
      raise("%s: %s must be 1-D, got shape (%s)", fn, what, table.concat(v.shape:totable(), ", "))
    end
    return v:detach():to("cpu"):double():reshape(-1):tolist()
  end
  if A.is_plain_table(v) then
    local t = {}
    for i, x in ipairs(v) do
      if type(x) ~= "number" then raise("%s: %s must hold numbers, got %s at [%d]", fn, what, A.typename(x), i) end
      t[i] = x + 0.0
    end
    return t
  end
  raise("%s: %s must be a 1-D tensor or a list of numbers, got %s", fn, what, A.typename(v))
end

-- ys: a 1-D tensor or list of numbers (one series), a 2-D tensor (a series
-- per column, as matplotlib), or a list of series.
local function series_of(fn, ys)
  if torch.is_tensor(ys) then
    if ys:dim() == 2 then
      local s = {}
      for j = 0, ys:size(1) - 1 do s[#s + 1] = values_of(fn, ys:select(1, j), "y") end
      return s
    end
    return {values_of(fn, ys, "y")}
  end
  if is_number_list(ys) then return {values_of(fn, ys, "y")} end
  if A.is_plain_table(ys) then
    local s = {}
    for i, v in ipairs(ys) do s[i] = values_of(fn, v, ("series %d"):format(i)) end
    return s
  end
  raise("%s: y must be a tensor, a list of numbers or a list of series, got %s", fn, A.typename(ys))
end

local function check_lim(fn, name, v)
  if v == nil then return nil end
  if not A.is_plain_table(v) or #v ~= 2 or type(v[1]) ~= "number" or type(v[2]) ~= "number" or not (v[1] < v[2]) then
    raise("%s: %s must be a list {low, high} of two numbers with low < high, got %s", fn, name, A.show(v))
  end
  return v
end

local function check_size(fn, name, v, min)
  if v == nil then return nil end
  if math.type(v) ~= "integer" and not (type(v) == "number" and v == math.floor(v)) or v < min or v > 10000 then
    raise("%s: %s must be an integer in [%d, 10000], got %s", fn, name, min, A.show(v))
  end
  return math.tointeger(v)
end

-- ---- plot: axes ----------------------------------------------------------------------

local function isfinite(v) return v == v and v ~= math.huge and v ~= -math.huge end
local function round(v) return math.floor(v + 0.5) end

-- A tick step of 1, 2, 2.5 or 5 times a power of ten giving at most about `target` ticks.
local function nice_step(span, target)
  local raw = span / math.max(target, 1)
  local mag = 10 ^ math.floor(math.log(raw, 10))
  for _, m in ipairs({1, 2, 2.5, 5, 10}) do
    if m * mag >= raw * (1 - 1e-9) then return m * mag end
  end
  return 10 * mag
end

local function ticks(lo, hi, target)
  local step = nice_step(hi - lo, target)
  local t, v = {}, math.ceil(lo / step - 1e-9) * step
  while v <= hi + step * 1e-9 and #t < 100 do
    if math.abs(v) < step * 1e-9 then v = 0.0 end -- no "-0"
    t[#t + 1] = v
    v = v + step
  end
  return t, step
end

-- Labels with the digits that tell ticks `step` apart, all in one format.
local function tick_labels(vals, step)
  local maxabs = 0
  for _, v in ipairs(vals) do maxabs = math.max(maxabs, math.abs(v)) end
  local labels = {}
  if maxabs < 1e7 and step >= 1e-4 then
    local dec = math.max(0, -math.floor(math.log(step, 10) + 1e-9))
    while dec < 12 and math.abs(step * 10 ^ dec - round(step * 10 ^ dec)) > 1e-6 do dec = dec + 1 end -- 2.5, 0.25
    for i, v in ipairs(vals) do labels[i] = ("%." .. dec .. "f"):format(v) end
  else
    local p = math.max(1, math.floor(math.log(math.max(maxabs, step), 10)) - math.floor(math.log(step, 10)) + 2)
    for i, v in ipairs(vals) do labels[i] = ("%." .. p .. "g"):format(v) end
  end
  return labels
end

-- The range of the finite values over all series, widened when it is a point.
local function data_range(lists)
  local lo, hi = math.huge, -math.huge
  for _, l in ipairs(lists) do
    for _, v in ipairs(l) do
      if isfinite(v) then lo, hi = math.min(lo, v), math.max(hi, v) end
    end
  end
  if lo > hi then return nil end
  if lo == hi then
    local d = lo == 0 and 1 or math.abs(lo) * 0.1
    lo, hi = lo - d, hi + d
  end
  return lo, hi
end

-- An automatic range [lo, hi] widened to the tick just outside each end when
-- that is near (within a tenth of the span), so the axis ends on a label.
local function snap(lo, hi, target)
  local step = nice_step(hi - lo, target)
  local span = hi - lo
  local l, h = math.floor(lo / step + 1e-9) * step, math.ceil(hi / step - 1e-9) * step
  if lo - l <= 0.1 * span then lo = l end
  if h - hi <= 0.1 * span then hi = h end
  return lo, hi
end

-- ---- plot: the braille canvas ----------------------------------------------------------

-- braille dot bits by (column 0-1, row 0-3) within a character
local DOT = {[0] = {[0] = 0x01, 0x02, 0x04, 0x40}, {[0] = 0x08, 0x10, 0x20, 0x80}}

local function new_canvas(w, h)
  return {w = w, h = h, bits = {}, color = {}}
end

local function set_dot(cv, x, y, k)
  if x < 0 or y < 0 or x >= 2 * cv.w or y >= 4 * cv.h then return end
  local cell = (y // 4) * cv.w + (x // 2)
  cv.bits[cell] = (cv.bits[cell] or 0) | DOT[x % 2][y % 4]
  cv.color[cell] = k
end

-- Liang-Barsky: the part of the segment inside [x0, x1] x [y0, y1], or nil.
local function clip(ax, ay, bx, by, x0, y0, x1, y1)
  local t0, t1 = 0, 1
  local dx, dy = bx - ax, by - ay
  for _, pq in ipairs({{-dx, ax - x0}, {dx, x1 - ax}, {-dy, ay - y0}, {dy, y1 - ay}}) do
    local p, q = pq[1], pq[2]
    if p == 0 then
      if q < 0 then return nil end
    else
      local r = q / p
      if p < 0 then
        if r > t1 then return nil end
        if r > t0 then t0 = r end
      else
        if r < t0 then return nil end
        if r < t1 then t1 = r end
      end
    end
  end
  return ax + t0 * dx, ay + t0 * dy, ax + t1 * dx, ay + t1 * dy
end

-- The dots of a series' polyline on a grid of dots [0, W] x [0, H] (y
-- down) over the ranges: set(x, y) for each; segments clipped to the grid,
-- NaN and infinities break the line, a point alone is one dot. The braille
-- canvas and the PNG plot (tensh.figure) both draw with it.
function M.trace(xs, ys, xlo, xhi, ylo, yhi, W, H, set)
  local function px(x) return (x - xlo) / (xhi - xlo) * W end
  local function py(y) return (yhi - y) / (yhi - ylo) * H end
  local prev_x, prev_y
  for i = 1, #ys do
    local x, y = xs[i], ys[i]
    if isfinite(x) and isfinite(y) then
      local fx, fy = px(x), py(y)
      if prev_x then
        local ax, ay, bx, by = clip(prev_x, prev_y, fx, fy, -0.5, -0.5, W + 0.49, H + 0.49)
        if ax then
          local x0, y0, x1, y1 = round(ax), round(ay), round(bx), round(by)
          local n = math.max(math.abs(x1 - x0), math.abs(y1 - y0))
          for s = 0, n do
            local t = n == 0 and 0 or s / n
            local dx, dy = round(x0 + (x1 - x0) * t), round(y0 + (y1 - y0) * t)
            if dx >= 0 and dy >= 0 and dx <= W and dy <= H then set(dx, dy) end
          end
        end
      else
        -- a point alone (the first, or after a gap) shows as a dot
        local nx, ny = xs[i + 1], ys[i + 1]
        local rx, ry = round(fx), round(fy)
        if not (nx and isfinite(nx) and isfinite(ny)) and rx >= 0 and ry >= 0 and rx <= W and ry <= H then set(rx, ry) end
      end
      prev_x, prev_y = fx, fy
    else
      prev_x, prev_y = nil, nil
    end
  end
end

local function utf8_len(s) return utf8.len(s) or #s end

local function pad_left(s, n) return (" "):rep(n - utf8_len(s)) .. s end

M.ticks, M.tick_labels, M.snap, M.series_color = ticks, tick_labels, snap, series_color

-- ---- plot ------------------------------------------------------------------------------

local PLOT_OPTS = {title = true, width = true, height = true, ylim = true, xlim = true, labels = true, color = true}

-- The figure as data: series, ranges, ticks, labels. Shared by the terminal
-- drawing below and the PNG one (tensh.figure) for the Jupyter kernel.
function M.figure(fn, ...)
  local n = select("#", ...)
  while n > 0 and select(n, ...) == nil do n = n - 1 end
  local opts
  if n >= 1 and A.is_opts(select(n, ...)) then opts, n = select(n, ...), n - 1 end
  opts = A.check_opts(fn, opts, PLOT_OPTS)
  if n == 0 then raise("%s: expected values to plot: %s(y) or %s(x, y)", fn, fn, fn) end
  if n > 2 then raise("%s: expected %s(y) or %s(x, y) and an options table, got %d arguments", fn, fn, fn, n) end
  local xarg, yarg
  if n == 1 then yarg = ... else xarg, yarg = ... end
  local ys = series_of(fn, yarg)
  if #ys == 0 then raise("%s: nothing to plot (no series)", fn) end
  local xs
  if xarg ~= nil then
    local x = values_of(fn, xarg, "x")
    for i, s in ipairs(ys) do
      if #s ~= #x then
        raise("%s: x and y must have the same length, but x has %d values and %s %d", fn, #x,
          #ys > 1 and ("series %d has"):format(i) or "y has", #s)
      end
    end
    xs = {}
    for i = 1, #ys do xs[i] = x end
  else
    xs = {}
    for i, s in ipairs(ys) do
      local x = {}
      for j = 1, #s do x[j] = j - 1.0 end
      xs[i] = x
    end
  end
  if opts.title ~= nil and type(opts.title) ~= "string" then raise("%s: title must be a string, got %s", fn, A.show(opts.title)) end
  local labels = opts.labels
  if labels ~= nil then
    if type(labels) == "string" then labels = {labels} end
    if not A.is_plain_table(labels) or #labels ~= #ys then
      raise("%s: labels must be a list of %d string(s), one a series, got %s", fn, #ys, A.show(opts.labels))
    end
    for i, l in ipairs(labels) do
      if type(l) ~= "string" then raise("%s: labels must be strings, got %s at [%d]", fn, A.typename(l), i) end
    end
  end
  local ylim, xlim = check_lim(fn, "ylim", opts.ylim), check_lim(fn, "xlim", opts.xlim)
  local ylo, yhi = data_range(ys)
  local xlo, xhi = data_range(xs)
  if not ylo or not xlo then raise("%s: nothing to plot (no finite values)", fn) end
  if ylim then ylo, yhi = ylim[1], ylim[2] end
  if xlim then xlo, xhi = xlim[1], xlim[2] end
  return {xs = xs, ys = ys, labels = labels, title = opts.title, xlo = xlo, xhi = xhi, ylo = ylo, yhi = yhi,
          xlim = xlim, ylim = ylim,
          width = check_size(fn, "width", opts.width, 2), height = check_size(fn, "height", opts.height, 2),
          color = opts.color}
end

-- The figure drawn with braille as lines of text (escapes per `mode`).
function M.render(fig, mode, reason)
  local cols = M.terminal_size()
  local H = fig.height or 15
  -- y labels first: their width decides the canvas width
  local ylo, yhi = fig.ylo, fig.yhi
  local ytarget = math.max(2, H // 2) -- a label every other row at most
  if not fig.ylim then ylo, yhi = snap(ylo, yhi, ytarget) end
  local yt, ystep = ticks(ylo, yhi, ytarget)
  local ylab = tick_labels(yt, ystep)
  local lw = 0
  for _, l in ipairs(ylab) do lw = math.max(lw, #l) end
  local W = fig.width or math.max(10, math.min(cols, 100) - lw - 3)
  local xlo, xhi = fig.xlo, fig.xhi
  if not fig.xlim then xlo, xhi = snap(xlo, xhi, math.max(2, W // 12)) end
  local cv = new_canvas(W, H)
  for i = 1, #fig.ys do
    M.trace(fig.xs[i], fig.ys[i], xlo, xhi, ylo, yhi, 2 * W - 1, 4 * H - 1, function(x, y) set_dot(cv, x, y, i) end)
  end
  -- the row of each y tick (the dot row of its value, in cells)
  local tick_at = {}
  for i, v in ipairs(yt) do
    local r = round((yhi - v) / (yhi - ylo) * (4 * H - 1)) // 4
    if r >= 0 and r < H then tick_at[r] = ylab[i] end
  end
  local colored = mode ~= "none"
  local lines = {}
  if fig.title then
    local pad = math.max(0, lw + 2 + (W - utf8_len(fig.title)) // 2)
    lines[#lines + 1] = (" "):rep(pad) .. fig.title
  end
  for r = 0, H - 1 do
    local parts = {pad_left(tick_at[r] or "", lw), tick_at[r] and " ┤" or " │"}
    local cur -- the colour in force
    local last = -1 -- the last column with dots: the line ends there
    for c = 0, W - 1 do if cv.bits[r * W + c] then last = c end end
    for c = 0, last do
      local cell = r * W + c
      local b = cv.bits[cell]
      if b then
        local k = cv.color[cell]
        if colored and k ~= cur then
          local col = series_color(k)
          parts[#parts + 1] = fg(mode, col, col[4])
          cur = k
        end
        parts[#parts + 1] = utf8.char(0x2800 + b)
      else
        parts[#parts + 1] = " "
      end
    end
    if cur then parts[#parts + 1] = RESET end
    lines[#lines + 1] = (table.concat(parts):gsub("%s+$", ""))
  end
  -- the x axis: a mark under each tick, labels centred under the marks where they fit
  local xt, xstep = ticks(xlo, xhi, math.max(2, W // 12))
  local xlab = tick_labels(xt, xstep)
  local axis, row, len = {}, {}, 0
  for c = 0, W - 1 do axis[c] = "─" end
  for i, v in ipairs(xt) do
    local c = round((v - xlo) / (xhi - xlo) * (2 * W - 1)) // 2
    if c >= 0 and c < W then
      axis[c] = "┬"
      local s = xlab[i]
      local start = math.max(0, c - (#s - 1) // 2)
      if start >= len + (len > 0 and 1 or 0) then -- a label that fits after the last one, a space apart
        row[#row + 1] = (" "):rep(start - len) .. s
        len = start + #s
      end
    end
  end
  lines[#lines + 1] = (" "):rep(lw + 1) .. "└" .. table.concat(axis, "", 0, W - 1)
  lines[#lines + 1] = ((" "):rep(lw + 2) .. table.concat(row)):gsub("%s+$", "")
  -- the legend, when there are labels or several series
  if fig.labels or #fig.ys > 1 then
    local items = {}
    for i = 1, #fig.ys do
      local name = fig.labels and fig.labels[i] or ("series " .. i)
      if colored then
        local col = series_color(i)
        items[#items + 1] = fg(mode, col, col[4]) .. "──" .. RESET .. " " .. name
      else
        items[#items + 1] = "── " .. name
      end
    end
    local legend = (" "):rep(lw + 2) .. table.concat(items, "   ")
    if not colored and #fig.ys > 1 then legend = legend .. ("   (no colour to tell them apart: %s)"):format(reason) end
    lines[#lines + 1] = legend
  end
  return table.concat(lines, "\n") .. "\n"
end

-- plot(y), plot(x, y), plot({y1, y2, ...}), plot(x, {y1, y2}) with
-- {title, width, height, ylim, xlim, labels, color}: y a 1-D tensor (any
-- device) or a list of numbers; x defaults to 0, 1, 2, ...
function M.plot(...)
  local fig = M.figure("plot", ...)
  if M.display then return M.display("plot", fig) end
  local mode, reason = M.color_mode("plot", fig.color)
  out(M.render(fig, mode, reason))
end

-- ---- imshow ----------------------------------------------------------------------------

local IMSHOW_OPTS = {width = true, height = true, color = true, dataformats = true}
for k in pairs(image.GRID_OPTS) do IMSHOW_OPTS[k] = true end

-- The picture imshow shows: a uint8 (3 or 4, H, W) CPU tensor (a batch as a grid).
function M.picture(fn, img, opts)
  if not torch.is_tensor(img) then raise("%s: expected an image tensor, got %s", fn, A.typename(img)) end
  image._check_image_dtype(fn, img)
  local t = image.channels_first(fn, img, opts.dataformats)
  local grid_opts = {}
  for k in pairs(image.GRID_OPTS) do grid_opts[k] = opts[k] end
  local g = image.make_grid(t, grid_opts)
  return image.to_uint8(g):to("cpu")
end

-- The picture at most max_w x max_h pixels: smaller by area averaging,
-- larger by whole factors (so pixels stay square and sharp).
function M.fit(u8, max_w, max_h)
  local h, w = u8:size(1), u8:size(2)
  local s = math.min(max_w / w, max_h / h)
  if s >= 2 then
    local k = math.floor(s)
    return u8:repeat_interleave(k, {dim = 1}):repeat_interleave(k, {dim = 2})
  end
  if s >= 1 then return u8 end
  local nw, nh = math.max(1, math.floor(w * s)), math.max(1, math.floor(h * s))
  local f = nn.functional.adaptive_avg_pool2d(u8:float():unsqueeze(0), {nh, nw}):squeeze(0)
  return f:add(0.5):floor():clamp(0, 255):to(torch.uint8)
end

-- The half-block lines of a uint8 (C, H, W) picture (alpha dropped).
function M.halfblocks(u8, mode)
  local rgb = u8:narrow(0, 0, 3):permute(1, 2, 0):contiguous():tolist()
  local h, w = #rgb, #rgb[1]
  local lines = {}
  for r = 1, h, 2 do
    local top, bot = rgb[r], rgb[r + 1]
    local parts, cur_f, cur_b = {}, nil, nil
    for c = 1, w do
      local f = fg(mode, top[c])
      if f ~= cur_f then parts[#parts + 1] = f; cur_f = f end
      if bot then
        local b = bg(mode, bot[c])
        if b ~= cur_b then parts[#parts + 1] = b; cur_b = b end
      end
      parts[#parts + 1] = "▀"
    end
    parts[#parts + 1] = RESET
    lines[#lines + 1] = table.concat(parts)
  end
  return table.concat(lines, "\n") .. "\n"
end

-- imshow(img, {width, height, color, dataformats, nrow, padding, normalize,
-- value_range, scale_each, pad_value}): img (C, H, W), (H, W, C), (H, W) or
-- a batch (N, C, H, W), float in [0, 1] or uint8, on any device.
function M.imshow(img, opts)
  local fn = "imshow"
  opts = A.check_opts(fn, opts, IMSHOW_OPTS)
  local pic = M.picture(fn, img, opts)
  if M.display then return M.display("image", pic) end
  local mode, reason = M.color_mode(fn, opts.color)
  local w, h = check_size(fn, "width", opts.width, 1), check_size(fn, "height", opts.height, 1)
  if mode == "none" or mode == "16" then
    out(("imshow: no image shown: %s; it needs 24-bit or 256 colours (TENSH_COLOR=truecolor or " ..
      "{color = 'truecolor'} forces them; data.save_image(t, 'x.png') writes a file)\n"):format(
      reason or "the terminal shows only 16 colours"))
    return
  end
  local cols, rows = M.terminal_size()
  local fitted = M.fit(pic, w or cols, 2 * (h or math.max(1, rows - 2)))
  out(M.halfblocks(fitted, mode))
end

return M
