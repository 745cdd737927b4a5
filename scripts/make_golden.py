#!/usr/bin/python3
"""Reference outputs for the op-by-op suite (tests/test_ops.cpp, tests/test_grad.cpp).

Run with Debian's interpreter (it has numpy and torch 1.13):
    /usr/bin/python3 scripts/make_golden.py
It rewrites tests/data/golden/ops.bin and tests/data/golden/grad.bin.

Every case has a name, a tolerance, input tensors and reference outputs. The
C++ suites hold a table from case name to the tinylens call, so a case added
here without its C++ twin (or the other way round) makes the suite fail.

File format, little-endian:
    b"TLGOLD1\\0", u32 case_count, then per case:
      u16 name_len, name (utf-8), f32 rtol, f32 atol, u8 n_inputs, u8 n_outputs,
      n_inputs + n_outputs tensors, each:
        u8 dtype (0 = float32, 1 = int32), u8 ndim, i64 dims[ndim],
        float32 data[numel] (int32 values stored as exact floats)
Inputs come from numpy RandomState seeded by crc32(case name), so a case's
data does not change when other cases are added or reordered.
"""
import os
import struct
import zlib

import numpy as np
import torch
import torch.nn.functional as F

torch.set_grad_enabled(False)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "tests", "data", "golden")

F32 = np.float32


class I32:
    """Marks an input that the C++ side must create with Tensor::from_ints."""

    def __init__(self, values):
        self.values = np.asarray(values, dtype=np.int32)


def rng(name):
    return np.random.RandomState(zlib.crc32(name.encode()))


def randn(r, *shape, scale=1.0):
    return (r.standard_normal(shape) * scale).astype(F32)


def unif(r, lo, hi, *shape):
    return r.uniform(lo, hi, shape).astype(F32)


def spaced(r, *shape, step=0.25, offset=0.0):
    """Distinct values at least `step` apart, shuffled (no ties for max/min)."""
    n = int(np.prod(shape))
    v = (np.arange(n) - n / 2) * step + offset
    r.shuffle(v)
    return v.reshape(shape).astype(F32)


def ints(r, lo, hi, *shape):
    """Small integers as floats: produces ties on purpose."""
    return r.randint(lo, hi, shape).astype(F32)


class Writer:
    def __init__(self):
        self.cases = []
        self.names = set()

    def case(self, name, inputs, fn, rtol=1e-4, atol=1e-5):
        assert name not in self.names, name
        self.names.add(name)
        tin = []
        for x in inputs:
            if isinstance(x, I32):
                tin.append(torch.from_numpy(x.values.astype(np.int64)))
            else:
                tin.append(torch.from_numpy(np.ascontiguousarray(x, dtype=F32)))
        out = fn(*tin)
        if not isinstance(out, (tuple, list)):
            out = (out,)
        outs = [o.detach().numpy() if isinstance(o, torch.Tensor) else np.asarray(o) for o in out]
        self.cases.append((name, rtol, atol, inputs, outs))

    def write(self, path):
        def tensor_bytes(x):
            if isinstance(x, I32):
                dtype, arr = 1, x.values
            else:
                arr = np.asarray(x)
                dtype = 1 if arr.dtype.kind in "iub" and arr.dtype != np.bool_ else 0
            arr = np.asarray(arr)
            b = struct.pack("<BB", dtype, arr.ndim)
            b += struct.pack("<%dq" % arr.ndim, *arr.shape)
            return b + np.ascontiguousarray(arr, dtype="<f4").tobytes()

        blob = bytearray(b"TLGOLD1\0")
        blob += struct.pack("<I", len(self.cases))
        for name, rtol, atol, inputs, outs in self.cases:
            nb = name.encode()
            blob += struct.pack("<H", len(nb)) + nb
            blob += struct.pack("<ffBB", rtol, atol, len(inputs), len(outs))
            for x in list(inputs) + list(outs):
                blob += tensor_bytes(x)
        with open(path, "wb") as f:
            f.write(blob)
        return len(blob)


# Values that probe the edges of each unary op: zero, signed tiny, moderate and
# huge magnitudes (exp overflows to Inf in float32 above ~88.7).
EDGE = np.array([-100, -20, -3.5, -1, -0.5, -1e-3, 0, 1e-3, 0.5, 1, 2.5, 20, 100], dtype=F32)


def tsum(x, axes, keep):
    return x.sum(dim=axes, keepdim=keep) if axes else (x.sum().reshape([1] * x.ndim) if keep else x.sum())


def reduce_all(fn, x, keep):
    out = fn(x.reshape(-1))
    return out.reshape([1] * x.ndim) if keep else out


def tmax(x, axes, keep):
    if not axes:
        return reduce_all(lambda v: v.max(), x, keep)
    return torch.amax(x, dim=axes, keepdim=keep)


