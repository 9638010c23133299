-- Namespaces loaded on first use. nn (with models, built on it), optim and
-- the profiler are half of the library's code, data, dist and bench another
-- quarter: loaded at start-up they cost ~2 ms (nn ...) and ~4.8M of the
-- 16.4M instructions (data, dist, bench) of every `tensh -e ''` and of every
-- script that never uses them. Each is a table in _G and in torch from the
-- start, so it prints,
-- compares and is passed around as itself; the first read, write or pairs()
-- through it loads the module into that same table (its file starts with
-- lazy.claim), makes it strict (tensh.strict) and leaves the table with the
-- module's own metatable. A raw read (rawget, next) before that finds it
-- empty: M.load_all() loads every one, for code that walks them raw.
-- require "tensh.nn" itself goes the same way (package.preload).
local M = {}

M.names = {"nn", "models", "optim", "profiler", "data", "dist", "bench"}
-- where each stub goes in torch, as PyTorch spells it (data is not torch.data)
local places = {
  nn = {"nn"}, models = {"models"}, optim = {"optim"}, profiler = {"profiler"},
  data = {"utils.data"}, dist = {"dist", "distributed"}, bench = {"bench", "utils.benchmark"},
}
local stubs = {} -- name -> the table its module fills, until it does

-- The table module `name` fills (nn.lua: local nn = lazy.claim("nn")): the
-- stub the globals hold, or a new one outside the shell's start-up.
function M.claim(name)
  local t = stubs[name]
  if not t then return {} end
  stubs[name] = nil
  setmetatable(t, nil)
  return t
end

-- runs the module's chunk, found by the searchers after package.preload
local function run(mod)
  local tried = {}
  for i = 2, #package.searchers do
    local loader, extra = package.searchers[i](mod)
    if type(loader) == "function" then return loader(mod, extra) end
    tried[#tried + 1] = tostring(loader)
  end
  error(("module '%s' not found:%s"):format(mod, table.concat(tried)))
end

local loading = {}

local function preload(name)
  local mod = "tensh." .. name
  package.preload[mod] = function()
    package.preload[mod] = nil
    loading[name] = true
    local t = run(mod)
    loading[name] = nil
    require("tensh.strict").protect_namespace(t, name)
    return t
  end
end

local function load(name)
  if loading[name] then error(("tensh.%s read through its global while it loads"):format(name), 3) end
  return require("tensh." .. name)
end

-- the stub for `name`, its module made loadable through require
function M.stub(name)
  local t = {}
  stubs[name] = t
  preload(name)
  return setmetatable(t, {
    __tensh_lazy = function() return load(name) end, -- the prompt's completion calls it
    __index = function(_, k) return load(name)[k] end,
    __newindex = function(_, k, v) load(name)[k] = v end,
    __pairs = function() return pairs(load(name)) end,
  })
end

-- the globals nn, models, ... and torch.nn, torch.models, torch.utils.data, ...: stubs
function M.install()
  for _, name in ipairs(M.names) do
    local t = M.stub(name)
    rawset(_G, name, t)
    for _, place in ipairs(places[name]) do
      local parent, key = torch, place
      local outer, inner = place:match("^(%w+)%.(%w+)$")
      if outer then
        parent, key = rawget(torch, outer), inner
        if parent == nil then
          parent = {}
          rawset(torch, outer, parent)
        end
      end
      rawset(parent, key, t)
    end
  end
end

function M.load_all()
  for _, name in ipairs(M.names) do
    if stubs[name] then load(name) end
  end
end

return M
