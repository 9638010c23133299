#!/usr/bin/env bash
# The API fuzzer (tests/fuzz/child.lua, catalog.lua, values.lua): calls every
# function reachable from tensh's globals and metatables with hostile
# arguments, in child processes so that a crash (a signal, a sanitizer
# report) is caught and reported with the call that caused it; a call that
# makes no progress for FUZZ_HANG seconds of CPU time, or uses none for
# FUZZ_HANG seconds (blocked), is killed and reported as a hang. CPU time, not
# the clock: on a loaded machine (or under ASan) a call that does a few
# seconds of real work, such as building GPT-2's 124M parameters, takes
# minutes of wall time.
# After a crash or a hang the run goes on from the next call.
#
# usage: run.sh BUILD_DIR [SECONDS] [SEED]
#   prints each crash and hang, then "fuzz: ... N calls to N functions (N ok,
#   N errors), N crashes, N hangs", a line counting the messages from
#   inside the library (Lua's own words or a lua/tensh position) and the
#   torch.Size twins' findings (child.lua), and one
#   line for each of cpu, cuda, mixed and none (calls whose arguments are on
#   the CPU only, on cuda only, on both, on neither: values.lua's devices_of) with its calls,
#   the functions they reached, crashes, hangs and messages from inside
#   the library; exits non-zero on any crash, hang or sanitizer report.
# FUZZ_DEVICE=cpu|cuda|both picks the tensors' devices (values.lua; "both"
# where cuda is available); a simulated device gets TENSH_SIM_DEVICES=2 and
# TENSH_SIM_MEMORY=2G unless they are set.
# FUZZ_HANG (default 60), FUZZ_MESSAGES=1 lists every message from inside the
# library; FUZZ_INSIDE=FILE writes those of every kind of call (a user's, a
# method on another value, a metamethod by hand, a private _x helper), and
# the Size twins' findings (function TAB
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
# A device (the simulator's window and shadow, a driver's mappings) reserves
# terabytes of address space at its first use: the limit is 4 GiB past what
# a process holds once it has touched cuda.
export TENSH_SIM_DEVICES=${TENSH_SIM_DEVICES:-2} TENSH_SIM_MEMORY=${TENSH_SIM_MEMORY:-2G}
if nm "$build/tensh" 2>/dev/null | grep -q __asan_init; then
  export ASAN_OPTIONS=${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}allocator_may_return_null=1:max_allocation_size_mb=4096
  export TENSH_NO_CPU_CACHING=1
  vlimit=unlimited
else
  held=$("$build/tensh" -e 'if cuda.is_available() then torch.zeros(1, {device = "cuda"}):sum():item() end
    print(io.open("/proc/self/status"):read("a"):match("VmSize:%s*(%d+)"))' 2>/dev/null)
  vlimit=$((${held:-0} + 4 * 1024 * 1024))
fi
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}

