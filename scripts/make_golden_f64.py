#!/usr/bin/python3
"""Float64 reference outputs for tests/test_f64.cpp.

Run with Debian's interpreter (it has numpy):
    /usr/bin/python3 scripts/make_golden_f64.py
It rewrites tests/data/golden/f64.bin.

Each case is chosen so float32 cannot get it right: values past float32's
range (1e200 * 1e100 / 1e250), sums and variances whose digits float32 drops,
maxima that differ in the 13th digit. The references are computed by NumPy in
float64 (math.fsum for sums, so they are correctly rounded); the C++ side
compares to about 1e-12 relative. The C++ suite holds a table from case name to
the tinylens call, so a case without its twin makes the suite fail.

File format, little-endian:
    b"TLGOLD64", u32 case_count, then per case:
      u16 name_len, name (utf-8), f64 rtol, f64 atol, u8 n_inputs, u8 n_outputs,
      n_inputs + n_outputs tensors, each: u8 ndim, i64 dims[ndim], f64 data[numel]
Inputs come from numpy RandomState seeded by crc32(case name).
"""
import math
import os
import struct
import zlib

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "golden", "f64.bin")

cases = []


def case(name, inputs, outputs, rtol=1e-12, atol=0.0):
    cases.append((name, rtol, atol, [np.asarray(x, np.float64) for x in inputs],
                  [np.asarray(y, np.float64) for y in outputs]))


def rng(name):
    return np.random.RandomState(zlib.crc32(name.encode()))


def fsum_rows(x):
    return np.array([math.fsum(row) for row in x.reshape(-1, x.shape[-1])]).reshape(x.shape[:-1])


# (x * y) / z where every product overflows float32 (max 3.4e38).
r = rng("overflow_mul_div")
x = r.uniform(1, 9, (3, 5)) * 1e200
y = r.uniform(1, 9, (5,)) * 1e100
z = r.uniform(1, 9, (3, 1)) * 1e250
case("overflow_mul_div", [x, y, z], [x * y / z])

# Sums of 10^7 plus small parts: float32 keeps about 7 digits of each term.
r = rng("sum_precision")
x = 1e7 + r.uniform(0, 1, (4, 3000))
case("sum_precision", [x], [fsum_rows(x)])

# Mean and unbiased variance of values near 1e9 that differ by about 1.
r = rng("mean_var_offset")
x = 1e9 + r.uniform(-1, 1, (3, 200))
case("mean_var_offset", [x], [x.mean(axis=1), x.var(axis=1, ddof=1)], rtol=1e-9)

# The maximum of values that differ in the 13th digit (float32 ties them all).
r = rng("max_close")
x = 1.0 + r.permutation(60).reshape(3, 20) * 1e-13
case("max_close", [x], [x.max(axis=1)])

# exp past float32's overflow (e^700), log of 1e-300, sqrt of 1e200, sin, pow.
r = rng("unary_range")
e = np.array([-700.0, -50.0, -1.5, 0.0, 0.75, 90.0, 300.0, 700.0])
p = np.array([1e-300, 1e-50, 0.5, 1.0, 3.0, 1e50, 1e200, 7.0])
s = np.array([-3.0, -1.0, -0.25, 0.1, 0.5, 1.0, 2.0, 3.0])
case("unary_range", [e, p, s], [np.exp(e), np.log(p), np.sqrt(p), np.sin(s), np.power(p, 1.5), 1.0 / p],
     rtol=1e-12, atol=1e-300)

# A matrix product whose terms need more than float32's 24 bits.
r = rng("matmul_precise")
a = 1e4 + r.uniform(0, 1, (5, 40))
b = 1e4 + r.uniform(0, 1, (40, 6))
case("matmul_precise", [a, b], [np.array([[math.fsum(a[i] * b[:, j]) for j in range(6)] for i in range(5)])])

# Softmax over logits near 1e6 that differ by thousandths.
r = rng("softmax_shifted")
x = 1e6 + r.uniform(0, 0.01, (2, 16)) * 100
m = x.max(axis=1, keepdims=True)
ex = np.exp(x - m)
case("softmax_shifted", [x], [ex / ex.sum(axis=1, keepdims=True)])

# Comparisons between values 1e-12 apart (float32 rounds them equal).
r = rng("compare_close")
x = 1.0 + r.randint(0, 3, (12,)) * 1e-12
y = np.full(12, 1.0 + 1e-12)
case("compare_close", [x, y], [(x < y).astype(np.float64), (x == y).astype(np.float64)])

# float64 -> float32 -> float64 rounds to float32; float64 -> int32 truncates.
r = rng("cast_round")
x = r.uniform(-1000, 1000, (10,)) + 1e-9
case("cast_round", [x], [x.astype(np.float32).astype(np.float64), np.trunc(x)])

blob = bytearray(b"TLGOLD64") + struct.pack("<I", len(cases))
for name, rtol, atol, ins, outs in cases:
    nb = name.encode()
    blob += struct.pack("<H", len(nb)) + nb + struct.pack("<ddBB", rtol, atol, len(ins), len(outs))
    for t in ins + outs:
        blob += struct.pack("<B", t.ndim) + struct.pack("<%dq" % t.ndim, *t.shape)
        blob += np.ascontiguousarray(t, dtype="<f8").tobytes()
os.makedirs(os.path.dirname(OUT), exist_ok=True)
with open(OUT, "wb") as f:
    f.write(blob)
print("wrote %s (%d cases, %d bytes)" % (os.path.relpath(OUT, ROOT), len(cases), len(blob)))
