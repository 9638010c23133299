-- tensh as a Jupyter kernel. Jupyter's protocol (ZeroMQ sockets, signed
-- messages, heartbeat, control channel) is spoken by ipykernel in a thin
-- Python wrapper (jupyter_kernel.py, embedded in the binary as
-- tensh.jupyter_kernel_py), which starts `tensh --jupyter kernel IN OUT`
-- and passes it one JSON request a line on fd IN; this file answers on fd
-- OUT, one JSON message a line. The code's stdout and stderr are the
-- wrapper's pipes, streamed to the notebook as they come.
--
-- Cells run as lines do at the prompt: the last expression's values come
-- back printed as the prompt prints them (a trailing ';' hides them),
-- errors carry the prompt's message (the user's line and frames), Ctrl-C
-- (the notebook's interrupt) stops the cell, completion is the prompt's
-- completer and inspection is help()'s text. imshow and plot send
-- display_data with a PNG (tensh.plot's display hook).
--
-- `tensh --jupyter install [--user] [--prefix DIR]` writes the kernelspec
-- "tensh" through jupyter_client's KernelSpecManager (Jupyter's own idea
-- of where kernels live), with the wrapper beside kernel.json.
local json = require "tensh.json"
local shell = require "tensh.shell"
local plot = require "tensh.plot"
local image = require "tensh.image"
local M = {}

-- ---- base64 (display_data carries PNGs as base64 text) ------------------------------

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local b64chars = {}
for i = 1, 64 do b64chars[i - 1] = B64:sub(i, i) end
function M.base64(s)
  local out, n = {}, #s
  for i = 1, n - 2, 3 do
    local a, b, c = s:byte(i, i + 2)
    local v = a << 16 | b << 8 | c
    out[#out + 1] = b64chars[v >> 18] .. b64chars[v >> 12 & 63] .. b64chars[v >> 6 & 63] .. b64chars[v & 63]
  end
  local rest = n % 3
  if rest == 1 then
    local v = s:byte(n) << 16
    out[#out + 1] = b64chars[v >> 18] .. b64chars[v >> 12 & 63] .. "=="
  elseif rest == 2 then
    local a, b = s:byte(n - 1, n)
    local v = a << 16 | b << 8
    out[#out + 1] = b64chars[v >> 18] .. b64chars[v >> 12 & 63] .. b64chars[v >> 6 & 63] .. "="
  end
  return table.concat(out)
end

-- ---- compiling a cell as the prompt compiles a line ---------------------------------

local MAX_SPLITS = 200 -- where to look for the last expression: the last lines and statements

-- The cell as a function that returns its last expression's values (the
-- shortest tail after a line break or a ';' that is an expression, with
-- the rest compiling on its own), or that runs it as statements. Returns
-- f, quiet (a trailing ';'), or nil and the syntax error.
function M.compile(code, name)
  local body = code:gsub("%s+$", "")
  local quiet = body:sub(-1) == ";"
  if quiet then body = body:gsub("[;%s]+$", "") end
  local splits = {}
  for i = #body, 2, -1 do
    local c = body:sub(i - 1, i - 1)
    if c == "\n" or c == ";" then splits[#splits + 1] = i end
    if #splits >= MAX_SPLITS then break end
  end
  splits[#splits + 1] = 1
  for _, at in ipairs(splits) do
    local prefix, suffix = body:sub(1, at - 1), body:sub(at)
    if suffix:find("%S") and load("return " .. suffix .. ";", name) then
      local sep = prefix:sub(-1) == "\n" and "\n" or " "
      if sep == "\n" then prefix = prefix:sub(1, -2) end
      if prefix == "" or load(prefix, name) then
        local f = load(prefix .. (prefix == "" and "" or sep) .. "return " .. suffix .. ";", name)
        if f then return f, quiet end
      end
    end
  end
  local f, err = load(body, name)
  if not f then return nil, err end
  return f, true
end

-- Whether a cell is complete, as the prompt asks for more (">> "): a syntax
-- error at its end (<eof>) means more lines are to come.
function M.is_complete(code)
  if load("return " .. code, "=cell") then return "complete" end
  local f, err = load(code, "=cell")
  if f then return "complete" end
  if err:match("<eof>$") and not err:match("syntax error near <eof>$") then return "incomplete" end
  return "invalid"
end

-- ---- answering the wrapper -----------------------------------------------------------

local out_file -- the reply pipe

local function send(msg)
  io.stdout:flush() -- what the code printed before this message goes first
  io.stderr:flush()
  out_file:write(json.encode(msg), "\n")
  out_file:flush()
end

-- the Jupyter picture of a uint8 (C, H, W) tensor: a PNG, shown bigger when it is small
local function image_bundle(pic, text)
  local h, w = pic:size(1), pic:size(2)
  local k = math.max(1, 256 // math.max(h, w))
  return {["image/png"] = M.base64(image.png_string(pic)), ["text/plain"] = text},
    {["image/png"] = {width = w * k, height = h * k}}
end

-- imshow and plot hand their pictures here while a cell runs
local function display(kind, obj)
  local data, meta
  if kind == "image" then
    data, meta = image_bundle(obj, ("<image %d x %d>"):format(obj:size(1), obj:size(2)))
  else
    local fig = require "tensh.figure"
    data, meta = image_bundle(fig.png_picture(obj), plot.render(obj, "none", nil))
  end
  send({type = "display", data = data, metadata = meta})
end

local function error_reply(msg, name)
  msg = tostring(msg)
  -- a tail call (`return f()`) leaves no frame of the cell: the prompt's handler says stdin:1
  msg = msg:gsub("^stdin:1:", name .. ":1:")
  local lines = {}
  for l in (msg .. "\n"):gmatch("(.-)\n") do lines[#lines + 1] = l end
  local interrupted = msg:find("interrupted!", 1, true) ~= nil
  return {type = "result", status = "error", ename = interrupted and "KeyboardInterrupt" or "Error",
          evalue = lines[1], traceback = json.array(lines)}
end

function M.execute(req, C)
  local name = ("In[%d]"):format(math.tointeger(req.count) or 0)
  local f, quiet_or_err = M.compile(req.code or "", "=" .. name)
  if not f then return error_reply(quiet_or_err, name) end
  local r = table.pack(C.call(f))
  if not r[1] then return error_reply(r[2], name) end
  local reply = {type = "result", status = "ok"}
  if r.n > 1 and not quiet_or_err then
    local parts = {}
    for i = 2, r.n do
      local okf, s = pcall(shell.format, r[i])
      parts[#parts + 1] = okf and s or ("<error printing the value: %s>"):format(tostring(s))
    end
    reply.text = table.concat(parts, "\t")
  end
  return reply
end

-- the word before the cursor, as the prompt's completer sees words (a.b.c:pre)
local function byte_pos(code, cursor)
  if not cursor then return #code end
  return (utf8.offset(code, cursor + 1) or #code + 1) - 1
end

function M.complete(req, C)
  local code = req.code or ""
  local pos = byte_pos(code, req.cursor_pos)
  local word = code:sub(1, pos):match("[%w_%.:]*$")
  local matches = {}
  local okc, found = pcall(C.completions, word)
  if okc and type(found) == "table" then
    local sep = #word
    while sep > 0 and not word:sub(sep, sep):match("[.:]") do sep = sep - 1 end
    for k in pairs(found) do matches[#matches + 1] = word:sub(1, sep) .. k end
    table.sort(matches)
  end
  return {type = "complete", matches = json.array(matches), cursor_start = utf8.len(code, 1, pos) - utf8.len(word),
          cursor_end = utf8.len(code, 1, pos)}
end

-- help()'s text for the name under the cursor: the value a global name
-- holds, else the name as the reference spells it
function M.inspect(req)
  local code = req.code or ""
  local pos = byte_pos(code, req.cursor_pos)
  local left = code:sub(1, pos):match("[%w_%.:]*$")
  local right = code:sub(pos + 1):match("^[%w_]*")
  local word = (left .. right):gsub("[.:]$", "")
  if word == "" then return {type = "inspect", found = false} end
  local lines = {}
  local saved = print
  print = function(...) -- luacheck: ignore (help() prints; the kernel collects)
    local parts = {}
    for i = 1, select("#", ...) do parts[i] = tostring((select(i, ...))) end
    lines[#lines + 1] = table.concat(parts, "\t")
  end
  local okr, value = pcall(shell.resolve, word)
  local okh = pcall(shell.help, okr and value ~= nil and type(value) ~= "number" and type(value) ~= "string"
    and type(value) ~= "boolean" and value or word)
  print = saved -- luacheck: ignore
  local text = table.concat(lines, "\n")
  if not okh or text == "" or text:match("^help: no entry") then return {type = "inspect", found = false} end
  return {type = "inspect", found = true, text = text}
end

function M.serve(in_fd, out_fd, C)
  local input = assert(io.open("/dev/fd/" .. in_fd, "rb"))
  out_file = assert(io.open("/dev/fd/" .. out_fd, "wb"))
  io.stdout:setvbuf("line") -- a pipe: lines reach the notebook as they are printed
  -- the prompt's globals (help, dir, plot, imshow, ...)
  for _, k in ipairs({"help", "dir", "plot", "imshow"}) do
    if rawget(_G, k) == nil then rawset(_G, k, shell[k]) end
  end
  plot.display = display
  send({type = "ready", version = torch.__version__, banner = ("tensh %s (%s) — torch, cuda loaded"):format(
    torch.__version__, _VERSION)})
  for line in input:lines() do
    local okd, req = pcall(json.decode, line)
    local reply
    if not okd or type(req) ~= "table" then
      reply = {type = "result", status = "error", ename = "ProtocolError", evalue = "bad request: " .. tostring(req),
               traceback = json.array({})}
    elseif req.type == "execute" then reply = M.execute(req, C)
    elseif req.type == "complete" then reply = M.complete(req, C)
    elseif req.type == "inspect" then reply = M.inspect(req)
    elseif req.type == "is_complete" then reply = {type = "is_complete", status = M.is_complete(req.code or "")}
    elseif req.type == "shutdown" then break
    else reply = {type = "unknown", request = tostring(req.type)} end
    send(reply)
  end
  io.stdout:flush()
  return 0
end

-- ---- install ------------------------------------------------------------------------

local function quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- The python3 that has ipykernel and jupyter_client: TENSH_PYTHON alone
-- when it is set, else python3 on PATH, else the system's.
local function find_python()
  local env = os.getenv("TENSH_PYTHON")
  local candidates = (env and env ~= "") and {env} or {"python3", "/usr/bin/python3"}
  for _, py in ipairs(candidates) do
    local p = io.popen(quote(py) .. " -c 'import ipykernel, jupyter_client, sys; print(sys.executable)' 2>/dev/null")
    local exe = p and p:read("l")
    if p then p:close() end
    if exe and exe ~= "" then return exe end
  end
  return nil, table.concat(candidates, ", ")
end

local function write_file(path, text)
  local f, err = io.open(path, "wb")
  if not f then error(("cannot write %s: %s"):format(path, err), 0) end
  f:write(text)
  f:close()
end

function M.install(args, C)
  local user, prefix = false, nil
  local i = 2
  while args[i] do
    local a = args[i]
    if a == "--user" then user = true
    elseif a == "--prefix" then
      i = i + 1
      prefix = args[i]
      if not prefix then error("--prefix needs a directory", 0) end
    else
      error(("unknown option '%s' (tensh --jupyter install [--user] [--prefix DIR])"):format(a), 0)
    end
    i = i + 1
  end
  if user and prefix then error("--user and --prefix exclude each other", 0) end
  local py, tried = find_python()
  if not py then
    error(("no python3 with ipykernel and jupyter_client (tried %s): on Debian, apt-get install python3-ipykernel " ..
      "python3-jupyter-client; or name one with TENSH_PYTHON"):format(tried), 0)
  end
  local exe = C.exe or arg and arg[-1]
  local tmp = os.tmpname()
  os.remove(tmp)
  assert(os.execute("mkdir -p " .. quote(tmp)))
  write_file(tmp .. "/tensh_kernel.py", require "tensh.jupyter_kernel_py")
  write_file(tmp .. "/kernel.json", "{}\n")
  local code = ("import sys; from jupyter_client.kernelspec import KernelSpecManager; " ..
    "print(KernelSpecManager().install_kernel_spec(sys.argv[1], 'tensh', user=%s, prefix=%s, replace=True))"):format(
    user and "True" or "False", prefix and "sys.argv[2]" or "None")
  local p = io.popen(quote(py) .. " -c " .. quote(code) .. " " .. quote(tmp) .. (prefix and " " .. quote(prefix) or "") .. " 2>&1")
  local out = p:read("a")
  local okp = p:close()
  os.execute("rm -rf " .. quote(tmp))
  local dest = out:match("([^\n]+)\n?$")
  if not okp or not dest then error("jupyter_client could not install the kernelspec: " .. out, 0) end
  local spec = {
    argv = json.array({py, dest .. "/tensh_kernel.py", "--tensh", exe, "-f", "{connection_file}"}),
    display_name = "tensh", language = "lua", interrupt_mode = "signal",
    metadata = {tensh_version = torch.__version__},
  }
  write_file(dest .. "/kernel.json", json.encode(spec) .. "\n")
  print(("Installed the Jupyter kernel 'tensh' in %s\n  (python: %s, tensh: %s)\n" ..
    "Start it with: jupyter console --kernel tensh, or choose tensh in a notebook"):format(dest, py, exe))
  return 0
end

local USAGE = [[usage: tensh --jupyter install [--user] [--prefix DIR]
  writes the kernelspec 'tensh' (system-wide, in your user's Jupyter
  directory with --user, or under DIR/share/jupyter with --prefix)
       tensh --jupyter kernel IN OUT
  (run by the kernel's Python wrapper: serves requests on file descriptors IN and OUT)]]

function M.main(args, C)
  local cmd = args[1]
  local okm, code = pcall(function()
    if cmd == "install" then return M.install(args, C) end
    if cmd == "kernel" then
      local fin, fout = tonumber(args[2]), tonumber(args[3])
      if not fin or not fout then error("kernel needs two file descriptors: tensh --jupyter kernel IN OUT", 0) end
      return M.serve(math.tointeger(fin), math.tointeger(fout), C)
    end
    if cmd == "-h" or cmd == "--help" then
      print(USAGE)
      return 0
    end
    error(("unknown command '%s'\n%s"):format(tostring(cmd), USAGE), 0)
  end)
  if not okm then
    io.stderr:write("tensh --jupyter: ", tostring(code), "\n")
    return 1
  end
  return code
end

return M
