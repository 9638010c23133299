-- tensh.plot: plot() (braille line plots) and imshow() (half blocks) in the
-- terminal. Outputs are compared with pictures worked out by hand, and the
-- braille is decoded back into dots here to check lines against the points
-- they join; the colour escapes against the xterm formulas; imshow's pixels
-- against the image's own values; the colour mode as a child process sees
-- its stdout (a pipe: no terminal).
local T = require "harness"
local test, eq, ok, raises = T.test, T.eq, T.ok, T.raises
local P = require "tensh.plot"
local build = os.getenv("TENSH_BUILD") or "../../build"

-- What fn writes through io.write, as a string.
local function captured(fn)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  local old = io.output()
  io.output(f)
  local okc, err = pcall(fn)
  io.output(old)
  f:close()
  f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  os.remove(path)
  if not okc then error(err, 0) end
  return s
end

local function lines_of(s)
  local t = {}
  for l in s:gmatch("([^\n]*)\n") do t[#t + 1] = l end
  return t
end

-- The dots of the braille characters in the canvas rows (lines after the
-- title, before the axis), as a set "x,y" in dot coordinates.
local BIT = {[0x01] = {0, 0}, [0x02] = {0, 1}, [0x04] = {0, 2}, [0x40] = {0, 3},
             [0x08] = {1, 0}, [0x10] = {1, 1}, [0x20] = {1, 2}, [0x80] = {1, 3}}
local function dots(text, first_row, nrows)
  local set, n = {}, 0
  local ls = lines_of(text)
  for r = 0, nrows - 1 do
    local l = ls[first_row + r]
    local col, left = 0, nil
    for _, cp in utf8.codes(l) do
      col = col + 1
      if not left and (cp == 0x2524 or cp == 0x2502) then left = col end -- the axis: ┤ or │
      if left and col > left and cp >= 0x2800 and cp <= 0x28ff then
        for bit, xy in pairs(BIT) do
          if (cp - 0x2800) & bit ~= 0 then
            set[("%d,%d"):format(2 * (col - left - 1) + xy[1], 4 * r + xy[2])] = true
            n = n + 1
          end
        end
      end
    end
  end
  return set, n
end

test("plot: a line by hand (title, ticks, axis, labels, braille)", function()
  local x = {0, 1, 2, 3, 4, 5, 6, 7}
  local s = captured(function()
    P.plot(x, x, {width = 4, height = 2, xlim = {0, 7}, ylim = {0, 7}, title = "t", color = "none"})
  end)
  -- 8 x 8 dots; y = x lands on dots (i, 7 - i); ticks every 5
  eq(s, table.concat({
    "    t",
    "5 ┤  ⡠⠊",
    "0 ┤⡠⠊",
    "  └┬─┬─",
    "   0 5",
  }, "\n") .. "\n", "plot output")
end)

test("plot: lines join the points, clipped to the limits, broken by NaN", function()
  -- a diagonal over a 40 x 40-dot canvas: exactly the dots (i, 39 - i)
  local y = {}
  for i = 0, 39 do y[#y + 1] = i end
  local s = captured(function() P.plot(y, {width = 20, height = 10, xlim = {0, 39}, ylim = {0, 39}, color = "none"}) end)
  local set, n = dots(s, 1, 10)
  eq(n, 40, "dots on the diagonal")
  for i = 0, 39 do ok(set[("%d,%d"):format(i, 39 - i)], "dot " .. i) end
  -- a horizontal line at 0.5 in [0, 1]: dot row round(0.5 * 39) = 20, every column
  s = captured(function() P.plot({0.5, 0.5}, {width = 10, height = 10, ylim = {0, 1}, color = "none"}) end)
  set, n = dots(s, 1, 10)
  eq(n, 20, "dots of the horizontal line")
  for i = 0, 19 do ok(set[i .. ",20"], "dot " .. i .. ",20") end
  -- NaN breaks the line; a point alone shows as one dot
  s = captured(function()
    P.plot({0, 1, 0 / 0, 1, 1, 0 / 0, 0.5}, {width = 7, height = 2, xlim = {0, 6}, ylim = {0, 1}, color = "none"})
  end)
  set, n = dots(s, 1, 2)
  -- x at dots 13 x / 6: 0, 2.17, 4.33, 6.5, 8.67, 10.83, 13: segments 0-1 and 3-4, point 6 alone
  ok(set["0,7"] and set["2,0"], "first segment's ends")
  ok(set["7,0"] and set["9,0"], "second segment")
  for x = 3, 6 do ok(not set[x .. ",0"], "nothing across the gap at " .. x) end
  ok(set["13,4"], "the lone point (0.5 at dot row round(3.5) = 4)")
  -- values far outside ylim are clipped at the edge, not wrapped
  s = captured(function() P.plot({0, 1e300}, {width = 2, height = 2, ylim = {0, 1}, color = "none"}) end)
  set, n = dots(s, 1, 2)
  ok(n > 0 and n <= 8, "a clipped segment stays inside: " .. n)
end)

test("plot: several series in colours, a legend; tab10 in every mode", function()
  local a, b = torch.linspace(0, 1, 20), torch.linspace(1, 0, 20)
  local tc = captured(function() P.plot({a, b}, {labels = {"up", "down"}, width = 20, height = 5, color = "truecolor"}) end)
  ok(tc:find("\27[38;2;31;119;180m", 1, true), "first series blue (tab10)")
  ok(tc:find("\27[38;2;255;127;14m", 1, true), "second series orange")
  ok(tc:find("\27[38;2;31;119;180m──\27[0m up   \27[38;2;255;127;14m──\27[0m down", 1, true), "legend")
  -- xterm 256: blue (31, 119, 180) is cube (0, 2, 3) = 16 + 12 + 3 = 31, nearer than gray 243 (108)
  eq(P.rgb_to_256(31, 119, 180), 31, "rgb_to_256 cube")
  eq(P.rgb_to_256(128, 128, 128), 244, "gray 128: ramp 232 + 12 (128), the cube has 135")
  eq(P.rgb_to_256(0, 0, 0), 16, "black")
  eq(P.rgb_to_256(255, 255, 255), 231, "white")
  local c256 = captured(function() P.plot({a, b}, {width = 20, height = 5, color = "256"}) end)
  ok(c256:find("\27[38;5;31m", 1, true), "256-colour series")
  local c16 = captured(function() P.plot({a, b}, {width = 20, height = 5, color = "16"}) end)
  ok(c16:find("\27[34m", 1, true) and c16:find("\27[33m", 1, true), "16-colour series")
  -- without colour: no escape anywhere, and it says the series cannot be told apart
  local none = captured(function() P.plot({a, b}, {labels = {"up", "down"}, width = 20, height = 5, color = "none"}) end)
  ok(not none:find("\27", 1, true), "no escapes")
  ok(none:find("── up   ── down   (no colour to tell them apart: colour is turned off (color = 'none'))", 1, true), none)
  -- the same dots whatever the colours
  eq(select(2, dots(tc:gsub("\27%[[%d;]*m", ""), 1, 5)), select(2, dots(none, 1, 5)), "dots in colour and not")
  -- a 2-D tensor plots its columns
  local cols = captured(function() P.plot(torch.stack({a, b}, 1), {width = 20, height = 5, color = "none"}) end)
  ok(cols:find("── series 1   ── series 2", 1, true), "columns as series")
  eq(dots(cols, 1, 5)["0,19"], dots(none, 1, 5)["0,19"], "same first dot")
end)

test("plot: x values, Lua lists, tensors on the device, 0-dim and constant series", function()
  local x = torch.tensor({1.0, 2.0, 4.0})
  local y = torch.tensor({1.0, 4.0, 16.0})
  local s1 = captured(function() P.plot(x, y, {width = 10, height = 4, color = "none"}) end)
  local s2 = captured(function() P.plot({1, 2, 4}, {1, 4, 16}, {width = 10, height = 4, color = "none"}) end)
  eq(s1, s2, "tensors and lists plot alike")
  local s3 = captured(function() P.plot(torch.tensor(3.0), {width = 10, height = 4, color = "none"}) end)
  ok(s3:find("⠁", 1, true) or s3:find("⡀", 1, true) or s3:find("⠄", 1, true) or s3:find("⠂", 1, true), "a 0-dim value is one dot: " .. s3)
  -- a constant series gets a range around its value: 5 +- 0.5
  local s4 = captured(function() P.plot({5, 5, 5}, {width = 10, height = 4, color = "none"}) end)
  ok(s4:find("5.0 ┤", 1, true) and s4:find("4.5 ┤", 1, true), s4)
  -- integers and bools plot as numbers
  local s5 = captured(function() P.plot(torch.tensor({1, 2, 3}), {width = 10, height = 4, color = "none"}) end)
  local s6 = captured(function() P.plot({1.0, 2.0, 3.0}, {width = 10, height = 4, color = "none"}) end)
  eq(s5, s6, "int64 tensor")
end)

test("plot: argument errors", function()
  raises(function() P.plot() end, "plot: expected values to plot")
  raises(function() P.plot({}) end, "plot: expected values to plot")
  raises(function() P.plot("x") end, "plot: y must be a tensor, a list of numbers or a list of series, got string")
  raises(function() P.plot({1, "a"}) end, "plot: series 1 must be a 1-D tensor or a list of numbers, got number")
  raises(function() P.plot(torch.zeros(2, 2, 2)) end, "plot: y must be 1-D, got shape (2, 2, 2)")
  raises(function() P.plot({1, 2}, {1, 2, 3}) end, "plot: x and y must have the same length, but x has 2 values and y has 3")
  raises(function() P.plot({0 / 0, 0 / 0}) end, "plot: nothing to plot (no finite values)")
  raises(function() P.plot({1, 2}, {widht = 3}) end, "plot: unknown option 'widht'")
  raises(function() P.plot({1, 2}, {width = 1}) end, "plot: width must be an integer in [2, 10000], got 1")
  raises(function() P.plot({1, 2}, {ylim = {1, 0}}) end, "plot: ylim must be a list {low, high} of two numbers with low < high")
  raises(function() P.plot({1, 2}, {labels = {"a", "b"}}) end, "plot: labels must be a list of 1 string(s)")
  raises(function() P.plot({1, 2}, {color = "rainbow"}) end, "plot: color must be 'auto', 'truecolor', '256', '16' or 'none'")
  raises(function() P.plot({1, 2}, {title = 3}) end, "plot: title must be a string")
  raises(function() P.plot(1, 2, 3, 4) end, "plot: expected plot(y) or plot(x, y)")
end)

-- ---- imshow ----------------------------------------------------------------

local RED, GREEN, BLUE, WHITE = {1.0, 0.0, 0.0}, {0.0, 1.0, 0.0}, {0.0, 0.0, 1.0}, {1.0, 1.0, 1.0}
-- a (3, H, W) float image from rows of RGB triples
local function chw(rows)
  local c = {{}, {}, {}}
  for k = 1, 3 do
    for r, row in ipairs(rows) do
      c[k][r] = {}
      for j, px in ipairs(row) do c[k][r][j] = px[k] end
    end
  end
  return torch.tensor(c)
end
local function cell(top, bottom)
  local f = ("\27[38;2;%d;%d;%dm"):format(top[1] * 255, top[2] * 255, top[3] * 255)
  local b = bottom and ("\27[48;2;%d;%d;%dm"):format(bottom[1] * 255, bottom[2] * 255, bottom[3] * 255) or ""
  return f .. b .. "▀"
end

test("imshow: half blocks, the top pixel in front, the bottom one behind", function()
  local img = chw({{RED, GREEN}, {BLUE, WHITE}})
  local s = captured(function() P.imshow(img, {color = "truecolor", width = 2, height = 1}) end)
  eq(s, cell(RED, BLUE) .. cell(GREEN, WHITE) .. "\27[0m\n", "2 x 2 image")
  -- an odd height: the last row has only foregrounds; a repeated colour is not repeated
  local odd = chw({{RED, RED}, {GREEN, GREEN}, {BLUE, BLUE}})
  s = captured(function() P.imshow(odd, {color = "truecolor", width = 2, height = 2}) end)
  eq(s, cell(RED, GREEN) .. "▀\27[0m\n" .. cell(BLUE) .. "▀\27[0m\n", "3 x 2 image")
  -- the same picture as (H, W, C), as uint8, and on the 256-colour palette
  eq(captured(function() P.imshow(img:permute(1, 2, 0), {color = "truecolor", width = 2, height = 1}) end),
    cell(RED, BLUE) .. cell(GREEN, WHITE) .. "\27[0m\n", "HWC")
  eq(captured(function() P.imshow((img * 255):to(torch.uint8), {color = "truecolor", width = 2, height = 1}) end),
    cell(RED, BLUE) .. cell(GREEN, WHITE) .. "\27[0m\n", "uint8")
  eq(captured(function() P.imshow(img, {color = "256", width = 2, height = 1}) end),
    "\27[38;5;196m\27[48;5;21m▀\27[38;5;46m\27[48;5;231m▀\27[0m\n", "256 colours")
  -- gray (H, W) images: each value on all three channels; 0.5 rounds to 128
  eq(captured(function() P.imshow(torch.tensor({{0.5}, {0.0}}), {color = "truecolor", width = 1, height = 1}) end),
    "\27[38;2;128;128;128m\27[48;2;0;0;0m▀\27[0m\n", "gray")
  -- values beyond [0, 1] are clamped, as save_image does
  eq(captured(function() P.imshow(torch.tensor({{2.0}, {-1.0}}), {color = "truecolor", width = 1, height = 1}) end),
    "\27[38;2;255;255;255m\27[48;2;0;0;0m▀\27[0m\n", "clamped")
end)

test("imshow: scaled to fit (area average down, whole factors up)", function()
  -- a 4 x 4 gray image shown 2 x 2: each pixel the mean of a 2 x 2 block
  local v = {{0, 0.2, 1, 1}, {0.2, 0.2, 1, 0.6}, {0, 0, 0.4, 0.4}, {0, 0.4, 0.4, 0.4}}
  local s = captured(function() P.imshow(torch.tensor(v), {color = "truecolor", width = 2, height = 1}) end)
  -- block means of the bytes 0, 51, 51, 51 -> 38.25 -> 38; 255, 255, 255, 153 -> 229.5 -> 230 (round half up)
  local means = {{38, 230}, {26, 102}}
  local function c(top, bot)
    return ("\27[38;2;%d;%d;%dm\27[48;2;%d;%d;%dm▀"):format(top, top, top, bot, bot, bot)
  end
  eq(s, c(means[1][1], means[2][1]) .. c(means[1][2], means[2][2]) .. "\27[0m\n", "area average")
  -- a 1 x 1 image in a 3 x 2-character box grows 3 times: 3 x 3 pixels, 2 lines
  s = captured(function() P.imshow(torch.ones(1, 1), {color = "truecolor", width = 3, height = 2}) end)
  eq(#lines_of(s), 2, "rows of a 3x upscaled pixel")
  eq(select(2, s:gsub("▀", "")), 6, "cells of a 3x upscaled pixel")
end)

test("imshow: a batch is a grid as make_grid lays it out", function()
  -- 3 one-pixel images, nrow 2, padding 1: a 2 x 2 grid of 1-pixel cells
  -- with 1-pixel borders: (2 * 2 + 1) x (2 * 2 + 1) = 5 x 5 pixels
  local b = torch.zeros(3, 3, 1, 1)
  b[0]:fill_(1)
  local g = data.make_grid(b, {nrow = 2, padding = 1})
  eq(T.fmt(g.shape:totable()), "{3, 5, 5}", "grid shape")
  local by_hand = torch.zeros(3, 5, 5)
  by_hand[{{}, 1, 1}] = 1 -- image 0 at (1, 1); images 1 and 2 are black like the padding
  ok(torch.equal(g, by_hand), "grid values")
  local s = captured(function() P.imshow(b, {nrow = 2, padding = 1, color = "truecolor", width = 5, height = 3}) end)
  eq(#lines_of(s), 3, "5 pixel rows in 3 lines")
  ok(s:find("\27[48;2;255;255;255m", 1, true), "the white pixel (row 1: a background)")
  -- pad_value, normalize and value_range pass through
  local n = data.make_grid(torch.tensor({{{{-1.0, 1.0}}}, {{{0.0, 3.0}}}}), {normalize = true, padding = 0})
  T.close(n, {{{0, 0.5, 0.25, 1}}, {{0, 0.5, 0.25, 1}}, {{0, 0.5, 0.25, 1}}}, 1e-6, 1e-6, "normalize by min and max")
  local e = data.make_grid(torch.tensor({{{{-1.0, 1.0}}}, {{{0.0, 3.0}}}}), {normalize = true, scale_each = true, padding = 0})
  T.close(e:select(0, 0), {{0, 1, 0, 1}}, 1e-6, 1e-6, "scale_each")
  local r = data.make_grid(torch.tensor({{0.0, 2.0}}), {normalize = true, value_range = {0, 4}})
  raises(function() data.make_grid(torch.zeros(0, 1, 4, 4)) end, "make_grid: the batch holds no images (shape (0, 1, 4, 4))")
  T.close(r, {{{0, 0.5}}, {{0, 0.5}}, {{0, 0.5}}}, 1e-6, 1e-6, "value_range")
  local p = data.make_grid({torch.zeros(1, 1, 1), torch.zeros(1, 1, 1)}, {padding = 1, pad_value = 0.5})
  eq(T.fmt(p.shape:totable()), "{3, 3, 5}", "a list of images")
  eq(p[{0, 0, 0}]:item(), 0.5, "pad_value")
  eq(p[{0, 1, 1}]:item(), 0.0, "image pixel")
end)

test("imshow: says why it draws nothing without 24-bit or 256 colours", function()
  local img = torch.rand(3, 2, 2)
  local s = captured(function() P.imshow(img, {color = "none"}) end)
  eq(s, "imshow: no image shown: colour is turned off (color = 'none'); it needs 24-bit or 256 colours " ..
    "(TENSH_COLOR=truecolor or {color = 'truecolor'} forces them; data.save_image(t, 'x.png') writes a file)\n", "none")
  s = captured(function() P.imshow(img, {color = "16"}) end)
  ok(s:find("imshow: no image shown: the terminal shows only 16 colours", 1, true), s)
  ok(not s:find("\27", 1, true), "no escapes")
end)

test("auto colour: a pipe gets no escapes; TENSH_COLOR forces a mode", function()
  local code = "local P = require 'tensh.plot'; P.imshow(torch.ones(3, 1, 1), {width = 1, height = 1}); P.plot({1, 2}, {3, 1}, {width = 4, height = 2})"
  local function run(env)
    local p = assert(io.popen(("%s %s/tensh -e %q 2>&1"):format(env, build, code)))
    local out = p:read("a")
    p:close()
    return out
  end
  local plain = run("env -u TENSH_COLOR")
  ok(plain:find("imshow: no image shown: stdout is not a terminal", 1, true), plain)
  ok(not plain:find("\27", 1, true), "no escapes in a pipe")
  ok(plain:find("3 ┤⠑⢄", 1, true) and plain:find("└", 1, true), "the plot is still drawn: " .. plain)
  local forced = run("TENSH_COLOR=truecolor")
  ok(forced:find("\27[38;2;255;255;255m▀\27[0m", 1, true), "forced truecolor: " .. forced)
  ok(forced:find("3 ┤\27[38;2;31;119;180m⠑⢄\27[0m\n", 1, true), "colour ends where the line's dots do: " .. forced)
  ok(run("NO_COLOR=1 TENSH_COLOR=auto"):find("NO_COLOR is set", 1, true), "NO_COLOR")
  raises(function() P.imshow(torch.ones(1, 1), {color = "auto", width = "x"}) end, "imshow: width must be an integer")
end)

test("imshow: argument errors", function()
  raises(function() P.imshow("x") end, "imshow: expected an image tensor, got string")
  raises(function() P.imshow(torch.ones(2, 2, 2)) end, "imshow: cannot tell the channels of a (2, 2, 2) image")
  raises(function() P.imshow(torch.ones(5)) end, "imshow: expected an image (H, W), (C, H, W), (H, W, C) or a batch (N, C, H, W), got shape (5)")
  raises(function() P.imshow(torch.ones(2, 2, 2, {dtype = torch.int32})) end, "imshow: expected float values in [0, 1] or uint8 values, got a int32 tensor")
  raises(function() P.imshow(torch.ones(0, 3)) end, "imshow: the image is empty")
  raises(function() P.imshow(torch.ones(3, 2, 2), {dataformats = "XYZ"}) end, "imshow: dataformats must be one of")
  raises(function() P.imshow(torch.ones(3, 2, 2), {dataformats = "HW"}) end, "imshow: dataformats 'HW' needs a 2-D tensor")
  raises(function() P.imshow(torch.ones(2, 2, 2), {dataformats = "CHW"}) end, "imshow: an image has 1 (gray), 3 (RGB) or 4 (RGBA) channels, got 2")
  raises(function() P.imshow(torch.ones(3, 2, 2), {nrows = 2}) end, "imshow: unknown option 'nrows'")
  raises(function() data.make_grid(torch.ones(3, 2, 2), {nrow = 0}) end, "make_grid: nrow must be an integer >= 1, got 0")
  raises(function() data.make_grid(torch.ones(3, 2, 2), {value_range = {1}}) end, "make_grid: value_range must be a list {min, max}")
  raises(function() data.make_grid({torch.ones(3, 2, 2), torch.ones(3, 1, 1)}) end, "make_grid: the images of a list must have one shape")
  raises(function() data.make_grid({1}) end, "make_grid: the list of images must hold tensors, got number at [1]")
end)

test("plot as a picture (the Jupyter kernel's PNG): a 2-pixel line in the series' colour", function()
  local F = require "tensh.figure"
  local img = F.png_picture(P.figure("plot", {0.5, 0.5}, {ylim = {0, 1}}))
  eq(T.fmt(img.shape:totable()), "{3, 400, 640}", "default size")
  eq(img.dtype, torch.uint8, "dtype")
  -- rows holding tab10 blue (31, 119, 180): two adjacent rows, each across most of the width
  local blue = img[0]:eq(31):logical_and(img[1]:eq(119)):logical_and(img[2]:eq(180))
  local per_row = blue:sum(1):tolist()
  local rows = {}
  for y, n in ipairs(per_row) do if n > 0 then rows[#rows + 1] = {y - 1, n} end end
  eq(#rows, 2, "rows with the line")
  eq(rows[2][1], rows[1][1] + 1, "adjacent rows")
  ok(rows[1][2] > 500 and rows[1][2] < 640, "a line across the plot: " .. rows[1][2])
  ok(math.abs(rows[1][1] - 200) < 40, "near the middle of the height: " .. rows[1][1])
  -- the paper is white, labels and the frame are dark
  eq(img[{{}, 0, 639}]:tolist()[1], 255, "white corner")
  ok(img:lt(100):sum():item() > 500, "dark pixels of text and frame")
  -- several series: a legend box with each colour
  local two = F.png_picture(P.figure("plot", {{1, 2}, {2, 1}}, {labels = {"a", "b"}, width = 40, height = 10}))
  eq(T.fmt(two.shape:totable()), "{3, 240, 320}", "size from width and height")
  local orange = two[0]:eq(255):logical_and(two[1]:eq(127)):logical_and(two[2]:eq(14))
  ok(orange:sum():item() > 100, "the second series in orange")
end)

test("plot and imshow are the prompt's globals (tensh.shell)", function()
  local shell = require "tensh.shell"
  eq(shell.plot, P.plot, "shell.plot")
  eq(shell.imshow, P.imshow, "shell.imshow")
  local p = assert(io.popen(("printf 'plot({1, 2}, {width = 4, height = 2, color = \"none\"})\\n' | %s/tensh -i 2>&1"):format(build)))
  local out = p:read("a")
  p:close()
  ok(out:find("└", 1, true), "plot at the prompt: " .. out)
end)

T.run()
