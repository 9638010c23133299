-- The Jupyter kernel (lua/tensh/jupyter.lua and its Python wrapper): how a
-- cell compiles (the last expression's values), base64 against RFC 4648's
-- vectors, `tensh --jupyter install`'s kernelspec, and a whole session
-- driven by jupyter_client (tests/lua/jupyter_session.py) where python3 has
-- jupyter_client and ipykernel: the REPL's values as execute_result, errors
-- as error replies with the session alive, stdout and stderr streamed,
-- completion, inspection, interrupts, and imshow/plot as image/png.
local T = require "harness"
local test, eq, ok, raises = T.test, T.eq, T.ok, T.raises
local J = require "tensh.jupyter"
local json = require "tensh.json"
local build = os.getenv("TENSH_BUILD") or "../../build"
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"

local tmp = os.tmpname()
os.remove(tmp)
local function sh(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("a")
  local okp, _, code = p:close()
  return out, okp and 0 or code
end
local read_all = T.read_file

test("base64: RFC 4648's test vectors", function()
  local v = {[""] = "", f = "Zg==", fo = "Zm8=", foo = "Zm9v", foob = "Zm9vYg==", fooba = "Zm9vYmE=", foobar = "Zm9vYmFy"}
  for k, e in pairs(v) do eq(J.base64(k), e, "base64('" .. k .. "')") end
  eq(J.base64("\0\255\128"), "AP+A", "bytes")
end)

test("a cell compiles as a line at the prompt: its last expression is returned", function()
  local function run(code)
    local f, quiet = J.compile(code, "=cell")
    if not f then return "syntax error", quiet end
    return table.pack(f()), quiet
  end
  local r, quiet = run("1 + 1")
  eq(r[1], 2, "an expression")
  eq(quiet, false, "shown")
  r = run("local a = 2\na * 3")
  eq(r[1], 6, "statements, then an expression that sees their locals")
  r = run("x_cell = 5; x_cell + 1")
  eq(r[1], 6, "a ';' splits statements from the expression")
  r = run("torch.tensor({1,\n  2}):sum()")
  eq(r[1]:item(), 3, "an expression over several lines")
  r = run("local t = {}\nfor i = 1, 3 do\n  t[i] = i\nend")
  eq(r.n, 0, "statements only: nothing returned")
  r, quiet = run("1 + 1;")
  eq(quiet, true, "a trailing ';' hides the value")
  r = run("s = 'a;b'\ns")
  eq(r[1], "a;b", "';' in a string is no split")
  r = run("return 7")
  eq(r[1], 7, "a return statement")
  eq(select(2, J.compile("x = = 1", "=In[4]")):match("^In%[4%]:1:") ~= nil, true, "syntax errors name the cell")
  eq(J.is_complete("x = 1"), "complete", "complete")
  eq(J.is_complete("for i = 1, 3 do"), "incomplete", "an open block")
  eq(J.is_complete("f(1,"), "incomplete", "an open call")
  eq(J.is_complete("x = = 1"), "invalid", "an error that more lines cannot fix")
end)

test("tensh --jupyter install: the kernelspec and its wrapper", function()
  local prefix = tmp .. "/prefix"
  local out, code = sh(("%s/tensh --jupyter install --prefix '%s'"):format(build, prefix))
  if code ~= 0 and out:find("no python3 with ipykernel", 1, true) then
    T.skip("python3 with ipykernel and jupyter_client is not installed (apt-get install python3-ipykernel python3-jupyter-client)")
  end
  eq(code, 0, "install: " .. out)
  local dir = prefix .. "/share/jupyter/kernels/tensh"
  ok(out:find("Installed the Jupyter kernel 'tensh' in " .. dir, 1, true), out)
  local spec = json.decode(read_all(dir .. "/kernel.json"))
  eq(spec.display_name, "tensh", "display_name")
  eq(spec.language, "lua", "language")
  eq(spec.argv[2], dir .. "/tensh_kernel.py", "the wrapper beside kernel.json")
  eq(spec.argv[3], "--tensh", "--tensh")
  ok(spec.argv[4]:match("/tensh$"), "the tensh that installed it: " .. spec.argv[4])
  eq(spec.argv[6], "{connection_file}", "connection file")
  eq(read_all(dir .. "/tensh_kernel.py"), require "tensh.jupyter_kernel_py", "the embedded wrapper")
  -- errors
  out, code = sh(("TENSH_PYTHON=/nonexistent/python3 %s/tensh --jupyter install --prefix '%s'"):format(build, prefix))
  ok(code ~= 0 and out:find("tensh --jupyter: no python3 with ipykernel and jupyter_client (tried /nonexistent/python3)", 1, true), out)
  out, code = sh(("%s/tensh --jupyter install --bogus"):format(build))
  ok(code ~= 0 and out:find("unknown option '--bogus'", 1, true), out)
  out, code = sh(("%s/tensh --jupyter install --user --prefix /x"):format(build))
  ok(code ~= 0 and out:find("--user and --prefix exclude each other", 1, true), out)
  out, code = sh(("%s/tensh --jupyter frobnicate"):format(build))
  ok(code ~= 0 and out:find("unknown command 'frobnicate'", 1, true), out)
end)

-- Runs the requests in one kernel session; returns the records (after kernel_info's).
local function session(py, requests)
  local prefix = tmp .. "/prefix"
  local _, code = sh(("%s/tensh --jupyter install --prefix '%s'"):format(build, prefix))
  eq(code, 0, "install")
  local req = tmp .. "/requests.jsonl"
  local f = assert(io.open(req, "w"))
  for _, r in ipairs(requests) do f:write(json.encode(r), "\n") end
  f:close()
  local out = sh(("JUPYTER_PATH='%s/share/jupyter' PYDEVD_DISABLE_FILE_VALIDATION=1 %s -Xfrozen_modules=off %sjupyter_session.py < '%s'")
    :format(prefix, py, here, req))
  local records = {}
  for line in out:gmatch("[^\n]+") do
    local okd, r = pcall(json.decode, line)
    if okd and type(r) == "table" and r.kind then records[#records + 1] = r end
  end
  eq(#records, #requests + 1, "one record a request, after kernel_info's; the session said:\n" .. out)
  return records
end

local function of_type(iopub, t)
  local out = {}
  for _, m in ipairs(iopub) do if m.type == t then out[#out + 1] = m.content end end
  return out
end

test("a session through jupyter_client: values, errors, streams, completion, help, pictures", function()
  local py = T.python_with("jupyter_client, ipykernel")
  if not py then T.skip("python3 with jupyter_client and ipykernel is not installed") end
  local r = session(py, {
    {kind = "execute", code = "x = torch.arange(6):view(2, 3)"},
    {kind = "execute", code = "x"},
    {kind = "execute", code = "error('boom')"},
    {kind = "execute", code = "x:sum()"},
    {kind = "execute", code = "print('hello'); io.write('a', 'b\\n'); io.stderr:write('warn\\n'); io.stdout:flush()"},
    {kind = "execute", code = "local a = 2\na * 3"},
    {kind = "execute", code = "1 + 1;"},
    {kind = "execute", code = "torch.ones(2) + torch.ones(3)"},
    {kind = "execute", code = "imshow(torch.rand(3, 8, 10))"},
    {kind = "execute", code = "plot({3, 1, 2}, {title = 'p'})"},
    {kind = "complete", code = "y = torch.ze", cursor_pos = 12},
    {kind = "complete", code = "x:su", cursor_pos = 4},
    {kind = "inspect", code = "torch.matmul", cursor_pos = 12},
    {kind = "inspect", code = "no_such_name_here", cursor_pos = 3},
    {kind = "is_complete", code = "for i = 1, 3 do"},
    {kind = "execute", code = "while true do end", interrupt_after = 2},
    {kind = "execute", code = "x:sum():item()"},
    {kind = "execute", code = "while true do end", interrupt_after = 2, wrapper_only = true},
    {kind = "execute", code = "x:sum():item() + 1"},
  })
  local info = r[1].content
  eq(info.implementation, "tensh", "kernel_info implementation")
  eq(info.language_info.name, "lua", "language")
  -- values
  eq(#of_type(r[2].iopub, "execute_result"), 0, "an assignment shows nothing")
  eq(r[2].reply.status, "ok", "assignment reply")
  eq(of_type(r[3].iopub, "execute_result")[1].data["text/plain"], "tensor([[0, 1, 2],\n        [3, 4, 5]])",
    "a tensor as the REPL prints it")
  -- errors leave the session alive
  local e = of_type(r[4].iopub, "error")[1]
  eq(r[4].reply.status, "error", "error reply")
  eq(e.ename, "Error", "ename")
  eq(e.evalue, "In[3]:1: boom", "evalue: the cell and line")
  eq(of_type(r[5].iopub, "execute_result")[1].data["text/plain"], "tensor(15)", "the session lives on, x kept")
  -- streams
  local streams = of_type(r[6].iopub, "stream")
  local outs, errs = {}, {}
  for _, s in ipairs(streams) do
    if s.name == "stdout" then outs[#outs + 1] = s.text else errs[#errs + 1] = s.text end
  end
  eq(table.concat(outs), "hello\nab\n", "stdout")
  eq(table.concat(errs), "warn\n", "stderr")
  eq(of_type(r[7].iopub, "execute_result")[1].data["text/plain"], "6", "a multi-line cell's last expression")
  eq(#of_type(r[8].iopub, "execute_result"), 0, "';' hides the value")
  ok(of_type(r[9].iopub, "error")[1].evalue:find("add: shapes (2,) and (3,) cannot be broadcast", 1, true),
    "a tensh error's message")
  -- pictures
  local img = of_type(r[10].iopub, "display_data")[1]
  ok(img, "imshow sends display_data")
  eq(img.data["image/png"]:sub(1, 8), "iVBORw0K", "a base64 PNG")
  eq(img.data["text/plain"], "<image 8 x 10>", "its text")
  eq(img.metadata["image/png"].width, 250, "small images shown bigger: 10 x 25")
  local pl = of_type(r[11].iopub, "display_data")[1]
  ok(pl and pl.data["image/png"]:sub(1, 8) == "iVBORw0K", "plot sends a PNG")
  ok(pl.data["text/plain"]:find("┤", 1, true), "and its braille text")
  -- completion and inspection
  local c = r[12].reply
  ok(T.fmt(c.matches):find("y = torch.zeros", 1, true) == nil, "matches are names, not the line")
  eq(c.matches[1], "torch.zeros", "completes torch.ze")
  eq(c.cursor_start, 4, "cursor_start: where torch.ze starts")
  eq(c.cursor_end, 12, "cursor_end")
  local names = table.concat(r[13].reply.matches, " ")
  ok(names:find("x:sum", 1, true) and names:find("x:sub", 1, true), "tensor methods: " .. names)
  eq(r[14].reply.found, true, "help for torch.matmul")
  ok(r[14].reply.data["text/plain"]:find("torch.matmul(input, other)", 1, true), r[14].reply.data["text/plain"])
  eq(r[15].reply.found, false, "no help for a missing name")
  eq(r[16].reply.status, "incomplete", "is_complete")
  -- interrupts
  local intr = of_type(r[17].iopub, "error")[1]
  eq(r[17].reply.status, "error", "an interrupted cell is an error")
  eq(intr and intr.ename, "KeyboardInterrupt", "ename of an interrupt")
  local after = of_type(r[18].iopub, "execute_result")[1]
  eq(after and after.data["text/plain"], "15", "alive after the interrupt: " .. json.encode(r[18]))
  -- an interrupt sent to the wrapper alone reaches tensh through it
  eq(r[19].reply.ename, "KeyboardInterrupt", "the wrapper passes the interrupt on")
  after = of_type(r[20].iopub, "execute_result")[1]
  eq(after and after.data["text/plain"], "16", "alive after it: " .. json.encode(r[20]))
end)

test("cleanup", function()
  os.execute("rm -rf '" .. tmp .. "'")
  eq(io.open(tmp .. "/requests.jsonl"), nil, "removed")
end)

T.run()
