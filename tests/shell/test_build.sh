#!/usr/bin/env bash
# The Makefile itself, on what CI cannot see: a machine where the libraries
# are not installed yet (pkg-config finds no Lua and oneDNN's header is
# missing until a stand-in for scripts/install-deps.sh "installs" them), and
# the incremental build (header and flag dependencies, one line per file).
# usage: test_build.sh BUILD_DIR (unused: it builds in a temporary directory);
# ends with "shell:test_build: N passed, N failed, N skipped".
set -u
unset MAKEFLAGS MFLAGS MAKELEVEL # its own makes, not jobs of a make that runs it
root=$(cd "$(dirname "$0")/../.." && pwd)
# the makes below build with their own variables: under `make asan` the caller's
# OPT=-O1, SAN=... would reach them through MAKEFLAGS (and OPT=-O1 would change nothing)
unset MAKEFLAGS MFLAGS MAKELEVEL
name=shell:test_build
passed=0 failed=0 skipped=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

want() { [ -z "${TEST_FILTER:-}" ] || [[ $1 == *"$TEST_FILTER"* ]]; }
pass() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL $name: $1: $2"; [ $# -ge 3 ] && sed 's/^/    | /' <<<"$3" | head -n 30; }

# ---- a bare machine: make test / make demo as the first command ---------------
# The stand-ins: pkg-config knows no lua5.4 and the oneDNN header does not
# exist until the "install" has run; make -n then prints what it would run.
fake=$tmp/fake
mkdir -p "$fake/bin"
cat >"$fake/bin/pkg-config" <<EOF
#!/bin/sh
case "\$*" in *lua5.4*) [ -e "$fake/installed" ] || exit 1 ;; esac
exec $(command -v pkg-config) "\$@"
EOF
cat >"$fake/install.sh" <<EOF
echo "FAKE-INSTALL \$*"
touch "$fake/installed" "$fake/dnnl.h"
EOF
chmod +x "$fake/bin/pkg-config"

bare() { # goal: make -n GOAL on the bare machine, output in $tmp/out
  rm -f "$fake/installed" "$fake/dnnl.h"
  rm -rf "$tmp/bare"
  PATH="$fake/bin:$PATH" make -n -C "$root" --no-print-directory BUILD="$tmp/bare" CUDA=0 SIM=0 \
    DNNL_HEADER="$fake/dnnl.h" INSTALL_DEPS="sh $fake/install.sh" "$1" >"$tmp/out" 2>&1
}
# every object of the build and every link agree on oneDNN, found after the install
check_bare() { # case
  local out first_cc
  out=$(cat "$tmp/out")
  first_cc=$(grep -nE ' -c src/' "$tmp/out" | head -n 1 | cut -d: -f1)
  if ! grep -q FAKE-INSTALL "$tmp/out"; then fail "$1" "install-deps did not run" "$out"
  elif [ -z "$first_cc" ] || [ "$(grep -n FAKE-INSTALL "$tmp/out" | head -n 1 | cut -d: -f1)" -gt "$first_cc" ]; then
    fail "$1" "something compiled before install-deps ran" "$out"
  elif ! grep -E ' -c src/cpu/conv_dnnl\.c' "$tmp/out" | grep -q -- '-DTS_HAVE_DNNL'; then
    fail "$1" "conv_dnnl.c compiled without oneDNN although the install provided it" "$(grep conv_dnnl "$tmp/out")"
  elif links=$(grep -E ' -o [^ ]*/(tensh|test_c|tensh\.so) ' "$tmp/out") &&
    [ "$(grep -c -- '-ldnnl' <<<"$links")" != 0 ] && [ "$(grep -c -- '-ldnnl' <<<"$links")" != "$(wc -l <<<"$links")" ]; then
    # libdnnl is opened at run time today (conv_dnnl.c); linked, every link needs it
    fail "$1" "some links with -ldnnl, some without" "$links"
  elif ! grep -qE ' -o [^ ]*/tensh ' "$tmp/out"; then fail "$1" "no link of tensh" "$out"
  else pass; fi
}
if want "bare machine: make test"; then
  bare test
  check_bare "bare machine: make test"
  grep -qE ' -o [^ ]*/test_c ' "$tmp/out" || fail "bare machine: make test" "no link of test_c" "$(cat "$tmp/out")"
fi
if want "bare machine: make demo"; then
  bare demo
  check_bare "bare machine: make demo"
