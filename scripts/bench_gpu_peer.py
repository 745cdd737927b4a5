#!/usr/bin/env python3
"""PyTorch's side of scripts/bench-gpu, on CUDA, plain fp32 (TF32 off, as
tinylens computes): EfficientNet-Lite0 eager from host pixels to host logits
(the network of scripts/reference_efficientnet.py, the same weights and
image), and an N x N matmul through cuBLAS. Prints lines that
scripts/bench-gpu puts beside tinylens's own.

  bench_gpu_peer.py model --batch B --runs R [--image PATH]
  bench_gpu_peer.py matmul --n N --repeat R
  bench_gpu_peer.py zoo --names resnet18 vit_b_16 ... --batch B --runs R [--compile]

zoo: each of scripts/export_zoo.py's architectures (torchvision's, random
weights: the time does not depend on them), host pixels to host logits,
warm median of R runs as eager, as a captured CUDA graph (the input copied
into the graph's static input, the output copied out) and, with --compile,
torch.compile(mode="reduce-overhead"); one line per model with each and the
best, for scripts/bench-gpu to put beside tinylens's `bench onnx`.
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
    """cuBLAS in float32 (the bar), then with TF32 allowed (PyTorch's faster
    setting, for reference: 10-bit mantissas), each with the error measure
    `tinylens-cli bench matmul` prints: 256 entries against float64, each
    |error| over the sum of |a_ik * b_kj|."""
    n = args.n
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    rows, cols = torch.arange(256) * 7919 % n, torch.arange(256) * 104729 % n
    a64, b64 = a.double()[rows], b.double()[:, cols]
    products = a64 * b64.t()
    exact, scale = products.sum(1), products.abs().sum(1)
    for label, tf32 in (("fp32 (TF32 off)", False), ("TF32 on, for reference", True)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        c = a @ b
        best = 1e30
        for _ in range(args.repeat):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            c = a @ b
            end.record()
            end.synchronize()
            best = min(best, start.elapsed_time(end) * 1e-3)
        err = ((c.double()[rows, cols] - exact).abs() / scale.clamp_min(1e-30)).cpu()
        print("cublas %s matmul n=%d: %.3f ms, %.1f GFLOP/s; error against float64 over 256 entries: "
              "mean %.2e, worst %.2e" % (label, n, best * 1e3, 2.0 * n**3 / best * 1e-9, err.mean(), err.max()))
    fp32_only()


def timed(fn, runs):
    times = []
    for r in range(runs + 2):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        if r >= 2:  # the first runs load kernels (and compile)
            times.append(dt)
    return statistics.median(times)


def zoo(args):
    import export_zoo
    models = export_zoo.zoo()
    for name in args.names:
        make, size = models[name]
        net = make().eval().cuda()
        host = torch.randn(args.batch, 3, size, size)
        with torch.no_grad():
            eager = timed(lambda: net(host.cuda()).cpu(), args.runs)
            static_in = host.cuda()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    net(static_in)  # warm up on a side stream, as capture asks
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                static_out = net(static_in)

            def replay():
                static_in.copy_(host)
                graph.replay()
                return static_out.cpu()

            graphed = timed(replay, args.runs)
            times = {"eager": eager, "cuda graph": graphed}
            if args.compile:
                compiled = torch.compile(net, mode="reduce-overhead")
                times["compile"] = timed(lambda: compiled(host.cuda()).cpu(), args.runs)
        best = min(times, key=times.get)
        print("pytorch %s %s batch %d: %s; best %s %.3f ms" %
              (torch.__version__, name, args.batch, ", ".join("%s %.3f ms" % (k, v * 1e3) for k, v in times.items()),
               best, times[best] * 1e3), flush=True)
        del net
        torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["model", "matmul", "zoo"])
    ap.add_argument("--names", nargs="*", default=[])
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--image", default="/usr/share/doc/opencv-doc/examples/data/squirrel_cls.jpg")
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()
    fp32_only()
    {"model": model, "matmul": matmul, "zoo": zoo}[args.what](args)


if __name__ == "__main__":
    main()
