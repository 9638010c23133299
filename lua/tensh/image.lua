-- Images as tensors, as torchvision lays them out: make_grid (a batch tiled
-- into one image, torchvision.utils.make_grid's layout and padding), the
-- conversion of float [0, 1] or uint8 images to bytes that save_image and
-- imshow share, and data.save_image / data.read_image over the PNG codec in
-- C (src/data/png.c, bound as torch._image). The per-pixel work is tensor
-- ops or C; Lua only arranges.
local A = require "tensh.args"
local raise = A.raise
local C = torch._image
local M = {}

local function is_int(v) return math.type(v) == "integer" or (type(v) == "number" and v == math.floor(v)) end

-- A tensor of images from a tensor or a Lua list of same-shape tensors (stacked).
local function as_tensor(fn, x)
  if torch.is_tensor(x) then return x end
  if A.is_plain_table(x) and #x > 0 then
    for i, t in ipairs(x) do
      if not torch.is_tensor(t) then raise("%s: the list of images must hold tensors, got %s at [%d]", fn, A.typename(t), i) end
    end
    local ok, r = pcall(torch.stack, x, 0)
    if not ok then raise("%s: the images of a list must have one shape (%s)", fn, (tostring(r):gsub("^[^:]*:%d+: ", ""))) end
    return r
  end
  raise("%s: expected an image tensor or a list of them, got %s", fn, A.typename(x))
end

local function check_value_range(fn, vr)
  if vr == nil then return nil end
  if not A.is_plain_table(vr) or type(vr[1]) ~= "number" or type(vr[2]) ~= "number" or #vr ~= 2 then
    raise("%s: value_range must be a list {min, max} of two numbers, got %s", fn, A.show(vr))
  end
  return vr
end

local function nonneg_int(fn, what, v, dflt, min)
  if v == nil then return dflt end
  min = min or 0
  if type(v) ~= "number" or not is_int(v) or v < min or v > 1e6 then
    raise("%s: %s must be an integer >= %d, got %s", fn, what, min, A.show(v))
  end
  return math.tointeger(v)
end

local GRID_OPTS = {nrow = true, padding = true, normalize = true, value_range = true, scale_each = true, pad_value = true}
M.GRID_OPTS = GRID_OPTS

local function check_image_dtype(fn, t)
  local d = t.dtype
  if d ~= torch.uint8 and d ~= torch.bool and not A.is_floating_dtype(d) then
    raise("%s: expected float values in [0, 1] or uint8 values, got a %s tensor", fn, (tostring(d):gsub("^torch%.", "")))
  end
end

-- torchvision.utils.make_grid: (B, C, H, W) or a list of (C, H, W) images
-- tiled nrow to a row, `padding` pixels of pad_value around and between
-- them; one image comes back as it is (padding only applies to a grid);
-- one-channel images become three. normalize shifts each value into [0, 1]
-- by the whole batch's min and max (each image's with scale_each), or by
-- value_range = {min, max}.
function M.make_grid(tensor, opts)
  local fn = "make_grid"
  opts = A.check_opts(fn, opts, GRID_OPTS)
  local t = as_tensor(fn, tensor)
  check_image_dtype(fn, t)
  local nrow = nonneg_int(fn, "nrow", opts.nrow, 8, 1)
  local padding = nonneg_int(fn, "padding", opts.padding, 2)
  local pad_value = opts.pad_value or 0
  if type(pad_value) ~= "number" then raise("%s: pad_value must be a number, got %s", fn, A.show(pad_value)) end
  local value_range = check_value_range(fn, opts.value_range)
  if t:dim() == 2 then t = t:unsqueeze(0) end
  if t:dim() == 3 then
    if t:size(0) == 1 then t = torch.cat({t, t, t}, 0) end
    t = t:unsqueeze(0)
  end
  if t:dim() ~= 4 then
    raise("%s: expected (H, W), (C, H, W) or (B, C, H, W) images, got a tensor of shape (%s)", fn,
      table.concat(t.shape:totable(), ", "))
  end
  if t:size(0) == 0 then -- torchvision divides by zero (ZeroDivisionError)
    raise("%s: the batch holds no images (shape (%s))", fn, table.concat(t.shape:totable(), ", "))
  end
  if t:size(1) == 1 then t = torch.cat({t, t, t}, 1) end
  if opts.normalize then
    t = t:to(t.dtype == torch.float64 and torch.float64 or torch.float32):clone()
    local function norm(img, lo, hi)
      img:clamp_(lo, hi)
      img:sub_(lo):div_(math.max(hi - lo, 1e-5))
    end
    local function norm_range(img)
      if value_range then norm(img, value_range[1], value_range[2])
      elseif img:numel() > 0 then norm(img, img:min():item(), img:max():item()) end
    end
    if opts.scale_each then
      for i = 0, t:size(0) - 1 do norm_range(t:select(0, i)) end
    else
      norm_range(t)
    end
  end
  if t:size(0) == 1 then return t:squeeze(0) end
  local n, c, h, w = t:size(0), t:size(1), t:size(2), t:size(3)
  local xmaps = math.min(nrow, n)
  local ymaps = (n + xmaps - 1) // xmaps
  local height, width = h + padding, w + padding
  local grid = torch.full({c, height * ymaps + padding, width * xmaps + padding}, pad_value,
    {dtype = t.dtype, device = t.device})
  local k = 0
  for y = 0, ymaps - 1 do
    for x = 0, xmaps - 1 do
      if k >= n then break end
      grid:narrow(1, y * height + padding, height - padding):narrow(2, x * width + padding, width - padding)
        :copy_(t:select(0, k))
      k = k + 1
    end
  end
  return grid
