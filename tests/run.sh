#!/usr/bin/env bash
# Runs every test: the C unit tests, each Lua test file under build/tensh,
# then each shell test program (tests/shell/test_*.sh, given the build dir).
# Given a second build dir (build-sim, the simulated CUDA device), the CUDA
# tests, the tutorials with their GPU lines, the whole Lua suite with
# tensors on cuda, and a minute of the API fuzzer with tensors on cuda run there.
# Prints one line per test program with its counts as it goes, and ends with
# one line "N passed, N failed, N skipped"; exits non-zero on any failure or
# on a test program that died without its closing line. TEST_FILTER=text
# runs only the cases whose name contains text, in every program (the ones
# with none print nothing).
set -u
build=${1:-build}
sim_build=${2:-}
root=$(cd "$(dirname "$0")/.." && pwd)
passed=0 failed=0 skipped=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# what a test program printed that the summary shows: its FAIL and SKIP lines
# and the detail lines ("    | ...") that follow a failure
shown() { grep -E '^(FAIL|SKIP|    \| )'; }

count() { # adds the counts from the closing line of a test program's output
  local line
  line=$(grep -E '^[a-z]+(:[^ ]*)?: [0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
  if [ -z "$line" ]; then
    echo "FAIL $1: died without a summary (exit $2)"
    failed=$((failed + 1))
    return
  fi
  local p f s
  p=$(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$line")
  f=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")
  s=$(grep -oE '[0-9]+ skipped' <<<"$line" | grep -oE '[0-9]+' || echo 0)
  passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + ${s:-0}))
  [ -n "${TEST_FILTER:-}" ] && [ $((p + f + ${s:-0})) -eq 0 ] && [ "$2" -eq 0 ] && return
  printf '  %-36s %4d passed%s%s\n' "$1" "$p" "$([ "$f" -gt 0 ] && echo ", $f FAILED")" \
    "$([ "${s:-0}" -gt 0 ] && echo ", $s skipped")"
  if [ "$2" -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "FAIL $1: exit $2 with no failed case"
    failed=$((failed + 1))
  fi
}

"$root/$build/test_c" ${TEST_FILTER:+"$TEST_FILTER"} >"$log" 2>&1; rc=$?
shown <"$log"
count c $rc

# run_lua BUILD LABEL FILE [ENV=VALUE...]: one Lua test file under BUILD's tensh
run_lua() {
  local b=$1 label=$2 f=$3
  shift 3
  (cd "$root/tests/lua" && env "$@" TENSH_BUILD="$root/$b" LUA_PATH="$root/tests/lua/?.lua;;" \
    timeout 900 "$root/$b/tensh" "$f") >"$log" 2>&1
  local rc=$?
  if [ -n "$label" ]; then sed -E "s/^(FAIL|SKIP) /\1 [$label] /" "$log" | shown
  else shown <"$log"; fi
  [ $rc -ne 0 ] && ! grep -qE '^[a-z]+:[^ ]*: [0-9]+ passed' "$log" && tail -n 20 "$log"
  count "$(basename "$f")${label:+[$label]}" $rc
}

# run_shell BUILD LABEL FILE [ENV=VALUE...]: one shell test program given BUILD
run_shell() {
  local b=$1 label=$2 f=$3
  shift 3
  timeout 300 env "$@" bash "$f" "$root/$b" >"$log" 2>&1
  local rc=$?
  if [ -n "$label" ]; then sed -E "s/^(FAIL|SKIP) /\1 [$label] /" "$log" | shown
  else shown <"$log"; fi
  [ $rc -ne 0 ] && ! grep -qE '^[a-z]+:[^ ]*: [0-9]+ passed' "$log" && tail -n 20 "$log"
  count "$(basename "$f")${label:+[$label]}" $rc
}

# With the simulated device, the CUDA tests (test_cuda_*) run there instead of
# skipping here for want of a GPU; test_cuda_nogpu is about having none.
for f in "$root"/tests/lua/test_*.lua; do
  case "$f" in
  */test_cuda_nogpu.lua) ;;
  */test_cuda_*) [ -n "$sim_build" ] && [ -x "$root/$sim_build/tensh" ] && continue ;;
  esac
  run_lua "$build" "" "$f"
done

# The simulated device: two devices of a small memory, so set_device, peer
# copies and the out-of-memory path run for real.
if [ -n "$sim_build" ] && [ -x "$root/$sim_build/tensh" ]; then
  sim_env=(TENSH_SIM_DEVICES=2 TENSH_SIM_MEMORY=2G)
  for f in "$root"/tests/lua/test_cuda_*.lua "$root"/tests/lua/test_seeds.lua; do
    case "$f" in */test_cuda_nogpu.lua) continue ;; esac
    run_lua "$sim_build" sim "$f" "${sim_env[@]}"
  done
  for f in "$root"/tests/lua/test_*.lua; do
    case "$f" in */test_cuda_*|*/test_seeds.lua) continue ;; esac # the seeds pick their device themselves
    run_lua "$sim_build" "sim cuda" "$f" "${sim_env[@]}" TENSH_TEST_DEVICE=cuda
  done
  # the matmuls again with cuBLASLt declining every one: the cuBLAS fallback
  run_lua "$sim_build" "sim lt-decline" "$root/tests/lua/test_cuda_linalg.lua" "${sim_env[@]}" TENSH_SIM_LT_DECLINE=1
  run_lua "$sim_build" "sim cuda lt-decline" "$root/tests/lua/test_linalg.lua" "${sim_env[@]}" TENSH_SIM_LT_DECLINE=1 \
    TENSH_TEST_DEVICE=cuda
  # a minute of the API fuzzer with three in four tensors on cuda (the rest on the CPU, mixed in)
  run_shell "$sim_build" "sim cuda" "$root/tests/shell/test_fuzz.sh" "${sim_env[@]}" FUZZ_DEVICE=cuda
elif [ -n "$sim_build" ]; then
  echo "SKIP the simulated CUDA device: $sim_build/tensh was not built (make sim says why)"
  skipped=$((skipped + 1))
fi

# On a GPU machine the whole Lua suite runs again with tensors created on
# cuda (tests/lua/harness.lua, TENSH_TEST_DEVICE); test_cuda_* compare the
# two devices themselves and run once.
if "$root/$build/tensh" -e 'os.exit(cuda.is_available() and 0 or 1)' >/dev/null 2>&1; then
  for f in "$root"/tests/lua/test_*.lua; do
    case "$f" in */test_cuda_*) continue ;; esac
    (cd "$root/tests/lua" && TENSH_TEST_DEVICE=cuda TENSH_BUILD="$root/$build" LUA_PATH="$root/tests/lua/?.lua;;" \
      timeout 600 "$root/$build/tensh" "$f") >"$log" 2>&1
    rc=$?
    sed -E 's/^(FAIL|SKIP) /\1 [cuda] /' "$log" | shown
    [ $rc -ne 0 ] && ! grep -qE '^[a-z]+:[^ ]*: [0-9]+ passed' "$log" && tail -n 20 "$log"
    count "$(basename "$f")[cuda]" $rc
  done
else
  echo "SKIP the Lua suite on a real GPU: this machine has none${sim_build:+ (the simulated device ran it above)}"
  skipped=$((skipped + 1))
fi

for f in "$root"/tests/shell/test_*.sh; do
  [ -e "$f" ] || continue
  run_shell "$build" "" "$f"
done

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
