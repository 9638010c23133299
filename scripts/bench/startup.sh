#!/usr/bin/env bash
# Start-up time of the shell: median wall time of `tensh -e ''` over 20 runs
# (after 3 warm-ups, so the binary and its libraries are in the page cache),
# printed as one JSON line. Usage: startup.sh [path/to/tensh]
set -euo pipefail
export LC_ALL=C  # a "." in $EPOCHREALTIME
tensh=${1:-build/tensh}
runs=20
for _ in 1 2 3; do "$tensh" -e '' >/dev/null; done
times=()
for _ in $(seq "$runs"); do
  # $EPOCHREALTIME (bash 5) reads the clock without forking, so the
  # measurement holds only tensh's own fork, exec, library loading and init
  t0=$EPOCHREALTIME
  "$tensh" -e '' >/dev/null
  t1=$EPOCHREALTIME
  times+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) * 1e3 }')")
done
median=$(printf '%s\n' "${times[@]}" | sort -g | awk '{ v[NR] = $1 } END { print v[int(NR / 2) + 1] }')
printf '{"bench": "startup", "impl": "tensh", "device": "cpu", "runs": %d, "ms": %s}\n' "$runs" "$median"