end

-- Image bytes as save_image makes them: uint8 as it is, bool as 0/255, floats
-- as round(255 x) clamped to [0, 255] (NaN as 0).
function M.to_uint8(t)
  if t.dtype == torch.uint8 then return t end
  if t.dtype == torch.bool then return t:to(torch.uint8) * 255 end
  local f = t:to(t.dtype == torch.float64 and torch.float64 or torch.float32)
  return f:nan_to_num(0):mul(255):add(0.5):clamp(0, 255):to(torch.uint8)
end

-- An image's layout from its shape, or from dataformats ("CHW", "HWC", "HW",
-- "NCHW", "NHWC", as TensorBoard names them): the tensor as (C, H, W) or
-- (N, C, H, W). A 3-D tensor is CHW when its first dim is 1, 3 or 4, else
-- HWC when its last is.
local LAYOUTS = {HW = true, CHW = true, HWC = true, NCHW = true, NHWC = true}
function M.channels_first(fn, t, dataformats)
  local d = t:dim()
  local fmt = dataformats
  if fmt ~= nil then
    if type(fmt) ~= "string" or not LAYOUTS[fmt:upper()] then
      raise("%s: dataformats must be one of 'CHW', 'HWC', 'HW', 'NCHW', 'NHWC', got %s", fn, A.show(fmt))
    end
    fmt = fmt:upper()
    if #fmt ~= d then
      raise("%s: dataformats '%s' needs a %d-D tensor, got shape (%s)", fn, fmt, #fmt, table.concat(t.shape:totable(), ", "))
    end
  elseif d == 2 then fmt = "HW"
  elseif d == 3 then
    local c0, c2 = t:size(0), t:size(2)
    if c0 == 1 or c0 == 3 or c0 == 4 then fmt = "CHW"
    elseif c2 == 1 or c2 == 3 or c2 == 4 then fmt = "HWC"
    else
      raise("%s: cannot tell the channels of a (%s) image: 1, 3 or 4 channels first (C, H, W) or last (H, W, C)", fn,
        table.concat(t.shape:totable(), ", "))
    end
  elseif d == 4 then fmt = "NCHW"
  else
    raise("%s: expected an image (H, W), (C, H, W), (H, W, C) or a batch (N, C, H, W), got shape (%s)", fn,
      table.concat(t.shape:totable(), ", "))
  end
  if fmt == "HW" then t = t:unsqueeze(0)
  elseif fmt == "HWC" then t = t:permute(2, 0, 1)
  elseif fmt == "NHWC" then t = t:permute(0, 3, 1, 2) end
  local c = t:size(#fmt == 4 and 1 or 0)
  if c ~= 1 and c ~= 3 and c ~= 4 then
    raise("%s: an image has 1 (gray), 3 (RGB) or 4 (RGBA) channels, got %d", fn, c)
  end
  if t:numel() == 0 then raise("%s: the image is empty (shape (%s))", fn, table.concat(t.shape:totable(), ", ")) end
  return t
end

-- ---- PNG files ---------------------------------------------------------------------

-- torchvision.io.ImageReadMode: the channels read_image returns
M.ImageReadMode = {UNCHANGED = "UNCHANGED", GRAY = "GRAY", GRAY_ALPHA = "GRAY_ALPHA", RGB = "RGB",
                   RGB_ALPHA = "RGB_ALPHA", RGBA = "RGB_ALPHA"}
local MODE_CODE = {UNCHANGED = 0, GRAY = 1, GRAY_ALPHA = 2, RGB = 3, RGB_ALPHA = 4}

local function mode_code(fn, mode)
  if mode == nil then return 0 end
  local m = type(mode) == "string" and rawget(M.ImageReadMode, mode:upper())
  if not m then
    raise("%s: mode must be one of 'UNCHANGED', 'GRAY', 'GRAY_ALPHA', 'RGB', 'RGB_ALPHA' (data.ImageReadMode), got %s", fn,
      A.show(mode))
  end
  return MODE_CODE[m]
end

local function check_level(fn, v)
  if v == nil then return 6 end
  if math.type(v) ~= "integer" and not (type(v) == "number" and v == math.floor(v)) or v < 0 or v > 9 then
    raise("%s: compression_level must be an integer in [0, 9], got %s", fn, A.show(v))
  end
  return math.tointeger(v)
end

-- A uint8 (H, W, C) contiguous CPU tensor of a (C, H, W) image, floats as save_image rounds them.
local function hwc_bytes(fn, t)
  check_image_dtype(fn, t)
  if t:dim() ~= 3 or t:size(0) < 1 or t:size(0) > 4 then
    raise("%s: expected an image (C, H, W) with 1 to 4 channels, got shape (%s)", fn, table.concat(t.shape:totable(), ", "))
  end
  if t:size(1) == 0 or t:size(2) == 0 then raise("%s: the image is empty (shape (%s))", fn, table.concat(t.shape:totable(), ", ")) end
  return M.to_uint8(t:detach()):to("cpu"):permute(1, 2, 0):contiguous()
end

local SAVE_OPTS = {format = true}
for k in pairs(GRID_OPTS) do SAVE_OPTS[k] = true end

-- A file path, checked here rather than by the codec (src/lua/largs.c's
-- lt_checkpath) so that a NUL byte in it is reported at the caller's line.
local function check_path(fn, what, path)
  if type(path) ~= "string" then raise("%s: %s must be a file path, got %s", fn, what, A.typename(path)) end
  local nul = path:find("\0", 1, true)
  if nul then raise("%s: the path holds a NUL byte (at byte %d); remove it", fn, nul - 1) end
end

-- torchvision.utils.save_image: tensor (C, H, W), (H, W) or a batch (B, C, H,
-- W) (as make_grid tiles it, with its options), floats in [0, 1] rounded to
-- bytes as round(255 x) clamped (uint8 as they are), written as a PNG.
function M.save_image(tensor, fp, opts)
  local fn = "save_image"
  opts = A.check_opts(fn, opts, SAVE_OPTS)
  check_path(fn, "fp", fp)
  local format = opts.format
  if format == nil then
    local ext = fp:match("%.([%w]+)$")
    format = ext and ext:lower() or "png"
  end
  if type(format) ~= "string" or format:lower() ~= "png" then
    raise("%s: tensh writes PNG files only, got format %s (name the file .png)", fn, A.show(format))
  end
  local t = as_tensor(fn, tensor)
  check_image_dtype(fn, t)
  local grid_opts = {}
  for k in pairs(GRID_OPTS) do grid_opts[k] = opts[k] end
  C.png_write(fp, hwc_bytes(fn, M.make_grid(t, grid_opts)))
end

-- torchvision.io.read_image for PNG files: a uint8 (C, H, W) CPU tensor.
function M.read_image(path, opts)
  local fn = "read_image"
  check_path(fn, "path", path)
  opts = A.check_opts(fn, opts, {mode = true})
  return C.png_read(path, mode_code(fn, opts.mode))
end

-- torchvision.io.encode_png: a uint8 (C, H, W) image (1 to 4 channels, floats
-- taken as save_image takes them) as the PNG's bytes in a 1-D uint8 tensor.
function M.encode_png(img, opts)
  local fn = "encode_png"
  opts = A.check_opts(fn, opts, {compression_level = true})
  if not torch.is_tensor(img) then raise("%s: expected an image tensor (C, H, W), got %s", fn, A.typename(img)) end
  return C.from_bytes(C.png_encode(hwc_bytes(fn, img), check_level(fn, opts.compression_level)))
end

-- torchvision.io.decode_png: PNG bytes (a 1-D uint8 tensor, or a Lua string) as uint8 (C, H, W).
function M.decode_png(input, opts)
  local fn = "decode_png"
  opts = A.check_opts(fn, opts, {mode = true})
  local bytes = input
  if torch.is_tensor(input) then
    if input.dtype ~= torch.uint8 or input:dim() ~= 1 then
      raise("%s: expected the PNG's bytes as a 1-D uint8 tensor, got a %s tensor of shape (%s)", fn,
        (tostring(input.dtype):gsub("^torch%.", "")), table.concat(input.shape:totable(), ", "))
    end
    bytes = C.bytes(input)
  elseif type(input) ~= "string" then
    raise("%s: expected the PNG's bytes as a 1-D uint8 tensor or a string, got %s", fn, A.typename(input))
  end
  return C.png_decode(bytes, mode_code(fn, opts.mode), fn)
end

-- ---- TensorBoard -----------------------------------------------------------------

-- tensorboard's make_grid (torch.utils.tensorboard._utils): up to 8 images
-- a row, no padding, black where a row ends early.
local function tb_grid(t)
  local n, c, h, w = t:size(0), t:size(1), t:size(2), t:size(3)
  local ncols = math.min(n, 8)
  local nrows = (n + ncols - 1) // ncols
  local canvas = torch.zeros({c, h * nrows, w * ncols}, {dtype = t.dtype, device = t.device})
  for i = 0, n - 1 do
    local y, x = i // ncols, i % ncols
    canvas:narrow(1, y * h, h):narrow(2, x * w, w):copy_(t:select(0, i))
  end
  return canvas
end

-- What PyTorch's SummaryWriter.add_image(s) encodes (summary.image): the
-- image laid out by dataformats ("NCHW" batches as a grid), one channel as
-- three, then uint8 as it is and any other dtype as x * 255 clipped to
-- [0, 255] and truncated; a uint8 (H, W, C) contiguous CPU tensor.
function M.tb_image(fn, img, dataformats)
  if not torch.is_tensor(img) then raise("%s: img_tensor must be a tensor, got %s", fn, A.typename(img)) end
  if type(dataformats) ~= "string" then raise("%s: dataformats must be a string such as 'CHW', got %s", fn, A.show(dataformats)) end
  local fmt = dataformats:upper()
  local wanted = ({[2] = "HW", [3] = "HWC", [4] = "NCHW"})[#fmt]
  local valid = wanted ~= nil
  for i = 1, #fmt do
    local ch = fmt:sub(i, i)
    if not (wanted or ""):find(ch, 1, true) or fmt:find(ch, i + 1, true) then valid = false end
  end
  if not valid then
    raise("%s: dataformats must name each of N, C, H, W once ('NCHW', 'NHWC') or C, H, W ('CHW', 'HWC') or H, W ('HW'), got %s",
      fn, A.show(dataformats))
  end
  if img:dim() ~= #fmt then
    raise("%s: dataformats '%s' needs a %d-D tensor, got shape (%s)", fn, fmt, #fmt, table.concat(img.shape:totable(), ", "))
  end
  if img:numel() == 0 then raise("%s: the image is empty (shape (%s))", fn, table.concat(img.shape:totable(), ", ")) end
  if img.dtype == torch.bool or not (A.is_floating_dtype(img.dtype) or img.dtype == torch.uint8) then
    img = img:to(torch.float32) -- integers and bools count as values in [0, 1], as in PyTorch
  end
  local order = {}
  for i = 1, #wanted do order[i] = fmt:find(wanted:sub(i, i), 1, true) - 1 end
  local t = img:detach():permute(table.unpack(order))
  if #fmt == 4 then
    if t:size(1) == 1 then t = torch.cat({t, t, t}, 1) end
    t = tb_grid(t):permute(1, 2, 0)
  elseif #fmt == 3 then
    if t:size(2) == 1 then t = torch.cat({t, t, t}, 2) end
  else
    t = torch.stack({t, t, t}, 2)
  end
  local c = t:size(2)
  if c ~= 3 and c ~= 4 then raise("%s: an image has 1, 3 or 4 channels, got %d", fn, c) end
  if t.dtype ~= torch.uint8 then
    t = (t:to(torch.float32) * 255):nan_to_num(0):clamp(0, 255):to(torch.uint8)
  end
  return t:to("cpu"):contiguous()
end

-- The PNG bytes (a Lua string) of a uint8 (C, H, W) picture, for the Jupyter kernel.
function M.png_string(img)
  return C.png_encode(hwc_bytes("png", img), 6)
end

M._is_int = is_int
M._nonneg_int = nonneg_int
M._check_image_dtype = check_image_dtype
return M
