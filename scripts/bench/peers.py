"""Runs the PyTorch twins (the peers' scripts, unchanged) under the rules
`tensh bench` times tensh's cases by, and writes their results as the
runner's JSON lines (schema 1, "impl": "pytorch").

    python3 peers.py PEERS_DIR OUT.jsonl --device cpu --threads N \
        --min-run-time S [--fashion 0|1] [--filter S] [--append]

--append adds to OUT.jsonl (run.sh's rounds: compare.py keeps each case's best).

The peers time with their common.time_ms (a median over a fixed count);
here time_ms is replaced by the runner's blocked autorange (bench.Timer's
rule, PyTorch's own: the smallest power-of-ten block of at least
min_run_time / 1000 s, then blocks until min_run_time has passed), with
the process's CPU time of each block beside its wall time, so that both
sides of a ratio are measured alike. The twin's emit() names the case:
its "bench" field, plus "[dtype=...]" where it prints a dtype, as tensh's
case files name theirs. The Fashion-MNIST twin times its epochs itself:
its sync() calls around each epoch are stamped, and the first epoch is
dropped as warm-up (tensh's runner warms up with one epoch too).
"""
import argparse
import ctypes
import gc
import json
import os
import runpy
import subprocess
import sys
import time

SCHEMA = 1


def percentile(sorted_xs, p):
    """numpy.percentile's default (linear), as bench.lua's."""
    n = len(sorted_xs)
    pos = (n - 1) * p / 100
    lo = int(pos)
    frac = pos - lo
    a, b = sorted_xs[lo], sorted_xs[min(lo + 1, n - 1)]
    return a + (b - a) * frac


def blas_info():
    """OpenBLAS's kernel family and thread count, read from the library the
    process loaded (torch's BLAS), as torch._blas_info() reads tensh's."""
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "openblas" in line.lower() and "/" in line}
        for path in sorted(libs):
            lib = ctypes.CDLL(path)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            return lib.openblas_get_corename().decode(), lib.openblas_get_num_threads()
    except (OSError, AttributeError):
        pass
    return "unknown", 0


class Timed:
    """The runner's blocked autorange for one statement."""

    def __init__(self, fn, sync, min_run_time):
        self.fn, self.sync, self.min_run_time = fn, sync, min_run_time
        self.warmup = {"runs": 0, "seconds": 0.0}

    def block(self, number):
        fn = self.fn
        self.sync()
        c0, t0 = time.process_time(), time.perf_counter()
        for _ in range(number):
            fn()
        self.sync()
        return time.perf_counter() - t0, time.process_time() - c0

    def warm(self, number):
        t, _ = self.block(number)
        self.warmup["runs"] += number
        self.warmup["seconds"] += t
        return t

    def run(self):
        overhead = sorted(self.warm(0) for _ in range(5))[2]
        number = 1
        while True:
            t = self.warm(number)
            if overhead / t <= 1e-4 and t >= self.min_run_time / 1000:
                break
            if t > self.min_run_time or number * 10 > 2147483647:
                break
            number *= 10
        gc.collect()
        total, walls, cpus = 0.0, [], []
        while total < self.min_run_time or not walls:
            t, c = self.block(number)
            walls.append(t / number)
            cpus.append(c / number)
            total += t
        return number, walls, cpus


