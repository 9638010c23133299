#!/usr/bin/env bash
# Runs every test: the C unit tests, each Lua test file under build/tensh,
# then each shell test program (tests/shell/test_*.sh, given the build dir).
# Ends with one line "N passed, N failed, N skipped"; exits non-zero on any
# failure or on a test program that died without its closing line.
set -u
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
passed=0 failed=0 skipped=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

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
  if [ "$2" -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "FAIL $1: exit $2 with no failed case"
    failed=$((failed + 1))
  fi
}

"$root/$build/test_c" >"$log" 2>&1; rc=$?
grep -E '^(FAIL|SKIP)' "$log"
count c $rc

for f in "$root"/tests/lua/test_*.lua; do
  (cd "$root/tests/lua" && TENSH_BUILD="$root/$build" LUA_PATH="$root/tests/lua/?.lua;;" timeout 600 "$root/$build/tensh" "$f") >"$log" 2>&1
  rc=$?
  grep -E '^(FAIL|SKIP)' "$log"
  [ $rc -ne 0 ] && ! grep -qE '^[a-z]+:[^ ]*: [0-9]+ passed' "$log" && tail -n 20 "$log"
  count "$(basename "$f")" $rc
done

# On a GPU machine the whole Lua suite runs again with tensors created on
# cuda (tests/lua/harness.lua, TENSH_TEST_DEVICE); test_cuda_* compare the
# two devices themselves and run once.
if "$root/$build/tensh" -e 'os.exit(cuda.is_available() and 0 or 1)' >/dev/null 2>&1; then
  for f in "$root"/tests/lua/test_*.lua; do
    case "$f" in */test_cuda_*) continue ;; esac
    (cd "$root/tests/lua" && TENSH_TEST_DEVICE=cuda TENSH_BUILD="$root/$build" LUA_PATH="$root/tests/lua/?.lua;;" \
      timeout 600 "$root/$build/tensh" "$f") >"$log" 2>&1
    rc=$?
    sed -E 's/^(FAIL|SKIP) /\1 [cuda] /' "$log" | grep -E '^(FAIL|SKIP)'
    [ $rc -ne 0 ] && ! grep -qE '^[a-z]+:[^ ]*: [0-9]+ passed' "$log" && tail -n 20 "$log"
    count "$(basename "$f")[cuda]" $rc
  done
else
  echo "SKIP the Lua suite on cuda: no CUDA device"
  skipped=$((skipped + 1))
fi

for f in "$root"/tests/shell/test_*.sh; do
  [ -e "$f" ] || continue
  timeout 300 bash "$f" "$root/$build" >"$log" 2>&1
  rc=$?
  grep -E '^(FAIL|SKIP)' "$log"
  [ $rc -ne 0 ] && ! grep -qE '^[a-z]+:[^ ]*: [0-9]+ passed' "$log" && tail -n 20 "$log"
  count "$(basename "$f")" $rc
done

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
