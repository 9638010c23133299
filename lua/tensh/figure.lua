-- A plot as a picture: the figure plot() describes (tensh.plot's figure:
-- series, ranges, labels) drawn into a uint8 (3, H, W) image, for the
-- Jupyter kernel's display_data. Axes, light grid lines at the ticks, tick
-- labels and the title in a bitmap font (tensh.plot_font), each series a
-- 2-pixel line in its colour, a legend when there are labels or several
-- series. Rectangles are filled as tensor slices; lines and text are
-- gathered as pixels (the last colour given a pixel wins) and flushed with
-- one scatter a channel, so no Lua loop runs over the whole image.
local plot = require "tensh.plot"
local font = require "tensh.plot_font"
local M = {}

local INK, GRID, FRAME, PAPER = {34, 34, 34}, {228, 228, 228}, {68, 68, 68}, {255, 255, 255}

local function new_canvas(w, h)
  return {w = w, h = h, img = torch.full({3, h, w}, 255, {dtype = torch.uint8}), px = {}, order = {}}
end

-- a filled rectangle [x, x + w) x [y, y + h), clipped
local function fill(cv, x, y, w, h, rgb)
  local x0, y0 = math.max(0, x), math.max(0, y)
  local x1, y1 = math.min(cv.w, x + w), math.min(cv.h, y + h)
  if x1 <= x0 or y1 <= y0 then return end
  for c = 0, 2 do cv.img:select(0, c):narrow(0, y0, y1 - y0):narrow(1, x0, x1 - x0):fill_(rgb[c + 1]) end
end

