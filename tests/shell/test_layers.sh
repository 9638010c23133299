#!/usr/bin/env bash
# The layering docs/design.md draws, read from the tree: src/ has rooms (at
# most 12 files directly in it), nothing under src/ includes from cuda/, the
# core never includes lua.h nor CUDA headers, the core and the backends never
# include the bindings, and the Lua binding does not wire backends.
# usage: test_layers.sh [BUILD_DIR]; ends with "shell:test_layers: N passed, N failed, N skipped".
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
name=shell:test_layers
passed=0 failed=0 skipped=0
pass() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL $name: $1: $2"; [ $# -ge 3 ] && sed 's/^/    | /' <<<"$3" | head -n 30; }
cd "$root" || exit 1
# $(includes DIRS...): "file:line:#include ..." for every include in C, C++ and CUDA sources there
includes() { grep -rnE '^[[:space:]]*#[[:space:]]*include' --include='*.c' --include='*.h' --include='*.cu' \
               --include='*.cuh' --include='*.cc' --include='*.def' "$@"; }
core_dirs=$(ls -d src/*/ | grep -vE '^src/(lua|shell)/$')

n=$(find src -maxdepth 1 -type f | wc -l)
[ "$n" -le 12 ] && pass || fail "rooms" "$n files directly in src/ (at most 12)" "$(find src -maxdepth 1 -type f)"

out=$(includes src | grep -E '"(\.\./)*cuda/|"[^"]*\.cuh"')
[ -z "$out" ] && pass || fail "src/ includes from cuda/" "what src/ needs of CUDA is declared on the core's side (src/core/cuda_api.h)" "$out"

out=$(includes $core_dirs | grep -E '[<"](lua|lauxlib|lualib)\.h[>"]|[<"](cuda_runtime|cuda|cublas[A-Za-z_]*|cudnn|nccl)\.h[>"]|"(\.\./)*lua/')
[ -z "$out" ] && pass || fail "the core includes Lua, CUDA or the bindings" "only src/lua/ and src/shell/ include lua.h; only cuda/ CUDA's headers" "$out"

out=$(includes cuda sim | grep -E '"(\.\./)*(src/)?(lua|shell)/')
[ -z "$out" ] && pass || fail "a backend includes the bindings" "cuda/ and sim/ include the core's headers only" "$out"

out=$(grep -rnE 'ts_backends\[[^]]*\][[:space:]]*=[^=]|backend_init[[:space:]]*\(' src/lua src/shell)
[ -z "$out" ] && pass || fail "the binding wires a backend" "backends are registered by the core (src/core/backend.c)" "$out"

echo "$name: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
