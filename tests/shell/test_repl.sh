#!/usr/bin/env bash
# Tests of the tensh executable: the command line (-e, scripts and their
# args, -v, -h, -i, -l, exit codes, tracebacks, SIGINT) run directly, and
# the prompt driven through a pseudo-terminal by tmux (value printing, ';',
# completion, multi-line input, Ctrl-C while running and at the prompt,
# Ctrl-D, the history file). Output checks use numbers and strings only,
# never the tensor print format.
# usage: test_repl.sh BUILD_DIR; ends with "shell:test_repl: N passed, N failed, N skipped".
set -u
build=${1:-build}
case $build in /*) ;; *) build=$(cd "$(dirname "$0")/../.." && pwd)/$build ;; esac
tensh=$build/tensh
name=shell:test_repl
passed=0 failed=0 skipped=0
tmp=$(mktemp -d)
sock=tensh-test-$$ sessions=0 # one tmux server (socket) per session
tm() { tmux -L "$sock-$sessions" -f /dev/null "$@"; }
cleanup() {
  command -v tmux >/dev/null 2>&1 && tm kill-server >/dev/null 2>&1
  rm -rf "$tmp"
}
trap cleanup EXIT

pass() { passed=$((passed + 1)); }
fail() { # case, what went wrong, [output to show]
  failed=$((failed + 1))
  echo "FAIL $name: $1: $2"
  [ $# -ge 3 ] && sed 's/^/    | /' <<<"$3" | head -n 40
}
skip() { skipped=$((skipped + 1)); echo "SKIP $name: $1: $2"; }
# TEST_FILTER=text: only the cases whose name contains text (the prompt's
# cases share one session: they run together when one of them is wanted)
want() { [ -z "${TEST_FILTER:-}" ] || [[ $1 == *"$TEST_FILTER"* ]]; }

# run CASE EXPECTED_RC STDOUT STDERR -- CMD...: runs CMD with stdin from
# $tmp/stdin (empty unless a case writes it). STDOUT and STDERR are extended
# regexps over the whole output (. spans lines, ^ and $ are its ends), or
# '=text' for exactly text (\n for newlines), '' for empty, '*' for anything.
run() {
  local case=$1 want_rc=$2 out_pat=$3 err_pat=$4
  shift 5
  want "$case" || { rm -f "$tmp/stdin"; return; }
  [ -f "$tmp/stdin" ] || : >"$tmp/stdin"
  TENSH_HISTORY="$tmp/hist-cli" timeout 20 "$@" <"$tmp/stdin" >"$tmp/out" 2>"$tmp/err"
  local rc=$? out err
  out=$(cat "$tmp/out") err=$(cat "$tmp/err")
  rm -f "$tmp/stdin"
  if [ "$rc" -ne "$want_rc" ]; then
    fail "$case" "exit code $rc, expected $want_rc" "stdout: $out
stderr: $err"
  elif ! match "$out" "$out_pat"; then
    fail "$case" "stdout does not match /$out_pat/" "$out"
  elif ! match "$err" "$err_pat"; then
    fail "$case" "stderr does not match /$err_pat/" "$err"
  else
    pass
  fi
}
match() { # text pattern
  case $2 in
  '*') return 0 ;;
  '') [ -z "$1" ] ;;
  =*) [ "$1" == "$(printf '%b' "${2#=}")" ] ;;
  *) printf '%s' "$1" | grep -qzE -- "$2" ;;
  esac
}

# ---- the command line ---------------------------------------------------------
if [ ! -x "$tensh" ]; then
  fail setup "no $tensh: run make first"
  echo "$name: $passed passed, $failed failed, $skipped skipped"
  exit 1
fi

run "-e prints" 0 '=3\nhello' '' -- "$tensh" -e 'print(1 + 2)' -e 'print("hello")'
run "-e sees torch" 0 '=3' '' -- "$tensh" -e 'print(#torch.ones(3):tolist())'
run "-e syntax error" 1 '' '^tensh: \(command line\):1: .*near' -- "$tensh" -e 'x = = 1'
run "-e runtime error" 1 '' 'boom.*stack traceback' -- "$tensh" -e 'error("boom")'
run "-e needs an argument" 1 '' "'-e' needs argument.*usage: tensh" -- "$tensh" -e
run "unknown option" 1 '' "unrecognized option '-q'.*usage: tensh" -- "$tensh" -q
run "--version" 0 '^tensh [0-9]+\.[0-9]+\.[0-9]+ \(Lua 5\.4\)$' '' -- "$tensh" --version
run "-v" 0 '^tensh [0-9.]+ \(Lua 5\.4\)$' '' -- "$tensh" -v
run "--help" 0 '^usage: tensh \[options\] \[script \[args\]\].*-e stat.*-i .*-l mod' '' -- "$tensh" --help
run "-h" 0 '^usage: tensh' '' -- "$tensh" -h
run "-l mod and -l g=mod" 0 '=aaa\tbb' '' -- "$tensh" -l string -l s=string -e 'print(string.rep("a", 3), s.rep("b", 2))'

cat >"$tmp/args.lua" <<'EOF'
local n = select("#", ...)
print(n, arg[0]:match("[^/]*$"), arg[1], arg[2], arg[-1], #arg, ...)
EOF
run "script with args" 0 '=2\targs.lua\tone\ttwo words\tx = 1\t2\tone\ttwo words' '' \
  -- "$tensh" -e 'x = 1' "$tmp/args.lua" one "two words"
run "-- before the script" 0 '=1\targs.lua\t-e\tnil\t--\t1\t-e' '' -- "$tensh" -- "$tmp/args.lua" -e

cat >"$tmp/fail.lua" <<'EOF'
local function inner() error("script failed here") end
print("before")
inner()
print("after")
EOF
run "failing script: exit 1, traceback on stderr" 1 '=before' \
  'fail\.lua:1: script failed here.*stack traceback:.*in (local|upvalue|function) .inner.' -- "$tensh" "$tmp/fail.lua"
run "failing script skips -i" 1 '=before' 'script failed here' -- "$tensh" -i "$tmp/fail.lua"
printf 'print(' >"$tmp/syntax.lua"
run "script syntax error" 1 '' "syntax\.lua:1: unexpected symbol near <eof>" -- "$tensh" "$tmp/syntax.lua"
run "missing script" 1 '' 'cannot open .*nope\.lua' -- "$tensh" "$tmp/nope.lua"
run "os.exit code" 7 '=x' '' -- "$tensh" -e 'print("x") os.exit(7)'
run "error object that is a table" 1 '' 'error object is a table value' -- "$tensh" -e 'error({})'

printf 'print(6 * 7)\nprint(...)\n' >"$tmp/stdin"
run "stdin that is not a terminal runs as a script" 0 '=42' '' -- "$tensh"
printf 'print(arg[1])\n' >"$tmp/stdin"
run "- runs stdin" 0 '=a1' '' -- "$tensh" - a1
printf 'print(x * 2)\ny = 5;\ny + 1\n' >"$tmp/stdin"
run "-i reads after -e" 0 '^tensh [0-9.]+ \(Lua 5\.4\) .*Ctrl-D to exit.*42.*6' '' -- "$tensh" -e 'x = 21' -i

printf 'print(1 + 1)\n' >"$tmp/stdin"
run "no HOME: no history, no failure" 0 '.*2.*' '' -- env -u TENSH_HISTORY -u HOME "$tensh" -i
printf 'print(1 + 2)\n' >"$tmp/stdin"
run "unwritable history file: no failure" 0 '.*3.*' '' -- env TENSH_HISTORY="$tmp/no/such/dir/history" "$tensh" -i

# SIGINT while a script runs: the hook stops Lua code, the flag stops C kernels
sigint_case() { # case, code (it runs once "ready" is out)
  want "$1" || return
  "$tensh" -e "io.write('ready\\n') io.flush() $2" >"$tmp/out" 2>"$tmp/err" &
  local pid=$! i rc
  for i in $(seq 100); do grep -q ready "$tmp/out" && break; sleep 0.1; done
  sleep 0.2
  kill -INT "$pid" 2>/dev/null
  for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid"
    wait "$pid" 2>/dev/null
    fail "$1" "still running 10 s after SIGINT"
    return
  fi
  wait "$pid"
  rc=$?
  if [ "$rc" -ne 1 ] || ! grep -q 'interrupted' "$tmp/err"; then
    fail "$1" "exit $rc, expected 1 and 'interrupted' on stderr" "$(cat "$tmp/err")"
  else
    pass
  fi
}
sigint_case "SIGINT stops a Lua loop" 'while true do end'
sigint_case "SIGINT stops a loop that pcalls" 'while true do pcall(function() for i = 1, 1e9 do end end) end'
sigint_case "SIGINT stops a loop in a coroutine" 'coroutine.wrap(function() while true do end end)()'
sigint_case "SIGINT stops long C ops" 'local x = torch.zeros(1e7) for i = 1, 1e6 do local y = x + 1 end'

# ---- the prompt, through tmux ---------------------------------------------------
repl_cases=(value semicolon completion multiline ctrl-c-running ctrl-c-op ctrl-c-prompt ctrl-c-continuation
  error statements-then-value locals tables help dir object-completion error-location history ctrl-d second-session
  exit ctrl-z)
if ! command -v tmux >/dev/null 2>&1; then
  for c in "${repl_cases[@]}"; do skip "repl: $c" "tmux is not installed (scripts/install-deps.sh)"; done
  echo "$name: $passed passed, $failed failed, $skipped skipped"
  [ "$failed" -eq 0 ]
  exit
fi
wanted=0
for c in "${repl_cases[@]}"; do want "repl: $c" && wanted=1; done
if [ $wanted = 0 ]; then
  echo "$name: $passed passed, $failed failed, $skipped skipped"
  [ "$failed" -eq 0 ]
  exit
fi

hist=$tmp/history
pane() { # the screen and its scrollback, less the blank rows below the cursor
  tm capture-pane -p -J -S -500 -t repl 2>/dev/null | awk 'NF { last = NR } { l[NR] = $0 } END { for (i = 1; i <= last; i++) print l[i] }'
}
# wait_for PATTERN [TENTHS]: polls the pane until a line matches the
# extended regexp (every 0.1 s, 5 s by default)
wait_for() {
  local i
  for ((i = 0; i < ${2:-50}; i++)); do
    pane | grep -qE -- "$1" && return 0
    sleep 0.1
  done
  return 1
}
# -l: "end" is text, not the End key; a trailing ';' would end the tmux command
type_line() {
  local t=$1
  [[ $t == *\; ]] && t="${t%;}\\;"
  tm send-keys -t repl -l -- "$t" && tm send-keys -t repl Enter
}
start() { # command line for the pane
  tm kill-server >/dev/null 2>&1
  sessions=$((sessions + 1))
  tm new-session -d -s repl -x 200 -y 50 \
    "env TENSH_HISTORY='$hist' $* ; echo \"TENSH-EXITED \$?\"; sleep 60"
}
# expect CASE PATTERN [TENTHS]: passes when the pattern shows, else fails with the pane
expect() {
  if wait_for "$2" "${3:-50}"; then pass; else fail "repl: $1" "no line matching /$2/ on screen" "$(pane | tail -n 25)"; fi
}

start "$tensh"
if ! wait_for '^> $' 100; then
  fail "repl: start" "no prompt within 10 s" "$(pane)"
else
  type_line 'keep = 777'
  type_line '6 * 7'
  expect value '^42$'

  # ';' hides the value, for assignments and for expressions alike
  type_line 'hidden = 123457;'
  type_line 'torch.ones(2);'
  type_line '1000 + 1;'
  type_line 'hidden + 1'
  if wait_for '^123458$'; then
    if pane | grep -qxE '123457|1001'; then fail "repl: semicolon" "a value ending in ';' was printed" "$(pane | tail -n 12)"
    elif ! pane | grep -A1 -xF '> torch.ones(2);' | tail -n 1 | grep -qxF '> 1000 + 1;'; then
      fail "repl: semicolon" "torch.ones(2); printed something" "$(pane | tail -n 12)"
    else pass; fi
  else
    fail "repl: semicolon" "no 123458 on screen" "$(pane | tail -n 12)"
  fi

  # completion: a field, a nested field, a global, and a method of a tensor
  ok=1
  tm send-keys -t repl -l 'torch.zer'
  tm send-keys -t repl Tab
  wait_for '^> torch\.zeros' || { ok=0; fail "repl: completion" "torch.zer<TAB>" "$(pane | tail -n 5)"; }
  tm send-keys -t repl C-u
  tm send-keys -t repl -l 'torch.cuda.is_av'
  tm send-keys -t repl Tab
  wait_for '^> torch\.cuda\.is_available\($' || { ok=0; fail "repl: completion" "torch.cuda.is_av<TAB>" "$(pane | tail -n 5)"; }
  tm send-keys -t repl C-u
  type_line 't = torch.ones(3)'
  tm send-keys -t repl -l '#t:tol'
  tm send-keys -t repl Tab
  wait_for '^> #t:tolist\($' || { ok=0; fail "repl: completion" "t:tol<TAB>" "$(pane | tail -n 5)"; }
  type_line ') + 1000' # the completed line runs: 3 + 1000
  wait_for '^1003$' || { ok=0; fail "repl: completion" "the completed t:tolist( did not run" "$(pane | tail -n 5)"; }
  tm send-keys -t repl -l 'kee'
  tm send-keys -t repl Tab
  type_line ' + 1' # keep + 1
  wait_for '^778$' || { ok=0; fail "repl: completion" "kee<TAB> did not give keep" "$(pane | tail -n 5)"; }
  # through an __index table, but never into an __index function
  type_line 'obj = setmetatable({}, {__index = {method_one = 1}})'
  type_line 'spy = setmetatable({}, {__index = function(t, k) touched = k end})'
  tm send-keys -t repl -l 'obj.meth'
  tm send-keys -t repl Tab
  wait_for '^> obj\.method_one$' || { ok=0; fail "repl: completion" "obj.meth<TAB> through __index" "$(pane | tail -n 5)"; }
  tm send-keys -t repl C-u
  tm send-keys -t repl -l 'spy.ab'
  tm send-keys -t repl Tab
  tm send-keys -t repl C-u
  type_line 'tostring(touched) .. "-untouched"'
  wait_for '^nil-untouched$' || { ok=0; fail "repl: completion" "completion ran an __index function" "$(pane | tail -n 5)"; }
  [ $ok = 1 ] && pass

  # a statement over several lines continues with '>> '
  type_line 'acc = 0'
  type_line 'for i = 1, 4 do'
  if wait_for '^>> $'; then
    type_line 'acc = acc + i * 100'
    type_line 'end'
    type_line 'acc + 1'
    expect multiline '^1001$'
  else
    fail "repl: multiline" "no '>> ' prompt" "$(pane | tail -n 5)"
  fi

  # Ctrl-C stops Lua code and keeps the state
  type_line 'while true do end'
  sleep 0.3
  tm send-keys -t repl C-c
  if wait_for 'interrupted!'; then
    type_line 'keep + 2'
    expect ctrl-c-running '^779$'
  else
    fail "repl: ctrl-c-running" "no 'interrupted!' after Ctrl-C" "$(pane | tail -n 5)"
  fi

  # Ctrl-C stops a long run of C ops (each polls the flag); the next line,
  # typed ahead, runs once it stops (~20 s later had it not)
  type_line 'big = torch.zeros(2e7)'
  before=$(pane | grep -c 'interrupted')
  type_line 'for i = 1, 2000 do big2 = big + 1 end'
  sleep 0.5
  tm send-keys -t repl C-c
  type_line 'keep + 3'
  if wait_for '^780$' 80; then
    if [ "$(pane | grep -c 'interrupted')" -gt "$before" ]; then pass
    else fail "repl: ctrl-c-op" "no 'interrupted' message" "$(pane | tail -n 8)"; fi
  else
    fail "repl: ctrl-c-op" "the loop of ops went on after Ctrl-C" "$(pane | tail -n 8)"
  fi

  # Ctrl-C at the prompt drops the half-typed line: were it kept, the next
  # line would read `half = 40 + 2` and print nothing
  tm send-keys -t repl -l 'half = '
  sleep 0.2
  tm send-keys -t repl C-c
  wait_for '^> half = \^C$' 20
  type_line '40 + 2 + 1000'
  expect ctrl-c-prompt '^1042$'

  # ... and abandons an unfinished chunk
  type_line 'for i = 1, 2 do'
  wait_for '^>> $' 20
  tm send-keys -t repl C-c
  # the signal may be handled after typed keys are read (seen under load):
  # the next line goes in once the abandoned chunk shows its ^C
  wait_for '^>> \^C$' 20
  type_line '2 + 3 + 1000'
  expect ctrl-c-continuation '^1005$'

  # an error is reported and the session goes on
  type_line 'error("oops-" .. 12)'
  if wait_for 'stdin:1: oops-12'; then
    type_line 'keep + 4'
    expect error '^781$'
  else
    fail "repl: error" "no error message" "$(pane | tail -n 5)"
  fi

  # `stmt; expr` runs the statements and prints the expression, and the
  # next line is a line of its own (not swallowed by a '>>' continuation)
  type_line 'ww = torch.ones(2, {requires_grad = true}); (ww * 3):sum():backward(); ww.grad:sum():item() + 1000'
  type_line 'torch.manual_seed(0); keep + 11'
  if wait_for '^1006(\.0)?$' && wait_for '^788$'; then
    if pane | sed -n '/^> ww = /,$p' | grep -qE '^>> '; then fail "repl: statements-then-value" "a '>>' continuation appeared" "$(pane | tail -n 8)"; else pass; fi
  else
    fail "repl: statements-then-value" "the trailing expressions did not print" "$(pane | tail -n 8)"
  fi

  # `local` at the top of a line lasts the session (lua/tensh/prompt_locals.lua),
  # as do several on one line and a local function; one inside a block does not
  type_line 'local lx = 700'
  type_line 'local ly, lz = 1, 2; local function lf(v) return v + 10 end'
  type_line 'do local inner = 5 end'
  type_line 'lx + ly + lz + lf(0) + (inner or 0)'
  expect locals '^713$'

  # tables print readably: sorted keys, tensors as shape and dtype, cut
  # past 100 plain values
  type_line 'sd = nn.Linear(2, 3):state_dict(); sd'
  type_line 'torch.arange(300):tolist()'
  if wait_for '^  weight = tensor\(shape=\[3, 2\], dtype=float32\)$' && wait_for '^  bias = tensor\(' 1 &&
    wait_for '^  97, 98, 99, \.\.\. \(200 more\)$'; then
    pass
  else
    fail "repl: tables" "state_dict or tolist() not shown readably" "$(pane | tail -n 20)"
  fi

  # help: the reference's signature and paragraph; alone, how to start
  type_line 'help(torch.matmul)'
  if wait_for '^torch\.matmul\(input, other\)' && wait_for '^Matrix product' 1; then
    type_line 'help()'
    expect help 'help\(torch\.matmul\), help\(nn\.Linear\)'
  else
    fail "repl: help" "help(torch.matmul) printed no entry" "$(pane | tail -n 10)"
  fi
  type_line 'dir(torch.ones(1))'
  # the method names, in columns (how many columns and which names share a row depend on the
  # methods there are and the longest name; the end of the sorted list is what stays on screen)
  expect dir '(^| )where( |$)'
  expect 'dir columns' '^[a-z_0-9]+ {2,}[a-z_0-9]+'

  # completion on objects whose __index is a function (nn.Module) or a class table
  ok=1
  type_line 'lin = nn.Linear(2, 3); op = optim.SGD(lin:parameters(), {lr = 0.1})'
  type_line 'ld = data.DataLoader(data.TensorDataset(torch.zeros(4, 2)), {batch_size = 2})'
  # (C-u leaves blanks behind on the pane)
  for pair in 'lin:zero_g|lin:zero_grad\( *$' 'lin.out_f|lin\.out_features *$' 'op:zero_g|op:zero_grad\( *$' \
    'ld:it|ld:iter\( *$' 'lin.wei|lin\.weight *$'; do
    tm send-keys -t repl -l "${pair%%|*}"
    tm send-keys -t repl Tab
    wait_for "^> ${pair#*|}" 20 || { ok=0; fail "repl: object-completion" "${pair%%|*}<TAB>" "$(pane | tail -n 5)"; }
    tm send-keys -t repl C-u
  done
  [ $ok = 1 ] && pass

  # an error raised inside the library points at the line typed, without
  # the library's frames; a function of the user's shows its frames
  type_line 'nn.functional.relu(3)'
  type_line 'function f1() error("deep-err") end; function g1() f1() end; g1()'
  if wait_for '^stdin:1: .*relu.*number' && wait_for "in function 'f1'" 20; then
    if pane | grep -qE 'lua/tensh/|\[C\]'; then fail "repl: error-location" "library or C frames shown" "$(pane | tail -n 10)"
    else pass; fi
  else
    fail "repl: error-location" "no message at stdin:1 or no user frames" "$(pane | tail -n 10)"
  fi

  type_line 'dup = 1'
  type_line 'dup = 1'
  tm send-keys -t repl C-d
  if wait_for '^TENSH-EXITED 0$'; then
    pass
    # the history: this session's lines, once each, multi-line chunks whole
    if [ ! -f "$hist" ]; then
      fail "repl: history" "no history file at TENSH_HISTORY"
    elif [ "$(grep -cxF 'dup = 1' "$hist")" != 1 ]; then
      fail "repl: history" "'dup = 1' should appear once" "$(cat "$hist")"
    elif ! grep -qxF 'keep = 777' "$hist" || ! grep -A1 -xF 'for i = 1, 4 do' "$hist" | grep -qxF 'acc = acc + i * 100'; then
      fail "repl: history" "lines missing" "$(cat "$hist")"
    else
      pass
    fi
  else
    fail "repl: ctrl-d" "Ctrl-D did not exit with 0" "$(pane | tail -n 5)"
    skip "repl: history" "the session did not end"
  fi

  # a second session: -i after -e, the history read back (Up gives the last
  # entry), and os.exit() leaving with its code and saving the history
  start "$tensh" -e "'pre = 5'" -i
  if wait_for '^> $' 100 && wait_for 'Ctrl-D to exit' 1; then
    tm send-keys -t repl Up
    ok=1
    wait_for '^> dup = 1$' 20 || { ok=0; fail "repl: second-session" "Up did not recall the last entry" "$(pane | tail -n 5)"; }
    tm send-keys -t repl C-u
    type_line 'pre * 3'
    wait_for '^15$' || { ok=0; fail "repl: second-session" "-e before -i" "$(pane | tail -n 5)"; }
    type_line 'os.exit(4)'
    wait_for '^TENSH-EXITED 4$' || { ok=0; fail "repl: second-session" "os.exit(4)" "$(pane | tail -n 5)"; }
    grep -qxF 'pre * 3' "$hist" 2>/dev/null || { ok=0; fail "repl: second-session" "os.exit lost the history" "$(cat "$hist")"; }
    [ $ok = 1 ] && pass
  else
    fail "repl: second-session" "no prompt or banner" "$(pane)"
  fi
fi

# exit() leaves as in Python; `exit` without the call says how
start "$tensh"
if wait_for '^> $' 100; then
  type_line 'exit'
  if wait_for '^Use exit\(\) or Ctrl-D to exit$'; then
    type_line 'exit(6)'
    expect exit '^TENSH-EXITED 6$'
  else
    fail "repl: exit" "'exit' did not say how to leave" "$(pane | tail -n 5)"
  fi
else
  fail "repl: exit" "no prompt" "$(pane)"
fi

# Ctrl-Z at the prompt hands the terminal back to the job shell, and fg gives
# a working prompt with the half-typed line still there
start env HISTFILE=/dev/null bash --norc --noprofile -i
if wait_for '[$#] $' 50; then
  type_line "$tensh"
  if wait_for '^> $' 100; then
    tm send-keys -t repl -l 'zz = 9'
    sleep 0.2
    tm send-keys -t repl C-z
    if wait_for 'Stopped' 30; then
      type_line 'fg'
      wait_for '^> zz = 9$' 30
      type_line '9'
      type_line 'zz + 1000'
      expect ctrl-z '^1099$'
      n=$(pane | grep -cE '[$#] $')
      tm send-keys -t repl C-d # back in bash, which then leaves
      for ((i = 0; i < 30; i++)); do [ "$(pane | grep -cE '[$#] $')" -gt "$n" ] && break; sleep 0.1; done
      type_line 'exit'
      wait_for '^TENSH-EXITED' 30
    else
      fail "repl: ctrl-z" "Ctrl-Z did not stop tensh" "$(pane | tail -n 5)"
    fi
  else
    fail "repl: ctrl-z" "no prompt in the job shell" "$(pane | tail -n 5)"
  fi
else
  skip "repl: ctrl-z" "no interactive bash in tmux"
fi

echo "$name: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
