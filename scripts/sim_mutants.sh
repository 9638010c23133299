#!/usr/bin/env bash
# make sim-mutants: mutation testing of the simulated CUDA device. Each
# mutant is a known GPU bug put into one file of cuda/ (a dropped atomic, a
# bound off by one, a wrong alignment test, a missing __syncthreads, a wrong
# stride); it is applied alone to a scratch copy of the tree, the simulated
# build recompiles that file, and the tests that cover it run there. A
# mutant is caught when they fail; the script fails unless every mutant is
# caught (and says which survived). It needs `make sim` done first: the
# scratch copy starts from build-sim/ so each mutant costs one file's
# compile. Not part of `make test` (about a minute a mutant on an idle
# machine, more under load).
#   bash scripts/sim_mutants.sh [NAME...]   only the named mutants
#   KEEP=1: keep the scratch copy (its path is printed)
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
[ -x "$root/build-sim/tensh" ] || { echo "sim_mutants: build-sim/tensh is missing: run make sim first" >&2; exit 2; }
command -v python3 >/dev/null || { echo "sim_mutants: needs python3 (to apply the mutants)" >&2; exit 2; }

# name | file | exact text (must occur once; \n joins lines) | its replacement | tests
# A mutant must be a bug a GPU would show: the barriers before a grid-stride
# loop's next round (reduce_row_k, softmax_block_k) are not, since their grids
# cover every line in one round, so the missing barriers are the ones before
# the first warp reads what every warp wrote.
# tests: FILE[@FILTER] run on the simulated device; cuda:FILE[@FILTER] runs a
# device-neutral test file with its tensors on cuda (TENSH_TEST_DEVICE).
mutants=(
  "dropped-atomic|cuda/nn_pool.cu|    atomicAdd(out + (int64_t)(i / L) * HW + ix, go[i]);|    out[(int64_t)(i / L) * HW + ix] += go[i];|test_cuda_nn.lua@max_pool2d backward"
  "bound-off-by-one|cuda/copy.cu|  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {|  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i <= n; i += step) {|test_cuda_ops.lua"
  "alignment-test-index|cuda/index.cu|    if (es == 1 && ts_is_contiguous(x) && ((uintptr_t)xp & 15) == 0) {|    if (es == 1 && ts_is_contiguous(x) && ((uintptr_t)xp & 7) == 0) {|test_cuda_sim_offsets.lua@nonzero and masked_select"
  "alignment-test-optim|cuda/optim.cu|static bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }|static bool aligned16(const void *p) { return ((uintptr_t)p & 3) == 0; }|test_cuda_sim_offsets.lua@Adam"
  "missing-syncthreads-reduce|cuda/reduce.cu|    if (lane == 0) sm[warp] = s;\n    __syncthreads();|    if (lane == 0) sm[warp] = s;|test_cuda_reduce.lua"
  "missing-syncthreads-softmax|cuda/softmax.cu|  if (lane == 0) smf[warp] = s;\n  __syncthreads();|  if (lane == 0) smf[warp] = s;|test_cuda_reduce.lua@softmax"
  "wrong-stride|cuda/linalg.cu|    dst[b * d0 + r * d1 + c * d2] = src[b * s0 + r * s1 + c * s2];|    dst[b * d0 + r * d1 + c * d2] = src[b * s0 + r * s2 + c * s1];|test_cuda_linalg.lua"
)

scratch=$(mktemp -d "${TMPDIR:-/tmp}/tensh-mutants.XXXXXX")
if [ -n "${KEEP:-}" ]; then echo "scratch copy: $scratch"; else trap 'rm -rf "$scratch"' EXIT; fi
# the tree as it is (tracked and new files), and the builds: only mutated files recompile
(cd "$root" && git ls-files -z -co --exclude-standard | tar --null -T - -cf -) | tar -xf - -C "$scratch"
cp -a "$root/build" "$root/build-sim" "$scratch/"
find "$scratch/build" "$scratch/build-sim" -exec touch {} + # newer than the copied sources

build() { make -C "$scratch" CUDA=0 SIM=1 -j"${JOBS:-2}" build-sim/tensh >"$scratch/build.log" 2>&1; }

