-- Bad arguments that once failed inside the library (Lua's own words, a
-- lua/tensh position, a C binding's argument numbers): each now names the
-- function the user called and the argument, says what was expected and
-- what came, and points at the user's line. One case per family the API
-- fuzzer (tests/fuzz) found.
local T = require "harness"
local test, eq, raises, ok = T.test, T.eq, T.raises, T.ok

-- The error names `pattern` and comes from this file's line, not from
-- inside lua/tensh and not in Lua's own words.
local function user_error(fn, pattern)
  local err = raises(fn, pattern)
  ok(err:find("^[^\n]*test_messages%.lua:%d+: "), "raised at the user's line: " .. err)
  ok(not err:find("lua/tensh/"), "no library position: " .. err)
  ok(not err:find("attempt to ") and not err:find("stack overflow") and not err:find("'%?'"), "library words: " .. err)
  return err
end

test("bench and its JSON: wrong arguments, deep and cyclic tables are refused with what was expected", function()
  local J = torch.bench._json
  local cyclic = {}
  cyclic.a = {b = cyclic}
  raises(function() return J.encode(cyclic) end, "json.encode: the table contains itself (a cycle)")
  local deep = {}
  for _ = 1, J.MAX_DEPTH + 1 do deep = {deep} end
  raises(function() return J.encode(deep) end, "json.encode: tables nested deeper than 1000 levels")
  raises(function() return J.decode(("["):rep(J.MAX_DEPTH + 1)) end, "json.decode: nesting deeper than 1000 levels")
  user_error(function() local _ = J.decode(5) end, "json.decode: expected a string (JSON text), got number")
  user_error(function() local _ = J.array(5) end, "json.array: expected a plain table (a list) or nil, got number")
  -- what stays legal: shared (not cyclic) tables, nesting up to the limit, re-marking an array
  local shared = {1}
  eq(J.encode({shared, shared}), "[[1],[1]]")
  local ok_deep = 1
  for _ = 1, J.MAX_DEPTH do ok_deep = {ok_deep} end
  eq(#J.encode(ok_deep), 2 * J.MAX_DEPTH + 1)
  eq(J.encode(J.array(J.array())), "[]")

  local B = torch.bench
  user_error(function() local _ = B.Measurement(5) end, "Measurement: expected a table {number_per_run =")
  user_error(function() local _ = B.Measurement({number_per_run = 1, raw_times = {1, "a"}}) end,
    "Measurement: raw_times[2] must be a number, got string")
  user_error(function() local _ = B.Measurement({number_per_run = 1, raw_times = {1}, task_spec = 5}) end,
    "Measurement: task_spec must be a table")
  user_error(function() local _ = B.Measurement.merge(5) end, "Measurement.merge: expected a list of Measurements, got number")
  user_error(function() local _ = B.Measurement.merge({5}) end, "Measurement.merge: element 1 is not a bench.Measurement")
  user_error(function() local _ = B.select_unit("a") end, "select_unit: t (a time in seconds) must be a number, got string")
  user_error(function() local _ = B.trim_sigfig({}, 2) end, "trim_sigfig: x must be a number, got table")
  user_error(function() local _ = B.trim_sigfig(3.14, 0) end, "trim_sigfig: n (the number of significant figures) must be")
  eq(B.trim_sigfig(3.14159, 2), 3.1)
  eq(B.select_unit(2e-6), "us")
end)

test("data: samplers and transforms name the argument and what came", function()
  user_error(function() local _ = data.SubsetRandomSampler(5) end,
    "SubsetRandomSampler: indices must be a list or a tensor, got number")
  user_error(function() local _ = data.SubsetRandomSampler({1, "a"}) end,
    "SubsetRandomSampler: indices[2] must be an integer, got \"a\"")
  user_error(function() local _ = data.SubsetRandomSampler({1}, 5) end, "SubsetRandomSampler: options must be a table, got number")
  user_error(function() local _ = data.SubsetRandomSampler({1}, {sed = 1}) end, "SubsetRandomSampler: unknown option 'sed'")
  eq(#data.SubsetRandomSampler({3, 1}, {seed = 1}):indices():tolist(), 2)
  local T = data.transforms
  user_error(function() local _ = T.Compose({T.ToTensor(), {5}}) end,
    "transform: expected a data.transforms object, a list of them, or a function, got number")
  user_error(function() local _ = T.ToTensor()(5) end, "ToTensor: expected a (C, H, W) tensor, got number")
  user_error(function() local _ = T.ToTensor()(torch.zeros(2)) end, "ToTensor: expected a (C, H, W) tensor, got a 1-D tensor")
end)

T.run()
