#!/usr/bin/env bash
# The API fuzzer (tests/fuzz/child.lua, catalog.lua, values.lua): calls every
# function reachable from tensh's globals and metatables with hostile
# arguments, in child processes so that a crash (a signal, a sanitizer
# report) is caught and reported with the call that caused it; a call that
# makes no progress for FUZZ_HANG seconds is killed and reported as a hang.
# After a crash or a hang the run goes on from the next call.
#
# usage: run.sh BUILD_DIR [SECONDS] [SEED]
#   prints each crash and hang, then "fuzz: ... N calls to N functions (N ok,
#   N errors), N crashes, N hangs" and a line counting the messages from
#   inside the library (Lua's own words or a lua/tensh position)
#   and exits non-zero on any crash, hang or sanitizer report.
# FUZZ_HANG (default 60), FUZZ_MESSAGES=1 lists every message from inside the
# library; FUZZ_INSIDE=FILE writes those of calls a user makes (function TAB
# message, digits folded to N) to FILE; FUZZ_CALLS=N stops after call N
# (child.lua); FUZZ_KEEP=DIR keeps the work files there.
set -u
build=${1:-build}
seconds=${2:-60}
seed=${3:-$(date +%s)}
root=$(cd "$(dirname "$0")/../.." && pwd)
case $build in /*) ;; *) build=$root/$build ;; esac
hang=${FUZZ_HANG:-60}
work=${FUZZ_KEEP:-$(mktemp -d)}
mkdir -p "$work/cwd"
[ -n "${FUZZ_KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
: >"$work/messages"

# Large allocations fail rather than take the machine: a virtual memory
# limit in the release build; ASan reserves terabytes of address space, so
# there its allocator refuses single allocations over 4 GiB instead.
# Under ASan, tensor buffers come from malloc, not the CPU cache's anonymous
# mappings: ASan sees overruns only in its own heap, and only its allocator
# applies the limit.
if nm "$build/tensh" 2>/dev/null | grep -q __asan_init; then
  export ASAN_OPTIONS=${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}allocator_may_return_null=1:max_allocation_size_mb=4096
  export TENSH_NO_CPU_CACHING=1
  vlimit=unlimited
else
  vlimit=$((4 * 1024 * 1024))
fi
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}

deadline=$(($(date +%s) + seconds))
next=1 calls=0 ok=0 errors=0 crashes=0 hangs=0 functions=0
while :; do
  rm -f "$work/progress"
  (cd "$work/cwd" && ulimit -v "$vlimit" && exec "$build/tensh" "$root/tests/fuzz/child.lua" \
    "$seed" "$next" "$deadline" "$work/progress" "$work/messages") >/dev/null 2>"$work/stderr" &
  pid=$!
  last="" still=0
  while kill -0 "$pid" 2>/dev/null; do
    sleep 0.5
    line=$(head -c 1001 "$work/progress" 2>/dev/null | sed 's/ *$//')
    if [ "$line" = "$last" ]; then still=$((still + 1)); else still=0 last=$line; fi
    if [ $((still / 2)) -ge "$hang" ]; then
      kill -9 "$pid" 2>/dev/null
      hangs=$((hangs + 1))
      echo "HANG (no progress in ${hang} s, seed $seed): call ${line#* * * }"
      break
    fi
  done
  wait "$pid" 2>/dev/null
  rc=$?
  line=$(head -c 1001 "$work/progress" 2>/dev/null | sed 's/ *$//')
  read -r index n_ok n_err rest <<<"$line"
  if [ "$index" = end ]; then
    read -r _ index n_ok n_err _ <<<"$line"
    calls=$((calls + index - next)) ok=$((ok + n_ok)) errors=$((errors + n_err))
    if [ "$rc" -ne 0 ]; then # a sanitizer's report at exit (LeakSanitizer)
      crashes=$((crashes + 1))
      echo "CRASH at exit (rc $rc, seed $seed, calls $next..$((index - 1))):"
      tail -n 40 "$work/stderr" | sed 's/^/    | /'
    fi
    break
  fi
  case $index in
  '' | *[!0-9]*)
    echo "FAIL the fuzzer itself did not start (rc $rc):"
    tail -n 20 "$work/stderr" | sed 's/^/    | /'
    crashes=$((crashes + 1))
    break
    ;;
  esac
  calls=$((calls + index - next + 1)) ok=$((ok + n_ok)) errors=$((errors + n_err))
  if [ "$rc" -ne 137 ] || [ $((still / 2)) -lt "$hang" ]; then
    crashes=$((crashes + 1))
    echo "CRASH (rc $rc, seed $seed, call $index): $rest"
    grep -v '^ *$' "$work/stderr" | head -n 40 | sed 's/^/    | /'
  fi
  next=$((index + 1))
  [ "$(date +%s)" -lt "$deadline" ] || break
done

functions=$(cat "$work/progress.functions" 2>/dev/null || echo 0)
# messages: where kind side function message (child.lua); the headline count
# is of calls a user makes (kind api), the rest are said beside it
count() { sort -u "$work/messages" | awk -F'\t' -v w="$1" -v k="$2" -v s="$3" \
  '$1 ~ w && $2 ~ k && $3 ~ s' | cut -f2- | sort -u | wc -l; }
if [ "${FUZZ_MESSAGES:-0}" = 1 ]; then
  echo "messages from inside the library (kind, side, function, message):"
  grep -a '^inside' "$work/messages" | cut -f2- | sort -u | sed 's/^/  /'
fi
if [ -n "${FUZZ_INSIDE:-}" ]; then
  awk -F'\t' '$1 == "inside" && $2 == "api" { print $4 "\t" $5 }' "$work/messages" | LC_ALL=C sort -u >"$FUZZ_INSIDE"
fi
echo "fuzz: seed $seed, ${seconds} s: $calls calls to $functions functions ($ok ok, $errors errors)," \
  "$crashes crashes, $hangs hangs"
echo "fuzz: $(count . . .) distinct messages; from inside the library: $(count inside api .) in calls" \
  "a user makes ($(count inside api c) raised in C, $(count inside api lua) in lua/tensh), besides" \
  "$(count inside method .) from methods called on other values, $(count inside meta .) from metamethods" \
  "called by hand, $(count inside internal .) from internal helpers"
[ "$crashes" -eq 0 ] && [ "$hangs" -eq 0 ]
