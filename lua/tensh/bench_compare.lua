-- bench.Compare: the table PyTorch's torch.utils.benchmark.Compare prints.
-- One table per label; rows by (threads, env, sub_label), columns by
-- description; replicates of one task merged. :trim_significant_figures(),
-- :colorize(rowwise), :highlight_warnings(), :print(), tostring(), :json().
local raise = require("tensh.errors").raise
local json = require "tensh.json"

return function(bench)
  local Measurement = bench.Measurement
  local BEST, GOOD, BAD, VERY_BAD = "\27[92m", "\27[34m", "\27[2m\27[91m", "\27[31m"
  local BOLD, TERMINATE = "\27[1m", "\27[0m"

  -- Python's str.center: the odd space goes left when both the margin and the width are odd
  local function center(s, width, fill)
    fill = fill or " "
    local marg = width - utf8.len(s)
    if marg <= 0 then return s end
    local left = marg // 2 + (marg & width & 1)
    return fill:rep(left) .. s .. fill:rep(marg - left)
  end
  local function ljust(s, w, fill) return s .. (fill or " "):rep(w - utf8.len(s)) end
  local function rjust(s, w) return (" "):rep(w - utf8.len(s)) .. s end

  local function ordered_unique(xs, key)
    local seen, out = {}, {}
    for _, x in ipairs(xs) do
      local k = key(x)
      if not seen[k] then seen[k] = true out[#out + 1] = x end
    end
    return out
  end

  local function column(grouped, scale, trim, highlight)
    local flat = {}
    for _, g in ipairs(grouped) do for i = 1, g.n do flat[#flat + 1] = g[i] or false end end
    local col = {grouped = grouped, scale = scale, trim = trim, highlight = false}
    for _, r in ipairs(flat) do if r and r.has_warnings and highlight then col.highlight = true end end
    local unit_digits, decimal_digits = nil, trim and math.huge or 1
    for _, r in ipairs(flat) do
      if r then
        local d = math.ceil(math.log(r.median / scale, 10))
        unit_digits = math.max(unit_digits or d, d)
        if trim then decimal_digits = math.min(decimal_digits, math.max(r:significant_figures() - d, 0)) end
      end
    end
    local length = unit_digits + decimal_digits + (decimal_digits > 0 and 1 or 0)
    function col.num_to_str(value, sigfigs, spread)
      if value == nil then return (" "):rep(utf8.len(col.num_to_str(1, sigfigs, nil))) end
      if trim then value = bench.trim_sigfig(value, sigfigs) end
      local s = rjust(("%." .. decimal_digits .. "f"):format(value), length)
      local extra = col.highlight and spread and (" (! %.0f%%)"):format(spread * 100) or ""
      return s .. (col.highlight and rjust(extra, 7) or extra)
    end
    return col
  end

  local function color_segment(seg, value, best)
    if value <= best * 1.01 or value <= best + 100e-9 then return BEST .. BOLD .. seg .. TERMINATE .. TERMINATE end
    if value <= best * 1.1 then return GOOD .. BOLD .. seg .. TERMINATE .. TERMINATE end
    if value >= best * 5 then return VERY_BAD .. BOLD .. seg .. TERMINATE .. TERMINATE end
    if value >= best * 2 then return BAD .. seg .. TERMINATE .. TERMINATE end
    return seg
  end

  local function render_table(results, colorize, trim, highlight)
    local label = results[1].label
    local min_median = math.huge
    for _, r in ipairs(results) do min_median = math.min(min_median, r.median) end
    local unit, scale = bench.select_unit(min_median)
    local function row_key(m) return table.concat({m.num_threads, tostring(m.env), m:as_row_name()}, "\0") end
    local function col_key(m) return m.description or "" end
    local rows = ordered_unique(results, row_key)
    -- stable sort by (threads, env): statement order is kept inside
    for i, r in ipairs(rows) do r._order = i end
    table.sort(rows, function(a, b)
      if a.num_threads ~= b.num_threads then return a.num_threads < b.num_threads end
      local ea, eb = tostring(a.env or ""), tostring(b.env or "")
      if ea ~= eb then return ea < eb end
      return a._order < b._order
    end)
    local cols = ordered_unique(results, col_key)
    local row_pos, col_pos = {}, {}
    for i, r in ipairs(rows) do row_pos[row_key(r)] = i end
    for j, c in ipairs(cols) do col_pos[col_key(c)] = j end
    local cells = {}
    for i = 1, #rows do cells[i] = {} end
    for _, r in ipairs(results) do cells[row_pos[row_key(r)]][col_pos[col_key(r)]] = r end
    local envs, n_envs, env_len = {}, 0, 0
    for _, r in ipairs(results) do
      local e = r.env or "Unspecified env"
      if not envs[e] then envs[e] = true n_envs = n_envs + 1 env_len = math.max(env_len, #e) end
    end
    local render_env = n_envs > 1
    if not render_env then env_len = 0 end
    -- row groups: a new one at each change of thread count
    local groups, row_group, prior_threads = {}, {}, nil
    local prior_env = ""
    local row_info = {}
    for i, r in ipairs(rows) do
      local transition = r.num_threads ~= prior_threads
      if transition then prior_threads = r.num_threads prior_env = "" groups[#groups + 1] = {} end
      local env = r.env or "Unspecified env"
      row_info[i] = {group = #groups, render_env = render_env and env ~= prior_env, threads = transition and r.num_threads or nil}
      table.insert(groups[#groups], i)
      prior_env = env
    end
    local columns = {}
    for j = 1, #cols do
      local grouped = {}
      for g, members in ipairs(groups) do
        local t = {n = #members}
        for k, i in ipairs(members) do t[k] = cells[i][j] end
        grouped[g] = t
      end
      columns[j] = column(grouped, scale, trim, highlight)
    end
    local string_rows = {{""}}
    for _, c in ipairs(cols) do table.insert(string_rows[1], col_key(c)) end
    for i, r in ipairs(rows) do
      local env = row_info[i].render_env and ("(" .. (r.env or "Unspecified env") .. ")") or ""
      local out = {"  " .. ljust(env, env_len + 4) .. r:as_row_name()}
      for j, col in ipairs(columns) do
        local m = cells[i][j]
        if m then out[#out + 1] = col.num_to_str(m.median / scale, m:significant_figures(), m.has_warnings and m.iqr / m.median or nil)
        else out[#out + 1] = col.num_to_str(nil, 1, nil) end
      end
      string_rows[#string_rows + 1] = out
    end
    local widths = {}
    for _, sr in ipairs(string_rows) do
      for j = 1, #cols + 1 do widths[j] = math.max(widths[j] or 0, utf8.len(sr[j] or "")) end
    end
    local header = {}
    for j = 1, #cols + 1 do header[j] = center(string_rows[1][j], widths[j]) end
    local lines = {table.concat(header, "  |  ")}
    local overall = utf8.len(lines[1])
    for i, r in ipairs(rows) do
      if row_info[i].threads then lines[#lines + 1] = ljust(("%d threads: "):format(row_info[i].threads), overall, "-") end
      local best = {}
      if colorize == "rowwise" then
        local mn = math.huge
        for j = 1, #cols do if cells[i][j] then mn = math.min(mn, cells[i][j].median) end end
        for j = 1, #cols do best[j] = mn end
      elseif colorize == "columnwise" then
        for j = 1, #cols do
          local mn
          for _, k in ipairs(groups[row_info[i].group]) do
            local m = cells[k][j]
            if m then mn = math.min(mn or math.huge, m.median) end
          end
          best[j] = mn
        end
      end
      local parts = {ljust(string_rows[i + 1][1], widths[1])}
      for j = 1, #cols do
        local s = center(string_rows[i + 1][j + 1], widths[j + 1])
        if colorize and cells[i][j] and best[j] then s = color_segment(s, cells[i][j].median, best[j]) end
        parts[#parts + 1] = s
      end
      lines[#lines + 1] = table.concat(parts, "  |  ")
    end
    local warn = false
    if highlight then for _, r in ipairs(results) do warn = warn or r.has_warnings end end
    return ("[%s]\n%s\n\nTimes are in %ss (%s).\n%s"):format(center(" " .. (label or "") .. " ", overall - 2, "-"),
      table.concat(lines, "\n"), bench.unit_to_english(unit), unit,
      warn and "(! XX%) Measurement has high variance, where XX is the IQR / median * 100.\n" or "")
  end

  local Compare = {}
  Compare.__index = Compare
  Compare.__name = "bench.Compare"

  local function check_results(results)
    if type(results) ~= "table" then raise("Compare: expected a list of Measurements, got %s", type(results)) end
    for i, r in ipairs(results) do
      if getmetatable(r) ~= Measurement then
        raise("Compare: expected a Measurement at position %d, got %s", i, type(r))
      end
    end
  end

  function Compare:extend_results(results)
    check_results(results)
    for _, r in ipairs(results) do self._results[#self._results + 1] = r end
  end
  function Compare:trim_significant_figures() self._trim = true end
  function Compare:colorize(rowwise) self._colorize = rowwise and "rowwise" or "columnwise" end
  function Compare:highlight_warnings() self._highlight = true end

  function Compare:_groups()
    local merged = Measurement.merge(self._results)
    local groups, order = {}, {}
    for _, m in ipairs(merged) do
      local k = m.label or "\0nil"
      if not groups[k] then groups[k] = {} order[#order + 1] = k end
      table.insert(groups[k], m)
    end
    local out = {}
    for _, k in ipairs(order) do out[#out + 1] = groups[k] end
    return out
  end

  Compare.__tostring = function(self)
    local out = {}
    for _, g in ipairs(self:_groups()) do out[#out + 1] = render_table(g, self._colorize, self._trim, self._highlight) end
    return table.concat(out, "\n")
  end
  function Compare:print() print(tostring(self)) end

  -- the same data as a JSON list: one object per merged task (times in seconds)
  function Compare:json()
    local rows = json.array()
    for _, g in ipairs(self:_groups()) do
      for _, m in ipairs(g) do
        rows[#rows + 1] = {label = m.label, sub_label = m.sub_label, description = m.description,
          num_threads = m.num_threads, env = m.env, median = m.median, mean = m.mean, iqr = m.iqr,
          measurements = #m.times, significant_figures = m:significant_figures()}
      end
    end
    return json.encode(rows)
  end
  require("tensh.classes").setup(Compare, {var = "compare"}) -- compare.print() for compare:print() says so

  return function(results)
    local self = setmetatable({_results = {}, _trim = false, _colorize = nil, _highlight = false}, Compare)
    self:extend_results(results or {})
    return self
  end
end
