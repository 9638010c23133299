#!/usr/bin/env bash
# make gpu-report's checker (scripts/gpu_report.lua) on this build's kernels
# (a spill not in scripts/gpu_spills.tsv, or larger than listed, fails), and
# on a made-up resource report that spills and breaks a launch-bounds
# promise, so the check is seen to fail.
# usage: test_gpu_report.sh BUILD_DIR; ends with "shell:test_gpu_report: N passed, N failed, N skipped".
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
name=shell:test_gpu_report
passed=0 failed=0 skipped=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
want() { [ -z "${TEST_FILTER:-}" ] || [[ $1 == *"$TEST_FILTER"* ]]; }
pass() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL $name: $1: $2"; [ $# -ge 3 ] && sed 's/^/    | /' <<<"$3" | head -n 30; }
cd "$root"

if want "no kernel spills (beyond the known list) or breaks its launch bounds"; then
  if ! ls "$build"/cuda/*.o.res >/dev/null 2>&1; then
    echo "SKIP $name: no kernel spills or breaks its launch bounds: $build has no nvcc objects (a CPU-only build)"
    skipped=$((skipped + 1))
  else
    out=$(lua5.4 scripts/gpu_report.lua "$build" --quiet --allow scripts/gpu_spills.tsv 2>&1)
    [ $? -eq 0 ] && pass || fail "no kernel spills or breaks its launch bounds" "gpu-report failed" "$out"
  fi
fi

if want "a spill and a broken promise fail the report"; then
  mkdir -p "$tmp/cuda"
  # softmax_block_k has __launch_bounds__(1024, 1): 128 registers x 1024 threads cannot fit one block
  cat >"$tmp/cuda/fake.o.res" <<'RES'
ptxas info    : Compiling entry function '_Z15softmax_block_kv' for 'sm_86'
ptxas info    : Function properties for _Z15softmax_block_kv
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 128 registers, used 1 barriers, 64 bytes smem, 400 bytes cmem[0]
RES
  out=$(lua5.4 scripts/gpu_report.lua "$tmp" 2>&1)
  rc=$?
  if [ $rc -ne 1 ]; then fail "a spill and a broken promise fail the report" "exit $rc, expected 1" "$out"
  elif ! grep -q 'FAIL softmax_block_k() sm_86: 8 bytes spilled' <<<"$out"; then fail "a spill and a broken promise fail the report" "spill not reported" "$out"
  elif ! grep -q '0 blocks of 1024 threads fit per SM, __launch_bounds__ promises 1' <<<"$out"; then
    fail "a spill and a broken promise fail the report" "launch bounds not checked" "$out"
  else pass; fi
fi

if want "a known spill passes, a larger one fails"; then
  printf 'softmax_block_k\t86\t8\n' >"$tmp/allow.tsv"
  out=$(lua5.4 scripts/gpu_report.lua "$tmp" --quiet --allow "$tmp/allow.tsv" 2>&1)
  if grep -q 'spilled' <<<"$out"; then fail "a known spill passes, a larger one fails" "a listed spill failed" "$out"
  else
    printf 'softmax_block_k\t86\t7\n' >"$tmp/allow.tsv"
    out=$(lua5.4 scripts/gpu_report.lua "$tmp" --quiet --allow "$tmp/allow.tsv" 2>&1)
    grep -q '8 bytes spilled' <<<"$out" && pass || fail "a known spill passes, a larger one fails" "a grown spill passed" "$out"
  fi
fi

echo "$name: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
