#!/usr/bin/env bash
# make install / make uninstall into a temporary prefix (GNU conventions:
# PREFIX, DESTDIR): the installed tensh runs from another folder, plain
# lua5.4 finds the module on that prefix's standard path, man renders the page,
# and uninstall leaves nothing behind.
# usage: test_install.sh BUILD_DIR; ends with "shell:test_install: N passed, N failed, N skipped".
set -u
unset MAKEFLAGS MFLAGS MAKELEVEL # its own makes, not jobs of a make that runs it
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
name=shell:test_install
passed=0 failed=0 skipped=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

want() { [ -z "${TEST_FILTER:-}" ] || [[ $1 == *"$TEST_FILTER"* ]]; }
pass() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL $name: $1: $2"; [ $# -ge 3 ] && sed 's/^/    | /' <<<"$3" | head -n 30; }

prefix=$tmp/prefix
# the build is up to date (make test built it, with the same settings: CUDA=0
# in the environment for a CPU-only build dir), so install only copies
inst() { make -C "$root" --no-print-directory BUILD="$build" PREFIX="$prefix" "$@" 2>&1; }

if want "make install"; then
  out=$(inst install)
  if [ $? -ne 0 ]; then fail "make install" "failed" "$out"
  else
    missing=""
    for f in bin/tensh lib/lua/5.4/tensh.so share/man/man1/tensh.1 share/bash-completion/completions/tensh \
             share/doc/tensh/api.md share/doc/tensh/porting.md share/doc/tensh/README.md; do
      [ -e "$prefix/$f" ] || missing="$missing $f"
    done
    [ -z "$missing" ] && pass || fail "make install" "not installed:$missing" "$out"
  fi
fi

if want "installed tensh runs from any folder"; then
  out=$(cd "$tmp" && env -i HOME="$tmp" PATH="$prefix/bin:/usr/bin:/bin" tensh -e 'print((torch.arange(4) * 2):sum():item())' 2>&1)
  [ "$out" = "12" ] && pass || fail "installed tensh runs from any folder" "expected 12" "$out"
fi

if want "lua5.4 requires the installed module"; then
  if ! command -v lua5.4 >/dev/null; then echo "SKIP $name: lua5.4 requires the installed module: no lua5.4"; skipped=$((skipped + 1))
  elif ldd "$build/tensh.so" 2>/dev/null | grep -q libasan; then
    echo "SKIP $name: lua5.4 requires the installed module: an AddressSanitizer build's module loads only into an instrumented program (lua5.4 is not)"
    skipped=$((skipped + 1))
  else
    # lua5.4's standard cpath for a prefix is PREFIX/lib/lua/5.4/?.so (that is
    # /usr/local/lib/lua/5.4 for the default prefix): the same path, rooted here
    out=$(cd "$tmp" && LUA_CPATH="$prefix/lib/lua/5.4/?.so" lua5.4 -e 'require "tensh"; print(torch.ones(2, 3):sum():item())' 2>&1)
    [ "$out" = "6.0" ] || [ "$out" = "6" ] && pass || fail "lua5.4 requires the installed module" "expected 6" "$out"
  fi
fi

if want "man tensh"; then
  if ! command -v man >/dev/null; then echo "SKIP $name: man tensh: no man"; skipped=$((skipped + 1))
  else
    out=$(MANPATH="$prefix/share/man" MANWIDTH=80 man tensh 2>&1)
    if grep -qE 'tensh +- the tensor shell' <<<"$out" && grep -q 'TENSH_HISTORY' <<<"$out" && ! grep -qiE 'troff.*warning' <<<"$out"; then pass
    else fail "man tensh" "the page did not render (NAME and ENVIRONMENT)" "$out"; fi
  fi
fi

if want "bash completion"; then
  out=$(bash -c "source '$prefix/share/bash-completion/completions/tensh'; COMP_WORDS=(tensh --np); COMP_CWORD=1; _tensh; echo \"\${COMPREPLY[*]}\"" 2>&1)
  [ "$out" = "--nproc" ] && pass || fail "bash completion" "expected --nproc for 'tensh --np'" "$out"
fi

if want "DESTDIR stages the install"; then
  out=$(inst install DESTDIR="$tmp/stage")
  [ -x "$tmp/stage$prefix/bin/tensh" ] && pass || fail "DESTDIR stages the install" "no $tmp/stage$prefix/bin/tensh" "$out"
fi

if want "make uninstall"; then
  out=$(inst uninstall)
  left=$(cd "$prefix" && find . -type f)
  [ -z "$left" ] && pass || fail "make uninstall" "files left behind" "$left"
fi

echo "$name: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
