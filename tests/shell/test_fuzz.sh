#!/usr/bin/env bash
# The short seeded run of the API fuzzer (tests/fuzz/run.sh): about a minute
# of hostile calls to every function reachable from tensh's globals and
# metatables. Under `make asan` the same run is the ASan/UBSan pass. Cases:
# no crash, no hang, and the fuzzer reached most of what it found (a walk
# that silently found nothing would pass the first two).
# usage: test_fuzz.sh BUILD_DIR; ends with "shell:test_fuzz: N passed, N failed, N skipped".
# FUZZ_SECONDS and FUZZ_SEED change the run (default 60 s, seed 11).
set -u
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
name=shell:test_fuzz
passed=0 failed=0
out=$(FUZZ_HANG=${FUZZ_HANG:-60} bash "$root/tests/fuzz/run.sh" "$build" "${FUZZ_SECONDS:-60}" "${FUZZ_SEED:-11}" 2>&1)
echo "$out"
check() { # case, condition
  if eval "$2"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL $name: $1"; fi
}
summary=$(grep -E '^fuzz: seed' <<<"$out")
num() { sed -nE "s/.* ([0-9]+) $1.*/\1/p" <<<"$summary"; }
check "no crash" '[ "$(num crashes)" = 0 ]'
check "no hang" '[ "$(num hangs)" = 0 ]'
check "at least 1000 calls to at least 500 functions" \
  '[ "${summary:-}" ] && [ "$(num "calls to")" -ge 1000 ] && [ "$(num functions)" -ge 500 ]'
# tests/run.sh shows only FAIL lines: the crashes and hangs, or why no summary came
grep -E '^(CRASH|HANG)' <<<"$out" | sed "s/^/FAIL $name: /"
[ -n "$summary" ] || tail -n 5 <<<"$out" | sed "s/^/FAIL $name: no summary: /"
echo "$name: $passed passed, $failed failed, 0 skipped"
[ "$failed" -eq 0 ]
