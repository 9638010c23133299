-- The oracle: every op documented in docs/api.md replayed on PyTorch's
-- answers. tests/fixtures/ops/*_torch.lua hold the cases (inputs built as a
-- base tensor plus view steps, so transposed, step-sliced and expanded
-- layouts are the same in both systems), PyTorch's results, a fixed g and
-- PyTorch's gradients of sum(out * g). Values, dtypes, shapes and gradients
-- are compared (per-dtype tolerances, tests/lua/oracle_compare.lua says
-- which; exact for integers, booleans and ops determined to the bit; NaN
-- equal to NaN). Runs on the CPU and, on the cuda pass (TENSH_TEST_DEVICE),
-- with every input on the test device.
--
-- Regenerate the fixtures (needs python3-torch; 1.13 made them) after adding
-- cases to tests/fixtures/ops/cases_*.py:
--     /usr/bin/python3 tests/fixtures/ops/gen.py
--
-- tests/fixtures/ops/known_wrong.tsv lists the cases tensh gets wrong today
-- (id, tab, reason). A failing case not listed fails, and so does a listed
-- case that passes: delete its line when a fix lands. Each name documented
-- in docs/api.md's tensor-op sections (Creating tensors ... Neural-network
-- functions on tensors) and each nn.functional op there needs a case, or a
-- line in EXEMPT below.
local T = require "harness"
local O = require "oracle_compare"

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local dir = here .. "../fixtures/ops/"

-- Documented names that compute no value to compare with PyTorch.
local EXEMPT = {
  ["torch.manual_seed"] = "seeds the generator",
  ["torch.initial_seed"] = "generator state",
  ["torch.get_rng_state"] = "generator state (tensh's Philox, not PyTorch's)",
  ["torch.set_rng_state"] = "generator state",
  ["Tensor.device"] = "depends on the test device",
  ["Tensor.is_cuda"] = "depends on the test device",
  ["Tensor:get_device"] = "depends on the test device",
  ["Tensor:data_ptr"] = "a memory address",
  ["torch.device"] = "a device object, no tensor",
  ["Tensor:cuda"] = "needs a CUDA device (test_cuda_* compare devices)",
  ["Tensor:pin_memory"] = "host memory placement, not a value",
  ["Tensor:is_pinned"] = "host memory placement, not a value",
  ["torch.set_float32_matmul_precision"] = "a setting",
}
for _, d in ipairs({"float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8",
                    "bool"}) do
  EXEMPT["torch." .. d] = "a dtype constant"
end

local sections = dofile(dir .. "index.lua")
local cases, by_id = {}, {}
for _, name in ipairs(sections) do
  for _, c in ipairs(dofile(dir .. name .. "_torch.lua")) do
    c.section = name
    cases[#cases + 1] = c
    by_id[c.id] = c
  end
end

-- An id may end in @cpu or @cuda: wrong on that device only (a kernel fixed
-- on one backend before the other).
local known, listed, bad_lines = {}, {}, {}
local device = T.device:match("^%a+")
for line in io.lines(dir .. "known_wrong.tsv") do
  if line ~= "" and line:sub(1, 1) ~= "#" then
    local id, reason = line:match("^([^\t]+)\t(.+)$")
    local base, only = (id or ""):match("^(.-)@(%a+)$")
    if not id then bad_lines[#bad_lines + 1] = line
    elseif base then
      listed[base] = true
      if only == device then known[base] = reason end
    else listed[id], known[id] = true, reason end
  end
end

for _, c in ipairs(cases) do
  T.test("oracle " .. c.id, function()
    local ok, err = pcall(O.check, c)
    local why = known[c.id]
    if why and ok then
      error(("%s passes now: delete its line in tests/fixtures/ops/known_wrong.tsv (%s)"):format(c.id, why), 0)
    elseif not why and not ok then
      error(("%s: %s (%s)"):format(c.id, tostring(err), c.call), 0)
    end
  end)
end

T.test("oracle: known_wrong.tsv lines are existing case ids and reasons", function()
  T.ok(#bad_lines == 0, "known_wrong.tsv: not 'id<tab>reason': " .. table.concat(bad_lines, " | "))
  for id in pairs(listed) do T.ok(by_id[id], "known_wrong.tsv: no case " .. id) end
end)

T.test("oracle: every documented op has a case or an exemption", function()
  local covered = {}
  for _, c in ipairs(cases) do
    if not c.raises then covered[c.call] = true end
  end
  local documented = O.documented_ops(here .. "../../docs/api.md")
  local missing, doc_set = {}, {}
  for _, name in ipairs(documented) do
    doc_set[name] = true
    if not covered[name] and not EXEMPT[name] then missing[#missing + 1] = name end
    if covered[name] and EXEMPT[name] then
      error(name .. " has cases and an exemption: drop the exemption")
    end
  end
  for name in pairs(EXEMPT) do
    T.ok(doc_set[name], "EXEMPT names " .. name .. ", which docs/api.md does not document")
  end
  T.ok(#missing == 0, "documented ops without a case in tests/fixtures/ops: " .. table.concat(missing, ", "))
end)

T.run()
