#!/usr/bin/env python3
"""ONNX models on tinylens's cpu device beside ONNX Runtime, in one call.

For each model: `tinylens-cli bench onnx MODEL --runs R` (host inputs to host
outputs, warm median) and ONNX Runtime's CPU provider with as many intra-op
threads as this process may use cores (its affinity mask, as tinylens's cpu
device counts them: `taskset -c 0 scripts/bench_onnx.py` compares one thread
each), on random inputs of the same declared shapes (dynamic dimensions taken
as 1), warm median of the same number of runs. The two alternate for
--rounds rounds so both see the same machine load; the table gives every
round's ratio and the median.

ONNX Runtime comes from PyPI into a virtual environment under build/ for the
benchmark only; it is never a dependency of the build or the tests.

  scripts/bench_onnx.py [--cli build/tinylens-cli] [--runs 20] [--rounds 3] [MODEL.onnx ...]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MODELS = [
    os.path.join(ROOT, "resources", "models", "efficientnet-lite0.onnx"),
    os.path.join(ROOT, "resources", "onnx-light-models", "light_resnet50.onnx"),
    os.path.join(ROOT, "resources", "onnx-light-models", "light_squeezenet.onnx"),
]


def ort_median(path, runs, threads):
    import numpy as np
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in i.shape]
        if "float" in i.type:
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
        elif "bool" in i.type:
            feeds[i.name] = np.zeros(shape, dtype=bool)
        else:
            feeds[i.name] = np.zeros(shape, dtype=np.int64)
    sess.run(None, feeds)  # cold
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def tinylens_median(cli, path, runs):
    out = subprocess.run([cli, "bench", "onnx", path, "--runs", str(runs), "--device", "cpu"], check=True,
                         capture_output=True, text=True).stdout
    m = re.search(r"warm median\s+([0-9.]+) ms", out)
    if not m:
        sys.exit("bench_onnx: no warm median in tinylens-cli's output:\n" + out)
    cold = re.search(r"cold\s+([0-9.]+) ms", out)
    return float(m.group(1)), float(cold.group(1)) if cold else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "tinylens-cli"))
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("models", nargs="*", default=DEFAULT_MODELS)
    args = ap.parse_args()
    import onnxruntime as ort
    ort.set_default_logger_severity(3)  # light models carry unused initializers; ORT warns about each
    threads = len(os.sched_getaffinity(0)) or 1
    print(f"ONNX Runtime {ort.__version__} (CPU provider, {threads} intra-op threads) vs tinylens cpu device; "
          f"warm median of {args.runs} runs, {args.rounds} alternating rounds")
    print(f"{'model':<28} {'tinylens ms':>12} {'ORT ms':>9} {'ratio':>7}   (tinylens / ORT time; <= 1: as fast or faster)")
    for path in args.models:
        name = os.path.basename(path)
        if not os.path.exists(path):
            print(f"{name:<28} missing: run scripts/setup")
            continue
        ratios = []
        for _ in range(args.rounds):
            ours, _cold = tinylens_median(args.cli, path, args.runs)
            peer = ort_median(path, args.runs, threads)
            ratios.append(ours / peer)
            print(f"{name:<28} {ours:12.2f} {peer:9.2f} {ours / peer:7.2f}")
            sys.stdout.flush()
        print(f"{name:<28} median ratio {statistics.median(ratios):.2f} over {args.rounds} rounds")


if __name__ == "__main__":
    main()
