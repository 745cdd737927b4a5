#!/usr/bin/env python3
"""Every convolution of a model, alone, beside ONNX Runtime: which class of
layer (depthwise, pointwise, grouped, dense, stem) a model's gap to ONNX
Runtime comes from.

Each distinct Conv of MODEL (input shape from ONNX shape inference, weight
shape, strides, pads, dilations, group, bias) becomes a one-layer model, a
Conv then a Relu, written to a temporary folder with seeded weights, and is
timed on --threads threads in --rounds alternating rounds:
  tinylens   `tinylens-cli bench onnx LAYER --profile`: the sum of its kernels'
             medians (the input's upload and the output's read-back left out)
  ORT        ONNX Runtime's profiled time of the Conv node itself; the layout
             reorders around a lone layer (ReorderInput/ReorderOutput), which
             a whole model mostly does without, are listed apart
Each row is the median over the rounds; a class's total counts every
occurrence in the model. A lone layer reads its input hot from the cache,
as the layer before it left it in a model; the layer's time inside the model
is `bench onnx MODEL --profile` beside `ort_profile.py MODEL --order`.
ONNX Runtime and the onnx package come from build/bench-venv (scripts/bench
installs them there); neither is a build or test dependency.

  build/bench-venv/bin/python scripts/bench_layers.py MODEL.onnx [--cli build/tinylens-cli]
      [--threads 1] [--runs 200] [--rounds 3] [--classes depthwise,stem]
"""
import argparse
import collections
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import ort_profile  # scripts/: ONNX Runtime's per-node profile
import thread_scaling  # scripts/: the kernel table's rows

HERE = os.path.dirname(os.path.abspath(__file__))