deadline=$(($(date +%s) + seconds))
next=1 calls=0 ok=0 errors=0 crashes=0 hangs=0 functions=0
devices="cpu cuda mixed none"
declare -A d_calls d_ok d_errors d_crashes d_hangs
for d in $devices; do d_calls[$d]=0 d_ok[$d]=0 d_errors[$d]=0 d_crashes[$d]=0 d_hangs[$d]=0; done
# add_counts COUNTS: a child's "cpu:calls/ok/errors,cuda:...,..." (child.lua)
add_counts() {
  local part d c o e
  for part in ${1//,/ }; do
    d=${part%%:*}
    IFS=/ read -r c o e <<<"${part#*:}"
    [ -n "${d_calls[$d]+x}" ] || continue
    d_calls[$d]=$((d_calls[$d] + c)) d_ok[$d]=$((d_ok[$d] + o)) d_errors[$d]=$((d_errors[$d] + e))
  done
}
# A report at exit from LeakSanitizer alone whose stacks never reach tensh's
# code (no frame in the repository's files, the tensh binary or liblua): Open
# MPI's. It unloads its components at MPI_Finalize, and the fast unwinder
# stops in them ("<unknown module>"), out of tests/lsan.supp's reach; the
# tests that start MPI record full stacks instead (harness.lua's
# T.MPI_ASAN_ENV), which would make the fuzzer's calls 8 times slower.
mpi_leaks_only() {
  grep -q "ERROR: LeakSanitizer: detected memory leaks" "$1" || return 1
  grep -qE "ERROR: AddressSanitizer|runtime error|ERROR: LeakSanitizer: [^d]" "$1" && return 1
  ! grep -E '^ *#[1-9][0-9]* ' "$1" | grep -v libsanitizer | grep -qE ' (src|sim|cuda|lua|tools)/|/tensh(\.so)?\+0x|liblua'
}

# the CPU time (clock ticks, all threads) process $1 has used
ticks=$(getconf CLK_TCK)
cpu_of() {
  local f
  { read -ra f <"/proc/$1/stat"; } 2>/dev/null || { echo 0; return; } # (gone: it ended)
  echo $((f[13] + f[14]))
}
while :; do
  rm -f "$work/progress"
  (cd "$work/cwd" && ulimit -v "$vlimit" && exec "$build/tensh" "$root/tests/fuzz/child.lua" \
    "$seed" "$next" "$deadline" "$work/progress" "$work/messages") >/dev/null 2>"$work/stderr" &
  pid=$!
  # per call: the CPU time at its start, and the half-seconds in a row in
  # which the process used none
  last="" hung=0 cpu_start=0 cpu_last=0 idle=0
  while kill -0 "$pid" 2>/dev/null; do
    sleep 0.5
    line=$(head -c 1001 "$work/progress" 2>/dev/null | sed 's/ *$//')
    cpu=$(cpu_of "$pid")
    if [ "$line" != "$last" ]; then last=$line cpu_start=$cpu idle=0
    elif [ "$cpu" = "$cpu_last" ]; then idle=$((idle + 1))
    else idle=0; fi
    cpu_last=$cpu
    if [ $(((cpu - cpu_start) / ticks)) -ge "$hang" ] || [ $((idle / 2)) -ge "$hang" ]; then
      kill -9 "$pid" 2>/dev/null
      hung=1 hangs=$((hangs + 1))
      read -r _ _ _ on _ rest <<<"$line"
      [ -n "${d_hangs[$on]+x}" ] && d_hangs[$on]=$((d_hangs[$on] + 1))
      echo "HANG (no progress in ${hang} s of CPU time, or blocked for ${hang} s; seed $seed, $on): call $rest"
      break
    fi
  done
  wait "$pid" 2>/dev/null
  rc=$?
  line=$(head -c 1001 "$work/progress" 2>/dev/null | sed 's/ *$//')
  read -r index n_ok n_err on counts rest <<<"$line"
  if [ "$index" = end ]; then
    read -r _ index n_ok n_err _ counts <<<"$line"
    calls=$((calls + index - next)) ok=$((ok + n_ok)) errors=$((errors + n_err))
    add_counts "$counts"
    if [ "$rc" -ne 0 ] && mpi_leaks_only "$work/stderr"; then
      echo "note: at exit (calls $next..$((index - 1))) LeakSanitizer reported only leaks outside tensh's code" \
        "(Open MPI's, whose components are unloaded at MPI_Finalize), not counted"
    elif [ "$rc" -ne 0 ]; then # a sanitizer's report at exit (LeakSanitizer)
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
  add_counts "$counts"
  if [ "$rc" -ne 137 ] || [ "$hung" = 0 ]; then
    crashes=$((crashes + 1))
    [ -n "${d_crashes[$on]+x}" ] && d_crashes[$on]=$((d_crashes[$on] + 1))
    echo "CRASH (rc $rc, seed $seed, call $index, $on): $rest"
    grep -v '^ *$' "$work/stderr" | head -n 40 | sed 's/^/    | /'
  fi
  next=$((index + 1))
  [ "$(date +%s)" -lt "$deadline" ] || break
done

functions=$(cat "$work/progress.functions" 2>/dev/null || echo 0)
# the functions called at least once (with arguments on device $1, or any)
reached() { cut -f2 <(grep -a "^${1:-}" "$work/progress.reached" 2>/dev/null) | sort -u | wc -l; }
# messages: where kind side function message devices (child.lua); the headline count
# is of calls a user makes (kind api), the rest are said beside it; a message
# met on two devices counts once, except in its device's line ($4)
count() { sort -u "$work/messages" | awk -F'\t' -v w="$1" -v k="$2" -v s="$3" -v d="${4:-.}" \
  '$1 ~ w && $2 ~ k && $3 ~ s && $6 ~ d' | cut -f2-5 | sort -u | wc -l; }
if [ "${FUZZ_MESSAGES:-0}" = 1 ]; then
  echo "messages from inside the library, and torch.Size twins' findings (kind, side, function, message):"
  grep -aE '^(inside|size)' "$work/messages" | cut -f2- | sort -u | sed 's/^/  /'
fi
# what test_fuzz holds against tests/fuzz/inside_allowed.tsv: the messages from
# inside the library in every kind of call (private helpers too: a user can
# reach them), and the torch.Size twins' findings
if [ -n "${FUZZ_INSIDE:-}" ]; then
  awk -F'\t' '$1 == "inside" || $1 == "size" { print $4 "\t" $5 }' \
    "$work/messages" | LC_ALL=C sort -u >"$FUZZ_INSIDE"
fi
echo "fuzz: seed $seed, ${seconds} s: $calls calls to $functions functions ($ok ok, $errors errors)," \
  "$crashes crashes, $hangs hangs; $(reached) functions reached"
echo "fuzz: $(count . . .) distinct messages; from inside the library: $(count inside api .) in calls" \
  "a user makes ($(count inside api c) raised in C, $(count inside api lua) in lua/tensh), besides" \
  "$(count inside method .) from methods called on other values, $(count inside meta .) from metamethods" \
  "called by hand, $(count inside internal .) from internal helpers; $(count size . .) calls refused a torch.Size" \
  "given for a list they took, or answered differently"
for d in $devices; do
  echo "fuzz: on $d: ${d_calls[$d]} calls (${d_ok[$d]} ok, ${d_errors[$d]} errors) reaching $(reached "$d") functions," \
    "${d_crashes[$d]} crashes, ${d_hangs[$d]} hangs, $(count inside api . "^$d\$") messages from inside the library" \
    "in calls a user makes"
done
[ "$crashes" -eq 0 ] && [ "$hangs" -eq 0 ]
