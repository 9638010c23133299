-- data.read_image / save_image / encode_png / decode_png: the PNG codec
-- (src/data/png.c). The decoder against files PIL wrote and files written
-- by hand (tests/fixtures/png/gen_png_fixture.py: every colour type and bit
-- depth, the five filters, Adam7, tRNS), with the read modes worked out here
-- from the stored pixels; save_image against torchvision's bytes for the
-- same tensors; round trips; PIL reading tensh's files where python3 has
-- PIL; and corrupt files (every truncation, every bit flipped, flips behind
-- a repaired CRC) that must give errors, never a crash.
local T = require "harness"
local test, eq, ok, raises = T.test, T.eq, T.ok, T.raises

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local dir = here .. "../fixtures/png/"
local fixture = dofile(dir .. "png_cases.lua")

local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p '" .. tmp .. "'")
local function path(name) return tmp .. "/" .. name end

local read_all, write_all = T.read_file, T.write_file

local function flat(t) return t:reshape(-1):tolist() end
local function same(t, shape, data, what)
  eq(T.fmt(t.shape:totable()), T.fmt(shape), what .. " shape")
  eq(t.dtype, torch.uint8, what .. " dtype")
  local got = flat(t)
  for i = 1, #data do
    if got[i] ~= data[i] then
      error(("%s: element %d: expected %d, got %d"):format(what, i - 1, data[i], got[i]), 2)
    end
  end
end

-- The read modes from the pixels as stored (c channels, CHW flat), as
-- docs/api.md says: gray from colour as libpng's rgb_to_gray with
-- torchvision's coefficients (15-bit fixed point, truncated), alpha 255
-- where there is none, gray repeated into RGB.
local function gray_of(r, g, b)
  if r == g and r == b then return r end
  return (9794 * r + 19234 * g + 3740 * b) >> 15
end
local function convert(case, mode)
  local c, h, w = case.shape[1], case.shape[2], case.shape[3]
  local n = h * w
  local oc = ({GRAY = 1, GRAY_ALPHA = 2, RGB = 3, RGB_ALPHA = 4})[mode]
  local out = {}
  for i = 1, n do
    local px = {}
    for k = 1, c do px[k] = case.data[(k - 1) * n + i] end
    local a = (c == 2 or c == 4) and px[c] or 255
    local v
    if oc <= 2 then
      v = {c >= 3 and gray_of(px[1], px[2], px[3]) or px[1], a}
    else
      v = {px[1], c >= 3 and px[2] or px[1], c >= 3 and px[3] or px[1], a}
    end
    for k = 1, oc do out[(k - 1) * n + i] = v[k] end
  end
  return {oc, h, w}, out
end

