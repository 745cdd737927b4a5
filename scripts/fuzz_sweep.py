#!/usr/bin/env python3
"""Systematic hostile variants of ONNX's node tests, each run once by the
sanitized fuzz_onnx binary (what libFuzzer finds by chance, tried in order).

  build/bench-venv/bin/python scripts/fuzz_sweep.py empty-axes|attributes [--only SUBSTRING] [--keep DIR]

empty-axes: one model per (test, input, axis), that axis declared 0 and the
other axes as the test's data (fuzz_onnx feeds inputs of the declared shapes).
attributes: one model per INT or INTS attribute element of every test, set
to each of 0, -1, -7, 2^31, -2^31 and 2^62; inputs as the test's data.

Runs build-fuzz/fuzz/fuzz_onnx (scripts/fuzz builds it) on every model: a
sanitizer report, a crash, a hang (60 s) or an error other than IOError and
ShapeError is a finding. Prints each finding's first line and a count, and
exits 1 if there was any. Needs the onnx module (scripts/bench installs it in
build/bench-venv); takes 5 (empty-axes) to 15 (attributes) minutes here.
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

import onnx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXTREMES = [0, -1, -7, 2**31, -(2**31), 2**62]


def load_case(case):
    """The test's model with its inputs declared as its data's shapes, and those shapes."""
    model = onnx.load(os.path.join(case, "model.onnx"))
    init = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in init]
    shapes = []
    for k, value in enumerate(inputs):
        try:
            dims = list(onnx.load_tensor(os.path.join(case, "test_data_set_0", "input_%d.pb" % k)).dims)
        except Exception:  # a sequence or optional input: left as declared
            dims = None
        if dims is not None and value.type.HasField("tensor_type"):
            declare(value, dims)
        else:
            dims = None
        shapes.append(dims)
    return model, inputs, shapes


def declare(value, dims):
    shape = value.type.tensor_type.shape
    shape.ClearField("dim")
    for d in dims:
        shape.dim.add().dim_value = d


def empty_axes(case):
    model, inputs, shapes = load_case(case)
    for k, dims in enumerate(shapes):
        for axis in range(len(dims or [])):
            declare(inputs[k], dims[:axis] + [0] + dims[axis + 1:])
            yield "in%d_axis%d" % (k, axis), model.SerializeToString()
            declare(inputs[k], dims)


def attributes(case):
    model, _, _ = load_case(case)
    for n, node in enumerate(model.graph.node):
        for a in node.attribute:
            if a.type == onnx.AttributeProto.INT:
                slots, get, put = [None], (lambda s, a=a: a.i), (lambda s, v, a=a: setattr(a, "i", v))
            elif a.type == onnx.AttributeProto.INTS:
                slots = range(len(a.ints))
                get, put = (lambda s, a=a: a.ints[s]), (lambda s, v, a=a: a.ints.__setitem__(s, v))
            else:
                continue
            for s in slots:
                kept = get(s)
                for v in EXTREMES:
                    put(s, v)
                    yield "node%d_%s%s_%d" % (n, a.name, "" if s is None else "[%d]" % s, v), model.SerializeToString()
                put(s, kept)


def finding(log):
    m = re.search(r"runtime error:.*|ERROR: \w+Sanitizer[^(\n]*|ERROR: libFuzzer[^(\n]*|what\(\): .*", log)
    return m.group(0) if m else "exit status without a report"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("sweep", choices=["empty-axes", "attributes"])
    p.add_argument("--only", default="", help="tests whose name contains this")
    p.add_argument("--keep", help="write the models that fail here")
    args = p.parse_args()
    binary = os.path.join(ROOT, "build-fuzz", "fuzz", "fuzz_onnx")
    if not os.access(binary, os.X_OK):
        sys.exit("fuzz_sweep: no %s (run scripts/fuzz onnx --seconds 1 first)" % binary)
    variants = empty_axes if args.sweep == "empty-axes" else attributes
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1", UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    total, failed = 0, []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.onnx")
        for case in sorted(glob.glob(os.path.join(ROOT, "resources", "onnx-node-tests", "test_*" + args.only + "*"))):
            try:
                models = list(variants(case))
            except Exception:  # a model the onnx module cannot read: not ours to sweep
                continue
            for name, data in models:
                with open(path, "wb") as f:
                    f.write(data)
                total += 1
                try:
                    r = subprocess.run([binary, "-rss_limit_mb=2048", path], env=env, capture_output=True, text=True,
                                       errors="replace", timeout=60)
                    bad = r.returncode != 0 and finding(r.stdout + r.stderr)
                except subprocess.TimeoutExpired:
                    bad = "hang (over 60 s)"
                if bad:
                    label = "%s %s" % (os.path.basename(case), name)
                    failed.append(label)
                    print("FINDING %s: %s" % (label, bad), flush=True)
                    if args.keep:
                        os.makedirs(args.keep, exist_ok=True)
                        with open(os.path.join(args.keep, re.sub(r"[^\w.-]", "_", label) + ".onnx"), "wb") as f:
                            f.write(data)
    print("fuzz_sweep %s: %d models, %d findings" % (args.sweep, total, len(failed)))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