def convs(model_path):
    """(spec, count) of every distinct Conv: spec = (input shape, weight
    shape, strides, pads, dilations, group, has bias)."""
    m = onnx.load(model_path)
    for i in m.graph.input:  # a free batch dimension is taken as 1
        for d in i.type.tensor_type.shape.dim:
            if not d.HasField("dim_value"):
                d.dim_value = 1
    m = onnx.shape_inference.infer_shapes(m)
    shapes = {}
    for v in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output):
        dims = [d.dim_value for d in v.type.tensor_type.shape.dim]
        if dims and all(d > 0 for d in dims):
            shapes[v.name] = tuple(dims)
    weights = {t.name: tuple(t.dims) for t in m.graph.initializer}
    found = collections.Counter()
    for n in m.graph.node:
        if n.op_type != "Conv" or len(n.input) < 2:
            continue
        # a weight is an initializer, or computed (the onnx wheel's light
        # models build theirs with ConstantOfShape): then its inferred shape
        w = weights.get(n.input[1], shapes.get(n.input[1]))
        if n.input[0] not in shapes or w is None:
            continue
        x = shapes[n.input[0]]
        if len(x) != 4 or len(w) != 4:
            continue
        a = {at.name: (at.s.decode() if at.type == onnx.AttributeProto.STRING else
                       list(at.ints) if at.type == onnx.AttributeProto.INTS else at.i) for at in n.attribute}
        strides, dilations = tuple(a.get("strides", [1, 1])), tuple(a.get("dilations", [1, 1]))
        pads = tuple(a.get("pads", [0, 0, 0, 0]))
        if a.get("auto_pad", "NOTSET") in ("SAME_UPPER", "SAME_LOWER"):  # the output is ceil(in / stride)
            p = []
            for axis in (0, 1):
                size, k, st, d = x[2 + axis], w[2 + axis], strides[axis], dilations[axis]
                total = max((-(-size // st) - 1) * st + (k - 1) * d + 1 - size, 0)
                p.append(total // 2 if a["auto_pad"] == "SAME_UPPER" else total - total // 2)
                p.append(total - p[-1])
            pads = (p[0], p[2], p[1], p[3])
        spec = (x, w, strides, pads, dilations, int(a.get("group", 1)), len(n.input) > 2 and n.input[2] != "")
        found[spec] += 1
    return found


def layer_class(spec):
    x, w, _, _, _, group, _ = spec
    if group > 1 and group == x[1] and w[1] == 1:
        return "depthwise"
    if group > 1:
        return "grouped"
    if x[1] <= 4 and w[2] * w[3] > 1:  # a k x k window over an image's few channels
        return "stem"
    return "pointwise" if w[2] == w[3] == 1 else "dense"


def label(spec):
    x, w, s, p, d, group, _ = spec
    k = f"{w[2]}x{w[3]}"
    return (f"{x[1]}->{w[0]} {k} s{s[0]} @{x[2]}x{x[3]}" + (f" g{group}" if 1 < group < x[1] else "")
            + (f" d{d[0]}" if d[0] > 1 else ""))


def write_layer(spec, path, rng):
    x, w, s, p, d, group, bias = spec
    fan_in = w[1] * w[2] * w[3]
    inits = [numpy_helper.from_array((rng.standard_normal(w) * (2.0 / fan_in) ** 0.5).astype(np.float32), "w")]
    ins = ["x", "w"]
    if bias:
        inits.append(numpy_helper.from_array((rng.standard_normal(w[0]) * 0.1).astype(np.float32), "b"))
        ins.append("b")
    oh = (x[2] + p[0] + p[2] - d[0] * (w[2] - 1) - 1) // s[0] + 1
    ow = (x[3] + p[1] + p[3] - d[1] * (w[3] - 1) - 1) // s[1] + 1
    nodes = [helper.make_node("Conv", ins, ["c"], kernel_shape=[w[2], w[3]], strides=list(s), pads=list(p),
                              dilations=list(d), group=group),
             helper.make_node("Relu", ["c"], ["y"])]
    g = helper.make_graph(nodes, "layer", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [x[0], w[0], oh, ow])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


def time_tinylens(cli, path, threads, runs):
    env = dict(os.environ, TINYLENS_THREADS=str(threads))
    run = subprocess.run([cli, "bench", "onnx", path, "--runs", str(runs), "--profile"], env=env,
                         capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"tinylens-cli: {(run.stderr or run.stdout).strip()[-300:]}")
    # the kernel table's rows, as thread_scaling.py reads them
    return sum(float(m.group(3)) for line in run.stdout.splitlines() if (m := thread_scaling.ROW.match(line)))


def time_ort(path, threads, runs):
    """The Conv node's time per run, and the other nodes' (the reorders)."""
    nodes, counted = ort_profile.profile_nodes(path, threads, runs, os.path.dirname(path))
    conv = sum(us for op, _, us, _ in nodes.values() if op in ("Conv", "FusedConv"))
    other = sum(us for op, _, us, _ in nodes.values() if op not in ("Conv", "FusedConv"))
    return conv / counted, other / counted


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--cli", default=os.path.join(HERE, "..", "build", "tinylens-cli"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--classes", default="", help="only these classes, comma-separated")
    a = ap.parse_args()
    found = convs(a.model)
    if not found:
        sys.exit(f"{a.model}: no Conv with known shapes")
    want = set(filter(None, a.classes.split(",")))
    specs = [s for s in found if not want or layer_class(s) in want]
    rng = np.random.default_rng(0)
    tmp = tempfile.TemporaryDirectory(prefix="tl-layers-")
    paths = {}
    for i, spec in enumerate(specs):
        paths[spec] = os.path.join(tmp.name, f"layer{i}.onnx")
        write_layer(spec, paths[spec], rng)
    ours = collections.defaultdict(list)
    peer = collections.defaultdict(list)
    for _ in range(a.rounds):
        for spec in list(specs):
            try:
                ours[spec].append(time_tinylens(a.cli, paths[spec], a.threads, a.runs))
                peer[spec].append(time_ort(paths[spec], a.threads, a.runs))
            except Exception as e:  # one layer that either side cannot run is left out, not the model
                print(f"{label(spec)}: left out: {e}", file=sys.stderr)
                specs.remove(spec)
    if not specs:
        sys.exit(f"{a.model}: no convolution ran on both sides")
    load = os.getloadavg()[0]
    print(f"{a.model}: {len(specs)} distinct convolutions ({sum(found[s] for s in specs)} in the model), "
          f"{a.threads} thread(s), median of {a.rounds} rounds of {a.runs} runs; ONNX Runtime {ort.__version__}; "
          f"load {load:.2f}")
    print(f"{'class':10s} {'layer':34s} {'count':>5s} {'tinylens us':>11s} {'ORT us':>8s} {'ratio':>6s} {'ORT reorders':>12s}")
    totals = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for spec in sorted(specs, key=lambda s: (layer_class(s), -statistics.median(ours[s]))):
        t = statistics.median(ours[spec])
        o = statistics.median(c for c, _ in peer[spec])
        r = statistics.median(x for _, x in peer[spec])
        cls = layer_class(spec)
        totals[cls][0] += t * found[spec]
        totals[cls][1] += o * found[spec]
        totals[cls][2] += found[spec]
        print(f"{cls:10s} {label(spec):34s} {found[spec]:5d} {t:11.1f} {o:8.1f} {t / o:6.2f} {r:12.1f}")
    print("by class (every occurrence in the model):")
    for cls, (t, o, n) in sorted(totals.items(), key=lambda kv: -(kv[1][0] - kv[1][1])):
        print(f"  {cls:10s} {n:4d} layers  tinylens {t:9.1f} us  ORT {o:9.1f} us  ratio {t / o:5.2f}  "
              f"gap {t - o:+9.1f} us")


if __name__ == "__main__":
    main()
