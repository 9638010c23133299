-- docs/api.md against the running binary: each documented name exists, each
-- planned one does not (the entry moves up when it arrives); and the
-- prompt's help(), dir() and table printing (lua/tensh/shell.lua) that
-- read it.
local T = require "harness"
local test, eq, ok = T.test, T.eq, T.ok
local shell = require "tensh.shell"

-- print's output while fn runs
local function captured(fn)
  local out, old = {}, print
  print = function(...) -- luacheck: ignore
    local parts = {}
    for i = 1, select("#", ...) do parts[i] = tostring((select(i, ...))) end
    out[#out + 1] = table.concat(parts, "\t")
  end
  local okc, err = pcall(fn)
  print = old -- luacheck: ignore
  if not okc then error(err, 0) end
  return table.concat(out, "\n")
end

test("docs/api.md is embedded and has entries in every section", function()
  local ref = shell.reference()
  ok(#ref.entries > 100, ("only %d entries read from the embedded docs/api.md"):format(#ref.entries))
  local planned = 0
  for _, e in ipairs(ref.entries) do if e.planned then planned = planned + 1 end end
  -- the section is read (its entries shrink as names arrive: no fixed count)
  ok(planned >= 1, "the Planned section has " .. planned .. " entries")
end)

-- the names of the reference's entries (planned or not) that tensh has (or lacks)
local function names(planned, present)
  local out = {}
  for _, e in ipairs(shell.reference().entries) do
    if e.planned == planned then
      for _, name in ipairs(e.names) do
        if (shell.resolve(name) ~= nil) == present then out[#out + 1] = name end
      end
    end
  end
  return table.concat(out, ", ")
end

test("every documented name exists", function()
  eq(names(false, false), "", "documented in docs/api.md but missing from tensh")
end)

test("every planned name is absent (an arrived one moves out of ## Planned)", function()
  eq(names(true, true), "", "listed under '## Planned' in docs/api.md but present: document them")
end)

test("every entry has a paragraph for help() to print", function()
  local bare = {}
  for _, e in ipairs(shell.reference().entries) do
    if not e.para or #e.para < 10 then bare[#bare + 1] = e.heading end
  end
  eq(table.concat(bare, "; "), "", "entries without a paragraph")
end)

test("resolve tells a missing name from a present one", function()
  ok(shell.resolve("torch.matmul") == torch.matmul, "torch.matmul")
  ok(shell.resolve("Tensor:sum") == torch._methods.sum, "Tensor:sum")
  ok(shell.resolve("Tensor.shape") ~= nil, "Tensor.shape")
  ok(shell.resolve("Tensor.grad") ~= nil, "Tensor.grad")
  ok(shell.resolve("Module:train") == nn.Module.train, "Module:train")
  eq(shell.resolve("torch.flaot32"), nil, "torch.flaot32")
  eq(shell.resolve("Tensor:itme"), nil, "Tensor:itme")
  eq(shell.resolve("Tensor.nope"), nil, "Tensor.nope")
  eq(shell.resolve("nn.Nope"), nil, "nn.Nope")
end)

test("help prints the signature and the paragraph", function()
  local s = captured(function() shell.help(torch.matmul) end)
  ok(s:find("torch.matmul(input, other)", 1, true), "help(torch.matmul): " .. s)
  ok(s:find("Matrix product", 1, true), "help(torch.matmul) paragraph: " .. s)
  s = captured(function() shell.help(nn.Linear) end)
  ok(s:find("nn.Linear(in_features, out_features", 1, true), "help(nn.Linear): " .. s)
  s = captured(function() shell.help(nn.Linear(2, 3)) end)
  ok(s:find("nn.Linear(in_features", 1, true), "help(an nn.Linear): " .. s)
  s = captured(function() shell.help(torch.ones(2)) end)
  ok(s:find("torch.Tensor", 1, true) and s:find("dir(t)", 1, true), "help(a tensor): " .. s)
  s = captured(function() shell.help(torch.ones(2).sum) end)
  ok(s:find("Tensor:sum(dim)", 1, true), "help(t.sum): " .. s)
  s = captured(function() shell.help(optim.SGD(nn.Linear(1, 1):parameters(), {lr = 0.1})) end)
  ok(s:find("optim.SGD(params", 1, true), "help(an optimizer): " .. s)
  local planned_name -- whichever name is still planned when this runs
  for _, e in ipairs(shell.reference().entries) do if e.planned then planned_name = e.names[1] break end end
  s = captured(function() shell.help(planned_name) end)
  ok(s:find("planned", 1, true), ("help('%s') says planned: %s"):format(planned_name, s))
  s = captured(function() shell.help("nn.LSTM") end)
  ok(s:find("nn.LSTM(input_size, hidden_size", 1, true) and not s:find("planned", 1, true), "help('nn.LSTM'): " .. s)
  s = captured(function() shell.help("matmul") end)
  ok(s:find("torch.matmul(", 1, true), "help('matmul'): " .. s)
  s = captured(function() shell.help() end)
  ok(s:find("help(torch.matmul)", 1, true) and s:find("exit()", 1, true), "help(): " .. s)
  s = captured(function() shell.help(nil) end)
  ok(s:find('help("nn.LSTM")', 1, true), "help(nil): " .. s)
  s = captured(function() shell.help(function() end) end)
  ok(s:find("no entry", 1, true), "help(an anonymous function): " .. s)
end)

-- help(f) for a function that docs/api.md documents: the signatures of an
-- entry that lists one of f's names, or nil and what help printed
local function help_finds(f)
  local s = captured(function() shell.help(f) end)
  for _, e in ipairs(shell.reference().entries) do
    if not e.planned and s:sub(1, #e.sigs[1]) == e.sigs[1] then
      for _, name in ipairs(e.names) do
        if rawequal(shell.resolve(name), f) then return true end
      end
    end
  end
  return nil, s
end

-- help() once named a function only through the namespaces it searched (no
-- dist, bench, profiler, data.transforms, torch.cpu, no class methods) and
-- by one name (Tensor:clip_ but not Tensor:clamp_): ~85 documented
-- functions had no entry. Walks every namespace table reachable from the
-- globals, and every entry of the reference.
test("help finds every documented function, in every namespace", function()
  eq(help_finds(rawget(_G, "dist").get_rank), true, "help(dist.get_rank)")
  local ref, lost, checked = shell.reference(), {}, 0
  local function check(name, f)
    checked = checked + 1
    local found, said = help_finds(f)
    if not found then lost[#lost + 1] = name .. " (" .. tostring(said):match("^[^\n]*") .. ")" end
  end
  -- the namespaces: each global table and the tables below it, under every
  -- path (torch.cuda is cuda too); a table already on the path is a cycle
  local on_path = {}
  local function walk(prefix, t, depth)
    if on_path[t] or depth > 4 then return end
    on_path[t] = true
    for k, v in next, t do
      local name = type(k) == "string" and prefix .. "." .. k
      if name and type(v) == "function" and ref.by_name[name] and not ref.by_name[name].planned then check(name, v) end
      if name and type(v) == "table" then walk(name, v, depth + 1) end
    end
    on_path[t] = nil
  end
  require("tensh.lazy").load_all() -- nn, optim, ... load on first use; walked raw below
  for _, ns in ipairs({"torch", "nn", "optim", "data", "cuda", "amp", "dist", "bench", "profiler", "tb", "models"}) do
    local t = rawget(_G, ns)
    if type(t) == "table" then walk(ns, t, 1) end
  end
  -- and every documented name that denotes a function (class methods, help, dir)
  for _, e in ipairs(ref.entries) do
    if not e.planned then
      for _, name in ipairs(e.names) do
        local f = shell.resolve(name)
        if type(f) == "function" then check(name, f) end
      end
    end
  end
  ok(checked > 600, "functions checked: " .. checked)
  eq(table.concat(lost, ", "), "", "documented functions help() does not find")
end)

local function has(list, name)
  for _, v in ipairs(list) do if v == name then return true end end
  return false
end

test("dir lists a tensor's methods and properties, a module's fields and methods", function()
  local d = shell.dir(torch.ones(2))
  for _, n in ipairs({"matmul", "sum", "shape", "dtype", "grad", "backward"}) do ok(has(d, n), "dir(t) has " .. n) end
  ok(not has(d, "__index"), "dir(t) leaves out metamethods")
  local Net = nn.Module:extend("DirNet")
  function Net:init() self.fc1 = nn.Linear(2, 2); self.scale = 3 end
  d = shell.dir(Net())
  for _, n in ipairs({"fc1", "scale", "forward", "parameters", "state_dict", "training"}) do
    ok(has(d, n), "dir(model) has " .. n)
  end
  d = shell.dir(nn.Linear(2, 3))
  ok(has(d, "weight") and has(d, "bias") and has(d, "in_features"), "dir(nn.Linear) has its parameters")
  d = shell.dir(optim.SGD(nn.Linear(1, 1):parameters(), {lr = 0.1}))
  ok(has(d, "step") and has(d, "zero_grad") and has(d, "param_groups"), "dir(opt)")
  d = shell.dir({b = 1, a = 2})
  eq(table.concat(d, ","), "a,b", "dir of a plain table: its keys, sorted")
end)

-- on the CPU in the cuda pass too: the expected summaries name no device
T.cpu_test("tables print readably: sorted keys, tensor summaries, nesting and size cut off", function()
  local f = shell.format
  eq(f({1, 2, 3}), "{1, 2, 3}", "a list")
  eq(f({b = 1, a = "x"}), '{a = "x", b = 1}', "sorted keys, quoted strings")
  eq(f({["fc1.weight"] = 1}), '{["fc1.weight"] = 1}', "a key that is not a name")
  eq(f({torch.zeros(3, 4)}), "{tensor(shape=[3, 4], dtype=float32)}", "a tensor summarised")
  eq(f({torch.tensor({1, 2})}), "{tensor([1, 2])}", "a small tensor shows its values")
  eq(f({{{{{{1}}}}}}), "{{{{{...}}}}}", "nesting cut")
  local t = {}
  t.self = t
  eq(f(t), "{self = <cycle>}", "a cycle")
  local big = {}
  for i = 1, 30 do big["k" .. i] = {i} end
  ok(f(big):find("... (10 more)", 1, true), "30 entries show 20: " .. f(big))
  local nums = {}
  for i = 1, 150 do nums[i] = i end
  ok(f(nums):find("... (50 more)", 1, true), "150 numbers show 100")
  ok(f(nn.Linear(2, 3)):find("Linear(", 1, true), "a module prints through its __tostring")
  eq(f(torch.matmul), "function torch.matmul", "a library function by its name")
  local sd = f(nn.Linear(2, 3):state_dict())
  ok(sd:find("weight = tensor(shape=[3, 2], dtype=float32)", 1, true), "a state_dict: " .. sd)
  ok(f(torch.autograd.grad):find("torch.autograd.grad", 1, true), "torch.autograd.grad by name")
end)

T.run()
