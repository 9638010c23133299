-- Scopes: torch.no_grad(), torch.enable_grad(), torch.set_grad_enabled(b)
-- (installed here) and torch.autocast(...) (lua/tensh/amp.lua) set a mode
-- for a to-be-closed variable (local _ <close> = torch.no_grad()) or for a
-- function they run (torch.no_grad(function() ... end)), the same way.
--
-- A scope object that is never closed (local ctx = torch.no_grad(): a
-- Python context manager called without `with`) would leave its mode on for
-- the rest of the process, where PyTorch's does nothing. Here the mode is
-- restored when the collector takes the object, and a warning says once
-- that the scope needs <close> or the function form.
-- torch.set_grad_enabled(b) is also PyTorch's plain setter: left unclosed,
-- its mode stays, silently, as in PyTorch.
--
-- Each kind of mode (grad mode; autocast per device type) keeps a stack of
-- its open scopes, because an unclosed scope is collected at any time, also
-- while newer scopes are open: a scope that closes under a newer open one
-- hands the state it found to that one (which restores it when it closes)
-- and leaves the current mode alone, so every scope still undoes exactly
-- what it did.
local warnings = require "tensh.warnings"
local M = {}

-- kind(set, drop): set(prev) restores a state; drop() is called when a
-- scope under a newer one closes (the state stays; autocast counts its
-- depth). The stack is two arrays, each open scope's token and the state it
-- found: a scope object's token is its record ({kind, open}); a function
-- form's is a number, so running a function in a scope allocates nothing
-- (the optimizers' steps do it every iteration).
function M.kind(set, drop) return {tokens = {}, prevs = {}, set = set, drop = drop} end

local function push(kind, token, prev)
  local n = #kind.tokens + 1
  kind.tokens[n], kind.prevs[n] = token, prev
end

-- takes token off kind's stack: restores (keep: leaves) the state
local function pop(kind, token, keep)
  local tokens, prevs = kind.tokens, kind.prevs
  local n = #tokens
  if tokens[n] == token then -- the newest, as closing in order always is
    local prev = prevs[n]
    tokens[n], prevs[n] = nil, nil
    if not keep then kind.set(prev) end
    return
  end
  for i = n - 1, 1, -1 do
    if tokens[i] == token then
      local prev = prevs[i]
      table.remove(tokens, i)
      table.remove(prevs, i)
      if i > #tokens then -- the newest: its state is the current one
        if not keep then kind.set(prev) end
      else -- a newer scope is open: it restores what this one found
        if not keep then prevs[i] = prev end
        if kind.drop then kind.drop() end
      end
      return
    end
  end
end

-- a scope object of `kind` opens over the state prev (the caller then sets
-- its own); returns its record
function M.enter(kind, prev)
  local rec = {kind = kind, open = true}
  push(kind, rec, prev)
  return rec
end

-- closes a scope object's record: restores (keep: leaves) the state; at most once
local function leave(rec, keep)
  if not rec.open then return end
  rec.open = false
  pop(rec.kind, rec, keep)
end

function M.exit(rec) leave(rec, false) end

-- the collector took an open scope's object: restore and warn once. opened:
-- how it was opened ('torch.no_grad()'); fn_form: its function form
-- ('torch.no_grad(function() ... end)'); keep: a setter's, left as set
function M.collected(rec, opened, fn_form, keep)
  if not rec.open then return end
  leave(rec, keep)
  if not keep then
    warnings.warn(("%s was collected without being closed, so its mode stayed on until now; open it as "
      .. "`local _ <close> = %s` or give it the function to run: %s"):format(opened, opened, fn_form),
      "UserWarning", "unclosed " .. opened)
  end
end

-- runs fn(...) in a scope of kind opened over prev (the caller has set its
-- state), closes it (an error included) and returns fn's results; push and
-- pop written out, as this runs in every optimizer step
local serial = 0
local function finish(kind, token, ok, ...)
  local tokens, prevs = kind.tokens, kind.prevs
  local n = #tokens
  if tokens[n] == token then
    local prev = prevs[n]
    tokens[n], prevs[n] = nil, nil
    kind.set(prev)
  else
    pop(kind, token, false)
  end
  if not ok then error((...), 0) end
  return ...
end
function M.run(kind, prev, fn, ...)
  serial = serial + 1
  local token, n = serial, #kind.tokens + 1
  kind.tokens[n], kind.prevs[n] = token, prev
  return finish(kind, token, pcall(fn, ...))
end

-- ---- grad mode -----------------------------------------------------------------

local grad_kind -- made by install, with the C setter itself as its set

-- named as the C binding named it, for the messages of its metamethods called by hand
local GradMode = {__name = "tensh.GradMode"}

local function check_grad_mode(fn, v)
  if getmetatable(v) ~= GradMode then
    require("tensh.args").type_error(fn, 1, "tensh.GradMode", v)
  end
end

GradMode.__close = function(self)
  check_grad_mode("__close", self)
  M.exit(self._rec)
end
GradMode.__gc = function(self)
  if getmetatable(self) == GradMode then
    M.collected(self._rec, self._name .. "()", self._name .. "(function() ... end)", self._keep)
  end
end

-- sets grad mode `on`; with a function (then its arguments), runs it in the
-- mode and returns its results; otherwise returns the scope to close
local function grad_scope(name, on, keep, fn, ...)
  local prev = torch.is_grad_enabled()
  if type(fn) == "function" then
    torch._set_grad_enabled(on)
    return M.run(grad_kind, prev, fn, ...)
  end
  if fn ~= nil then
    require("tensh.args").type_error(name:match("^torch%.([%w_]+)"), keep and 2 or 1, "function or nothing", fn)
  end
  local rec = M.enter(grad_kind, prev)
  torch._set_grad_enabled(on)
  return setmetatable({_rec = rec, _name = name, _keep = keep}, GradMode)
end

function M.install(torch) -- torch: the table, before it is the global
  grad_kind = M.kind(torch._set_grad_enabled)
  torch.no_grad = function(...) return grad_scope("torch.no_grad", false, false, ...) end
  torch.enable_grad = function(...) return grad_scope("torch.enable_grad", true, false, ...) end
  torch.set_grad_enabled = function(flag, ...)
    if type(flag) ~= "boolean" then require("tensh.args").type_error("set_grad_enabled", 1, "boolean", flag) end
    return grad_scope("torch.set_grad_enabled", flag, true, ...)
  end
end

return M
