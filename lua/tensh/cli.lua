-- Command-line options for tensh's scripts: `--name value`, `--name=value`,
-- `--flag`, and `--help`, declared once with their defaults and help text.
--
--   local cli = require "tensh.cli"
--   local args = cli.parse(arg, "train a model", {
--     {"epochs", 5, "number of epochs"},           -- a number option
--     {"model", "mlp", "mlp or cnn", {"mlp", "cnn"}}, -- a choice
--     {"resume", false, "continue from the last checkpoint"}, -- a flag
--   })
--   args.epochs, args.model, args.resume, args.batch_size ("--batch-size")
local cli = {}

local function key(name) return (name:gsub("-", "_")) end

local function usage(script, about, spec)
  local lines = {("usage: tensh %s [options]"):format(script), "", about, "", "options:"}
  for _, o in ipairs(spec) do
    local name, default, help, choices = o[1], o[2], o[3], o[4]
    local shown = type(default) == "boolean" and "" or (" " .. (choices and table.concat(choices, "|") or "VALUE"))
    local def = type(default) == "boolean" and "" or (" (default: %s)"):format(tostring(default))
    lines[#lines + 1] = ("  --%-22s %s%s"):format(name .. shown, help, def)
  end
  lines[#lines + 1] = ("  --%-22s %s"):format("help", "show this help and exit")
  return table.concat(lines, "\n")
end

-- Returns the options table; prints the help and exits on --help; raises a
-- clear error for an unknown option or a bad value.
function cli.parse(argv, about, spec)
  local script = argv and argv[0] or "script.lua"
  local by_name, out = {}, {}
  for _, o in ipairs(spec) do
    by_name[o[1]] = o
    out[key(o[1])] = o[2]
  end
  local i = 1
  while argv and argv[i] do
    local a = argv[i]
    if a == "--help" or a == "-h" then
      print(usage(script, about, spec))
      os.exit(0)
    end
    local name, value = a:match("^%-%-([%w%-_]+)=(.*)$")
    name = name or a:match("^%-%-([%w%-_]+)$")
    local o = name and by_name[name:gsub("_", "-")]
    if not o then error(("%s: unknown option '%s' (see --help)"):format(script, a), 0) end
    local default = o[2]
    if type(default) == "boolean" then
      out[key(o[1])] = value == nil or value == "true" or value == "1"
    else
      if value == nil then
        i = i + 1
        value = argv[i]
        if value == nil then error(("%s: option --%s needs a value"):format(script, o[1]), 0) end
      end
      if type(default) == "number" then
        local v = tonumber(value)
        if not v then error(("%s: option --%s expects a number, got '%s'"):format(script, o[1], value), 0) end
        if math.type(default) == "integer" then
          if math.type(v) ~= "integer" and v ~= math.floor(v) then
            error(("%s: option --%s expects an integer, got '%s'"):format(script, o[1], value), 0)
          end
          v = math.tointeger(v)
        end
        value = v
      elseif o[4] then
        local okv = false
        for _, c in ipairs(o[4]) do okv = okv or c == value end
        if not okv then
          error(("%s: option --%s must be one of %s, got '%s'"):format(script, o[1], table.concat(o[4], ", "), value), 0)
        end
      end
      out[key(o[1])] = value
    end
    i = i + 1
  end
  return out
end

-- The best device available: "cuda" when a GPU can be used, else "cpu";
-- `requested` ("auto", "cpu", "cuda", "cuda:1") overrides it.
function cli.device(requested)
  if requested == nil or requested == "auto" then
    return (cuda and cuda.is_available()) and "cuda" or "cpu"
  end
  if requested:match("^cuda") and not (cuda and cuda.is_available()) then
    error(("device '%s' requested but CUDA is not available (no GPU, driver or CUDA build); use --device cpu"):format(requested), 0)
  end
  return requested
end

return cli
