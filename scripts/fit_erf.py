#!/usr/bin/env python3
"""Fits the rational function behind ONNX Erf (core/io/onnx/context.cpp):

    erf(x) ~= x * P(x^2) / Q(x^2),  |x| <= CLAMP,  Q(0) = 1,

P of degree 5 and Q of degree 5 in z = x^2. Past CLAMP, erf rounds to +-1 in
float, so the ONNX import clamps x first. The fit is linear least squares on
P(z) - f(z) (Q(z) - 1) = f(z), f = erf(x) / x, iterated: each pass divides
the rows by the last pass's Q (Sanathanan-Koerner) and reweights them by
their error (Lawson), so the relative error levels out. NumPy only.

Prints the coefficients, then the error of the float32 evaluation that the
kernels do (Horner's rule, no fused multiply-adds, clamp first) against
math.erf on a dense grid: the numbers the comment in context.cpp quotes.

    python3 scripts/fit_erf.py
"""
import math

import numpy as np

CLAMP = 3.925  # erf(3.925) = 1 - 4e-8: float rounds it (and all past it) to 1
DEG_P, DEG_Q = 5, 5


def fit(passes=30):
    x = np.linspace(1e-4, CLAMP, 20000)
    z = x * x
    f = np.array([math.erf(v) for v in x]) / x
    weight = np.ones_like(x)
    q_last = np.ones_like(x)
    vz = np.vander(z, max(DEG_P, DEG_Q) + 1, increasing=True)
    for _ in range(passes):
        rows = np.hstack([vz[:, : DEG_P + 1], -f[:, None] * vz[:, 1 : DEG_Q + 1]])
        scale = weight / q_last / f
        sol, *_ = np.linalg.lstsq(rows * scale[:, None], f * scale, rcond=None)
        p, q = sol[: DEG_P + 1], np.concatenate([[1.0], sol[DEG_P + 1 :]])
        q_last = np.polyval(q[::-1], z)
        err = (np.polyval(p[::-1], z) / q_last - f) / f
        weight = weight * np.sqrt(np.abs(err) + 1e-30)
        weight /= weight.max()
    assert np.all(np.polyval(q[::-1], np.linspace(0, CLAMP * CLAMP, 4000)) > 0), "Q has a root in range"
    return p, q


def erf_f32(p, q, x):
    """The kernels' evaluation in float32: clamp, z = x*x, Horner, x * P * (1 / Q)."""
    f32 = np.float32
    xc = np.clip(x.astype(f32), f32(-CLAMP), f32(CLAMP))
    z = xc * xc
    num = np.full_like(z, f32(p[-1]))
    for c in p[-2::-1]:
        num = num * z + f32(c)
    den = np.full_like(z, f32(q[-1]))
    for c in q[-2::-1]:
        den = den * z + f32(c)
    return xc * num * (f32(1) / den)


def main():
    p, q = fit()
    print("P:", ", ".join(repr(float(v)) for v in p))
    print("Q:", ", ".join(repr(float(v)) for v in q))
    x = np.linspace(-6, 6, 1200001).astype(np.float32)
    got = erf_f32(p, q, x).astype(np.float64)
    want = np.array([math.erf(float(v)) for v in x])
    diff = np.abs(got - want)
    ulps = diff / np.spacing(np.maximum(np.abs(want), 1e-30).astype(np.float32)).astype(np.float64)
    small = np.abs(x) < 1e-2
    print("largest absolute error %.2e at x = %.4f" % (diff.max(), x[diff.argmax()]))
    print("largest error in float32 ulps %.1f, mean %.2f" % (ulps.max(), ulps.mean()))
    print("largest relative error for |x| < 0.01: %.2e" % (diff[small] / np.abs(want[small]).clip(1e-30)).max())


if __name__ == "__main__":
    main()
