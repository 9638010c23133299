#!/usr/bin/env bash
# The fuzzer's watchdog (tests/fuzz/run.sh) against a stand-in for tensh that
# makes one call and then blocks, spins, or works slowly: a call blocked (no
# CPU time) or spinning (FUZZ_HANG seconds of CPU time) is a hang; a call that
# keeps using a little CPU over more than FUZZ_HANG seconds of wall time, as
# on a loaded machine, is not (a 30-minute run on a loaded machine reported
# building GPT-2's 124M parameters, 12 s of CPU time, as a hang). And its
# verdict on a LeakSanitizer report at exit: one whose stacks never reach
# tensh's code (Open MPI's unloaded components) is a note, one that does a crash.
# usage: test_fuzz_watchdog.sh BUILD_DIR (unused: the stand-in replaces it);
# ends with "shell:test_fuzz_watchdog: N passed, N failed, N skipped".
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
name=shell:test_fuzz_watchdog
passed=0 failed=0
fake=$(mktemp -d)
trap 'rm -rf "$fake"' EXIT
# the stand-in: `tensh -e ...` (run.sh's memory probe) prints a number; `tensh
# child.lua SEED FIRST DEADLINE PROGRESS MESSAGES` writes call 1's progress
# line, behaves as FAKE_MODE says, then writes the end line
cat >"$fake/tensh" <<'EOF'
#!/usr/bin/env bash
[ "$1" = -e ] && { echo 1000; exit 0; }
progress=$5
[ "$3" -gt 1 ] && { printf 'end %d 0 0 1 none:0/0/0\n' "$3" >"$progress"; exit 0; } # after the hang: done
printf '1 0 0 none none:1/0/0 torch.fake(%s)\n' "$FAKE_MODE" >"$progress"
case $FAKE_MODE in
block) sleep 60 ;;
spin) while :; do :; done ;;
slow) # 8 s of wall time, a little CPU in every half second
  end=$((SECONDS + 8))
  while [ $SECONDS -lt $end ]; do
    sleep 0.2
    for ((i = 0; i < 20000; i++)); do :; done
  done ;;
esac
printf 'end 2 1 0 1 none:1/1/0\n' >"$progress"
# a report at exit, as LeakSanitizer's, with or without a frame of tensh's own
case $FAKE_MODE in
leak_*)
  echo "==1==ERROR: LeakSanitizer: detected memory leaks" >&2
  echo "    #0 0x1 in __interceptor_malloc ../../../../src/libsanitizer/asan/asan_malloc_linux.cpp:69" >&2
  echo "    #1 0x2  (<unknown module>)" >&2
  [ "$FAKE_MODE" = leak_ours ] && echo "    #2 0x3 in ts_tensor_new src/core/tensor.c:42" >&2
  exit 1 ;;
esac
EOF
chmod +x "$fake/tensh"

check() { # case, condition
  if eval "$2"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL $name: $1"; fi
}
run() { FAKE_MODE=$1 FUZZ_HANG=3 timeout 60 bash "$root/tests/fuzz/run.sh" "$fake" 30 1 2>&1; }

out=$(run block)
check "a blocked call is a hang: $out" 'grep -q "^HANG .*torch.fake(block)" <<<"$out"'
out=$(run spin)
check "a spinning call is a hang: $out" 'grep -q "^HANG .*torch.fake(spin)" <<<"$out"'
start=$SECONDS
out=$(run slow)
check "a slow call that keeps working is no hang: $out" '! grep -q "^HANG" <<<"$out" && grep -q " 0 hangs" <<<"$out"'
check "the slow call ran past FUZZ_HANG's seconds" '[ $((SECONDS - start)) -ge 6 ]'
out=$(run leak_mpi)
check "a leak report at exit outside tensh's code is a note, not a crash: $out" \
  'grep -q "^note: at exit" <<<"$out" && grep -q " 0 crashes" <<<"$out"'
out=$(run leak_ours)
check "a leak report at exit with a frame in tensh's code is a crash: $out" \
  'grep -q "^CRASH at exit" <<<"$out" && grep -q " 1 crashes" <<<"$out"'
echo "$name: $passed passed, $failed failed, 0 skipped"
[ "$failed" -eq 0 ]
