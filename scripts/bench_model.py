#!/usr/bin/python3
"""EfficientNet-Lite0 batch-1 latency: tinylens on its cpu device against
PyTorch (2 threads, the same weights, image and network definition as
scripts/reference_efficientnet.py), warm median of the same number of runs,
measured in one call so both see the same machine load.

  scripts/bench_model.py [--cli build/tinylens-cli] [--runs 10] [--device cpu]
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "tinylens-cli"))
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()

    out = subprocess.run([args.cli, "bench", "model", "--device", args.device, "--runs", str(args.runs)],
                         check=True, capture_output=True, text=True).stdout
    print(out, end="")
    m = re.search(r"warm median\s+([0-9.]+) ms", out)
    if not m:
        sys.exit("bench_model: no warm median in the CLI's output")
    ours = float(m.group(1))

    ref = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "reference_efficientnet.py"), "bench",
                          str(args.runs)], check=True, capture_output=True, text=True).stdout
    print(ref, end="")
    peer = float(re.search(r"warm median ([0-9.]+) ms", ref).group(1))
    print("efficientnet-lite0 batch 1 on %s: tinylens %.2f ms, PyTorch %.2f ms; tinylens / PyTorch time = %.2f "
          "(<= 1 means we are as fast or faster)" % (args.device, ours, peer, ours / peer))


if __name__ == "__main__":
    main()
