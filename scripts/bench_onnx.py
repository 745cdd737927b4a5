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

With --zoo the models are the zoo's (resources/onnx-zoo, scripts/export_zoo.py)
and the onnx wheel's light models, and each round times tinylens twice:
with its default settings (TINYLENS_TUNE=0, what the window and the CLI do)
and tuned (TINYLENS_TUNE=1, the kernel cache holding the tuner's choices); the
table ends with the geometric means of the median ratios and the machine's
load before and after.

With --base CLI, each round also times another build of tinylens (an older
commit's) on the same model, and the table gives this build's time over it:
a change measured against what it changes, in the same call.

  scripts/bench_onnx.py [--cli build/tinylens-cli] [--base OTHER-CLI] [--runs 20] [--rounds 3] [--zoo] [MODEL.onnx ...]
"""
import argparse
import math
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


def zoo_models():
    zoo = os.path.join(ROOT, "resources", "onnx-zoo")
    light = os.path.join(ROOT, "resources", "onnx-light-models")
    models = [os.path.join(zoo, d, "model.onnx") for d in sorted(os.listdir(zoo))
              if os.path.isfile(os.path.join(zoo, d, "model.onnx"))] if os.path.isdir(zoo) else []
    if os.path.isdir(light):
        models += [os.path.join(light, f) for f in sorted(os.listdir(light)) if f.endswith(".onnx")]
    return models


def label(path):
    base = os.path.basename(path)
    return os.path.basename(os.path.dirname(path)) if base == "model.onnx" else base[:-5]


def tinylens_median(cli, path, runs, tune=None):
    env = dict(os.environ)
    if os.path.basename(os.path.dirname(path)) == "onnx-light-models":
        # The onnx wheel's light models build their weights with
        # ConstantOfShape: more than an untrusted file's values may hold.
        env["TINYLENS_TRUST_FILES"] = "1"
    if tune is not None:
        env["TINYLENS_TUNE"] = tune
    out = subprocess.run([cli, "bench", "onnx", path, "--runs", str(runs), "--device", "cpu"], check=True,
                         capture_output=True, text=True, env=env).stdout
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
    ap.add_argument("--zoo", action="store_true", help="the zoo and the light models, default and tuned")
    ap.add_argument("--base", help="another tinylens-cli, timed in each round beside --cli")
    ap.add_argument("models", nargs="*")
    args = ap.parse_args()
    if args.zoo:
        return zoo_table(args, args.models or zoo_models())
    args.models = args.models or DEFAULT_MODELS
    import onnxruntime as ort
    ort.set_default_logger_severity(3)  # light models carry unused initializers; ORT warns about each
    threads = len(os.sched_getaffinity(0)) or 1
    print(f"ONNX Runtime {ort.__version__} (CPU provider, {threads} intra-op threads) vs tinylens cpu device; "
          f"warm median of {args.runs} runs, {args.rounds} alternating rounds")
    base_cols = f" {'base ms':>9} {'/base':>6}" if args.base else ""
    print(f"{'model':<28} {'tinylens ms':>12} {'ORT ms':>9} {'ratio':>7}{base_cols}   "
          "(tinylens / ORT time; <= 1: as fast or faster)")
    logs = {"ort": [], "base": []}
    for path in args.models:
        name = label(path)
        if not os.path.exists(path):
            print(f"{name:<28} missing: run scripts/setup")
            continue
        ratios, to_base = [], []
        for _ in range(args.rounds):
            ours, _cold = tinylens_median(args.cli, path, args.runs)
            peer = ort_median(path, args.runs, threads)
            ratios.append(ours / peer)
            line = f"{name:<28} {ours:12.2f} {peer:9.2f} {ours / peer:7.2f}"
            if args.base:
                base, _cold = tinylens_median(args.base, path, args.runs)
                to_base.append(ours / base)
                line += f" {base:9.2f} {ours / base:6.2f}"
            print(line)
            sys.stdout.flush()
        logs["ort"].append(math.log(statistics.median(ratios)))
        line = f"{name:<28} median ratio {statistics.median(ratios):.2f} over {args.rounds} rounds"
        if to_base:
            logs["base"].append(math.log(statistics.median(to_base)))
            line += f"; to the base {statistics.median(to_base):.2f}"
        print(line)
    if len(logs["ort"]) > 1:
        line = f"geometric mean over {len(logs['ort'])} models: {math.exp(sum(logs['ort']) / len(logs['ort'])):.2f} to ORT"
        if logs["base"]:
            line += f", {math.exp(sum(logs['base']) / len(logs['base'])):.2f} to the base"
        print(line)


def zoo_table(args, models):
    import math
    import onnxruntime as ort
    ort.set_default_logger_severity(3)
    threads = len(os.sched_getaffinity(0)) or 1
    print(f"ONNX Runtime {ort.__version__} (CPU provider, {threads} intra-op threads) vs tinylens cpu device, default "
          f"(TINYLENS_TUNE=0) and tuned (=1); warm median of {args.runs} runs, {args.rounds} alternating rounds")
    print(f"load before: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (1, 5, 15 min)")
    print(f"{'model':<26} {'default ms':>10} {'tuned ms':>9} {'ORT ms':>8} {'default':>8} {'tuned':>6}   "
          "(tinylens / ORT time, median of the rounds; <= 1: as fast or faster)")
    logs = {"default": [], "tuned": []}
    for path in models:
        name = label(path)
        times = {"default": [], "tuned": [], "ort": []}
        try:
            for _ in range(args.rounds):
                times["default"].append(tinylens_median(args.cli, path, args.runs, "0")[0])
                times["tuned"].append(tinylens_median(args.cli, path, args.runs, "1")[0])
                times["ort"].append(ort_median(path, args.runs, threads))
        except subprocess.CalledProcessError as e:
            print(f"{name:<26} tinylens failed: {(e.stdout or '').strip()[-200:]} {(e.stderr or '').strip()[-200:]}")
            continue
        ratio = {k: statistics.median(a / b for a, b in zip(times[k], times["ort"])) for k in ("default", "tuned")}
        for k in logs:
            logs[k].append(math.log(ratio[k]))
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"{name:<26} {med['default']:10.2f} {med['tuned']:9.2f} {med['ort']:8.2f} {ratio['default']:8.2f} "
              f"{ratio['tuned']:6.2f}")
        sys.stdout.flush()
    for k in logs:
        if logs[k]:
            print(f"geometric mean, {k}: {math.exp(sum(logs[k]) / len(logs[k])):.2f} over {len(logs[k])} models")
    print(f"load after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (1, 5, 15 min)")


if __name__ == "__main__":
    main()
