-- tb.SummaryWriter: the event files are read back by an independent reader
-- written here in Lua (TFRecord frames, both masked CRC32Cs checked with a
-- CRC32C computed in Lua, the protobuf fields decoded by field number), and,
-- where python3 has tensorboard, by TensorBoard's own EventAccumulator.
local T = require "harness"
local test, eq, raises, close = T.test, T.eq, T.raises, T.close

-- ---- a reference CRC32C and protobuf reader, in plain Lua --------------------

local crc_tab = {}
for i = 0, 255 do
  local c = i
  for _ = 1, 8 do c = (c & 1 == 1) and ((c >> 1) ~ 0x82F63B78) or (c >> 1) end
  crc_tab[i] = c
end
local function crc32c(s)
  local c = 0xFFFFFFFF
  for i = 1, #s do c = crc_tab[(c ~ s:byte(i)) & 0xff] ~ (c >> 8) end
  return c ~ 0xFFFFFFFF
end
local function masked(s)
  local c = crc32c(s)
  return (((c >> 15) | (c << 17)) + 0xa282ead8) & 0xFFFFFFFF
end

local function read_all(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

-- The records of a TFRecord file, each CRC checked.
local function records(path)
  local s, pos, out = read_all(path), 1, {}
  while pos <= #s do
    T.ok(pos + 11 <= #s, "truncated record header at byte " .. pos - 1)
    local head = s:sub(pos, pos + 7)
    local len, hcrc = string.unpack("<I8I4", s, pos)
    eq(hcrc, masked(head), "length crc of record " .. #out + 1)
    local data = s:sub(pos + 12, pos + 11 + len)
    eq(#data, len, "record " .. #out + 1 .. " length")
    local dcrc = string.unpack("<I4", s, pos + 12 + len)
    eq(dcrc, masked(data), "data crc of record " .. #out + 1)
    out[#out + 1] = data
    pos = pos + 16 + len
  end
  return out
end

-- A protobuf message as {[field] = {values...}}: varints as integers,
-- fixed64/fixed32 as 8/4-byte strings, length-delimited as strings.
local function pb(s)
  local msg, pos = {}, 1
  local function varint()
    local v, shift = 0, 0
    while true do
      local b = s:byte(pos)
      pos = pos + 1
      v = v | ((b & 0x7f) << shift)
      if b < 0x80 then return v end
      shift = shift + 7
    end
  end
  while pos <= #s do
    local key = varint()
    local field, wire = key >> 3, key & 7
    local v
    if wire == 0 then v = varint()
    elseif wire == 1 then v = s:sub(pos, pos + 7); pos = pos + 8
    elseif wire == 5 then v = s:sub(pos, pos + 3); pos = pos + 4
    elseif wire == 2 then
      local n = varint()
      v = s:sub(pos, pos + n - 1)
      pos = pos + n
    else error("unexpected wire type " .. wire) end
    msg[field] = msg[field] or {}
    table.insert(msg[field], v)
  end
  return msg
end
local function f64(b) return string.unpack("<d", b) end
local function f32(b) return string.unpack("<f", b) end
local function one(m, f) return m[f] and m[f][1] end
local function packed_doubles(b)
  local t = {}
  for i = 1, #b, 8 do t[#t + 1] = string.unpack("<d", b, i) end
  return t
end

-- Events as Lua tables: {wall_time, step, file_version, values = {{tag, simple_value, histo, text, plugin}}}
local function events(path)
  local out = {}
  for _, r in ipairs(records(path)) do
    local m = pb(r)
    local e = {wall_time = f64(one(m, 1)), step = one(m, 2) or 0, file_version = one(m, 3), values = {}}
    if m[5] then
      for _, vb in ipairs(pb(one(m, 5))[1] or {}) do
        local v = pb(vb)
        local val = {tag = one(v, 1)}
        if v[2] then val.simple_value = f32(one(v, 2)) end
        if v[4] then
          local im = pb(one(v, 4))
          val.image = {height = one(im, 1), width = one(im, 2), colorspace = one(im, 3), png = one(im, 4)}
        end
        if v[5] then
          local h = pb(one(v, 5))
          val.histo = {min = f64(one(h, 1)), max = f64(one(h, 2)), num = f64(one(h, 3)), sum = f64(one(h, 4)),
                       sum_squares = f64(one(h, 5)), bucket_limit = packed_doubles(one(h, 6)),
                       bucket = packed_doubles(one(h, 7))}
        end
        if v[9] then
          local pd = pb(one(pb(one(v, 9)), 1))
          val.plugin = one(pd, 1)
          val.plugin_content = one(pd, 2) or ""
        end
        if v[8] then
          local tp = pb(one(v, 8))
          local shape = pb(one(tp, 2))
          local dims = {}
          for _, d in ipairs(shape[2] or {}) do dims[#dims + 1] = one(pb(d), 1) end
          val.tensor = {dtype = one(tp, 1), dims = dims, string_val = tp[8]}
        end
        e.values[#e.values + 1] = val
      end
    end
    out[#out + 1] = e
  end
  return out
end

-- A fresh directory for each case; the whole tree goes at the end.
local root = os.tmpname()
os.remove(root)
local ndirs = 0
local function fresh_dir()
  ndirs = ndirs + 1
  return ("%s_tb/run%d"):format(root, ndirs)
end
local function ls(dir)
  local p = io.popen("ls -1 '" .. dir .. "' 2>/dev/null")
  local t = {}
  for l in p:lines() do t[#t + 1] = l end
  p:close()
  return t
end
local function f32round(v) return string.unpack("<f", string.pack("<f", v)) end

-- ---- the cases -------------------------------------------------------------

test("the reference CRC32C matches the check vector", function()
  eq(crc32c("123456789"), 0xE3069283, "crc32c('123456789')")
  eq(crc32c(""), 0, "crc32c('')")
end)

test("event file name and the file_version header record", function()
  local dir = fresh_dir() .. "/a/b" -- nested, like mkdir -p
  local before = os.time()
  local w = tb.SummaryWriter(dir)
  local path = w:_event_file()
  w:close()
  local files = ls(dir)
  eq(#files, 1, "files in logdir")
  eq(dir .. "/" .. files[1], path, "event file path")
  local stamp, host, pid, counter = files[1]:match("^events%.out%.tfevents%.(%d+)%.(.+)%.(%d+)%.(%d+)$")
  T.ok(stamp, "name pattern: " .. files[1])
  T.ok(#stamp >= 10 and math.abs(tonumber(stamp) - before) <= 2, "unix time in the name: " .. stamp)
  local h = io.popen("hostname"):read("l")
  if h then eq(host, h, "hostname in the name") end
  local ev = events(path)
  eq(#ev, 1, "records")
  eq(ev[1].file_version, "brain.Event:2", "file_version")
  T.ok(math.abs(ev[1].wall_time - before) <= 2, "wall_time near now")
  eq(#ev[1].values, 0, "no summary")
  -- a second writer in the same directory gets its own file
  local w2 = tb.SummaryWriter(dir)
  T.ok(w2:_event_file() ~= path, "second file differs")
  w2:close()
  eq(#ls(dir), 2, "files after a second writer")
  eq(type(w.get_logdir), "function", "get_logdir exists")
  eq(torch.utils.tensorboard.SummaryWriter, tb.SummaryWriter, "torch.utils.tensorboard alias")
end)

test("add_scalar: tags, steps, float32 values, walltime", function()
  local dir = fresh_dir()
  local w = tb.SummaryWriter(dir)
  local vals = {}
  for i = 1, 20 do vals[i] = (math.random() - 0.5) * 10 ^ math.random(-3, 3) end
  for i, v in ipairs(vals) do w:add_scalar("train/loss", v, i - 1) end
  w:add_scalar("acc", torch.tensor(0.75), 7, 1234567.25)   -- a 0-dim tensor value, explicit walltime
  w:add_scalar("big", 3, 2 ^ 40)                             -- a float with an integral value as step
  w:add_scalar("neg", -1.5, -5)                               -- negative steps are 10-byte varints
  w:add_scalar("int_tensor", torch.tensor({{42}}), 1)
  w:add_scalar("nostep", 1.0)
  w:close()
  local ev = events(dir .. "/" .. ls(dir)[1])
  eq(#ev, 1 + #vals + 5, "records")
  for i, v in ipairs(vals) do
    local e = ev[i + 1]
    eq(#e.values, 1, "values in event " .. i)
    eq(e.values[1].tag, "train/loss", "tag")
    eq(e.step, i - 1, "step")
    eq(e.values[1].simple_value, f32round(v), "simple_value " .. i)
    T.ok(math.abs(e.wall_time - os.time()) < 5, "default walltime is now")
  end
  local e = ev[#vals + 2]
  eq(e.values[1].tag, "acc", "tensor scalar tag")
  eq(e.values[1].simple_value, 0.75, "tensor scalar value")
  eq(e.step, 7, "step")
  eq(e.wall_time, 1234567.25, "explicit walltime")
  eq(ev[#vals + 3].step, 1 << 40, "large step")
  eq(ev[#vals + 4].step, -5, "negative step")
  eq(ev[#vals + 4].values[1].simple_value, -1.5, "negative value")
  eq(ev[#vals + 5].values[1].simple_value, 42.0, "int tensor value")
  eq(ev[#vals + 6].step, 0, "missing step is 0")
end)

test("add_scalars: one sub-run directory per key, tagged main_tag", function()
  local dir = fresh_dir()
  local w = tb.SummaryWriter(dir)
  local ref = {}
  for step = 0, 3 do
    local d = {train = math.random(), val = math.random(), ["test set"] = step}
    ref[step] = d
    w:add_scalars("run/loss", d, step)
  end
  w:add_scalars("run/loss", {}, 9) -- nothing to write
  w:flush()
  w:close()
  local files = ls(dir)
  table.sort(files)
  eq(#files, 4, "main file + 3 sub-runs")
  eq(files[2], "run_loss_test set", "sub-run name ('/' in main_tag as '_')")
  eq(files[3], "run_loss_train", "sub-run name")
  eq(files[4], "run_loss_val", "sub-run name")
  eq(#events(dir .. "/" .. files[1]), 1, "the main file holds only the header")
  for _, key in ipairs({"train", "val", "test set"}) do
    local sub = dir .. "/run_loss_" .. key
    local inner = ls(sub)
    eq(#inner, 1, "one event file in " .. key)
    T.ok(inner[1]:find("tfevents", 1, true), "sub-run file name")
    local ev = events(sub .. "/" .. inner[1])
    eq(ev[1].file_version, "brain.Event:2", "sub-run header")
    eq(#ev, 5, "records in " .. key)
    for step = 0, 3 do
      eq(ev[step + 2].step, step, "step")
      eq(ev[step + 2].values[1].tag, "run/loss", "tag is main_tag")
      eq(ev[step + 2].values[1].simple_value, f32round(ref[step][key]), key .. " value at " .. step)
    end
  end
end)

-- PyTorch's histogram in plain Lua: np.histogram over edges, then the trim
-- that keeps the non-empty span plus one empty bucket on the left.
local function tf_edges()
  local pos, v = {}, 1e-12
  while v < 1e20 do pos[#pos + 1] = v; v = v * 1.1 end
  local e = {-math.huge}
  for i = #pos, 1, -1 do e[#e + 1] = -pos[i] end
  e[#e + 1] = 0
  for i = 1, #pos do e[#e + 1] = pos[i] end
  e[#e + 1] = math.huge
  return e
end
local function ref_histogram(x, edges)
  local counts = {}
  for i = 1, #edges - 1 do counts[i] = 0 end
  for _, v in ipairs(x) do
    for i = 1, #edges - 1 do
      if (v >= edges[i] and v < edges[i + 1]) or (i == #edges - 1 and v == edges[i + 1]) then
        counts[i] = counts[i] + 1
        break
      end
    end
  end
  local first, last
  for i, c in ipairs(counts) do
    if c > 0 then first = first or i; last = i end
  end
  local limits, bucket = {}, {0}
  for i = first, last + 1 do limits[#limits + 1] = edges[i] end
  for i = first, last do bucket[#bucket + 1] = counts[i] end
  local mn, mx, sum, sq = math.huge, -math.huge, 0, 0
  for _, v in ipairs(x) do
    mn, mx, sum, sq = math.min(mn, v), math.max(mx, v), sum + v, sq + v * v
  end
  return {min = mn, max = mx, num = #x, sum = sum, sum_squares = sq, bucket_limit = limits, bucket = bucket}
end
local function equal_edges(x, n)
  local lo, hi = math.huge, -math.huge
  for _, v in ipairs(x) do lo, hi = math.min(lo, v), math.max(hi, v) end
  if lo == hi then lo, hi = lo - 0.5, hi + 0.5 end
  local e = {}
  for i = 0, n - 1 do e[i + 1] = lo + i * (hi - lo) / n end
  e[n + 1] = hi
  return e
end

local function check_histo(h, ref, what)
  -- DBL_MAX in the file stands for the reference's infinity
  local limits = T.map(h.bucket_limit, function(v)
    if v == 1.7976931348623157e308 then return math.huge elseif v == -1.7976931348623157e308 then return -math.huge end
    return v
  end)
  close(limits, ref.bucket_limit, 1e-12, 0, what .. " bucket_limit")
  eq(#h.bucket, #ref.bucket, what .. " bucket count")
  close(h.bucket, ref.bucket, 0, 0, what .. " bucket")
  close({h.min, h.max, h.num}, {ref.min, ref.max, ref.num}, 1e-12, 0, what .. " min/max/num")
  close({h.sum, h.sum_squares}, {ref.sum, ref.sum_squares}, 1e-9, 1e-9, what .. " sum/sum_squares")
end

local function histos(w, dir)
  w:close()
  local out = {}
  for i, e in ipairs(events(dir .. "/" .. ls(dir)[1])) do
    if i > 1 then out[#out + 1] = {tag = e.values[1].tag, step = e.step, h = e.values[1].histo} end
  end
  return out
end

test("add_histogram: TensorBoard's default buckets on tensors and lists", function()
  local dir = fresh_dir()
  local w = tb.SummaryWriter(dir)
  local a = T.rand_list({30, 20}, -3, 3)
  local x = torch.tensor(a, {dtype = "float64"})
  w:add_histogram("weights", x, 5)
  w:add_histogram("weights_t", x:t(), 6)                        -- non-contiguous
  local b = T.rand_list({50}, -1e-3, 1e5)
  w:add_histogram("list", b, 7)                                  -- a plain Lua list
  w:add_histogram("nested", {{1, 2}, {0, -4}}, 8)                -- nested lists, with a 0
  w:add_histogram("ints", torch.tensor({3, 3, 3}), 9)            -- an int64 tensor, all equal
  w:add_histogram("scalar", torch.tensor(2.5), 10)               -- 0-dim
  w:add_histogram("huge", {1e25, -1e30, 1}, 11)                  -- beyond 1e20: the +-DBL_MAX buckets
  local h = histos(w, dir)
  local edges = tf_edges()
  eq(h[1].tag, "weights", "tag")
  eq(h[1].step, 5, "step")
  local flat_a = T.flat(a)
  check_histo(h[1].h, ref_histogram(flat_a, edges), "weights")
  local at = {}
  for j = 1, 20 do for i = 1, 30 do at[#at + 1] = a[i][j] end end
  check_histo(h[2].h, ref_histogram(at, edges), "weights_t")
  check_histo(h[3].h, ref_histogram(b, edges), "list")
  check_histo(h[4].h, ref_histogram({1, 2, 0, -4}, edges), "nested")
  check_histo(h[5].h, ref_histogram({3, 3, 3}, edges), "ints")
  check_histo(h[6].h, ref_histogram({2.5}, edges), "scalar")
  check_histo(h[7].h, ref_histogram({1e25, -1e30, 1}, edges), "huge")
  eq(h[5].h.bucket[2], 3.0, "all three equal values in one bucket")
end)

test("add_histogram: counted, 'auto' and explicit-edge bins as numpy", function()
  local dir = fresh_dir()
  local w = tb.SummaryWriter(dir)
  w:add_histogram("three", {0, 1, 1, 2, 3}, 0, {bins = 3})
  w:add_histogram("auto4", {1, 2, 3, 4}, 1, {bins = "auto"})
  local r = T.rand_list({200}, -5, 5)
  w:add_histogram("r10", torch.tensor(r, {dtype = "float64"}), 2, {bins = 10})
  w:add_histogram("edges", {0.5, 1.5, 2.5, 9, -3}, 3, {bins = {0, 1, 2, 3}}) -- 9 and -3 fall outside
  w:add_histogram("same", {2, 2}, 4, {bins = 4})                             -- min == max: [1.5, 2.5]
  w:add_histogram("sqrt", {1, 2, 3, 4, 5, 6, 7, 8, 9}, 5, {bins = "sqrt", walltime = 99.5})
  local h = histos(w, dir)
  -- by hand: edges 0,1,2,3 hold [0,1) {0}, [1,2) {1,1}, [2,3] {2,3}
  eq(T.fmt(h[1].h.bucket_limit), "{0.0, 1.0, 2.0, 3.0}", "three: limits")
  eq(T.fmt(h[1].h.bucket), "{0.0, 1.0, 2.0, 2.0}", "three: buckets")
  -- numpy.histogram([1,2,3,4], 'auto'): sturges width 1 < fd 1.89, so edges 1,2,3,4
  eq(T.fmt(h[2].h.bucket_limit), "{1.0, 2.0, 3.0, 4.0}", "auto: limits")
  eq(T.fmt(h[2].h.bucket), "{0.0, 1.0, 1.0, 2.0}", "auto: buckets")
  check_histo(h[3].h, ref_histogram(r, equal_edges(r, 10)), "r10")
  eq(T.fmt(h[4].h.bucket), "{0.0, 1.0, 1.0, 1.0}", "edges: outside values dropped")
  eq(h[4].h.num, 5.0, "edges: num counts every value")
  -- edges 1.5, 1.75, 2, 2.25, 2.5: both values in [2, 2.25)
  close(h[5].h.bucket_limit, {2.0, 2.25}, 0, 0, "same: limits")
  close(h[5].h.bucket, {0, 2}, 0, 0, "same: buckets")
  -- sqrt: 3 bins of width 8/3 over [1, 9]: {1,2,3}, {4,5,6}, {7,8,9}
  close(h[6].h.bucket, {0, 3, 3, 3}, 0, 0, "sqrt: buckets")
end)

test("add_text: the text plugin's DT_STRING tensor", function()
  local dir = fresh_dir()
  local w = tb.SummaryWriter(dir)
  local s = "hello **markdown**\nline two é \0 binary"
  w:add_text("notes", s, 3)
  w:add_text("empty", "", 4)
  w:close()
  local ev = events(dir .. "/" .. ls(dir)[1])
  local v = ev[2].values[1]
  eq(ev[2].step, 3, "step")
  eq(v.tag, "notes/text_summary", "tag (as PyTorch names it)")
  eq(v.plugin, "text", "plugin_name")
  eq(v.plugin_content, "", "plugin content (TextPluginData version 0)")
  eq(v.tensor.dtype, 7, "dtype DT_STRING")
  eq(T.fmt(v.tensor.dims), "{1}", "shape")
  eq(#v.tensor.string_val, 1, "one string")
  eq(v.tensor.string_val[1], s, "text bytes")
  eq(ev[3].values[1].tensor.string_val[1], "", "empty text")
end)

test("flush writes through; close, __close and __gc close the file", function()
  local dir = fresh_dir()
  local w = tb.SummaryWriter(dir, {flush_secs = 0})
  local path = w:_event_file()
  eq(#records(path), 1, "the header is on disk at once")
  w:add_scalar("x", 1, 1)
  eq(#records(path), 1, "a scalar waits in the buffer")
  w:flush()
  eq(#records(path), 2, "after flush")
  w:close()
  w:close() -- twice is harmless
  eq(tostring(w), "SummaryWriter(closed)", "tostring after close")
  for _, m in ipairs({"add_scalar", "add_scalars", "add_histogram", "add_text", "flush", "get_logdir"}) do
    raises(function() w[m](w, "t", 1, 1) end, m .. ": the SummaryWriter is closed", m .. " after close")
  end
  do
    local w2 <close> = tb.SummaryWriter(dir)
    path = w2:_event_file()
    w2:add_scalar("y", 2, 2)
    w = w2
  end
  eq(tostring(w), "SummaryWriter(closed)", "closed by <close>")
  eq(#records(path), 2, "<close> flushed")
  local w3 = tb.SummaryWriter(dir)
  path = w3:_event_file()
  w3:add_text("z", "gc", 3)
  w3 = nil
  collectgarbage()
  collectgarbage()
  eq(#records(path), 2, "__gc closed and flushed")
  -- SummaryWriter({log_dir = ...}) and the default runs/<date>_<host> name
  local w4 = tb.SummaryWriter({log_dir = dir .. "/opt", comment = "ignored"})
  eq(w4:get_logdir(), dir .. "/opt", "log_dir from options")
  w4:close()
end)

test("errors: unwritable log_dir, wrong types, bad bins, bad values", function()
  local dir = fresh_dir()
  local w = tb.SummaryWriter(dir)
  local file = w:_event_file()
  raises(function() tb.SummaryWriter(file .. "/sub") end, "SummaryWriter: cannot create directory '" .. file .. "/sub': Not a directory")
  raises(function() tb.SummaryWriter(file) end, "exists and is not a directory")
  raises(function() tb.SummaryWriter("") end, "log_dir must be a non-empty path")
  raises(function() tb.SummaryWriter(42) end, "SummaryWriter: log_dir must be a string, got number")
  raises(function() w:add_scalar(1, 1, 1) end, "add_scalar: tag must be a string, got number")
  raises(function() w:add_scalar("a", "x", 1) end, "add_scalar: scalar_value must be a number or a one-element tensor, got string")
  raises(function() w:add_scalar("a", torch.zeros(2), 1) end, "a tensor with 2 elements cannot be converted")
  raises(function() w:add_scalar("a", 1, 1.5) end, "add_scalar: global_step must be an integer, got 1.5")
  raises(function() w:add_scalar("a", 1, "s") end, "global_step must be an integer, got string")
  raises(function() w:add_scalar("a", 1, 1, "now") end, "add_scalar: walltime must be a number")
  raises(function() w.add_scalar("a", 1, 1) end, "SummaryWriter expected, got string")
  raises(function() w:add_scalars("m", 3, 1) end, "add_scalars: tag_scalar_dict must be a table")
  raises(function() w:add_scalars("m", {1, 2}, 1) end, "add_scalars: the keys of tag_scalar_dict must be strings")
  raises(function() w:add_scalars("m", {a = "x"}, 1) end, "add_scalars: each value must be a number")
  raises(function() w:add_histogram("h", "abc", 1) end, "add_histogram: values must be a tensor or a list of numbers, got string")
  raises(function() w:add_histogram("h", {1, "x"}, 1) end, "but found a string in the list")
  raises(function() w:add_histogram("h", {}, 1) end, "add_histogram: the input has no elements")
  raises(function() w:add_histogram("h", torch.zeros(0, 3), 1) end, "add_histogram: the input has no elements")
  raises(function() w:add_histogram("h", {1, 0 / 0}, 1) end, "add_histogram: values must be finite, but element 1 is")
  raises(function() w:add_histogram("h", torch.tensor({1, math.huge}), 1) end, "values must be finite")
  raises(function() w:add_histogram("h", {1}, 1, {bins = "bogus"}) end, "add_histogram: unknown bins 'bogus'")
  raises(function() w:add_histogram("h", {1}, 1, {bins = 0}) end, "add_histogram: bins must be in [1, 1000000], got 0")
  raises(function() w:add_histogram("h", {1}, 1, {bins = 2.5}) end, "bins must be an integer count")
  raises(function() w:add_histogram("h", {1}, 1, {bins = true}) end, "bins must be a string, a count or a list of edges, got boolean")
  raises(function() w:add_histogram("h", {1}, 1, {bins = {3, 1}}) end, "bin edges must increase monotonically")
  raises(function() w:add_histogram("h", {1}, 1, {bins = {1}}) end, "needs at least 2 edges")
  raises(function() w:add_histogram("h", {5}, 1, {bins = {0, 1}}) end, "no value lies within the bin edges [0, 1]")
  local outlier = {}
  for i = 1, 100 do outlier[i] = i % 2 end
  outlier[101] = 1e12
  raises(function() w:add_histogram("h", outlier, 1, {bins = "fd"}) end, "bins='fd' gives")
  raises(function() w:add_text("t", 5, 1) end, "add_text: text_string must be a string, got number")
  -- the writer still works after every error
  w:add_scalar("ok", 1, 1)
  w:close()
  local ev = events(file)
  eq(#ev, 2, "only the good record was written")
  eq(ev[2].values[1].tag, "ok", "tag")
end)

-- PyTorch's summary.image bytes of a (H, W, C) list of values: uint8 as
-- they are, anything else as x * 255 in float32 (exact in a double, then
-- rounded to float32 as numpy does), clipped to [0, 255] and truncated
local function tb_bytes(v, is_uint8)
  if is_uint8 then return v end
  return math.floor(math.max(0, math.min(255, (f32round(v * 255)))))
end

-- The images of an event file: {tag, step, height, width, colorspace, pixels (C, H, W uint8)}
local function images(path)
  local out = {}
  for _, e in ipairs(events(path)) do
    for _, v in ipairs(e.values) do
      if v.image then
        local img = v.image
        out[#out + 1] = {tag = v.tag, step = e.step, height = img.height, width = img.width,
                         colorspace = img.colorspace, png = img.png, pixels = data.decode_png(img.png)}
      end
    end
  end
  return out
end

-- (H, W, C) nested lists from a tensor laid out as fmt ("CHW", "HWC", "HW")
local function hwc_list(t, fmt)
  local l = t:cpu():tolist()
  local H, W = t:size(fmt:find("H") - 1), t:size(fmt:find("W") - 1)
  local C = fmt:find("C") and t:size(fmt:find("C") - 1) or 1
  local out = {}
  for y = 1, H do
    out[y] = {}
    for x = 1, W do
      out[y][x] = {}
      for c = 1, C do
        local v
        if fmt == "CHW" then v = l[c][y][x] elseif fmt == "HWC" then v = l[y][x][c] else v = l[y][x] end
        out[y][x][c] = v
      end
      if C == 1 then out[y][x] = {out[y][x][1], out[y][x][1], out[y][x][1]} end
    end
  end
  return out
end

local function check_pixels(img, hwc, is_uint8, what)
  local H, W, C = #hwc, #hwc[1], #hwc[1][1]
  eq(img.height, H, what .. " height")
  eq(img.width, W, what .. " width")
  eq(img.colorspace, C, what .. " colorspace")
  eq(T.fmt(img.pixels.shape:totable()), T.fmt({C, H, W}), what .. " PNG shape")
  local p = img.pixels:tolist()
  for y = 1, H do
    for x = 1, W do
      for c = 1, C do
        local want = tb_bytes(hwc[y][x][c], is_uint8)
        if p[c][y][x] ~= want then
          error(("%s: pixel (%d, %d) channel %d: expected %d, got %d"):format(what, y - 1, x - 1, c - 1, want, p[c][y][x]))
        end
      end
    end
  end
end

test("add_image: a PNG of the image as PyTorch's summary.image makes it", function()
  local dir = fresh_dir()
  local w = tb.SummaryWriter(dir)
  local chw = torch.rand(3, 5, 7) * 1.4 - 0.2          -- floats, some outside [0, 1]
  local u8 = torch.randint(0, 256, {6, 4, 3}):to(torch.uint8)
  local gray = torch.rand(1, 3, 4)
  local hw = torch.rand(2, 9)
  local rgba = torch.rand(4, 3, 3)
  w:add_image("chw", chw, 1)
  w:add_image("hwc", u8, 2, {dataformats = "HWC"})
  w:add_image("gray", gray, 3)
  w:add_image("hw", hw, 4, {dataformats = "HW", walltime = 77.5})
  w:add_image("rgba", rgba, 5, 88.25)                   -- walltime as a number
  w:add_image("t", chw:transpose(1, 2), 6, {dataformats = "CWH"}) -- any order of the letters
  w:close()
  local imgs = images(dir .. "/" .. ls(dir)[1])
  eq(#imgs, 6, "image events")
  check_pixels(imgs[1], hwc_list(chw, "CHW"), false, "chw")
  eq(imgs[1].tag, "chw", "tag")
  eq(imgs[1].step, 1, "step")
  check_pixels(imgs[2], hwc_list(u8, "HWC"), true, "uint8 HWC")
  check_pixels(imgs[3], hwc_list(gray, "CHW"), false, "one channel as three")
  check_pixels(imgs[4], hwc_list(hw, "HW"), false, "HW")
  check_pixels(imgs[5], hwc_list(rgba, "CHW"), false, "RGBA")
  check_pixels(imgs[6], hwc_list(chw, "CHW"), false, "CWH")
  local ev = events(dir .. "/" .. ls(dir)[1])
  eq(ev[5].wall_time, 77.5, "walltime option")
  eq(ev[6].wall_time, 88.25, "walltime argument")
end)

test("add_images: a batch as tensorboard's grid (8 a row, no padding)", function()
  local dir = fresh_dir()
  local w = tb.SummaryWriter(dir)
  local batch = torch.rand(10, 1, 2, 3)
  w:add_images("batch", batch, 7)
  local nhwc = torch.rand(3, 2, 2, 3)
  w:add_images("nhwc", nhwc, 8, {dataformats = "NHWC"})
  w:close()
  local imgs = images(dir .. "/" .. ls(dir)[1])
  -- 10 images: two rows of 8 cells (2 x 3 each), the last 6 cells black
  local b = batch:cpu():tolist()
  local grid = {}
  for y = 1, 4 do
    grid[y] = {}
    for x = 1, 24 do
      local k = ((y - 1) // 2) * 8 + (x - 1) // 3 -- 0-based image index
      local v = k < 10 and b[k + 1][1][(y - 1) % 2 + 1][(x - 1) % 3 + 1] or 0
      grid[y][x] = {v, v, v}
    end
  end
  check_pixels(imgs[1], grid, false, "NCHW grid")
  local n = nhwc:cpu():tolist()
  local g2 = {}
  for y = 1, 2 do
    g2[y] = {}
    for x = 1, 6 do g2[y][x] = n[(x - 1) // 2 + 1][y][(x - 1) % 2 + 1] end
  end
  check_pixels(imgs[2], g2, false, "NHWC grid")
end)

test("add_image: errors", function()
  local dir = fresh_dir()
  local w = tb.SummaryWriter(dir)
  raises(function() w:add_image("x", "img", 1) end, "add_image: img_tensor must be a tensor, got string")
  raises(function() w:add_image("x", torch.rand(3, 4), 1) end, "add_image: dataformats 'CHW' needs a 3-D tensor, got shape (3, 4)")
  raises(function() w:add_image("x", torch.rand(2, 4, 4), 1) end, "add_image: an image has 1, 3 or 4 channels, got 2")
  raises(function() w:add_image("x", torch.rand(3, 4, 4), 1, {dataformats = "CHX"}) end, "add_image: dataformats must name each of")
  raises(function() w:add_image("x", torch.rand(3, 4, 4), 1, {dataformats = "CCW"}) end, "add_image: dataformats must name each of")
  raises(function() w:add_image("x", torch.rand(3, 0, 4), 1) end, "add_image: the image is empty")
  raises(function() w:add_image("x", torch.rand(3, 4, 4), 1, {dataformat = "CHW"}) end, "add_image: unknown option 'dataformat'")
  raises(function() w:add_images("x", torch.rand(3, 4, 4), 1) end, "add_images: dataformats 'NCHW' needs a 4-D tensor")
  raises(function() w:add_image(5, torch.rand(3, 4, 4), 1) end, "add_image: tag must be a string, got number")
  raises(function() w:add_image("x", torch.rand(3, 4, 4), 1.5) end, "add_image: global_step must be an integer, got 1.5")
  w:close()
  raises(function() w:add_image("x", torch.rand(3, 4, 4), 1) end, "add_image: the SummaryWriter is closed")
  eq(#events(dir .. "/" .. ls(dir)[1]), 1, "nothing but the header was written")
end)

test("torch._isatty", function()
  eq(type(torch._isatty(1)), "boolean", "isatty(1)")
  eq(torch._isatty(1), os.execute("test -t 1") == true, "isatty(1) agrees with the shell's test -t 1")
  eq(torch._isatty(2), os.execute("test -t 2") == true, "isatty(2) agrees with the shell's test -t 2")
  raises(function() torch._isatty(7) end, "0 (stdin), 1 (stdout) or 2 (stderr) expected")
end)

-- Independent readers in Python, where the machine has them.
-- The first python3 (on PATH, or the system's) that imports mod, or nil.
local python_with = T.python_with

-- What a Python script prints, run with one argument.
local function python_output(py, script, argument)
  local p = io.popen(py .. " -c '" .. script:gsub("'", "'\\''") .. "' '" .. argument .. "' 2>&1")
  local out = p:read("a")
  p:close()
  return out
end

test("TensorBoard's EventAccumulator reads the files", function()
  local py = python_with("tensorboard.backend.event_processing.event_accumulator")
  if not py then T.skip("python3 with tensorboard is not installed") end
  local dir = fresh_dir()
  local w = tb.SummaryWriter(dir)
  w:add_scalar("loss", 0.5, 1)
  w:add_scalar("loss", 0.25, 2)
  w:add_histogram("w", {1, 2, 3, 4, 5}, 3)
  w:add_text("note", "hi", 4)
  w:add_image("img", torch.rand(3, 5, 7), 3)
  w:add_images("batch", torch.rand(9, 3, 2, 2), 4)
  w:close()
  local script = [[
import sys
from tensorboard.backend.event_processing import event_accumulator as ea
acc = ea.EventAccumulator(sys.argv[1], size_guidance={ea.TENSORS: 0, ea.IMAGES: 0})
acc.Reload()
for tag in ("img", "batch"):
    e = acc.Images(tag)[0]
    print("image", tag, e.step, e.height, e.width, e.encoded_image_string[:8] == b"\x89PNG\r\n\x1a\n")
s = acc.Scalars("loss")
print("scalars", [(e.step, e.value) for e in s])
h = acc.Histograms("w")[0]
print("histo", h.step, h.histogram_value.num, h.histogram_value.sum)
t = acc.Tensors("note/text_summary")[0]
print("text", t.step, t.tensor_proto.string_val[0].decode())
]]
  local out = python_output(py, script, dir)
  T.ok(out:find("scalars [(1, 0.5), (2, 0.25)]", 1, true), "scalars: " .. out)
  T.ok(out:find("histo 3 5.0 15.0", 1, true), "histogram: " .. out)
  T.ok(out:find("text 4 hi", 1, true), "text: " .. out)
  T.ok(out:find("image img 3 5 7 True", 1, true), "image: " .. out)
  T.ok(out:find("image batch 4 4 16 True", 1, true), "images (a 2 x 8 grid of 2 x 2): " .. out)
end)

test("PIL decodes the images' PNGs", function()
  local py = python_with("PIL.Image")
  if not py then T.skip("python3 with PIL is not installed") end
  local dir = fresh_dir()
  local w = tb.SummaryWriter(dir)
  local img = torch.rand(4, 3, 5)
  w:add_image("rgba", img, 1)
  w:close()
  local got = images(dir .. "/" .. ls(dir)[1])[1]
  local png = dir .. "/x.png"
  T.write_file(png, got.png)
  local out = python_output(py, [[import sys; from PIL import Image; im = Image.open(sys.argv[1]); print(im.mode, im.size, " ".join(str(v) for px in im.getdata() for v in px))]], png)
  local mode, values = out:match("^(%S+) %(5, 3%) (.*)\n$")
  eq(mode, "RGBA", "PIL's mode: " .. out)
  local expected = {}
  for _, px in ipairs(hwc_list(img, "CHW")) do
    for _, c in ipairs(px) do for _, v in ipairs(c) do expected[#expected + 1] = tb_bytes(v, false) end end
  end
  local k = 0
  for v in values:gmatch("%d+") do
    k = k + 1
    eq(tonumber(v), expected[k], "PIL's value " .. k)
  end
  eq(k, 60, "values")
end)

test("python's protobuf library decodes the Events", function()
  local py = python_with("google.protobuf.descriptor_pb2")
  if not py then T.skip("python3 with google.protobuf is not installed") end
  local dir = fresh_dir()
  local w = tb.SummaryWriter(dir)
  w:add_scalar("loss", 0.5, 12)
  w:add_histogram("w", {1, 2, 3, 4, 5}, 13, {bins = 2})
  w:add_text("note", "hi there", 14)
  local path = w:_event_file()
  w:close()
  -- the messages declared from their field numbers, without protoc
  local script = [[
import struct, sys
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
F = descriptor_pb2.FieldDescriptorProto
fd = descriptor_pb2.FileDescriptorProto(name="ev.proto", package="tf", syntax="proto3")
def msg(name, fields):
    m = fd.message_type.add(name=name)
    for num, fname, typ, extra in fields:
        f = m.field.add(name=fname, number=num, type=typ, label=F.LABEL_REPEATED if "rep" in extra else F.LABEL_OPTIONAL)
        if typ == F.TYPE_MESSAGE: f.type_name = ".tf." + extra.split(":")[-1]
msg("Dim", [(1, "size", F.TYPE_INT64, "")])
msg("Shape", [(2, "dim", F.TYPE_MESSAGE, "rep:Dim")])
msg("Tensor", [(1, "dtype", F.TYPE_INT32, ""), (2, "tensor_shape", F.TYPE_MESSAGE, "Shape"), (8, "string_val", F.TYPE_BYTES, "rep")])
msg("PluginData", [(1, "plugin_name", F.TYPE_STRING, ""), (2, "content", F.TYPE_BYTES, "")])
msg("Meta", [(1, "plugin_data", F.TYPE_MESSAGE, "PluginData")])
msg("Histo", [(1, "min", F.TYPE_DOUBLE, ""), (2, "max", F.TYPE_DOUBLE, ""), (3, "num", F.TYPE_DOUBLE, ""), (4, "sum", F.TYPE_DOUBLE, ""),
              (5, "sum_squares", F.TYPE_DOUBLE, ""), (6, "bucket_limit", F.TYPE_DOUBLE, "rep"), (7, "bucket", F.TYPE_DOUBLE, "rep")])
msg("Value", [(1, "tag", F.TYPE_STRING, ""), (2, "simple_value", F.TYPE_FLOAT, ""), (5, "histo", F.TYPE_MESSAGE, "Histo"),
              (8, "tensor", F.TYPE_MESSAGE, "Tensor"), (9, "metadata", F.TYPE_MESSAGE, "Meta")])
msg("Summary", [(1, "value", F.TYPE_MESSAGE, "rep:Value")])
msg("Event", [(1, "wall_time", F.TYPE_DOUBLE, ""), (2, "step", F.TYPE_INT64, ""), (3, "file_version", F.TYPE_STRING, ""),
              (5, "summary", F.TYPE_MESSAGE, "Summary")])
pool = descriptor_pool.DescriptorPool()
pool.Add(fd)
desc = pool.FindMessageTypeByName("tf.Event")
Event = message_factory.GetMessageClass(desc) if hasattr(message_factory, "GetMessageClass") else message_factory.MessageFactory(pool).GetPrototype(desc)
data = open(sys.argv[1], "rb").read()
pos = 0
while pos < len(data):
    n, = struct.unpack("<Q", data[pos:pos + 8])
    e = Event.FromString(data[pos + 12:pos + 12 + n])
    pos += 16 + n
    if e.file_version: print("version", e.file_version)
    for v in e.summary.value:
        if v.HasField("histo"): print("histo", e.step, v.tag, v.histo.num, list(v.histo.bucket_limit), list(v.histo.bucket))
        elif v.HasField("tensor"): print("text", e.step, v.tag, v.metadata.plugin_data.plugin_name, v.tensor.dtype, [d.size for d in v.tensor.tensor_shape.dim], v.tensor.string_val[0].decode())
        else: print("scalar", e.step, v.tag, v.simple_value)
]]
  local out = python_output(py, script, path)
  T.ok(out:find("version brain.Event:2", 1, true), "header: " .. out)
  T.ok(out:find("scalar 12 loss 0.5", 1, true), "scalar: " .. out)
  T.ok(out:find("histo 13 w 5.0 [1.0, 3.0, 5.0] [0.0, 2.0, 3.0]", 1, true), "histogram: " .. out)
  T.ok(out:find("text 14 note/text_summary text 7 [1] hi there", 1, true), "text: " .. out)
end)

test("cleanup removes the test runs", function()
  os.execute("rm -rf '" .. root .. "_tb'")
  eq(io.open(root .. "_tb/run1"), nil, "the runs are gone")
end)

T.run()
