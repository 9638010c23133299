#!/usr/bin/env bash
# `make bench`: runs scripts/bench/ with `tensh bench` (one JSON line per
# case, the runner's schema) and, in the same run, the PyTorch twins of
# scripts/bench/twins/ (or $PEERS; scripts/bench/peers.py times them by the runner's rules), both with
# the same OpenBLAS kernels and thread counts, then prints the ratio per
# benchmark (compare.py); with BENCH_ROUNDS=R all of it R times, each side's
# best round per case compared. With BASELINE=file.jsonl the runner compares its medians
# with that earlier run and its exit status is this script's: 1 on a
# regression, 2 on a broken benchmark.
# Usage: scripts/bench/run.sh [build-dir]. Environment (make bench passes
# them): PEERS (the twins' folder; default scripts/bench/twins), BASELINE, THRESHOLD (default 5%), BENCH_THREADS
# (default 1), BENCH_MIN_RUN_TIME (seconds of timed blocks per case, default
# 1), BENCH_REPEAT, BENCH_FILTER, BENCH_ROUNDS (default 1), BENCH_DEVICE (default cpu), BENCH_FASHION=0
# (skips the Fashion-MNIST epochs), BENCH_OUT (default <build>/bench),
# PYTHON, OPENBLAS_CORETYPE (default Haswell on an x86-64 CPU with AVX2+FMA).
set -uo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
here="$root/scripts/bench"
tensh="$root/$build/tensh"
[ -x "$tensh" ] || { echo "bench: $tensh not built (run make)" >&2; exit 2; }

# The same thread counts for both sides: OpenMP's team and OpenBLAS's in
# both, torch.set_num_threads for PyTorch. One by default: on a machine
# other work shares, more threads measure the neighbours.
threads=${BENCH_THREADS:-1}
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
# Above one thread, OpenMP's idle threads sleep instead of spinning, on both
# sides: PyTorch's OpenMP team (libgomp) spun while the pthreads of Debian's
# default OpenBLAS (openblas-pthread) needed the cores, and its 2-thread LSTM
# step took 803 ms against 161 ms with OMP_WAIT_POLICY=PASSIVE (tensh's
# 198-199 -> 202-211 ms of CPU time: tensh calls BLAS outside its OpenMP
# regions). Set OMP_WAIT_POLICY to measure otherwise.
if [ "$threads" != 1 ]; then export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}; fi
# The same OpenBLAS kernels for both sides: left to itself, PyTorch's
# OpenBLAS may pick generic kernels on a CPU it does not know where tensh
# picks optimised ones, and the matmul rows would compare kernels, not code.
# Haswell's AVX2 kernels run on every x86-64 CPU with AVX2 and FMA.
if [ -z "${OPENBLAS_CORETYPE:-}" ] && [ "$(uname -m)" = x86_64 ] && grep -qw avx2 /proc/cpuinfo &&
  grep -qw fma /proc/cpuinfo; then
  export OPENBLAS_CORETYPE=Haswell
fi
export BENCH_DEVICE=${BENCH_DEVICE:-cpu} TENSH_EXE="$tensh"
min_run_time=${BENCH_MIN_RUN_TIME:-1}
out=${BENCH_OUT:-$root/$build/bench}
mkdir -p "$out"

peers=${PEERS:-$here/twins}
# the first Python that has torch (the PATH's python3 may not: Debian's
# python3-torch is /usr/bin/python3's)
py=""
for p in ${PYTHON:-} python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import torch' >/dev/null 2>&1; then py=$p; break; fi
done
cmp_py=$py
[ -z "$cmp_py" ] && command -v python3 >/dev/null 2>&1 && cmp_py=python3

echo "bench: $threads thread(s), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)}, device $BENCH_DEVICE," \
  "commit $(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown), results in $out" >&2
opts=(--min-run-time "$min_run_time")
[ -n "${THRESHOLD:-}" ] && opts+=(--threshold "$THRESHOLD")
[ -n "${BENCH_REPEAT:-}" ] && opts+=(--repeat "$BENCH_REPEAT")
[ -n "${BENCH_FILTER:-}" ] && opts+=(--filter "$BENCH_FILTER")
fashion=1
[ "${BENCH_FASHION:-1}" = 0 ] && fashion=0
peer_args=("$peers" "$out/pytorch.jsonl" --device "$BENCH_DEVICE" --threads "$threads" --min-run-time "$min_run_time"
  --fashion $fashion --filter "${BENCH_FILTER:-}")
have_peers=0
if [ ! -f "$peers/common.py" ]; then
  echo "bench: skipped: PyTorch peers not found at $peers (set PEERS=dir)" >&2
elif [ -z "$py" ]; then
  echo "bench: skipped: PyTorch peers: no Python with torch (tried ${PYTHON:+$PYTHON, }python3, /usr/bin/python3;" \
    "Debian: apt-get install python3-torch)" >&2
else
  echo "bench: PyTorch twins from $peers with $py" >&2
  have_peers=1
fi
rm -f "$out/summary.md" "$out/pytorch.jsonl"
# BENCH_ROUNDS=R: the whole run (tensh's suite, then the twins) R times, and
# compare.py keeps each side's best round per case. This machine's neighbours
# come and go in phases of minutes, and noise only adds time: with one round,
# one case's ratio moved between 0.63 and 0.87 from run to run (RESULTS.md,
# 2026-11-28); alternating rounds give both sides the same chances of a quiet
# phase. A baseline compares one round with tensh's earlier run.
rounds=${BENCH_ROUNDS:-1}
if ! [[ $rounds =~ ^[1-9][0-9]*$ ]]; then
  echo "bench: BENCH_ROUNDS=$rounds is not a positive whole number" >&2
  exit 2
fi
if [ -n "${BASELINE:-}" ] && [ "$rounds" != 1 ]; then
  echo "bench: BASELINE compares one round: BENCH_ROUNDS=$rounds ignored" >&2
  rounds=1
fi
: >"$out/tensh.jsonl"
status=0
for r in $(seq "$rounds"); do
  [ "$rounds" != 1 ] && echo "bench: round $r of $rounds" >&2
  args=("$here" --json "$out/round.jsonl" --summary "$out/summary.md" "${opts[@]}")
  [ -n "${BASELINE:-}" ] && args+=(--baseline "$BASELINE")
  rm -f "$out/round.jsonl"
  "$tensh" bench "${args[@]}"
  st=$?
  [ $st -gt $status ] && status=$st
  [ -f "$out/round.jsonl" ] && cat "$out/round.jsonl" >>"$out/tensh.jsonl"
  if [ $have_peers = 1 ]; then
    "$py" "$here/peers.py" "${peer_args[@]}" --append || echo "bench: a PyTorch twin failed (see above)" >&2
  fi
done
rm -f "$out/round.jsonl"
if [ -n "$cmp_py" ] && [ -s "$out/tensh.jsonl" ]; then
  echo
  pyres="$out/pytorch.jsonl"
  [ -f "$pyres" ] || pyres=-
  "$cmp_py" "$here/compare.py" "$out/tensh.jsonl" "$pyres" "$out/compare.jsonl"
fi
exit $status
