-- Python's warnings as a ported script sees them: "script.lua:12:
-- UserWarning: message" on stderr, shown once per call site, as Python's
-- default filter shows a warning once per location (a warning raised in a
-- training loop prints once, not every iteration). The call site is the
-- user's line: the first frame outside tensh's own Lua library.
local M = {}

local shown = {}

-- "file:line" of the first caller that is neither C nor lua/tensh/*, or nil
local function user_site()
  for level = 3, 64 do
    local info = debug.getinfo(level, "Sl")
    if not info then return nil end
    if info.what ~= "C" and not info.source:find("^@lua/tensh/") then
      return info.currentline > 0 and ("%s:%d"):format(info.short_src, info.currentline) or info.short_src
    end
  end
end

-- warn(message [, category = "UserWarning" [, key]]): prints unless this
-- message was shown for this call site; `key` replaces the call site (for a
-- warning with no meaningful site, such as one from a finalizer: shown once
-- per key, without a location).
function M.warn(msg, category, key)
  category = category or "UserWarning"
  local site = key == nil and user_site() or nil
  local id = (key or site or "?") .. "\0" .. category .. "\0" .. msg
  if shown[id] then return end
  shown[id] = true
  io.stderr:write(site and site .. ": " or "", category, ": ", msg, "\n")
end

return M