def tmin(x, axes, keep):
    if not axes:
        return reduce_all(lambda v: v.min(), x, keep)
    return torch.amin(x, dim=axes, keepdim=keep)


def tmean(x, axes, keep):
    if not axes:
        return reduce_all(lambda v: v.mean(), x, keep)
    return x.mean(dim=axes, keepdim=keep)


def tvar(x, axes, keep, corr=1):
    if not axes:
        axes = list(range(x.ndim))
    return torch.var(x, dim=axes, keepdim=keep, unbiased=bool(corr))


def tstd(x, axes, keep, corr=1):
    if not axes:
        axes = list(range(x.ndim))
    return torch.std(x, dim=axes, keepdim=keep, unbiased=bool(corr))


def pyslice(x, axis, start, stop, step):
    """Python slicing on a numpy array (handles negative steps, which torch lacks)."""
    idx = [slice(None)] * x.ndim
    idx[axis] = slice(start, stop, step)
    return torch.from_numpy(np.ascontiguousarray(x.numpy()[tuple(idx)]))


def tpad(x, pairs, value):
    flat = []
    for before, after in reversed(pairs):
        flat += [before, after]
    return F.pad(x, flat, value=value)


def op_cases(w):
    # ---- creation (no inputs) ----
    w.case("zeros_2x3", [], lambda: torch.zeros(2, 3))
    w.case("zeros_0x3", [], lambda: torch.zeros(0, 3))
    w.case("ones_7", [], lambda: torch.ones(7))
    w.case("full_3x1", [], lambda: torch.full((3, 1), 2.5))
    w.case("full_scalar", [], lambda: torch.tensor(-4.0))
    w.case("arange_10", [], lambda: torch.arange(10, dtype=torch.float32))
    w.case("arange_neg_half", [], lambda: torch.arange(-3, 3, 0.5, dtype=torch.float32))
    w.case("arange_frac_step", [], lambda: torch.from_numpy(np.arange(1, 2, 0.3).astype(F32)))
    w.case("arange_down", [], lambda: torch.arange(5, 0, -1.5, dtype=torch.float32))
    w.case("eye_4", [], lambda: torch.eye(4))
    w.case("eye_1", [], lambda: torch.eye(1))

    # ---- unary: edge values and a random odd-sized block ----
    pos = lambda r: unif(r, 0.1, 4.0, 3, 7)
    unary = {
        "neg": (lambda x: -x, None),
        "exp": (torch.exp, None),
        "log": (torch.log, pos),
        "sqrt": (torch.sqrt, pos),
        "rsqrt": (torch.rsqrt, pos),
        "reciprocal": (torch.reciprocal, None),
        "sin": (torch.sin, None),
        "cos": (torch.cos, None),
        "relu": (F.relu, None),
        "relu6": (F.relu6, None),
        "leaky_relu": (lambda x: F.leaky_relu(x, 0.1), None),
        "sigmoid": (torch.sigmoid, None),
        "tanh": (torch.tanh, None),
        "gelu": (lambda x: F.gelu(x, approximate="tanh"), None),
        "silu": (F.silu, None),
        "abs": (torch.abs, None),
        "sign": (torch.sign, None),
        "clip": (lambda x: torch.clamp(x, -1.0, 2.0), None),
    }
    for name, (fn, gen) in unary.items():
        # sin/cos of +-100 depend on argument reduction; a looser atol keeps
        # the check meaningful without requiring correctly rounded results.
        atol = 1e-4 if name in ("sin", "cos") else 1e-5
        w.case(name + "_edge", [EDGE], fn, atol=atol)
        r = rng(name + "_rand")
        x = gen(r) if gen else randn(r, 3, 7, scale=2.0)
        w.case(name + "_rand", [x], fn)
    w.case("neg_1x1", [np.array([[3.0]], F32)], lambda x: -x)
    w.case("exp_empty", [np.zeros((0, 3), F32)], torch.exp)
    w.case("cast_i32", [np.array([-2.7, -0.5, 0.5, 2.7, 3.0, -3.0], F32)], lambda x: x.to(torch.int32))
    w.case("cast_bool", [np.array([-2.0, 0.0, 0.5, 0.0, 1e-6], F32)], lambda x: x != 0)
    w.case("from_ints_cast", [I32([-3, 0, 7, 2**20])], lambda x: x.to(torch.float32))

    # ---- binary with broadcasting ----
    r = rng("binary")
    a31, b14 = randn(r, 3, 1), randn(r, 1, 4)
    a234, b4 = randn(r, 2, 3, 4), randn(r, 4)
    den14 = np.sign(randn(r, 1, 4)) * unif(r, 0.5, 2.0, 1, 4)
    sc = np.array(1.75, F32)
    a7, b7 = randn(r, 7), randn(r, 7)
    a13, b13 = randn(r, 13), randn(r, 13)
    w.case("add_3x1_1x4", [a31, b14], torch.add)
    w.case("sub_3x1_1x4", [a31, b14], torch.sub)
    w.case("mul_3x1_1x4", [a31, b14], torch.mul)
    w.case("div_3x1_1x4", [a31, den14.astype(F32)], torch.div)
    w.case("maximum_3x1_1x4", [a31, b14], torch.maximum)
    w.case("minimum_3x1_1x4", [a31, b14], torch.minimum)
    w.case("add_2x3x4_4", [a234, b4], torch.add)
    w.case("sub_4_2x3x4", [b4, a234], torch.sub)
    w.case("mul_2x3x4_scalar", [a234, sc], torch.mul)
    w.case("div_scalar_2x3x4", [sc, a234 + np.float32(5.0)], torch.div)
    w.case("add_7", [a7, b7], torch.add)
    w.case("mul_13", [a13, b13], torch.mul)
    w.case("add_1x1", [np.array([[2.0]], F32), np.array([[-0.5]], F32)], torch.add)
    w.case("add_empty_0x3", [np.zeros((0, 3), F32), np.zeros((0, 3), F32)], torch.add)
    w.case("add_empty_0x3_3", [np.zeros((0, 3), F32), randn(r, 3)], torch.add)
    w.case("div_edge", [np.array([1, -1, 0, 2, 0], F32), np.array([0, 0, 0, 4, -1], F32)], torch.div)
    pb, pe = unif(r, 0.2, 3.0, 3, 4), randn(r, 3, 4)
    w.case("pow_tensor", [pb, pe], torch.pow)
    w.case("pow_tensor_bcast", [pb, randn(r, 4)], torch.pow)
    w.case("pow_scalar2_neg_base", [randn(r, 3, 4, scale=2.0)], lambda x: torch.pow(x, 2.0))
    w.case("pow_scalar3_neg_base", [randn(r, 3, 4, scale=2.0)], lambda x: torch.pow(x, 3.0))
    w.case("pow_scalar_half", [unif(r, 0.0, 4.0, 3, 4)], lambda x: torch.pow(x, 0.5))
    x34 = randn(r, 3, 4)
    w.case("add_double", [x34], lambda x: x + 2.5)
    w.case("sub_double", [x34], lambda x: x - 1.0)
    w.case("mul_double", [x34], lambda x: x * -3.0)
    w.case("div_double", [x34], lambda x: x / 4.0)
    w.case("maximum_double", [x34], lambda x: torch.clamp(x, min=0.5))
    w.case("minimum_double", [x34], lambda x: torch.clamp(x, max=0.5))
    w.case("rsub_double", [x34], lambda x: 2.0 - x)
    w.case("rdiv_double", [x34 + np.float32(4.0)], lambda x: 1.0 / x)
    w.case("radd_rmul_double", [x34], lambda x: 3.0 * x + 1.0)

    # ---- comparisons (small integers: many ties) and where ----
    c1, c2 = ints(r, -2, 3, 3, 1), ints(r, -2, 3, 1, 4)
    cmp = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge}
    for n, fn in cmp.items():
        w.case(n + "_3x1_1x4", [c1, c2], lambda a, b, fn=fn: fn(a, b).float())
    w.case("eq_2x3x4_4", [ints(r, 0, 3, 2, 3, 4), ints(r, 0, 3, 4)], lambda a, b: torch.eq(a, b).float())
    w.case("where_bcast", [randn(r, 3, 1), randn(r, 1, 4), randn(r, 3, 4)],
           lambda c, a, b: torch.where(c > 0, a, b))
    w.case("where_same", [randn(r, 2, 5), randn(r, 2, 5), randn(r, 2, 5)],
           lambda c, a, b: torch.where(c < a, a * 2, b - 1))

    # ---- reductions ----
    x = randn(rng("reduce"), 2, 3, 4)
    axis_sets = [[0], [1], [2], [-1], [0, 2], [1, 2], []]
    keep_sets = [[1], [0, 2], []]

    def an(axes):
        return "all" if not axes else "".join("m%d" % -a if a < 0 else str(a) for a in axes)

    reds = {"sum": tsum, "mean": tmean, "max": tmax, "min": tmin, "var": tvar, "std": tstd}
    for n, fn in reds.items():
        for axes in axis_sets:
            w.case("%s_%s" % (n, an(axes)), [x], lambda t, fn=fn, axes=axes: fn(t, axes, False))
        for axes in keep_sets:
            w.case("%s_%s_keep" % (n, an(axes)), [x], lambda t, fn=fn, axes=axes: fn(t, axes, True))
    neg = -unif(rng("allneg"), 1.0, 5.0, 5, 7)
    w.case("max_allneg_1", [neg], lambda t: tmax(t, [1], False))
    w.case("min_allpos_0", [-neg], lambda t: tmin(t, [0], False))
    w.case("sum_odd_5x7_1", [neg], lambda t: t.sum(1))
    w.case("var_corr0_1", [x], lambda t: tvar(t, [1], False, 0))
    w.case("std_corr0_all", [x], lambda t: tstd(t, [], False, 0))
    w.case("var_single_corr1", [randn(rng("vs"), 3, 1)], lambda t: tvar(t, [1], False, 1))
    big = randn(rng("bigsum"), 100000)
    w.case("sum_big_100000", [big], lambda t: t.sum(), rtol=1e-3, atol=1e-3)
    w.case("mean_32x1000_1", [randn(rng("bigmean"), 32, 1000)], lambda t: t.mean(1), rtol=1e-3, atol=1e-5)
    w.case("max_32x1000_0", [randn(rng("bigmax"), 32, 1000)], lambda t: t.amax(0))
    w.case("sum_empty_0x3_0", [np.zeros((0, 3), F32)], lambda t: t.sum(0))
    xt = ints(rng("argmax"), 0, 3, 2, 3, 4)  # many ties: the first maximum wins
    for axis in [0, 1, 2, -1]:
        w.case("argmax_%s" % an([axis]), [xt], lambda t, axis=axis: torch.argmax(t, axis).int())
    w.case("argmax_1_keep", [xt], lambda t: torch.argmax(t, 1, keepdim=True).int())
    w.case("argmax_rand_7x13_1", [randn(rng("am2"), 7, 13)], lambda t: torch.argmax(t, 1).int())

    # Reductions large enough for the grouped (work-group) form on devices
    # with local memory: one output or few, group sizes that do not divide
    # the reduced size, reductions over leading axes, NaN, and size 1.
    w.case("sum_1000", [randn(rng("g1000"), 1000)], lambda t: t.sum(), rtol=1e-4, atol=1e-4)
    nan_rows = randn(rng("gnan"), 3, 1000)
    nan_rows[1, 617] = np.nan
    w.case("max_3x1000_1_nan", [nan_rows], lambda t: t.amax(1))
    w.case("mean_gap_1x1280x7x7", [randn(rng("ggap"), 1, 1280, 7, 7)], lambda t: t.mean((2, 3)))
    w.case("sum_7x7x1280_all", [randn(rng("g62720"), 7, 7, 1280)], lambda t: t.sum(), rtol=1e-3, atol=1e-3)
    nhw = randn(rng("gnhw"), 8, 16, 9, 9)
    w.case("sum_nhw_8x16x9x9_023", [nhw], lambda t: t.sum((0, 2, 3)), rtol=1e-4, atol=1e-4)
    w.case("max_nhw_8x16x9x9_023", [nhw], lambda t: t.amax((0, 2, 3)))
    w.case("mean_nhw_4x24x7x7_023_keep", [randn(rng("gbn"), 4, 24, 7, 7)], lambda t: t.mean((0, 2, 3), keepdim=True))
    w.case("sum_3x257_1", [randn(rng("g257"), 3, 257)], lambda t: t.sum(1), rtol=1e-4, atol=1e-4)
    w.case("sum_2x512_1", [randn(rng("g512"), 2, 512)], lambda t: t.sum(1), rtol=1e-4, atol=1e-4)
    w.case("max_5x33_1", [randn(rng("g33"), 5, 33)], lambda t: t.amax(1))
    w.case("min_97x4_0", [randn(rng("g97"), 97, 4)], lambda t: t.amin(0))
    w.case("max_allneg_2x300_1", [-unif(rng("gneg"), 1e3, 1e4, 2, 300)], lambda t: t.amax(1))
    w.case("argmax_3x1000_1", [randn(rng("gargmax"), 3, 1000)], lambda t: torch.argmax(t, 1).int())
    w.case("sum_1x1_all", [randn(rng("g1"), 1, 1)], lambda t: t.sum())
    w.case("sum_1x1000_0", [randn(rng("g1x1000"), 1, 1000)], lambda t: t.sum(0))

    # ---- movement ----
    r = rng("movement")
    m = randn(r, 2, 3, 4)
    m2 = randn(r, 2, 3, 4)
    w.case("reshape_4_m1", [m], lambda t: t.reshape(4, -1))
    w.case("reshape_flat", [m], lambda t: t.reshape(24))
    w.case("reshape_m1_2", [m], lambda t: t.reshape(-1, 2))
    w.case("reshape_of_transpose", [m], lambda t: t.transpose(0, 1).reshape(-1))
    w.case("permute_201", [m], lambda t: t.permute(2, 0, 1))
    w.case("permute_021", [m], lambda t: t.permute(0, 2, 1))
    w.case("transpose_default", [m], lambda t: t.transpose(-2, -1))
    w.case("transpose_02", [m], lambda t: t.transpose(0, 2))
    w.case("expand_3x1_3x4", [randn(r, 3, 1)], lambda t: t.expand(3, 4))
    w.case("expand_4_2x3x4", [randn(r, 4)], lambda t: t.expand(2, 3, 4))
    w.case("expand_keep_m1", [randn(r, 3, 1)], lambda t: t.expand(-1, 5))
    w.case("pad_2d", [randn(r, 2, 3)], lambda t: tpad(t, [(1, 2), (0, 1)], 0.0))
    w.case("pad_3d_value", [m], lambda t: tpad(t, [(0, 0), (2, 1), (1, 3)], -1.5))
    s = randn(r, 4, 9)
    w.case("slice_step2", [s], lambda t: pyslice(t, 1, 1, 7, 2))
    w.case("slice_step3", [s], lambda t: pyslice(t, 1, 0, 9, 3))
    w.case("slice_negidx", [s], lambda t: pyslice(t, 1, -5, -1, 1))
    w.case("slice_clamp", [s], lambda t: pyslice(t, 1, 1, 100, 1))
    w.case("slice_axis0_neg", [s], lambda t: pyslice(t, -2, -3, 4, 1))
    w.case("slice_negstep", [s], lambda t: pyslice(t, 1, 7, -10, -2))
    s8 = randn(r, 8)
    w.case("slice_1d_2_7_2", [s8], lambda t: pyslice(t, 0, 2, 7, 2))
    w.case("slice_1d_2_8_2", [s8], lambda t: pyslice(t, 0, 2, 8, 2))
    w.case("slice_1d_1_8_3", [s8], lambda t: pyslice(t, 0, 1, 8, 3))
    w.case("flip_0", [m], lambda t: torch.flip(t, [0]))
    w.case("flip_02", [m], lambda t: torch.flip(t, [0, 2]))
    w.case("flip_m1", [m], lambda t: torch.flip(t, [-1]))
    c_a, c_b, c_c = randn(r, 2, 3), randn(r, 1, 3), randn(r, 4, 3)
    w.case("cat_0", [c_a, c_b, c_c], lambda a, b, c: torch.cat([a, b, c], 0))
    w.case("cat_1", [randn(r, 2, 1), randn(r, 2, 4), randn(r, 2, 2)], lambda a, b, c: torch.cat([a, b, c], 1))
    w.case("cat_m1_3d", [m, randn(r, 2, 3, 1)], lambda a, b: torch.cat([a, b], -1))
    w.case("cat_single", [c_a], lambda a: torch.cat([a], 0))
    w.case("stack_0", [m, m2], lambda a, b: torch.stack([a, b], 0))
    w.case("stack_1", [m, m2], lambda a, b: torch.stack([a, b], 1))
    w.case("stack_m1", [m, m2, m], lambda a, b, c: torch.stack([a, b, c], -1))
    q = randn(r, 3, 1, 4)
    w.case("squeeze_1", [q], lambda t: t.squeeze(1))
    w.case("squeeze_m2", [q], lambda t: t.squeeze(-2))
    w.case("unsqueeze_0", [q], lambda t: t.unsqueeze(0))
    w.case("unsqueeze_m1", [q], lambda t: t.unsqueeze(-1))
    w.case("flatten_all", [m], lambda t: t.flatten())
    w.case("flatten_1", [m], lambda t: t.flatten(1))
    w.case("flatten_0_1", [m], lambda t: t.flatten(0, 1))
    # Chains: views on views, and views on computed values.
    w.case("chain_add_permute_reshape_slice", [m, m2],
           lambda a, b: pyslice((a + b).permute(2, 0, 1).reshape(4, 6), 1, 1, 5, 2))
    w.case("chain_transpose_pad_flip_exp", [randn(r, 3, 5)],
           lambda t: torch.flip(tpad(t.transpose(0, 1), [(1, 0), (0, 2)], 0.5), [0]).exp())
    w.case("chain_expand_permute_add", [randn(r, 3, 1), randn(r, 4, 3)],
           lambda a, b: a.expand(3, 4).permute(1, 0) + b)
    w.case("chain_slice_slice_permute", [randn(r, 6, 8)],
           lambda t: pyslice(pyslice(t.permute(1, 0), 0, 1, 8, 2), 1, -4, 6, 1))
    w.case("chain_reduce_expand_mul", [randn(r, 3, 4)],
           lambda t: t.sum(1, keepdim=True).expand(3, 4).transpose(0, 1) * t.transpose(0, 1))
    w.case("chain_pad_reshape_sum", [randn(r, 2, 3)],
           lambda t: tpad(t, [(1, 1), (0, 1)], 1.0).reshape(2, 8).sum(0))
    w.case("chain_flip_cat_slice", [randn(r, 3, 4), randn(r, 3, 4)],
           lambda a, b: pyslice(torch.cat([torch.flip(a, [1]), b * 2], 1), 1, 2, 7, 2))
    w.case("chain_stack_permute_flatten_relu", [randn(r, 2, 3), randn(r, 2, 3)],
           lambda a, b: torch.stack([a, b], 0).permute(2, 1, 0).flatten(0, 1).relu())

    # ---- matmul and linear ----
    r = rng("matmul")
    loose = dict(rtol=1e-4, atol=1e-4)
    w.case("matmul_1d_1d", [randn(r, 7), randn(r, 7)], torch.matmul, **loose)
    w.case("matmul_2d", [randn(r, 3, 5), randn(r, 5, 4)], torch.matmul, **loose)
    w.case("matmul_1d_2d", [randn(r, 5), randn(r, 5, 4)], torch.matmul, **loose)
    w.case("matmul_2d_1d", [randn(r, 3, 5), randn(r, 5)], torch.matmul, **loose)
    w.case("matmul_batched_2d", [randn(r, 2, 3, 5), randn(r, 5, 4)], torch.matmul, **loose)
    w.case("matmul_batched_bcast", [randn(r, 2, 1, 3, 5), randn(r, 3, 5, 4)], torch.matmul, **loose)
    w.case("matmul_17x33x5", [randn(r, 17, 33), randn(r, 33, 5)], torch.matmul, **loose)
    w.case("matmul_1x1x1", [randn(r, 1, 1), randn(r, 1, 1)], torch.matmul, **loose)
    w.case("matmul_transposed_a", [randn(r, 5, 3), randn(r, 5, 4)], lambda a, b: a.transpose(0, 1) @ b, **loose)
    w.case("matmul_transposed_b", [randn(r, 3, 5), randn(r, 4, 5)], lambda a, b: a @ b.transpose(0, 1), **loose)
    w.case("matmul_computed_inputs", [randn(r, 6, 7), randn(r, 7, 6)],
           lambda a, b: (a * 2).relu() @ (b + 1).transpose(0, 1).transpose(0, 1), **loose)
    w.case("matmul_128x96x80", [randn(r, 128, 96), randn(r, 96, 80)], torch.matmul, rtol=1e-3, atol=1e-3)
    w.case("linear_bias", [randn(r, 4, 6), randn(r, 3, 6), randn(r, 3)], F.linear, **loose)
    w.case("linear_nobias", [randn(r, 4, 6), randn(r, 3, 6)], F.linear, **loose)
    w.case("linear_3d", [randn(r, 2, 4, 6), randn(r, 5, 6), randn(r, 5)], F.linear, **loose)

    # ---- convolution and pooling ----
    r = rng("conv")
    conv_cases = [
        # name, x shape, w shape, bias?, stride, pad, dilation, groups
        ("conv2d_basic", (1, 3, 7, 7), (4, 3, 3, 3), True, (1, 1), (0, 0), (1, 1), 1),
        ("conv2d_stride2_pad1", (2, 3, 9, 8), (5, 3, 3, 3), True, (2, 2), (1, 1), (1, 1), 1),
        ("conv2d_dilation2", (1, 2, 11, 11), (3, 2, 3, 3), False, (1, 1), (2, 2), (2, 2), 1),
        ("conv2d_groups2", (1, 4, 6, 6), (6, 2, 3, 3), True, (1, 1), (0, 0), (1, 1), 2),
        ("conv2d_depthwise", (2, 4, 7, 7), (4, 1, 3, 3), True, (1, 1), (1, 1), (1, 1), 4),
        ("conv2d_1x1", (1, 8, 5, 5), (6, 8, 1, 1), False, (1, 1), (0, 0), (1, 1), 1),
        ("conv2d_asym", (1, 2, 8, 7), (3, 2, 3, 2), True, (2, 1), (1, 0), (1, 1), 1),
        ("conv2d_5x5_odd", (1, 3, 13, 13), (2, 3, 5, 5), True, (3, 3), (2, 2), (1, 1), 1),
    ]
    for name, xs, ws, has_bias, st, pd, dl, g in conv_cases:
        inputs = [randn(r, *xs), randn(r, *ws, scale=0.5)]
        if has_bias:
            inputs.append(randn(r, ws[0]))
        w.case(name, inputs,
               lambda x, wt, b=None, st=st, pd=pd, dl=dl, g=g: F.conv2d(x, wt, b, st, pd, dl, g),
               rtol=1e-4, atol=1e-4)
    p1, p2 = randn(r, 1, 2, 6, 6), randn(r, 2, 3, 7, 7)
    w.case("avg_pool_k2s2", [p1], lambda x: F.avg_pool2d(x, 2, 2))
    w.case("avg_pool_k3s2p1", [p2], lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=True))
    w.case("avg_pool_k3_default_stride", [randn(r, 1, 1, 9, 9)], lambda x: F.avg_pool2d(x, 3))
    w.case("avg_pool_k2_odd", [randn(r, 1, 1, 7, 7)], lambda x: F.avg_pool2d(x, 2, 2))
    w.case("max_pool_k2s2", [p1], lambda x: F.max_pool2d(x, 2, 2))
    w.case("max_pool_k3s2p1_neg", [p2 - np.float32(10)], lambda x: F.max_pool2d(x, 3, 2, 1))
    w.case("max_pool_k3s1", [randn(r, 1, 1, 5, 5)], lambda x: F.max_pool2d(x, 3, 1))
    w.case("max_pool_k2_odd", [randn(r, 1, 1, 7, 7)], lambda x: F.max_pool2d(x, 2))
    w.case("adaptive_avg_8_to_4", [randn(r, 1, 2, 8, 8)], lambda x: F.adaptive_avg_pool2d(x, (4, 4)))
    w.case("adaptive_avg_7_to_3", [randn(r, 1, 3, 7, 7)], lambda x: F.adaptive_avg_pool2d(x, (3, 3)))
    w.case("adaptive_avg_global", [randn(r, 2, 2, 5, 6)], lambda x: F.adaptive_avg_pool2d(x, (1, 1)))
    w.case("adaptive_avg_10x7_to_4x3", [randn(r, 1, 1, 10, 7)], lambda x: F.adaptive_avg_pool2d(x, (4, 3)))

    # ---- GEMMs of the shapes image models run: skinny products whose left
    # operand is a realized weight (packed once by the CPU device), K cut into
    # several blocks, ragged tiles, a weight shared by a batch, padded and
    # depthwise convolutions with strides 1 and 2, 3x3 and 5x5 ----
    r = rng("gemm_packed")
    mm_tol = dict(rtol=1e-4, atol=1e-4)
    w.case("matmul_packed_16x32x700", [randn(r, 16, 32), randn(r, 32, 700)], torch.matmul, **mm_tol)
    w.case("matmul_packed_96x16x500", [randn(r, 96, 16), randn(r, 16, 500)], torch.matmul, **mm_tol)
    w.case("matmul_packed_120x300x49", [randn(r, 120, 300, scale=0.2), randn(r, 300, 49)], torch.matmul, **mm_tol)
    w.case("matmul_packed_37x600x70", [randn(r, 37, 600, scale=0.1), randn(r, 600, 70)], torch.matmul, **mm_tol)
    w.case("matmul_packed_5x64x33", [randn(r, 5, 64), randn(r, 64, 33)], torch.matmul, **mm_tol)
    conv_more = [
        ("conv2d_1x1_batch3", (3, 24, 9, 9), (40, 24, 1, 1), True, (1, 1), (0, 0), 1),
        ("conv2d_3x3_pad1_batch2", (2, 8, 12, 12), (20, 8, 3, 3), True, (1, 1), (1, 1), 1),
        ("conv2d_dw3x3_s1", (1, 16, 14, 14), (16, 1, 3, 3), True, (1, 1), (1, 1), 16),
        ("conv2d_dw3x3_s2", (2, 16, 15, 15), (16, 1, 3, 3), False, (2, 2), (1, 1), 16),
        ("conv2d_dw5x5_s1", (1, 24, 9, 9), (24, 1, 5, 5), True, (1, 1), (2, 2), 24),
        ("conv2d_dw5x5_s2", (1, 24, 14, 14), (24, 1, 5, 5), True, (2, 2), (2, 2), 24),
    ]
    for name, xs, ws, has_bias, st, pd, g in conv_more:
        inputs = [randn(r, *xs), randn(r, *ws, scale=0.5)]
        if has_bias:
            inputs.append(randn(r, ws[0]))
        w.case(name, inputs, lambda x, wt, b=None, st=st, pd=pd, g=g: F.conv2d(x, wt, b, st, pd, 1, g),
               rtol=1e-4, atol=1e-4)

    # A squeeze-and-excite's scale before a 1x1 convolution (which the core
    # turns into a scale of the weights): per image, and one shared scale.
    r = rng("squeeze_excite")
    for name, ss in (("conv2d_1x1_channel_scale", (2, 24, 1, 1)), ("conv2d_1x1_channel_scale_shared", (1, 24, 1, 1))):
        w.case(name, [randn(r, 2, 24, 9, 9), randn(r, *ss), randn(r, 16, 24, 1, 1, scale=0.5), randn(r, 16)],
               lambda x, s, wt, b: F.conv2d(x * torch.sigmoid(s), wt, b), rtol=1e-4, atol=1e-4)

    # ---- normalisation, softmax, losses ----
    r = rng("norm")
    bx = randn(r, 4, 3, 5, 5, scale=2.0) + np.float32(1.0)
    bw, bb = unif(r, 0.5, 1.5, 3), randn(r, 3)
    rm, rv = randn(r, 3, scale=0.1), unif(r, 0.5, 2.0, 3)

    def bn(x, wt, b, m, v, training):
        m, v = m.clone(), v.clone()
        y = F.batch_norm(x, m, v, wt, b, training=training, momentum=0.1, eps=1e-5)
        return y, m, v

    w.case("batch_norm_infer", [bx, bw, bb, rm, rv], lambda *a: bn(*a, False))
    w.case("batch_norm_train", [bx, bw, bb, rm, rv], lambda *a: bn(*a, True), rtol=1e-4, atol=1e-4)
    sm = randn(r, 3, 7)
    large = np.array([[1000, 1001, 1002, 999], [-1000, -1001, -1002, -999], [0, 1e-3, -1e-3, 50]], F32)
    for n, fn in {"softmax": F.softmax, "log_softmax": F.log_softmax}.items():
        w.case(n + "_last", [sm], lambda x, fn=fn: fn(x, -1))
        w.case(n + "_axis0", [randn(r, 4, 5)], lambda x, fn=fn: fn(x, 0))
        w.case(n + "_axis1_3d", [randn(r, 2, 3, 4)], lambda x, fn=fn: fn(x, 1))
        w.case(n + "_large", [large], lambda x, fn=fn: fn(x, -1), rtol=1e-4, atol=1e-4)
        w.case(n + "_1000", [randn(r, 2, 1000, scale=3.0)], lambda x, fn=fn: fn(x, -1), rtol=1e-3, atol=1e-5)
    w.case("cross_entropy", [randn(r, 5, 7), I32([0, 6, 3, 3, 1])], F.cross_entropy)
    w.case("cross_entropy_large", [randn(r, 4, 10, scale=200.0), I32([9, 0, 5, 2])], F.cross_entropy,
           rtol=1e-4, atol=1e-3)


