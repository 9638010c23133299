-- make gpu-report: registers, spills, static shared memory and theoretical
-- occupancy of every CUDA kernel for every architecture it was built for,
-- read from ptxas's resource usage (nvcc --resource-usage, kept beside each
-- object as build/cuda/*.o.res). Exits 1 when a kernel spills or when its
-- registers and shared memory leave fewer blocks per SM than its
-- __launch_bounds__ promise (minBlocksPerSM, 1 when not given).
-- usage: lua5.4 scripts/gpu_report.lua BUILD_DIR [--quiet] [--allow FILE]
-- --allow FILE (scripts/gpu_spills.tsv): the spills known today are not
-- failures unless they grow; make test uses it, make gpu-report does not.
-- Dynamic shared memory (sized at launch) is not in ptxas's numbers.
local build, quiet, allow_file = arg[1] or "build", false, nil
for i = 2, #arg do
  if arg[i] == "--quiet" then quiet = true
  elseif arg[i] == "--allow" then allow_file = arg[i + 1] end
end
local allowed = {}
if allow_file then
  for line in io.lines(allow_file) do
    local k, sm, bytes = line:match("^([^#\t][^\t]*)\t(%d+)\t(%d+)$")
    if k then allowed[k .. "@" .. sm] = tonumber(bytes) end
  end
end

-- per-SM limits (CUDA C Programming Guide, compute capabilities table)
local LIMITS = {
  [80] = {threads = 2048, blocks = 32, regs = 65536, smem = 167936},
  [86] = {threads = 1536, blocks = 16, regs = 65536, smem = 102400},
  [87] = {threads = 1536, blocks = 16, regs = 65536, smem = 167936},
  [89] = {threads = 1536, blocks = 24, regs = 65536, smem = 102400},
  [90] = {threads = 2048, blocks = 32, regs = 65536, smem = 233472},
}
local SMEM_RESERVED = 1024 -- per block, sm_80 and later
local ASSUMED_BLOCK = 256  -- the backend's usual block (TSC_THREADS) where the source gives none

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local function ls(pattern)
  local out, p = {}, io.popen("ls " .. pattern .. " 2>/dev/null")
  for line in p:lines() do out[#out + 1] = line end
  p:close()
  return out
end

-- constants the launch bounds name: #define X 256, constexpr int X = 256
local consts = {}
local sources = {}
for _, f in ipairs(ls("cuda/*.cu cuda/*.cuh cuda/*.h")) do
  local s = read(f)
  sources[#sources + 1] = s
  for name, v in s:gmatch("#define%s+([%w_]+)%s+%(?(%d+)%)?") do consts[name] = tonumber(v) end
  for name, v in s:gmatch("constexpr%s+[%w_]+%s+([%w_]+)%s*=%s*(%d+)") do consts[name] = consts[name] or tonumber(v) end
end

-- kernel name -> {threads, min_blocks} from its __launch_bounds__(...)
local bounds = {}
for _, s in ipairs(sources) do
  for args, name in s:gmatch("__launch_bounds__%s*(%b())%s*([%w_]+)%s*%(") do
    local a, b = args:match("^%(%s*([%w_]+)%s*,?%s*([%w_]*)%s*%)$")
    if a then
      bounds[name] = {threads = tonumber(a) or consts[a], min_blocks = tonumber(b) or consts[b] or 1, expr = a}
    end
  end
end

-- demangled base names, one c++filt for all
local function demangle(names)
  local tmp = os.tmpname()
  local f = io.open(tmp, "w")
  for _, n in ipairs(names) do f:write(n, "\n") end
  f:close()
  local out, p = {}, io.popen("c++filt < " .. tmp)
  for line in p:lines() do out[#out + 1] = line end
  p:close()
  os.remove(tmp)
  return out
end

local rows = {}
local files = ls(build .. "/cuda/*.o.res")
if #files == 0 then
  io.stderr:write("gpu-report: no " .. build .. "/cuda/*.o.res (a CUDA build with nvcc writes them; run make)\n")
  os.exit(2)
end
for _, path in ipairs(files) do
  local cur
  for line in io.lines(path) do
    local mangled, sm = line:match("Compiling entry function '([^']+)' for 'sm_(%d+)'")
    if mangled then
      cur = {file = path:match("([^/]+)%.o%.res$"), mangled = mangled, sm = tonumber(sm), regs = 0, smem = 0,
             spill_st = 0, spill_ld = 0, stack = 0}
      rows[#rows + 1] = cur
    elseif cur then
      local st, sst, sld = line:match("(%d+) bytes stack frame, (%d+) bytes spill stores, (%d+) bytes spill loads")
      if st then cur.stack, cur.spill_st, cur.spill_ld = tonumber(st), tonumber(sst), tonumber(sld) end
      local r = line:match("Used (%d+) registers")
      if r then
        cur.regs = tonumber(r)
        cur.smem = tonumber(line:match("(%d+) bytes smem") or 0)
      end
    end
  end
end

local names = {}
for i, r in ipairs(rows) do names[i] = r.mangled end
for i, d in ipairs(demangle(names)) do
  d = d:gsub("%(anonymous namespace%)::", ""):gsub("^void ", "")
  rows[i].pretty = d
  -- the function's own name: the identifier before its parameter list
  rows[i].base = d:gsub("%b<>", ""):match("([%w_]+)%s*%(") or d
  -- a bound named by a template parameter (scan_row_k<T, NT>): the kernel's
  -- last integer template argument
  rows[i].tmpl_int = tonumber((d:match("^[%w_:]+(%b<>)") or ""):match("(%d+)>$"))
end

local function occupancy(r)
  local lim = LIMITS[r.sm]
  if not lim then return nil end
  local b = bounds[r.base]
  local block = (b and (b.threads or r.tmpl_int)) or ASSUMED_BLOCK
  local warps = math.ceil(block / 32)
  local warp_regs = math.ceil(math.max(r.regs, 1) * 32 / 256) * 256
  local by_regs = math.floor(math.floor(lim.regs / warp_regs) / warps)
  local by_smem = r.smem > 0 and math.floor(lim.smem / (r.smem + SMEM_RESERVED)) or lim.blocks
  local by_threads = math.floor(lim.threads / block)
  local blocks = math.min(by_regs, by_smem, by_threads, lim.blocks)
  return blocks * warps / (lim.threads / 32), blocks, block, b
end

table.sort(rows, function(a, b)
  if a.file ~= b.file then return a.file < b.file end
  if a.base ~= b.base then return a.base < b.base end
  if a.pretty ~= b.pretty then return a.pretty < b.pretty end
  return a.sm < b.sm
end)

local bad = {}
if not quiet then
  print(("%-12s %-44s %5s %5s %7s %6s %6s %5s %s"):format("file", "kernel", "sm", "regs", "smem", "spill", "block",
                                                        "occ", "blocks/SM"))
end
for _, r in ipairs(rows) do
  local occ, blocks, block, b = occupancy(r)
  local spill = r.spill_st + r.spill_ld
  local label = r.pretty:gsub("%(.*$", "")
  if not quiet then
    local shown = #label > 44 and label:sub(1, 41) .. "..." or label
    print(("%-12s %-44s %5d %5d %7d %6d %5d%s %4.0f%% %d"):format(r.file, shown, r.sm, r.regs, r.smem, spill, block,
                                                                 b and " " or "?", (occ or 0) * 100, blocks or 0))
  end
  local listed = allowed[label .. "@" .. r.sm]
  if spill > 0 and not (listed and spill <= listed) then
    bad[#bad + 1] = ("%s sm_%d: %d bytes spilled (stores %d, loads %d)"):format(r.pretty, r.sm, spill, r.spill_st, r.spill_ld)
  end
  if b and blocks and blocks < b.min_blocks then
    bad[#bad + 1] = ("%s sm_%d: %d blocks of %d threads fit per SM, __launch_bounds__ promises %d"):format(
      r.pretty, r.sm, blocks, block, b.min_blocks)
  end
end
print(("gpu-report: %d kernel builds in %d objects; block '?' = no __launch_bounds__, %d assumed"):format(
  #rows, #files, ASSUMED_BLOCK))
for _, m in ipairs(bad) do print("FAIL " .. m) end
os.exit(#bad == 0 and 0 or 1)