fi
# without a GPU the demo's build has no nvcc on its path (minutes, not a quarter hour)
if want "make demo without a GPU runs no nvcc"; then
  out=$(PATH="$fake/bin:$PATH" make -n -C "$root" --no-print-directory BUILD="$tmp/nogpu" SIM=0 GPU_ARCH= \
    INSTALL_DEPS=true demo 2>&1)
  if grep -qE 'nvcc .* -c cuda/' <<<"$out"; then fail "make demo without a GPU runs no nvcc" "nvcc in the demo's build" "$(grep nvcc <<<"$out" | head -n 5)"
  elif ! grep -qE -- "-o $tmp/nogpu-cpu/tensh " <<<"$out"; then fail "make demo without a GPU runs no nvcc" "no CPU-only tensh linked in BUILD-cpu" "$out"
  else pass; fi
fi

# ---- the incremental build, on one small object ----------------------------------
obj=$tmp/inc/src/core/status.o
build_one() { make -C "$root" --no-print-directory BUILD="$tmp/inc" CUDA=0 SIM=0 LTO= "$@" "$obj" 2>&1; }
if want "one line per file"; then
  out=$(build_one)
  if [ "$(grep -vE '^(✓|✗) ' <<<"$out")" = "  CC        src/core/status.c" ]; then pass
  else fail "one line per file" "expected '  CC        src/core/status.c'" "$out"; fi
  # removing the object, not touching the source: a touch within the file
  # system's timestamp granularity leaves the object up to date (CI saw that)
  out=$(rm -f "$obj" && build_one V=1)
  grep -qE '^([^ ]*ccache )?[a-z-]*(cc|gcc) .* -c src/core/status\.c -o ' <<<"$out" && pass || fail "V=1 prints the command" "no full command" "$out"
fi
if want "dependencies"; then
  build_one >/dev/null
  hdr=$(sed -n 's/^\(src\/[a-z_/]*\.h\):$/\1/p' "${obj%.o}.d" | head -n 1)
  if make -q --no-print-directory -C "$root" BUILD="$tmp/inc" CUDA=0 SIM=0 LTO= "$obj"; then pass
  else fail "dependencies: up to date" "a second make would rebuild status.o"; fi
  if [ -n "$hdr" ]; then
    # the header's time moves forward and back: the tree stays as it was (the
    # second's wait: a touch within the file system's timestamp granularity
    # would leave status.o up to date)
    stamp=$(stat -c %y "$root/$hdr")
    sleep 1 && touch "$root/$hdr"
    make -q --no-print-directory -C "$root" BUILD="$tmp/inc" CUDA=0 SIM=0 LTO= "$obj" && fail "dependencies: header" "touching $hdr leaves status.o up to date" || pass
    touch -d "$stamp" "$root/$hdr"
  else
    fail "dependencies: header" "no header listed in ${obj%.o}.d" "$(cat "${obj%.o}.d" 2>/dev/null)"
  fi
  make -q --no-print-directory -C "$root" BUILD="$tmp/inc" CUDA=0 SIM=0 LTO= OPT=-O1 "$obj" && fail "dependencies: flags" "OPT=-O1 leaves status.o up to date" || pass
fi

# ---- flags files: rewritten only when the flags change ---------------------------
# (a comma in the flags, as nvcc's -gencode arch=...,code=... has, made every
# make rewrite them and so rebuild every object: CI compiled CUDA twice)
if want "flags files"; then
  fb=$tmp/flags
  flags_make() { make -n -C "$root" --no-print-directory BUILD="$fb" CUDA_BUILD="$fb" SIM=0 LTO= OPT="-O2 -Wa,--noexecstack" all >/dev/null 2>&1; }
  flags_make
  before=$(stat -c '%n %y' "$fb"/.flags-* "$fb"/.lua-files 2>&1)
  sleep 1
  flags_make
  after=$(stat -c '%n %y' "$fb"/.flags-* "$fb"/.lua-files 2>&1)
  if [ -z "$(ls "$fb"/.flags-cc 2>/dev/null)" ]; then fail "flags files" "make -n wrote no $fb/.flags-cc" "$before"
  elif [ "$before" = "$after" ]; then pass
  else fail "flags files" "a second make with the same flags rewrote them" "$(diff <(echo "$before") <(echo "$after"))"; fi
fi

echo "$name: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