# run_tests SPEC...: 0 when every test file passed
run_tests() {
  local spec f filter env_extra rc all=0
  for spec in "$@"; do
    f=${spec%%@*} filter=
    [ "$spec" != "$f" ] && filter=${spec#*@}
    env_extra=()
    case "$f" in cuda:*) f=${f#cuda:} env_extra=(TENSH_TEST_DEVICE=cuda) ;; esac
    (cd "$scratch/tests/lua" && env TENSH_SIM_DEVICES=2 TENSH_SIM_MEMORY=2G "${env_extra[@]}" TEST_FILTER="$filter" \
      TENSH_BUILD="$scratch/build-sim" LUA_PATH="$scratch/tests/lua/?.lua;;" \
      timeout 1200 "$scratch/build-sim/tensh" "$f") >"$scratch/test.log" 2>&1
    rc=$?
    if [ $rc -ne 0 ] || grep -qE ': [0-9]+ passed, [1-9][0-9]* failed' "$scratch/test.log"; then
      all=1
      echo "      $f${filter:+ ($filter)}: $(grep -m1 -oE 'tensh-sim: [^:]+: kernel [^ ]+|FAIL [^:]*: [^:]*' "$scratch/test.log" | cut -c1-150)"
    fi
  done
  return $all
}

# the unmutated tree must build and pass the same tests, or a caught mutant means nothing
echo "sim_mutants: the scratch copy ($scratch) builds and passes the tests first"
build || { tail -20 "$scratch/build.log"; echo "sim_mutants: the unmutated tree does not build"; exit 2; }
want=" $* "
chosen=()
for m in "${mutants[@]}"; do
  IFS='|' read -r name _ <<<"$m"
  [ "$want" != "  " ] && [[ "$want" != *" $name "* ]] && continue
  chosen+=("$m")
done
declare -A clean
for m in "${chosen[@]}"; do
  IFS='|' read -r _ _ _ _ tests <<<"$m"
  [ -n "${clean[$tests]:-}" ] && continue
  IFS=';' read -ra specs <<<"$tests"
  if run_tests "${specs[@]}"; then clean[$tests]=yes; else clean[$tests]=no; fi
done

caught=0 survived=()
for m in "${chosen[@]}"; do
  IFS='|' read -r name file from to tests <<<"$m"
  IFS=';' read -ra specs <<<"$tests"
  if [ "${clean[$tests]}" != yes ]; then
    echo "  $name: $tests fail without the mutant too; fix them first"
    survived+=("$name(unclean)")
    continue
  fi
  case "$file" in cuda/*.cu) ;; *) echo "  $name: only cuda/*.cu files can be mutated here"; survived+=("$name(bad file)"); continue ;; esac
  # the file's objects, put back afterwards instead of compiling it again
  gen=$scratch/build-sim/gen/${file%.cu}
  mkdir -p "$scratch/saved"
  cp -p "$scratch/$file" "$scratch/saved/src"
  cp -p "$gen.cc" "$gen.o" "$scratch/saved/"
  if ! python3 - "$scratch/$file" "$from" "$to" <<'EOF'; then
import sys
path, old, new = (a.replace("\\n", "\n") for a in sys.argv[1:])
text = open(path).read()
if text.count(old) != 1:
    sys.exit(f"sim_mutants: expected the text once in {path}, found it {text.count(old)} times: {old!r}")
open(path, "w").write(text.replace(old, new))
EOF
    survived+=("$name(not applied)")
    continue
  fi
  if ! build; then
    echo "  $name: the mutant does not compile"
    tail -5 "$scratch/build.log"
    survived+=("$name(no build)")
  elif run_tests "${specs[@]}"; then
    echo "  $name ($file): SURVIVED: $tests passed with the bug in"
    survived+=("$name")
  else
    echo "  $name ($file): caught"
    caught=$((caught + 1))
  fi
  cp -p "$scratch/saved/src" "$scratch/$file" # its old time: older than the objects put back
  cp "$scratch/saved/$(basename "$gen").cc" "$gen.cc"
  cp "$scratch/saved/$(basename "$gen").o" "$gen.o" # newer than tensh: the next build relinks
done

echo "sim_mutants: $caught of ${#chosen[@]} mutants caught"
[ ${#survived[@]} -eq 0 ] || { echo "sim_mutants: not caught: ${survived[*]}"; exit 1; }