def record(case, number, walls, cpus, warmup, env, fields):
    s, c = sorted(walls), sorted(cpus)
    p25, p75 = percentile(s, 25), percentile(s, 75)
    return {"schema": SCHEMA, "case": case, "impl": "pytorch", "median": percentile(s, 50),
            "mean": sum(s) / len(s), "p25": p25, "p75": p75, "iqr": p75 - p25, "times": walls,
            "cpu_median": percentile(c, 50), "cpu_times": cpus, "numbers_per_run": [number],
            "warmup": warmup, "env": env, "peer": fields, "time": int(time.time())}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("peers")
    ap.add_argument("out")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--min-run-time", type=float, default=0.2)
    ap.add_argument("--fashion", type=int, default=1, help="0 skips the Fashion-MNIST epochs")
    ap.add_argument("--filter", default="", help="only cases whose name contains this (as tensh bench --filter)")
    ap.add_argument("--append", action="store_true", help="add to OUT instead of replacing it")
    opts = ap.parse_args()
    mode = "a" if opts.append else "w"

    sys.path.insert(0, opts.peers)
    import torch
    import common  # the peers' own helpers; time_ms, sync and emit are replaced below

    torch.set_num_threads(opts.threads)
    core, blas_threads = blas_info()
    env = {"threads": opts.threads, "blas_core": core, "blas_threads": blas_threads,
           "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"), "build": "PyTorch " + torch.__version__,
           "device": opts.device}
    real_sync = common.sync
    state = {"last": None, "stamps": []}
    out = open(opts.out, mode)

    def time_ms(fn, device, warmup=10, iters=100):
        t = Timed(fn, lambda: real_sync(device), opts.min_run_time)
        number, walls, cpus = t.run()
        state["last"] = (number, walls, cpus, t.warmup)
        return percentile(sorted(walls), 50) * 1e3

    def sync(device):
        real_sync(device)
        state["stamps"].append((time.perf_counter(), time.process_time()))

    def emit(**fields):
        fields.setdefault("impl", "pytorch")
        case = fields["bench"] + (f"[dtype={fields['dtype']}]" if "dtype" in fields else "")
        if opts.filter not in case:
            state["last"], state["stamps"] = None, []
            return
        if state["last"] is not None:
            number, walls, cpus, warmup = state["last"]
        else:  # an epoch twin: its sync() stamps bound each epoch
            st = state["stamps"]
            spans = [(st[i + 1][0] - st[i][0], st[i + 1][1] - st[i][1]) for i in range(0, len(st) - 1, 2)]
            warm, spans = spans[:1], spans[1:] or spans
            number, walls, cpus = 1, [w for w, _ in spans], [c for _, c in spans]
            warmup = {"runs": len(warm), "seconds": sum(w for w, _ in warm)}
        rec = record(case, number, walls, cpus, warmup, env, fields)
        out.write(json.dumps(rec) + "\n")
        out.flush()
        print(f"{case:50s} {rec['median'] * 1e3:10.3f} ms  (CPU {rec['cpu_median'] * 1e3:.3f} ms)", flush=True)
        state["last"], state["stamps"] = None, []

    common.time_ms, common.sync, common.emit = time_ms, sync, emit
    # twin script, its arguments, the cases it emits (for --filter)
    micro = "op_overhead_add1 add_bandwidth matmul softmax_rows log_softmax_rows attention_backward"
    twins = [("ops_micro.py", [], micro), ("mlp_seed003.py", [], "mlp_seed003"), ("lstm_step.py", [], "lstm_lm_train"),
             ("transformer_step.py", [], "transformer_encoder_train"),
             ("mobilenet_v3_small.py", [], "mobilenet_v3_small_train"), ("gpt_step.py", [], "gpt_char_train")]
    if opts.fashion:
        twins += [("fashion_mnist.py", ["--model", m, "--epochs", "2"], f"fashion_mnist_{m}") for m in ("mlp", "cnn")]
    status = 0
    for script, extra, cases in twins:
        if not any(opts.filter in c for c in cases.split()):
            continue
        path = os.path.join(opts.peers, script)
        if not os.path.exists(path):
            print(f"peers: {path} not found: skipped", file=sys.stderr)
            continue
        sys.argv = [path, "--device", opts.device, "--threads", str(opts.threads)] + extra
        try:
            runpy.run_path(path, run_name="__main__")
        except (Exception, SystemExit) as e:  # one twin failing (torchvision missing...) leaves the others
            print(f"peers: {script} failed: {e!r}", file=sys.stderr)
            status = 1
        state["last"], state["stamps"] = None, []

    out.close()
    if opts.filter not in "startup":
        return status
    # start-up: `python3 -c 'import torch'` through /bin/sh, as tensh's case runs `tensh -e ''`
    out = open(opts.out, "a")
    cmd = f"'{sys.executable}' -c 'import torch' >/dev/null"
    t = Timed(lambda: subprocess.run(cmd, shell=True, check=True), lambda: None, max(opts.min_run_time, 0.5))
    number, walls, cpus = t.run()
    rec = record("startup", number, walls, cpus, t.warmup, env, {"cmd": cmd})
    out.write(json.dumps(rec) + "\n")
    print(f"{'startup':50s} {rec['median'] * 1e3:10.3f} ms", flush=True)
    out.close()
    return status


if __name__ == "__main__":
    sys.exit(main())
