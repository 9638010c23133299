-- Table helpers shared by the optimizers (optim.lua) and the schedulers
-- (optim/lr_scheduler.lua).
local M = {}

function M.is_plain_table(v) return type(v) == "table" and not torch.is_tensor(v) end

function M.shallow_copy(v)
  if type(v) ~= "table" then return v end
  local t = {}
  for k, x in pairs(v) do t[k] = x end
  return t
end

function M.sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  return keys
end

function M.show(v)
  if type(v) == "table" and not torch.is_tensor(v) then
    local parts = {}
    for i, x in ipairs(v) do parts[i] = M.show(x) end
    return "{" .. table.concat(parts, ", ") .. "}"
  end
  return tostring(v)
end

return M
