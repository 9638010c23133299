-- torch.profiler: op counts on a small training step (each forward kernel as
-- often as the dispatch counter saw it, each backward node once per step),
-- nesting and self times, shapes, memory, stacks, key_averages' table, the
-- Chrome trace (parsed back), the <close> and function forms, and that a
-- stopped profiler records nothing.
local T = require "harness"
local test, eq, ok, raises = T.test, T.eq, T.ok, T.raises
local json = require "tensh.json"
local profiler = torch.profiler

local function count_by(events, kind)
  local c = {}
  for _, e in ipairs(events) do
    if not kind or e.kind == kind then c[e.name] = (c[e.name] or 0) + 1 end
  end
  return c
end

-- the profile's Chrome trace, written and parsed back
local function read_trace(prof)
  local path = os.tmpname()
  prof:export_chrome_trace(path)
  local f = io.open(path)
  local trace = json.decode(f:read("a"))
  f:close()
  os.remove(path)
  return trace
end

-- a two-layer regression step written with tensor ops, so its graph is known
local function step(x, w1, b1, w2, t)
  local h = (x:matmul(w1) + b1):relu()
  local loss = (h:matmul(w2) - t):pow(2):mean()
  loss:backward()
  return loss
end

test("a training step: every kernel and every backward node, as often as they ran", function()
  local x, t = torch.randn(8, 4), torch.randn(8, 2)
  local w1 = torch.randn(4, 5, {requires_grad = true})
  local b1 = torch.zeros(5, {requires_grad = true})
  local w2 = torch.randn(5, 2, {requires_grad = true})
  step(x, w1, b1, w2, t) -- warm
  local steps = 3
  torch.backends._dispatch_counts(true)
  local before = torch.backends._dispatch_counts()
  local prof
  do
    prof = profiler.profile({activities = {"cpu"}})
    for _ = 1, steps do step(x, w1, b1, w2, t) end
    prof:stop()
  end
  local after = torch.backends._dispatch_counts(false)
  local ops = count_by(prof:events(), "op")
  local dev = T.device == "cpu" and "cpu" or "cuda"
  local n_kernels = 0
  for name, n in pairs(after[dev]) do
    local expected = n - before[dev][name]
    eq(ops[name] or 0, expected, "profiled '" .. name .. "' against the dispatch counter")
    n_kernels = n_kernels + expected
  end
  ok(n_kernels > 0, "kernels ran")
  local back = count_by(prof:events(), "backward")
  for _, name in ipairs({"MeanBackward0", "PowBackward0", "SubBackward0", "MatmulBackward0", "ReluBackward0",
                         "AddBackward0"}) do
    ok(back[name], "backward node " .. name .. " recorded")
  end
  eq(back.MatmulBackward0, 2 * steps, "two matmuls per step")
  for _, name in ipairs({"MeanBackward0", "PowBackward0", "SubBackward0", "ReluBackward0", "AddBackward0"}) do
    eq(back[name], steps, name .. " once per step")
  end
  -- the kernels a backward node runs are its children
  local evs = prof:events()
  local inside = 0
  for _, e in ipairs(evs) do
    if e.kind == "op" and e.parent and evs[e.parent].kind == "backward" then inside = inside + 1 end
  end
  ok(inside > 0, "backward kernels nest in their node")
end)

test("record_function scopes nest; self time is total minus children", function()
  local a = torch.randn(64, 64)
  local prof = profiler.profile({}, function()
    local outer <close> = profiler.record_function("outer")
    local y = a:matmul(a)
    profiler.record_function("inner", function() return (y + 1):sum() end)
  end)
  local evs = prof:events()
  local by = {}
  for i, e in ipairs(evs) do by[e.name] = by[e.name] or i end
  local outer, inner = evs[by.outer], evs[by.inner]
  eq(outer.kind, "user", "a user scope")
  eq(evs[by.inner].parent, by.outer, "inner inside outer")
  eq(evs[by.sum].parent, by.inner, "sum inside inner")
  local children = 0
  for _, e in ipairs(evs) do if e.parent == by.outer then children = children + e.dur end end
  T.close({outer.self}, {outer.dur - children}, 1e-9, 1e-3, "self = total - children")
  ok(outer.dur >= inner.dur and inner.dur >= evs[by.sum].dur, "totals nest")
  ok(inner.ts >= outer.ts and inner.ts + inner.dur <= outer.ts + outer.dur + 1e-3, "inner within outer in time")
end)

