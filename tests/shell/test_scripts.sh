#!/usr/bin/env bash
# The user-facing scripts, each on tiny settings: they run, print what they
# promise, and a resumed training run ends exactly where an uninterrupted one
# does. usage: test_scripts.sh BUILD_DIR; ends with
# "shell:test_scripts: N passed, N failed, N skipped".
set -u
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
case $build in /*) ;; *) build=$root/$build ;; esac
tensh=$build/tensh
name=shell:test_scripts
passed=0 failed=0 skipped=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$root"

fail() { failed=$((failed + 1)); echo "FAIL $name: $1: $2"; [ $# -ge 3 ] && tail -n 15 "$3" | sed 's/^/    | /'; }
skip() { skipped=$((skipped + 1)); echo "SKIP $name: $1: $2"; }
# TEST_FILTER=text: only the cases whose name contains text
want() { [ -z "${TEST_FILTER:-}" ] || [[ $1 == *"$TEST_FILTER"* ]]; }
# check CASE PATTERN -- CMD...: CMD exits 0 and its output matches the extended regexp
# (returns 1 when it failed or was filtered out)
check() {
  local case=$1 pat=$2
  shift 3
  want "$case" || return 1
  if ! timeout 300 "$@" >"$tmp/out" 2>&1; then
    fail "$case" "exit code $?" "$tmp/out"
    return 1
  elif ! grep -qE -- "$pat" "$tmp/out"; then
    fail "$case" "output does not match /$pat/" "$tmp/out"
    return 1
  fi
  passed=$((passed + 1))
}

check "tour" "torch.Size\(\[2, 2, 3\]\)" -- "$tensh" scripts/tour.lua
# every name the tour uses is shown being defined, as typed at the prompt
if check "tour shows its definitions" "^> v = torch.tensor" -- "$tensh" scripts/tour.lua; then
  for v in y col a m w; do
    grep -qE "^> $v(, [a-z]+)? = " "$tmp/out" || fail "tour shows its definitions" "no line defining $v" "$tmp/out"
  done
fi
if check "tour --help" "^usage: tensh scripts/tour.lua" -- "$tensh" scripts/tour.lua --help; then
  grep -q "a tour of tensors" "$tmp/out" && fail "tour --help" "the tour ran instead of the help" "$tmp/out"
fi
check "device_info" "cuda.is_available\(\): (true|false)" -- "$tensh" scripts/device_info.lua
check "--help" "usage: tensh scripts/train_fashion_mnist.lua" -- "$tensh" scripts/train_fashion_mnist.lua --help
check "cpu_vs_gpu" "cpu +3 steps: .* ms/step" -- "$tensh" scripts/cpu_vs_gpu.lua --steps 3 --batch-size 16
check "grad_accumulation" "^verdict: the accumulated gradient equals one batch of 64's; .*\(it learns\)$" -- \
  "$tensh" scripts/grad_accumulation.lua --steps 2
check "cifar10 (synthetic)" "epoch 1: test accuracy" -- "$tensh" scripts/cifar10_mobilenet.lua --synthetic 128 --epochs 1 \
  --batch-size 32 --workers 1
want() { [ -z "${TEST_FILTER:-}" ] || [[ $1 == *"$TEST_FILTER"* ]]; }
# without the dataset: the whole "looked for" list, then the synthetic images
check "cifar10 (no dataset)" "^ +$tmp/nope/cifar-10-batches-bin/data_batch_1\.bin$" -- \
  "$tensh" scripts/cifar10_mobilenet.lua --root "$tmp/nope" --epochs 0 --workers 1
if ! want "unknown option"; then :
elif "$tensh" scripts/train_fashion_mnist.lua --bogus >"$tmp/out" 2>&1; then
  fail "unknown option" "exit code 0"
elif grep -q "unknown option '--bogus'" "$tmp/out"; then passed=$((passed + 1)); else fail "unknown option" "message" "$tmp/out"; fi

# the character-level GPT on Debian's license texts, tiny: it learns, samples, plots, and a run stopped at
# its first evaluation and resumed ends exactly where an uninterrupted one does
gpt=(--steps 20 --eval-interval 10 --eval-iters 2 --log-interval 5 --sample 30 --batch-size 4 --block-size 16
  --n-layer 1 --n-head 2 --n-embd 16 --lr 3e-3 --warmup 2 --device cpu)
check "--help (gpt)" "usage: tensh scripts/train_gpt.lua" -- "$tensh" scripts/train_gpt.lua --help
if [ ! -d /usr/share/common-licenses ]; then skip "train_gpt" "no /usr/share/common-licenses (Debian's base-files)"
elif check "train_gpt, 20 steps" "^final: val loss" -- "$tensh" scripts/train_gpt.lua "${gpt[@]}" --out "$tmp/g1"; then
  straight=$(grep -E "^(iter 20|step 20|final)" "$tmp/out" | sed 's/, [0-9.]* ms\/iter//; s#'"$tmp"'/g1#OUT#')
  first=$(grep "^step 0: train loss" "$tmp/out" | sed 's/.*val loss //')
  last=$(grep "^step 20: train loss" "$tmp/out" | sed 's/.*val loss //')
  awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.3) }' && passed=$((passed + 1)) ||
    fail "train_gpt learns" "val loss $first at step 0, $last at step 20" "$tmp/out"
  grep -q -- "---- sample ----" "$tmp/out" && grep -q "── train   ── val" "$tmp/out" && passed=$((passed + 1)) ||
    fail "train_gpt samples and plots" "no sample or no loss plot" "$tmp/out"
  check "train_gpt, stop at step 10" "stopping after iteration 10" -- \
    "$tensh" scripts/train_gpt.lua "${gpt[@]}" --out "$tmp/g2" --stop-after 10
  check "train_gpt, resume" "resuming at iteration 10 of 20" -- \
    "$tensh" scripts/train_gpt.lua "${gpt[@]}" --out "$tmp/g2" --resume
  resumed=$(grep -E "^(iter 20|step 20|final)" "$tmp/out" | sed 's/, [0-9.]* ms\/iter//; s#'"$tmp"'/g2#OUT#')
  if [ "$straight" = "$resumed" ] && [ -n "$straight" ]; then passed=$((passed + 1))
  else fail "train_gpt resume is exact" "straight: '$straight', resumed: '$resumed'"; fi
  check "train_gpt, resume a finished run" "already finished its 20 iterations" -- \
    "$tensh" scripts/train_gpt.lua "${gpt[@]}" --out "$tmp/g2" --resume
fi

fm=/usr/share/datasets/fashion-mnist
if ! want "train"; then :
elif [ -f "$fm/train-images-idx3-ubyte.gz" ] || [ -f "$fm/train-images-idx3-ubyte" ]; then
  common=(--limit 600 --batch-size 100 --workers 1 --logdir "$tmp/runs")
  for model in mlp cnn; do
    check "train $model, 2 epochs" "final test accuracy" -- \
      "$tensh" scripts/train_fashion_mnist.lua --model $model --epochs 2 --out "$tmp/a" "${common[@]}"
    straight=$(grep "final test accuracy" "$tmp/out")
    check "train $model, epoch 1 then stop" "stopping after epoch 1" -- \
      "$tensh" scripts/train_fashion_mnist.lua --model $model --epochs 2 --stop-after 1 --out "$tmp/b" "${common[@]}"
    check "train $model, resume to epoch 2" "resuming after epoch 1" -- \
      "$tensh" scripts/train_fashion_mnist.lua --model $model --epochs 2 --out "$tmp/b" --resume "${common[@]}"
    resumed=$(grep "final test accuracy" "$tmp/out" | sed "s#$tmp/b#$tmp/a#")
    # resuming a run that has finished says so and writes no empty event file
    events=$(ls "$tmp/runs/fashion_mnist_$model" | wc -l)
    check "train $model, resume a finished run" "already finished its 2 epochs" -- \
      "$tensh" scripts/train_fashion_mnist.lua --model $model --epochs 2 --out "$tmp/b" --resume "${common[@]}"
    [ "$(ls "$tmp/runs/fashion_mnist_$model" | wc -l)" = "$events" ] ||
      fail "train $model, resume a finished run" "a new event file in $tmp/runs/fashion_mnist_$model"
    if [ "$straight" = "$resumed" ] && [ -n "$straight" ]; then passed=$((passed + 1))
    else fail "resume is exact ($model)" "straight: '$straight', resumed: '$resumed'"; fi
  done
  ls "$tmp/runs"/fashion_mnist_mlp/*tfevents* >/dev/null 2>&1 && passed=$((passed + 1)) ||
    fail "TensorBoard logs" "no event file under $tmp/runs/fashion_mnist_mlp"
else
  skip "train_fashion_mnist" "Debian's dataset-fashion-mnist is not installed ($fm)"
fi

# DistributedDataParallel in two processes, on tiny settings: it trains (the
# accuracy against one process is in the notes, from full runs)
if ! want "ddp_fashion_mnist"; then :
elif ! command -v mpirun >/dev/null; then
  skip "ddp_fashion_mnist" "needs Open MPI's mpirun (apt-get install openmpi-bin libopenmpi3)"
elif [ -f "$fm/train-images-idx3-ubyte.gz" ] || [ -f "$fm/train-images-idx3-ubyte" ]; then
  check "ddp_fashion_mnist, 2 processes" "final test accuracy: [5-9][0-9]\.[0-9]+ %" -- \
    "$tensh" --nproc 2 scripts/ddp_fashion_mnist.lua --limit 600 --batch-size 100 --epochs 2 --out "$tmp/ddp.safetensors"
  grep -q "over 2 processes (mpi, cpu)" "$tmp/out" && passed=$((passed + 1)) ||
    fail "ddp_fashion_mnist says its processes" "no 'over 2 processes (mpi, cpu)' line" "$tmp/out"
  [ -f "$tmp/ddp.safetensors" ] && passed=$((passed + 1)) || fail "ddp_fashion_mnist --out" "no $tmp/ddp.safetensors"
else
  skip "ddp_fashion_mnist" "Debian's dataset-fashion-mnist is not installed ($fm)"
fi

# make bench's comparison: with several rounds (BENCH_ROUNDS) each side keeps
# its lowest median per case (CPU time; wall time for start-up), and the ratio
# and the verdict come from those
rec() { printf '{"case": "%s", "median": %s, "cpu_median": %s, "env": {"threads": 1}}\n' "$@"; }
{ rec lstm_lm_train 0.30 0.30; rec lstm_lm_train 0.17 0.18; rec startup 0.004 0.1; rec startup 0.008 0.001; } \
  >"$tmp/tensh.jsonl"
{ rec lstm_lm_train 0.25 0.20; rec lstm_lm_train 0.21 0.24; rec startup 1.0 0.5; } >"$tmp/pytorch.jsonl"
if check "compare.py: best of rounds" "^\| lstm_lm_train \| 170 ms \(CPU 180 ms\) \| 250 ms \(CPU 200 ms\) \| 0.68 \| 0.9 \| <= 0.8: NOT met" -- \
  python3 scripts/bench/compare.py "$tmp/tensh.jsonl" "$tmp/pytorch.jsonl" "$tmp/compare.jsonl"; then
  grep -q "^Each side's best of up to 2 rounds" "$tmp/out" || fail "compare.py: best of rounds" "no rounds line" "$tmp/out"
  grep -qE "^\| startup \| 4 ms \| 1 s \| 0.004 \| - \| < 10 ms: met" "$tmp/out" ||
    fail "compare.py: best of rounds" "start-up's round is not its lowest wall time" "$tmp/out"
  grep -q '"tensh_rounds": 2, "pytorch_rounds": 2' "$tmp/compare.jsonl" ||
    fail "compare.py: best of rounds" "compare.jsonl lacks the round counts" "$tmp/compare.jsonl"
fi

echo "$name: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
