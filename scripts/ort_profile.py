#!/usr/bin/env python3
"""ONNX Runtime's time per node of a model, beside which tinylens's own
`tinylens-cli bench onnx MODEL --profile` can be read layer by layer.

Runs the model warm with ONNX Runtime's profiler on (CPU provider, the given
intra-op threads), then prints the mean time per run of each operator type
and each node, in graph order or slowest first. ONNX Runtime comes from
build/bench-venv (scripts/bench installs it there); it is never a build or
test dependency. The profiler adds its own overhead: compare layers, not
totals, with the un-profiled figures of scripts/bench.

  build/bench-venv/bin/python scripts/ort_profile.py MODEL.onnx [--runs N] [--threads T] [--top K] [--order]
"""
import argparse
import collections
import json
import os
import sys
import tempfile

import numpy as np
import onnxruntime as ort


def profile_nodes(model, threads, runs, folder=None):
    """ONNX Runtime's profile of `model` on `threads` intra-op threads: one
    warm-up run, then `runs` runs, all of them in the profile, with random
    inputs (a free dimension taken as 1). Returns {node name: [op, output
    shape, total us, count]} in graph order and the number of runs the
    totals cover. The profile's file goes into `folder` (default: a new
    temporary one)."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(folder or tempfile.mkdtemp(), "ort")
    so.log_severity_level = 3
    s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {}
    for i in s.get_inputs():
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in i.shape]
        feeds[i.name] = rng.random(shape, dtype=np.float32)
    s.run(None, feeds)  # warm-up, counted in the profile too
    for _ in range(runs):
        s.run(None, feeds)
    events = json.load(open(s.end_profiling()))

    per_node = collections.OrderedDict()  # name -> [op, output shape, total us, count]
    for e in events:
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time"):
            continue
        name = e["name"][: -len("_kernel_time")]
        slot = per_node.setdefault(name, [e["args"].get("op_name", "?"), e["args"].get("output_type_shape"), 0.0, 0])
        slot[2] += e["dur"]
        slot[3] += 1
    return per_node, runs + 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model")
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--top", type=int, default=25, help="nodes to list (0: all)")
    p.add_argument("--order", action="store_true", help="list nodes in graph order, not slowest first")
    a = p.parse_args()

    per_node, runs = profile_nodes(a.model, a.threads, a.runs)
    if not per_node:
        sys.exit("no node events in the profile")
    by_op = collections.Counter()
    for op, _, us, _ in per_node.values():
        by_op[op] += us / runs
    print(f"{a.model}: ONNX Runtime {ort.__version__}, {a.threads} threads, profiled, mean of {runs} runs")
    print(f"nodes {sum(by_op.values()):.1f} us per run; by operator:")
    for op, us in by_op.most_common():
        print(f"  {op:24s} {us:9.1f} us")
    rows = list(per_node.items()) if a.order else sorted(per_node.items(), key=lambda kv: -kv[1][2])
    if a.top:
        rows = rows[: a.top]
    print("node time per run (us), operator, output shape, name:")
    for name, (op, shape, us, _) in rows:
        out = shape[0] if isinstance(shape, list) and shape else shape
        dims = next(iter(out.values())) if isinstance(out, dict) and out else out
        print(f"  {us / runs:9.1f}  {op:16s} {str(dims):24s} {name}")


if __name__ == "__main__":
    main()
