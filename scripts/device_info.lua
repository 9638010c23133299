-- What the tutorials print about devices and memory: the CUDA build and
-- devices when there are any, and the CPU side (threads, BLAS, tensor memory).
local cli = require "tensh.cli"
cli.parse(arg, "Print the devices tensh can use and their memory.", {})

print(("tensh %s (Lua %s)"):format(torch.__version__, _VERSION:match("%d+%.%d+")))
print(("CUDA build: %s"):format(cuda.version and ("yes, CUDA " .. cuda.version) or "no (CPU-only build)"))
print(("cuda.is_available(): %s"):format(tostring(cuda.is_available())))
print(("cuda.device_count(): %d"):format(cuda.device_count()))
if cuda.is_available() then
  for i = 0, cuda.device_count() - 1 do
    local name = cuda.get_device_name and cuda.get_device_name(i) or "?"
    print(("  cuda:%d  %s"):format(i, name))
    if cuda.get_device_properties then
      local p = cuda.get_device_properties(i)
      print(("    compute capability %d.%d, %d SMs, %.1f GiB"):format(p.major, p.minor, p.multi_processor_count,
        p.total_memory / 2 ^ 30))
    end
    if cuda.memory_allocated then
      print(("    allocated %d bytes, reserved %d bytes"):format(cuda.memory_allocated(i), cuda.memory_reserved(i)))
    end
  end
else
  print("  no GPU here: tensors live on the CPU (device \"cpu\")")
end
local threads = os.getenv("OMP_NUM_THREADS")
local f = io.popen("nproc 2>/dev/null")
local cores = f and f:read("l") or "?"
if f then f:close() end
print(("CPU: %s cores, OMP_NUM_THREADS=%s; GEMM through OpenBLAS"):format(cores, threads or "(unset: all cores)"))
local x = torch.randn(1000, 1000)
print(("a 1000x1000 float32 tensor takes %d bytes (%s, %s)"):format(x:numel() * x:element_size(), tostring(x.dtype),
  tostring(x.device)))
