#!/usr/bin/env bash
# `make bench`: runs the tensh benchmarks and, where PyTorch can be imported,
# their PyTorch twins from shared/peers beside the checkout or its parent
# (or $TENSH_PEERS) with the same OpenBLAS kernels and the same
# number of threads, then one comparison line per case (compare.py explains
# tensh_vs_pytorch_speed: above 1 means tensh is faster).
# Usage: scripts/bench/run.sh [build-dir]. Output: JSON lines on stdout;
# what ran and what was skipped goes to stderr. Environment: BENCH_THREADS
# (default: every core), BENCH_ROUNDS (default 3), TENSH_PEERS, PYTHON,
# OPENBLAS_CORETYPE (default Haswell on an x86-64 CPU with AVX2 and FMA).
set -uo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
here="$root/scripts/bench"
tensh="$root/$build/tensh"
[ -x "$tensh" ] || { echo "bench: $tensh not built (run make)" >&2; exit 1; }

# Every core of the machine, the same for both sides (OpenMP in both,
# OpenBLAS for tensh's GEMM, torch.set_num_threads for PyTorch).
threads=${BENCH_THREADS:-$(nproc)}
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
# The same OpenBLAS kernels for both sides: left to itself, PyTorch's
# OpenBLAS may pick generic kernels on a CPU it does not know where tensh
# would restart itself onto better ones (src/shell/main.c), and the matmul
# rows would compare kernels, not code. Haswell's AVX2 kernels run on every
# x86-64 CPU with AVX2 and FMA; elsewhere both sides choose alike.
if [ -z "${OPENBLAS_CORETYPE:-}" ] && [ "$(uname -m)" = x86_64 ] && grep -qw avx2 /proc/cpuinfo &&
  grep -qw fma /proc/cpuinfo; then
  export OPENBLAS_CORETYPE=Haswell
fi

peers=${TENSH_PEERS:-}
if [ -z "$peers" ]; then
  for d in "$root/../shared/peers" "$root/../../shared/peers" "$root/shared/peers"; do
    [ -f "$d/ops_micro.py" ] && { peers=$(cd "$d" && pwd); break; }
  done
fi
# the first Python that has torch (pyenv shims often hide Debian's python3-torch)
py=""
for p in ${PYTHON:-} python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import torch' >/dev/null 2>&1; then py=$p; break; fi
done
# compare.py only needs a Python, not torch
cmp_py=$py
[ -z "$cmp_py" ] && command -v python3 >/dev/null 2>&1 && cmp_py=python3

echo "bench: $threads threads, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)}, commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)" >&2
results=$(mktemp)
trap 'rm -f "$results"' EXIT
status=0
run_peer=0
if [ -z "$peers" ]; then
  echo "bench: no peers directory (set TENSH_PEERS): PyTorch side skipped" >&2
elif [ -z "$py" ]; then
  echo "bench: no Python with torch (apt-get install python3-torch): PyTorch side skipped" >&2
else
  echo "bench: PyTorch peer $peers/ops_micro.py with $py" >&2
  run_peer=1
fi
# Rounds alternate tensh and PyTorch so that a burst of load from elsewhere
# hits both sides alike; compare.py keeps each side's best round.
rounds=${BENCH_ROUNDS:-3}
for r in $(seq "$rounds"); do
  echo "bench: round $r of $rounds" >&2
  "$tensh" "$here/ops_micro.lua" >>"$results" || status=1
  bash "$here/startup.sh" "$tensh" >>"$results" || status=1
  "$tensh" "$here/mlp_seed003.lua" --device cpu >>"$results" || status=1
  "$tensh" "$here/lstm_step.lua" --device cpu >>"$results" || status=1
  if [ $run_peer = 1 ]; then
    "$py" "$peers/ops_micro.py" --device cpu --threads "$threads" >>"$results" || status=1
    "$py" "$peers/mlp_seed003.py" --device cpu --threads "$threads" >>"$results" || status=1
    "$py" "$peers/lstm_step.py" --device cpu --threads "$threads" >>"$results" || status=1
  fi
done
# Fashion-MNIST epochs are long: once, after the rounds, when the dataset is
# there (BENCH_FASHION_EPOCHS=0 skips them)
fepochs=${BENCH_FASHION_EPOCHS:-1}
if [ "$fepochs" -gt 0 ] && [ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  for model in mlp cnn; do
    echo "bench: fashion_mnist $model, $fepochs epoch(s)" >&2
    "$tensh" "$here/fashion_mnist.lua" --model $model --epochs "$fepochs" --device cpu >>"$results" || status=1
    if [ $run_peer = 1 ]; then
      "$py" "$peers/fashion_mnist.py" --model $model --epochs "$fepochs" --device cpu --threads "$threads" \
        >>"$results" || status=1
    fi
  done
fi
if [ -n "$cmp_py" ]; then
  "$cmp_py" "$here/compare.py" <"$results" || status=1
else
  cat "$results"
fi
exit $status