-- one pixel, to be written by finish()
local function pixel(cv, x, y, r, g, b)
  if x < 0 or y < 0 or x >= cv.w or y >= cv.h then return end
  local i = y * cv.w + x
  if not cv.px[i] then cv.order[#cv.order + 1] = i end
  cv.px[i] = {r, g, b}
end

-- text with its top-left corner at (x, y), ink blended over white by coverage
local function text(cv, x, y, s, rgb)
  rgb = rgb or INK
  for k = 1, #s do
    local g = font.glyphs[s:byte(k)] or font.glyphs[63] -- '?' for what the font lacks
    local gx = x + (k - 1) * font.w
    for row = 0, font.h - 1 do
      for col = 0, font.w - 1 do
        local a = g:byte(row * font.w + col + 1) - 48
        if a > 0 then
          local t = a / 9
          pixel(cv, gx + col, y + row, math.floor(255 + (rgb[1] - 255) * t + 0.5),
            math.floor(255 + (rgb[2] - 255) * t + 0.5), math.floor(255 + (rgb[3] - 255) * t + 0.5))
        end
      end
    end
  end
end

-- writes the gathered pixels into the image (and starts a new gathering)
local function flush(cv)
  local n = #cv.order
  if n > 0 then
    local vals = {{}, {}, {}}
    for j, i in ipairs(cv.order) do
      local p = cv.px[i]
      vals[1][j], vals[2][j], vals[3][j] = p[1], p[2], p[3]
    end
    local idx = torch.tensor(cv.order, {dtype = torch.int64})
    for c = 0, 2 do
      cv.img:select(0, c):view(-1):scatter_(0, idx, torch.tensor(vals[c + 1], {dtype = torch.uint8}))
    end
  end
  cv.px, cv.order = {}, {}
  return cv.img
end

-- The figure as a uint8 (3, H, W) image: 640 x 400 pixels, or 8 x 24
-- pixels a character of the figure's width and height.
function M.png_picture(fig)
  local W = fig.width and math.max(240, fig.width * 8) or 640
  local H = fig.height and math.max(160, fig.height * 24) or 400
  local cv = new_canvas(W, H)
  local top = fig.title and font.h + 12 or 12
  local bottom = font.h + 14
  -- the y labels decide the left margin; tick targets: a label every 40 (y) and 90 (x) pixels
  local ph0 = H - top - bottom
  local ylo, yhi = fig.ylo, fig.yhi
  if not fig.ylim then ylo, yhi = plot.snap(ylo, yhi, math.max(2, ph0 // 40)) end
  local yt, ystep = plot.ticks(ylo, yhi, math.max(2, ph0 // 40))
  local ylab = plot.tick_labels(yt, ystep)
  local lw = 0
  for _, l in ipairs(ylab) do lw = math.max(lw, #l) end
  local x0, y0 = lw * font.w + 14, top
  local pw, ph = W - x0 - 16, ph0
  local xlo, xhi = fig.xlo, fig.xhi
  if not fig.xlim then xlo, xhi = plot.snap(xlo, xhi, math.max(2, pw // 90)) end
  local xt, xstep = plot.ticks(xlo, xhi, math.max(2, pw // 90))
  local xlab = plot.tick_labels(xt, xstep)
  local function sx(v) return x0 + math.floor((v - xlo) / (xhi - xlo) * (pw - 1) + 0.5) end
  local function sy(v) return y0 + math.floor((yhi - v) / (yhi - ylo) * (ph - 1) + 0.5) end
  -- grid lines and ticks with their labels
  for i, v in ipairs(yt) do
    local y = sy(v)
    fill(cv, x0, y, pw, 1, GRID)
    fill(cv, x0 - 4, y, 4, 1, FRAME)
    text(cv, x0 - 7 - #ylab[i] * font.w, y - font.h // 2, ylab[i])
  end
  for i, v in ipairs(xt) do
    local x = sx(v)
    fill(cv, x, y0, 1, ph, GRID)
    fill(cv, x, y0 + ph, 1, 4, FRAME)
    local lx = math.max(0, math.min(W - #xlab[i] * font.w, x - (#xlab[i] * font.w) // 2))
    text(cv, lx, y0 + ph + 6, xlab[i])
  end
  -- the frame
  fill(cv, x0 - 1, y0 - 1, pw + 2, 1, FRAME)
  fill(cv, x0 - 1, y0 + ph, pw + 2, 1, FRAME)
  fill(cv, x0 - 1, y0 - 1, 1, ph + 2, FRAME)
  fill(cv, x0 + pw, y0 - 1, 1, ph + 2, FRAME)
  if fig.title then text(cv, math.max(0, x0 + (pw - #fig.title * font.w) // 2), 4, fig.title) end
  -- the series, 2 pixels wide
  for k = 1, #fig.ys do
    local col = plot.series_color(k)
    plot.trace(fig.xs[k], fig.ys[k], xlo, xhi, ylo, yhi, pw - 1, ph - 1, function(x, y)
      pixel(cv, x0 + x, y0 + y, col[1], col[2], col[3])
      if x + 1 < pw then pixel(cv, x0 + x + 1, y0 + y, col[1], col[2], col[3]) end
      if y + 1 < ph then pixel(cv, x0 + x, y0 + y + 1, col[1], col[2], col[3]) end
    end)
  end
  flush(cv) -- the legend goes over the lines
  -- the legend, in the top right corner of the plot
  if fig.labels or #fig.ys > 1 then
    local names, longest = {}, 0
    for k = 1, #fig.ys do
      names[k] = fig.labels and fig.labels[k] or ("series " .. k)
      longest = math.max(longest, #names[k])
    end
    local bw, bh = longest * font.w + 34, #names * (font.h + 2) + 8
    local bx, by = x0 + pw - bw - 6, y0 + 6
    fill(cv, bx, by, bw, bh, FRAME)
    fill(cv, bx + 1, by + 1, bw - 2, bh - 2, PAPER)
    for k, name in ipairs(names) do
      local ly = by + 4 + (k - 1) * (font.h + 2)
      fill(cv, bx + 6, ly + font.h // 2 - 1, 18, 2, plot.series_color(k))
      text(cv, bx + 28, ly, name)
    end
  end
  return flush(cv)
end

return M
