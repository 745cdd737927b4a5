#!/usr/bin/env python3
"""How well each kernel of an ONNX model uses the CPU device's threads.

Runs `tinylens-cli bench onnx MODEL --profile` with one thread
(TINYLENS_THREADS=1) and with N threads, alternating for --rounds rounds so
both see the same machine load, and prints each kernel's median time in both,
its speedup, and the time it loses against a perfect split (N-thread time
minus one-thread time / N), the kernels that lose most first. A kernel whose
speedup is far below N waits on one thread (units that do not divide
evenly), on memory, or on data that the other core wrote: read it beside
the kernel table's launch column and the tuner's choice, listed beside it.

  scripts/thread_scaling.py MODEL.onnx [--threads N] [--rounds 3] [--runs 30] [--top 20]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROW = re.compile(r"^\s*(\d+)\s+(\S+)\s+cpu\s+\S+\s+([0-9.]+)\s")
TUNED = re.compile(r"^\s+tuned: (.+?) [0-9.]+ us")


def kernel_times(cli, model, runs, threads):
    env = dict(os.environ, TINYLENS_THREADS=str(threads))
    env.setdefault("TINYLENS_TUNE", "1")
    out = subprocess.run([cli, "bench", "onnx", model, "--device", "cpu", "--profile", "--runs", str(runs)],
                         check=True, capture_output=True, text=True, env=env).stdout
    rows, choices = [], {}
    for line in out.splitlines():
        if m := ROW.match(line):
            rows.append((int(m.group(1)), m.group(2), float(m.group(3))))
        elif (t := TUNED.match(line)) and rows:
            choices[rows[-1][0]] = t.group(1)  # the tuner's choice for the kernel above
    if not rows:
        sys.exit("thread_scaling: no kernel table in tinylens-cli's output:\n" + out)
    return rows, choices


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "tinylens-cli"))
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--top", type=int, default=20, help="kernels to list (0: all)")
    a = ap.parse_args()
    if a.threads < 2:
        sys.exit("thread_scaling: needs at least 2 threads to compare with one (--threads)")
    one, many = {}, {}
    names, chosen = {}, {}
    for _ in range(a.rounds):
        for threads, into in ((1, one), (a.threads, many)):
            rows, choices = kernel_times(a.cli, a.model, a.runs, threads)
            if threads > 1:
                chosen.update(choices)
            for index, name, us in rows:
                names.setdefault(index, name)
                if names[index] != name:
                    sys.exit(f"thread_scaling: kernel {index} is {name} in one run and {names[index]} in another")
                into.setdefault(index, []).append(us)
    rows = []
    for index, name in names.items():
        t1, tn = statistics.median(one.get(index, [0.0])), statistics.median(many.get(index, [0.0]))
        if t1 <= 0 or tn <= 0:
            continue  # assembled in place: never launched
        rows.append((tn - t1 / a.threads, index, name, t1, tn))
    total1, totaln = sum(r[3] for r in rows), sum(r[4] for r in rows)
    print(f"{a.model}: kernel medians over {a.rounds} rounds of {a.runs} profiled runs, 1 thread vs {a.threads}")
    print(f"{'#':>4}  {'kernel':28s} {'1 thread us':>12} {a.threads:>3} threads us {'speedup':>8} {'lost us':>8}"
          "  tuned (on all threads)")
    rows.sort(reverse=True)
    for lost, index, name, t1, tn in rows[: a.top or len(rows)]:
        print(f"{index:4d}  {name:28s} {t1:12.1f} {tn:14.1f} {t1 / tn:8.2f} {lost:8.1f}  {chosen.get(index, '')}")
    print(f"all {len(rows)} launched kernels: {total1:.0f} us on 1 thread, {totaln:.0f} us on {a.threads}: "
          f"speedup {total1 / totaln:.2f}, {totaln - total1 / a.threads:.0f} us lost against a perfect split")


if __name__ == "__main__":
    main()