test("read_image: PIL's files and hand-made ones, as stored", function()
  ok(#fixture.files >= 20, "fixture files")
  for _, case in ipairs(fixture.files) do
    same(data.read_image(dir .. case.file), case.shape, case.data, case.file .. " (" .. case.note .. ")")
    same(data.read_image(dir .. case.file, {mode = "UNCHANGED"}), case.shape, case.data, case.file .. " UNCHANGED")
  end
end)

test("read_image: GRAY, GRAY_ALPHA, RGB and RGB_ALPHA", function()
  for _, case in ipairs(fixture.files) do
    for _, mode in ipairs({"GRAY", "GRAY_ALPHA", "RGB", "RGB_ALPHA"}) do
      local shape, expected = convert(case, mode)
      same(data.read_image(dir .. case.file, {mode = mode}), shape, expected, case.file .. " " .. mode)
    end
  end
  -- the mode's spellings: data.ImageReadMode, lower case, RGBA
  local f = dir .. "pil_RGB.png"
  ok(torch.equal(data.read_image(f, {mode = data.ImageReadMode.GRAY}), data.read_image(f, {mode = "gray"})), "gray")
  ok(torch.equal(data.read_image(f, {mode = "RGBA"}), data.read_image(f, {mode = "RGB_ALPHA"})), "RGBA alias")
end)

test("decode_png and encode_png: bytes in tensors (and strings)", function()
  local bytes = read_all(dir .. "hand_mixed.png")
  local t = torch.tensor({bytes:byte(1, -1)}, {dtype = torch.uint8})
  local a = data.decode_png(t)
  ok(torch.equal(a, data.read_image(dir .. "hand_mixed.png")), "decode_png of a tensor")
  ok(torch.equal(data.decode_png(bytes, {mode = "RGB"}), data.read_image(dir .. "hand_mixed.png", {mode = "RGB"})), "of a string")
  local e = data.encode_png(a)
  eq(e.dtype, torch.uint8, "encode_png dtype")
  eq(e:dim(), 1, "encode_png is 1-D")
  ok(torch.equal(data.decode_png(e), a), "encode then decode")
  local e0 = data.encode_png(a, {compression_level = 0})
  ok(e0:numel() > a:numel(), "level 0 stores: " .. e0:numel())
  ok(torch.equal(data.decode_png(e0), a), "level 0 round trip")
end)

test("round trips of 1 to 4 channels, odd sizes, uint8 and float, on the test device", function()
  local sizes = {{1, 1}, {1, 17}, {19, 1}, {33, 47}, {64, 3}}
  for c = 1, 4 do
    for _, hw in ipairs(sizes) do
      local u = torch.randint(0, 256, {c, hw[1], hw[2]}):to(torch.uint8)
      local e = data.encode_png(u)
      local back = data.decode_png(e)
      ok(torch.equal(back, u:cpu()), ("uint8 %d x %d x %d"):format(c, hw[1], hw[2]))
    end
  end
  -- a float image: bytes round(255 x) clamped, the checkpoint of save_image
  local x = torch.rand(3, 21, 13) * 1.2 - 0.1
  data.save_image(x, path("f.png"))
  local expected = (x * 255 + 0.5):clamp(0, 255):to(torch.uint8)
  ok(torch.equal(data.read_image(path("f.png")), expected:cpu()), "float save_image")
  -- smooth and noisy images big enough for several IDAT chunks (1 MiB each)
  local big = torch.randint(0, 256, {3, 700, 700}):to(torch.uint8)
  data.save_image(big, path("big.png"))
  ok(torch.equal(data.read_image(path("big.png")), big:cpu()), "700 x 700 noise")
  local ramp = torch.arange(0, 256):to(torch.uint8):view(1, 1, 256):expand(3, 40, 256)
  data.save_image(ramp, path("ramp.png")) -- a non-contiguous view
  ok(torch.equal(data.read_image(path("ramp.png")), ramp:cpu():contiguous()), "expanded ramp")
  ok(#read_all(path("ramp.png")) < 3 * 40 * 256 / 4, "a ramp compresses (filters at work)")
  -- bool images are 0 and 255
  local b = torch.tensor({{true, false}})
  data.save_image(b, path("b.png"))
  same(data.read_image(path("b.png")), {3, 1, 2}, {255, 0, 255, 0, 255, 0}, "bool")
end)

test("save_image makes torchvision's bytes (make_grid, rounding, normalize)", function()
  for _, case in ipairs(fixture.save_image) do
    local x = torch.tensor(case.input.data):view(case.input.shape)
    local p = path("s.png")
    data.save_image(x, p, next(case.opts) and case.opts or nil)
    local got = data.read_image(p):permute(1, 2, 0):contiguous():to(torch.int64)
    eq(T.fmt(got.shape:totable()), T.fmt(case.expected.shape), case.note .. " shape")
    local g = flat(got)
    for i = 1, #case.expected.data do
      if g[i] ~= case.expected.data[i] then
        error(("%s: byte %d: expected %d, got %d"):format(case.note, i - 1, case.expected.data[i], g[i]))
      end
    end
  end
end)

test("PIL reads tensh's PNGs", function()
  local py = T.python_with("PIL.Image, numpy")
  if not py then T.skip("python3 with PIL and numpy is not installed") end
  local imgs, files = {}, {}
  for c = 1, 4 do
    local u = torch.randint(0, 256, {c, 9, 14}):to(torch.uint8)
    imgs[c] = u:cpu()
    files[c] = path("pil" .. c .. ".png")
    write_all(files[c], string.char(table.unpack(data.encode_png(u):tolist())))
  end
  -- and a grid from save_image
  local batch = torch.rand(5, 3, 4, 6)
  data.save_image(batch, path("grid.png"), {nrow = 3})
  imgs[5], files[5] = data.make_grid(batch, {nrow = 3}), path("grid.png")
  local script = [[
import sys
import numpy as np
from PIL import Image
for f in sys.argv[1:]:
    im = Image.open(f)
    a = np.array(im)
    a = a[:, :, None] if a.ndim == 2 else a
    print(im.mode, " ".join(str(v) for v in a.transpose(2, 0, 1).reshape(-1)))
]]
  local p = io.popen(py .. " -c '" .. script .. "' " .. table.concat(files, " ") .. " 2>&1")
  local lines = {}
  for l in p:lines() do lines[#lines + 1] = l end
  p:close()
  eq(#lines, 5, "PIL's lines: " .. table.concat(lines, "\n"))
  local modes = {"L", "LA", "RGB", "RGBA", "RGB"}
  for i = 1, 5 do
    local mode, values = lines[i]:match("^(%S+) (.*)$")
    eq(mode, modes[i], "PIL's mode of file " .. i)
    local expected = i == 5 and flat((imgs[5] * 255 + 0.5):clamp(0, 255):to(torch.uint8)) or flat(imgs[i])
    local k = 0
    for v in values:gmatch("%d+") do
      k = k + 1
      if tonumber(v) ~= expected[k] then error(("file %d value %d: PIL read %s, tensh wrote %d"):format(i, k - 1, v, expected[k])) end
    end
    eq(k, #expected, "values PIL read from file " .. i)
  end
end)

test("corrupt files: every truncation, every flipped bit, flips behind a good CRC", function()
  local good = read_all(dir .. "hand_pal4_trns.png")
  local reference = data.decode_png(good)
  -- every prefix is refused
  for n = 0, #good - 1 do
    local okd, err = pcall(data.decode_png, good:sub(1, n))
    ok(not okd, "a prefix of " .. n .. " bytes decoded")
    ok(tostring(err):find("decode_png: ", 1, true), "message names decode_png: " .. tostring(err))
  end
  -- every bit flipped: an error, or (in an ancillary chunk's bytes) the same
  -- image; tRNS is ancillary too: damaged, it is dropped (the opaque image)
  local trns_at = good:find("tRNS", 1, true) - 4
  local trns_end = trns_at + 12 + string.unpack(">I4", good, trns_at) - 1
  local decoded, refused = 0, 0
  for i = 1, #good do
    for bit = 0, 7 do
      local s = good:sub(1, i - 1) .. string.char(good:byte(i) ~ (1 << bit)) .. good:sub(i + 1)
      local okd, r = pcall(data.decode_png, s)
      if okd then
        decoded = decoded + 1
        local same_image = torch.equal(r, reference)
        local opaque = i >= trns_at and i <= trns_end and torch.equal(r, reference:narrow(0, 0, 3))
        ok(same_image or opaque, ("byte %d bit %d: decoded to another image"):format(i - 1, bit))
      else
        refused = refused + 1
      end
    end
  end
  ok(refused >= 8 * #good - 8 * 16, ("flips refused: %d of %d"):format(refused, 8 * #good))
  -- flips inside chunk data with the CRC repaired reach IHDR, PLTE, tRNS and zlib
  local function crc32(s)
    local c = 0xFFFFFFFF
    for k = 1, #s do
      c = c ~ s:byte(k)
      for _ = 1, 8 do c = (c & 1 == 1) and ((c >> 1) ~ 0xEDB88320) or (c >> 1) end
    end
    return c ~ 0xFFFFFFFF
  end
  for _, name in ipairs({"hand_pal4_trns.png", "hand_adam7_gray2.png", "hand_rgba16.png", "pil_RGBA.png"}) do
    local s = read_all(dir .. name)
    local pos = 9
    while pos <= #s do
      local len = string.unpack(">I4", s, pos)
      local body = s:sub(pos + 4, pos + 7 + len) -- type and data
      for j = 5, #body do
        for _, bit in ipairs({0, 3, 7}) do
          local b = body:sub(1, j - 1) .. string.char(body:byte(j) ~ (1 << bit)) .. body:sub(j + 1)
          local m = s:sub(1, pos + 3) .. b .. string.pack(">I4", crc32(b)) .. s:sub(pos + 12 + len)
          local okd, r = pcall(data.decode_png, m)
          ok(okd or tostring(r):find("decode_png: ", 1, true), tostring(r))
          if okd then ok(r:dim() == 3 and r.dtype == torch.uint8, "a decoded image") end
        end
      end
      pos = pos + 12 + len
    end
  end
end)

test("errors name the file and what is wrong", function()
  write_all(path("text.png"), "hello, this is not an image at all")
  raises(function() data.read_image(path("text.png")) end, path("text.png") .. ": not a PNG file")
  raises(function() data.read_image(path("missing.png")) end, "cannot open '" .. path("missing.png") .. "'")
  raises(function() data.read_image(tmp) end, "cannot read '" .. tmp .. "'")
  local s = read_all(dir .. "pil_RGB.png")
  write_all(path("cut.png"), s:sub(1, #s - 20))
  raises(function() data.read_image(path("cut.png")) end, "corrupt or unsupported PNG")
  write_all(path("crc.png"), s:sub(1, 20) .. string.char(s:byte(21) ~ 1) .. s:sub(22))
  raises(function() data.read_image(path("crc.png")) end, "the CRC of the IHDR chunk does not match")
  raises(function() data.read_image(dir .. "pil_RGB.png", {mode = "CMYK"}) end, "read_image: mode must be one of")
  raises(function() data.read_image(dir .. "pil_RGB.png", {mdoe = "RGB"}) end, "read_image: unknown option 'mdoe'")
  raises(function() data.read_image(42) end, "read_image: path must be a file path, got number")
  raises(function() data.decode_png(torch.zeros(3)) end, "decode_png: expected the PNG's bytes as a 1-D uint8 tensor")
  raises(function() data.decode_png({}) end, "decode_png: expected the PNG's bytes as a 1-D uint8 tensor or a string, got table")
  raises(function() data.save_image(torch.rand(3, 4, 4), path("x.jpg")) end, "save_image: tensh writes PNG files only")
  raises(function() data.save_image(torch.rand(3, 4, 4), 5) end, "save_image: fp must be a file path, got number")
  raises(function() data.save_image(torch.rand(3, 4, 4), tmp .. "/no/such/dir/x.png") end, "cannot write '" .. tmp .. "/no/such/dir/x.png'")
  raises(function() data.save_image(torch.ones(3, 4, 4, {dtype = torch.int64}), path("i.png")) end,
    "save_image: expected float values in [0, 1] or uint8 values, got a int64 tensor")
  raises(function() data.save_image(torch.rand(5, 4, 4), path("c.png")) end, "save_image: expected an image (C, H, W) with 1 to 4 channels, got shape (5, 4, 4)")
  raises(function() data.save_image(torch.rand(3, 0, 4), path("e.png")) end, "save_image: the image is empty")
  raises(function() data.save_image(torch.rand(3, 4, 4), path("o.png"), {nrows = 2}) end, "save_image: unknown option 'nrows'")
  raises(function() data.encode_png(torch.rand(3, 4, 4), {compression_level = 10}) end, "encode_png: compression_level must be an integer in [0, 9], got 10")
  raises(function() data.encode_png("x") end, "encode_png: expected an image tensor (C, H, W), got string")
end)

test("cleanup", function()
  os.execute("rm -rf '" .. tmp .. "'")
  eq(io.open(tmp .. "/f.png"), nil, "temporary files removed")
end)

T.run()
