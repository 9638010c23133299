-- `local` at the prompt. Each line typed is its own chunk, so a local
-- declared on one line is gone on the next: `local x = torch.ones(2)` then
-- `x + 1` would say x is nil, and the `local` examples of the docs and of
-- ported scripts break when pasted. As trepl and IPython keep them, the
-- prompt (src/shell/repl.c) runs each chunk through rewrite(): a `local`
-- statement at the chunk's top level (not inside a function, do, if or
-- loop) becomes a global assignment, so the variable lives for the session:
--   local x, y = 1, 2          ->  x, y = 1, 2
--   local n                    ->  n = nil
--   local function f() end     ->  function f() end
--   local c <const> = 3        ->  c = 3
-- A to-be-closed variable (local _ <close> = torch.no_grad()) stays local: it
-- closes when its chunk ends, which at the prompt is the end of the line.
local M = {}

local OPEN = {["function"] = true, ["if"] = true, ["while"] = true, ["for"] = true, ["repeat"] = true}
local CLOSE = {["end"] = true, ["until"] = true}

-- the end (exclusive) of a long bracket [==[ ... ]==] opening at i, or nil
local function long_bracket_end(s, i)
  local eqs = s:match("^%[(=*)%[", i)
  if not eqs then return nil end
  local _, close = s:find("]" .. eqs .. "]", i + #eqs + 2, true)
  return (close or #s) + 1
end

-- The tokens of s that matter here: {kind, text, start, stop} with kind
-- "name" (keywords too) or "sym"; strings, numbers and comments are skipped
-- (their text never holds a statement).
local function tokens(s)
  local out, i, n = {}, 1, #s
  while i <= n do
    local c = s:sub(i, i)
    if c:match("%s") then
      i = i + 1
    elseif s:sub(i, i + 1) == "--" then
      i = long_bracket_end(s, i + 2) or ((s:find("\n", i, true) or n) + 1)
    elseif c == "[" and s:match("^%[=*%[", i) then
      i = long_bracket_end(s, i)
    elseif c == '"' or c == "'" then
      local j = i + 1
      while j <= n and s:sub(j, j) ~= c do
        if s:sub(j, j) == "\\" then j = j + 1 end
        j = j + 1
      end
      i = j + 1
    elseif c:match("[%a_]") then
      local j = s:find("[^%w_]", i) or n + 1
      out[#out + 1] = {"name", s:sub(i, j - 1), i, j - 1}
      i = j
    elseif c:match("%d") or (c == "." and s:sub(i + 1, i + 1):match("%d")) then
      local j = i
      repeat -- digits, hex, exponents with signs, '.'
        j = j + 1
        local prev = s:sub(j - 1, j - 1):lower()
        local ch = s:sub(j, j)
      until not (ch:match("[%w%.]") or ((ch == "+" or ch == "-") and (prev == "e" or prev == "p")))
      i = j
    else
      local three, two = s:sub(i, i + 2), s:sub(i, i + 1)
      local len = three == "..." and 3 or (two == "==" or two == "~=" or two == "<=" or two == ">=" or two == "//"
        or two == "::" or two == "<<" or two == ">>" or two == "..") and 2 or 1
      out[#out + 1] = {"sym", s:sub(i, i + len - 1), i, i + len - 1}
      i = i + len
    end
  end
  return out
end

-- s with its top-level `local` statements made global assignments; nil
-- when it has none to change
function M.rewrite(s)
  if type(s) ~= "string" or not s:find("local", 1, true) then return nil end
  local toks = tokens(s)
  local edits = {} -- {start, stop, replacement}: spans of s replaced, in order
  local depth, header = 0, 0 -- header: while/for whose `do` is not a block of its own
  local i = 1
  while i <= #toks do
    local kind, text = toks[i][1], toks[i][2]
    if kind == "name" then
      if text == "local" and depth == 0 then
        local nxt = toks[i + 1]
        if nxt and nxt[2] == "function" then
          edits[#edits + 1] = {toks[i][3], nxt[3] - 1, ""} -- `local function f` -> `function f`
        else
          -- the name list: name [<attrib>] {, name [<attrib>]}
          local j, closes, attribs = i + 1, false, {}
          while toks[j] and toks[j][1] == "name" do
            if toks[j + 1] and toks[j + 1][2] == "<" and toks[j + 2] and toks[j + 3] and toks[j + 3][2] == ">" then
              if toks[j + 2][2] == "close" then closes = true end
              attribs[#attribs + 1] = {toks[j + 1][3], toks[j + 3][4]}
              j = j + 4
            else
              j = j + 1
            end
            if toks[j] and toks[j][2] == "," then j = j + 1 else break end
          end
          local last = toks[j - 1]
          if not closes and j > i + 1 then
            edits[#edits + 1] = {toks[i][3], toks[i + 1][3] - 1, ""}
            for _, a in ipairs(attribs) do edits[#edits + 1] = {a[1], a[2], ""} end
            if not (toks[j] and toks[j][2] == "=") then edits[#edits + 1] = {last[4] + 1, last[4], " = nil"} end
          end
          i = j - 1
        end
      elseif OPEN[text] then
        depth = depth + 1
        if text == "while" or text == "for" then header = header + 1 end
      elseif text == "do" then
        if header > 0 then header = header - 1 else depth = depth + 1 end
      elseif CLOSE[text] then
        depth = depth - 1
      end
    end
    i = i + 1
  end
  if #edits == 0 then return nil end
  table.sort(edits, function(a, b) return a[1] < b[1] end)
  local out, pos = {}, 1
  for _, e in ipairs(edits) do
    out[#out + 1] = s:sub(pos, e[1] - 1)
    out[#out + 1] = e[3]
    pos = e[2] + 1
  end
  out[#out + 1] = s:sub(pos)
  return table.concat(out)
end

return M