test("shapes, memory and stacks when asked", function()
  local a, b = torch.randn(3, 4), torch.randn(4, 5)
  local prof = profiler.profile({record_shapes = true, profile_memory = true, with_stack = true}, function()
    local y = a:matmul(b)
    local z = torch.zeros(1000)
  end)
  local mm, fill
  for _, e in ipairs(prof:events()) do
    -- shapes are the kernel's inputs: a 2-d matmul runs as a batch of one
    if e.kind == "op" and e.shapes == "[[1, 3, 4], [1, 4, 5]]" then mm = e end
    if e.name == "fill" then fill = e end
  end
  ok(mm, "the matmul's kernel has its input shapes")
  local bytes = fill and (fill.device == "cpu" and fill.cpu_mem or fill.dev_mem)
  ok(bytes and bytes >= 4000, "zeros(1000) leaves 4000 bytes: " .. tostring(bytes))
  ok(mm.stack and mm.stack:find("test_profiler.lua:", 1, true), "the caller's line: " .. tostring(mm.stack))
  local plain = profiler.profile({}, function() local y = a:matmul(b) end)
  for _, e in ipairs(plain:events()) do ok(e.shapes == nil and e.stack == nil, "nothing extra by default") end
end)

test("key_averages: PyTorch's table, sorted, limited, grouped by shape", function()
  local a, b = torch.randn(8, 8), torch.randn(16, 16)
  local prof = profiler.profile({record_shapes = true}, function()
    for _ = 1, 3 do local y = a * a end
    for _ = 1, 2 do local y = b * b end
  end)
  local avg = prof:key_averages()
  local mul
  for i = 1, #avg do if avg[i].key == "mul" then mul = avg[i] end end
  eq(mul.count, 5, "five muls")
  local s = avg:table({sort_by = "self_cpu_time_total", row_limit = 10})
  local lines = {}
  for l in s:gmatch("([^\n]*)\n") do lines[#lines + 1] = l end
  ok(lines[1]:match("^%-+  %-+"), "a rule first")
  ok(lines[2]:find("Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg    # of Calls", 1, true),
    "PyTorch's headers: " .. lines[2])
  ok(lines[#lines]:match("^Self CPU time total: [%d.]+[mu]?s$"), "the total last: " .. lines[#lines])
  ok(s:find("%s+mul%s+[%d.]+%%%s+[%d.]+[mu]?s%s+[%d.]+%%%s+[%d.]+[mu]?s%s+[%d.]+[mu]?s%s+5%s+\n"), "the mul row")
  local grouped = prof:key_averages({group_by_input_shape = true})
  local shapes = {}
  for i = 1, #grouped do if grouped[i].key == "mul" then shapes[grouped[i].input_shapes] = grouped[i].count end end
  eq(shapes["[[8, 8], [8, 8]]"], 3, "muls of 8x8")
  eq(shapes["[[16, 16], [16, 16]]"], 2, "muls of 16x16")
  ok(grouped:table():find("Input Shapes", 1, true), "shape column")
  local limited = avg:table({sort_by = "count", row_limit = 1})
  local n = 0
  for _ in limited:gmatch("\n") do n = n + 1 end
  eq(n, 6, "rule, header, rule, one row, rule, total")
  raises(function() avg:table({sort_by = "nope"}) end, "table: option 'sort_by': unknown key 'nope'")
  raises(function() profiler.profile({}, function() end):key_averages({group_by_input_shape = true}) end,
    "group_by_input_shape needs the profile recorded with record_shapes = true")
end)

test("export_chrome_trace writes the Trace Event Format", function()
  local a = torch.randn(10, 10, {requires_grad = true})
  local prof = profiler.profile({record_shapes = true}, function()
    profiler.record_function("fwd", function() (a * 2):sum():backward() end)
  end)
  local trace = read_trace(prof)
  ok(type(trace.traceEvents) == "table", "traceEvents")
  local complete, cats, names = 0, {}, {}
  for _, e in ipairs(trace.traceEvents) do
    ok(e.ph == "X" or e.ph == "M", "complete or metadata events")
    if e.ph == "X" then
      complete = complete + 1
      ok(type(e.ts) == "number" and type(e.dur) == "number" and e.dur >= 0, "ts and dur in microseconds")
      ok(math.type(e.pid) == "integer" and math.type(e.tid) == "integer", "pid and tid")
      cats[e.cat] = true
      names[e.name] = e
    end
  end
  eq(complete, #prof:events(), "one complete event per profiler event")
  ok(cats.cpu_op and cats.user_annotation and cats.backward, "ops, scopes and backward nodes")
  eq(names.mul.args["Input Dims"], "[[10, 10], [10, 10]]", "shapes in args (the kernel's: the scalar broadcast)")
  ok(names.fwd.ts <= names.mul.ts and names.mul.ts + names.mul.dur <= names.fwd.ts + names.fwd.dur + 1e-3, "mul within fwd")
  raises(function() prof:export_chrome_trace("/nonexistent/dir/t.json") end, "export_chrome_trace: cannot open")
end)

test("ATen names: rows, the table's names = 'aten' and the trace carry PyTorch's name where one corresponds", function()
  -- every mapped name is a registry kernel (src/ops/ops*.def), so a renamed kernel cannot leave a dead entry
  local kernels = torch.backends._dispatch_counts().cpu
  for name, aten in pairs(profiler.aten_names) do
    ok(kernels[name] ~= nil, "'" .. name .. "' is a registry kernel")
    ok(aten:match("^aten::[%w_]+$"), name .. " -> " .. aten)
  end
  local x, t = torch.randn(8, 4), torch.randn(8, 2)
  local w1 = torch.randn(4, 5, {requires_grad = true})
  local b1 = torch.zeros(5, {requires_grad = true})
  local w2 = torch.randn(5, 2, {requires_grad = true})
  local prof = profiler.profile({}, function() step(x, w1, b1, w2, t) end)
  local rows = {}
  for _, r in ipairs(prof:key_averages().rows) do rows[r.key] = r end
  eq(rows.relu.aten_name, "aten::relu", "relu's row")
  eq(rows.pow_scalar.aten_name, "aten::pow", "pow by a scalar is aten::pow")
  eq(rows.bmm.aten_name, nil, "bmm runs 2-d matmuls too: no single ATen name")
  eq(rows.ReluBackward0.aten_name, nil, "backward nodes keep their names")
  local aten_table = prof:key_averages():table({names = "aten"})
  ok(aten_table:find("\n%s*aten::relu  ") and aten_table:find("\n%s*bmm  "), "aten names where mapped:\n" .. aten_table)
  ok(not aten_table:find("\n%s*relu  "), "relu shown by its ATen name only")
  local plain = prof:key_averages():table()
  ok(plain:find("\n%s*relu  ") and not plain:find("aten::", 1, true), "the default keeps tensh's names")
  local args = {}
  for _, e in ipairs(read_trace(prof).traceEvents) do
    if e.ph == "X" then args[e.name] = e.args end
  end
  eq(args.relu.aten, "aten::relu", "the trace's args name the ATen op")
  eq(args.bmm.aten, nil, "and only where one corresponds")
  raises(function() prof:key_averages():table({names = "torch"}) end, "table: option 'names': \"aten\" or \"tensh\" expected, got torch")
end)

test("<close> form, one profiler at a time, and off records nothing", function()
  local a = torch.randn(4)
  local prof
  do
    local p <close> = profiler.profile()
    prof = p
    local y = a + a
    raises(function() profiler.profile() end, "a profiler is already running")
  end
  local n = #prof:events()
  ok(n >= 1, "recorded inside the block")
  local y = a + a
  eq(#prof:events(), n, "nothing after the block")
  -- an error in the function form stops the profiler; the next one starts
  raises(function() profiler.profile({}, function() error("inside") end) end, "inside")
  local p2 = profiler.profile({}, function() local z = a * a end)
  eq(count_by(p2:events()).mul, 1, "a new profiler works")
  raises(function() profiler.profile({activities = {"tpu"}}) end, "unknown activity 'tpu'")
  raises(function() profiler.profile({record_shape = true}) end, "unknown option 'record_shape'")
  raises(function() profiler.record_function(5) end, "record_function: name must be a string, got number")
  -- a scope opened without a profiler is harmless
  do local s <close> = profiler.record_function("idle") end
  -- PyTorch's form: profile(), then start() ... stop(): only what ran after start() is recorded
  local p3 = profiler.profile()
  local _ = a * a
  p3:start()
  local _ = a + a
  p3:stop()
  local c3 = count_by(p3:events())
  eq(c3.add, 1, "recorded after start()")
  eq(c3.mul, nil, "dropped from before start()")
  p3:start()
  local _ = a * a
  p3:stop()
  eq(count_by(p3:events()).mul, 1, "a stopped profile starts again")
end)

test("cuda activity: device times from CUDA events, and every launch", function()
  if not (cuda and cuda.is_available()) then T.skip("no CUDA device") end
  local a = torch.randn(128, 128, {device = "cuda"})
  local prof = profiler.profile({activities = {"cpu", "cuda"}}, function() local y = a:matmul(a) + 1 end)
  local timed = 0
  for _, e in ipairs(prof:events()) do
    if e.kind == "op" and e.device:find("^cuda") then
      ok(e.device_us and e.device_us >= 0, "device time for " .. e.name)
      timed = timed + 1
    end
  end
  ok(timed >= 2, "the cuda kernels are timed")
  ok(prof:key_averages():table():find("Self CUDA", 1, true), "CUDA columns")
  local trace = read_trace(prof)
  local spans, kernels = 0, 0
  for _, e in ipairs(trace.traceEvents) do
    if e.cat == "gpu_user_annotation" then spans = spans + 1 end
    if e.cat == "kernel" then kernels = kernels + 1 end
  end
  eq(spans, timed, "a device track event per timed op")
  eq(kernels, 2, "a kernel event per launch: the product (one cuBLAS call) and the add")
end)

T.run()
