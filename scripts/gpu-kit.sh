#!/usr/bin/env bash
# A portable bundle for a GPU machine that has the CUDA toolkit (and perhaps
# PyTorch) but none of the Debian packages tensh builds with, and may have no
# package registry: a build whose Debian libraries (Lua, readline,
# OpenBLAS, cJSON, zlib and what they need) are copied into build-gpu/lib and
# found through an $ORIGIN rpath. cuBLAS and the CUDA runtime come from the
# machine's own toolkit (LD_LIBRARY_PATH=/usr/local/cuda/lib64 there); cuDNN
# (too big to pack) from PyTorch's wheels there, through TENSH_CUDNN_LIB.
#
# Here:   bash scripts/gpu-kit.sh          (writes build-kit/tensh-gpu.tar.xz: carry build-kit)
# There:  bash scripts/gpu-kit.sh --run    (unpacks it; the suite, compute-sanitizer, the benchmarks)
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-gpu

if [ "${1:-}" = "--run" ]; then
  [ -x "$build/tensh" ] || tar xJf build-kit/tensh-gpu.tar.xz
  # Debian's dataset-fashion-mnist, where the scripts look for it
  if [ -d build-kit/fashion-mnist ] && [ ! -d /usr/share/datasets/fashion-mnist ]; then
    mkdir -p /usr/share/datasets && cp -r build-kit/fashion-mnist /usr/share/datasets/
  fi
  export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
  # cuDNN for the convolutions: the one PyTorch's pip wheels ship (nvidia-cudnn-*, or
  # torch/lib), unless TENSH_CUDNN_LIB names one already; else the loader's paths
  if [ -z "${TENSH_CUDNN_LIB:-}" ]; then
    cudnn_lib=$(python3 - <<'EOF' 2>/dev/null || true
import glob, os, site
roots = []
try:
    import nvidia.cudnn  # a namespace package: __path__, not __file__
    roots += list(nvidia.cudnn.__path__)
except Exception:
    pass
for sp in site.getsitepackages() + [site.getusersitepackages()]:
    roots += [os.path.join(sp, "nvidia"), os.path.join(sp, "torch", "lib")]
for r in roots:
    hits = sorted(glob.glob(os.path.join(r, "**", "libcudnn.so.9"), recursive=True))
    if hits:
        print(hits[0])
        break
EOF
    )
    if [ -n "$cudnn_lib" ]; then export TENSH_CUDNN_LIB="$cudnn_lib"; fi
  fi
  out=${OUT:-/tmp/tensh-gpu}
  mkdir -p "$out"
  nvidia-smi -L | tee "$out/device.txt" || true
  echo "cuDNN: ${TENSH_CUDNN_LIB:-libcudnn.so.9 from the loader paths, if there is one}" | tee -a "$out/device.txt"
  bash tests/run.sh "$build" 2>&1 | tee "$out/test.txt" | tail -n 40
  # memcheck over the CUDA tests: every op once on the GPU
  if command -v compute-sanitizer >/dev/null 2>&1; then
    for f in tests/lua/test_cuda_*.lua; do
      (cd tests/lua && TENSH_BUILD="../../$build" compute-sanitizer --tool memcheck --error-exitcode 9 \
        "../../$build/tensh" "$(basename "$f")") >"$out/memcheck-$(basename "$f" .lua).txt" 2>&1
      echo "memcheck $(basename "$f"): exit $? ($(grep -c 'ERROR SUMMARY: 0' "$out/memcheck-$(basename "$f" .lua).txt") clean summaries)"
    done
  fi
  # the benchmarks and their PyTorch twins, side by side
  bash scripts/bench/run.sh "$build" >"$out/bench.jsonl" 2>"$out/bench.err" || true
  tail -n 20 "$out/bench.jsonl"
  exit 0
fi

# every architecture with PTX, unless CUDA_ARCH names the target machine's card
make -j"$(nproc)" BUILD="$build" CUDA_ARCH="${CUDA_ARCH:-all}" LDFLAGS='-Wl,-rpath,\$$ORIGIN/lib' \
  "$build/tensh" "$build/test_c"
mkdir -p "$build/lib"
# every shared library the binaries need, except the C runtime and CUDA's own
for bin in "$build/tensh" "$build/test_c"; do
  ldd "$bin" | awk '/=> \//{print $3}'
done | sort -u | grep -vE '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libstdc\+\+|libgcc_s|libcublas[^/]*|libcudart[^/]*)\.so' |
  grep -v "/$build/lib/" | while read -r lib; do cp -L "$lib" "$build/lib/"; done
# small enough to carry: binaries without debug sections, everything xz-packed
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/$build" build-kit
cp -r "$build/lib" "$stage/$build/"
for bin in tensh test_c; do strip --strip-debug -o "$stage/$build/$bin" "$build/$bin"; done
tar cJf build-kit/tensh-gpu.tar.xz -C "$stage" "$build"
# the dataset the Fashion-MNIST benchmark and script read (30 MB, already gzipped)
[ -d /usr/share/datasets/fashion-mnist ] && rm -rf build-kit/fashion-mnist && cp -r /usr/share/datasets/fashion-mnist build-kit/
du -sh build-kit
echo "carry build-kit with a checkout of this repository (the PyTorch twins are in scripts/bench/twins)"