def grad_cases(w):
    """PyTorch gradients of loss = (op(...) * R).sum() for the composite ops."""
    torch.set_grad_enabled(True)
    r = rng("grad_conv")

    def conv_grad(x, wt, b, R, st, pd, dl, g):
        x, wt, b = (t.clone().requires_grad_(True) for t in (x, wt, b))
        (F.conv2d(x, wt, b, st, pd, dl, g) * R).sum().backward()
        return x.grad, wt.grad, b.grad

    specs = [
        ("grad_conv2d_basic", (2, 3, 6, 6), (4, 3, 3, 3), (1, 1), (0, 0), (1, 1), 1),
        ("grad_conv2d_stride_pad", (1, 2, 7, 6), (3, 2, 3, 3), (2, 2), (1, 1), (1, 1), 1),
        ("grad_conv2d_dilation", (1, 2, 7, 7), (2, 2, 3, 3), (1, 1), (2, 2), (2, 2), 1),
        ("grad_conv2d_groups", (1, 4, 5, 5), (4, 2, 3, 3), (1, 1), (1, 1), (1, 1), 2),
    ]
    for name, xs, ws, st, pd, dl, g in specs:
        x, wt, b = randn(r, *xs), randn(r, *ws, scale=0.5), randn(r, ws[0])
        with torch.no_grad():
            out = F.conv2d(torch.from_numpy(x), torch.from_numpy(wt), torch.from_numpy(b), st, pd, dl, g)
        R = randn(r, *out.shape)
        w.case(name, [x, wt, b, R], lambda x, wt, b, R, a=(st, pd, dl, g): conv_grad(x, wt, b, R, *a),
               rtol=1e-3, atol=1e-4)

    r = rng("grad_bn")
    x = randn(r, 4, 3, 3, 3, scale=2.0) + np.float32(0.5)
    wt, b = unif(r, 0.5, 1.5, 3), randn(r, 3)
    R = randn(r, 4, 3, 3, 3)

    def bn_grad(x, wt, b, R):
        x, wt, b = (t.clone().requires_grad_(True) for t in (x, wt, b))
        rm, rv = torch.zeros(3), torch.ones(3)
        (F.batch_norm(x, rm, rv, wt, b, training=True, momentum=0.1, eps=1e-5) * R).sum().backward()
        return x.grad, wt.grad, b.grad

    w.case("grad_batch_norm_train", [x, wt, b, R], bn_grad, rtol=1e-3, atol=1e-4)
    torch.set_grad_enabled(False)


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    ops = Writer()
    op_cases(ops)
    n1 = ops.write(os.path.join(OUT_DIR, "ops.bin"))
    grads = Writer()
    grad_cases(grads)
    n2 = grads.write(os.path.join(OUT_DIR, "grad.bin"))
    print("ops.bin: %d cases, %d bytes; grad.bin: %d cases, %d bytes" % (len(ops.cases), n1, len(grads.cases), n2))


if __name__ == "__main__":
    main()
