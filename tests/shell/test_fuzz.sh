#!/usr/bin/env bash
# The short seeded run of the API fuzzer (tests/fuzz/run.sh): about a minute
# of hostile calls to every function reachable from tensh's globals and
# metatables. Under `make asan` the same run is the ASan/UBSan pass. Cases:
# no crash, no hang, the fuzzer reached most of what it found (a walk
# that silently found nothing would pass the first two), and no message
# from inside the library (Lua's own words, a lua/tensh position: see
# tests/fuzz/child.lua) in any call (private _x helpers too) that tests/fuzz/inside_allowed.tsv
# does not list with its reason.
# The run stops at call FUZZ_CALLS (default 30000) or after FUZZ_SECONDS:
# calls are drawn from the seed and their number alone, so a slow machine
# (or ASan) makes a prefix of the same calls, finding a subset of the same messages.
# usage: test_fuzz.sh BUILD_DIR; ends with "shell:test_fuzz: N passed, N failed, N skipped".
# FUZZ_SECONDS, FUZZ_CALLS and FUZZ_SEED change the run (default 60 s, 30000 calls, seed 11);
# FUZZ_DEVICE=cuda puts three in four tensors on cuda (tests/run.sh's simulated pass).
set -u
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
name=shell:test_fuzz
passed=0 failed=0
inside=$(mktemp)
trap 'rm -f "$inside"' EXIT
out=$(FUZZ_HANG=${FUZZ_HANG:-60} FUZZ_CALLS=${FUZZ_CALLS:-30000} FUZZ_INSIDE=$inside \
  bash "$root/tests/fuzz/run.sh" "$build" "${FUZZ_SECONDS:-60}" "${FUZZ_SEED:-11}" 2>&1)
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
allowed=$root/tests/fuzz/inside_allowed.tsv
# an entry is function TAB message, or function TAB * for all of that function's
new=$(awk -F'\t' 'NR == FNR { if ($0 !~ /^#/) ok[$1 "\t" $2] = 1; next }
  !(($1 "\t" $2) in ok) && !(($1 "\t*") in ok)' "$allowed" "$inside")
check "no new message from inside the library (not in tests/fuzz/inside_allowed.tsv)" '[ -z "$new" ]'
[ -z "$new" ] || sed "s/^/FAIL $name: new message from inside the library: /" <<<"$new"
# tests/run.sh shows only FAIL lines: the crashes and hangs, or why no summary came
grep -E '^(CRASH|HANG)' <<<"$out" | sed "s/^/FAIL $name: /"
[ -n "$summary" ] || tail -n 5 <<<"$out" | sed "s/^/FAIL $name: no summary: /"
echo "$name: $passed passed, $failed failed, 0 skipped"
[ "$failed" -eq 0 ]
