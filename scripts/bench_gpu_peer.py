#!/usr/bin/env python3
"""PyTorch's side of scripts/bench-gpu, on CUDA, plain fp32 (TF32 off, as
tinylens computes): EfficientNet-Lite0 eager from host pixels to host logits
(the network of scripts/reference_efficientnet.py, the same weights and
image), and an N x N matmul through cuBLAS. Prints lines that
scripts/bench-gpu puts beside tinylens's own.

  bench_gpu_peer.py model --batch B --runs R [--image PATH]
  bench_gpu_peer.py matmul --n N --repeat R
"""
import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def fp32_only():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def model(args):
    import reference_efficientnet as ref
    sd = {k: v.cuda() for k, v in ref.load().items()}
    x = ref.preprocess(args.image).repeat(args.batch, 1, 1, 1).contiguous()
    times = []
    with torch.no_grad():
        for r in range(args.runs + 1):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            ref.forward(sd, x.cuda()).cpu()
            dt = time.perf_counter() - t0
            if r:  # the first run loads cuDNN's kernels
                times.append(dt)
    med = statistics.median(times)
    print("pytorch %s cuda eager, batch %d: warm median %.2f ms, %.1f images/s" %
          (torch.__version__, args.batch, med * 1e3, args.batch / med))


def matmul(args):
    n = args.n
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    a @ b
    best = 1e30
    for _ in range(args.repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        a @ b
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) * 1e-3)
    print("cublas fp32 (TF32 off) matmul n=%d: %.3f ms, %.1f GFLOP/s" % (n, best * 1e3, 2.0 * n**3 / best * 1e-9))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["model", "matmul"])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--image", default="/usr/share/doc/opencv-doc/examples/data/squirrel_cls.jpg")
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()
    fp32_only()
    model(args) if args.what == "model" else matmul(args)


if __name__ == "__main__":
    main()
