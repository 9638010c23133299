-- Errors raised at the user's line: the level of the first caller that is
-- neither C nor one of tensh's own Lua files (lua/tensh/*), so a message from
-- deep inside nn, optim or the losses points at the line the user wrote.
local M = {}

function M.raise(msg, ...)
  if select("#", ...) > 0 then msg = msg:format(...) end
  local level = 2
  while true do
    local info = debug.getinfo(level, "S")
    if not info then level = 0 break end
    if info.what ~= "C" and not info.source:find("^@lua/tensh/") then break end
    level = level + 1
  end
  error(msg, level)
end

return M
