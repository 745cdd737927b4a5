#!/usr/bin/env python3
"""A copy of an ONNX model for timing where the file cannot be carried.

The device tool carries at most 64 MiB to the GPU machine, and the zoo's
models are up to 331 MB of weights that do not compress. This writes the
same graph with every float initializer's values replaced by a pattern that
repeats every 1,024 values (small, nonzero, no denormals), gzipped: the
kernels of tinylens and of ONNX Runtime do the same work on it, so their
times are those of the real model, and the file shrinks to a few hundred KB.
Its outputs mean nothing: use it for speed, never for answers.

  scripts/shrink_onnx.py MODEL.onnx OUT.onnx.gz
"""
import gzip
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def pattern(count, dtype):
    i = np.arange(count, dtype=np.int64) % 1024
    return (((i * 7919) % 1024 - 512) / 8192.0 + 1.0 / 16384).astype(dtype)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-1].strip())
    model = onnx.load(sys.argv[1])
    for init in model.graph.initializer:
        a = numpy_helper.to_array(init)
        if a.dtype not in (np.float32, np.float16, np.float64) or a.size < 64:
            continue  # shapes, indices and scalars keep their values
        new = numpy_helper.from_array(pattern(a.size, a.dtype).reshape(a.shape), init.name)
        init.CopyFrom(new)
    with gzip.open(sys.argv[2], "wb", compresslevel=9) as f:
        f.write(model.SerializeToString())


if __name__ == "__main__":
    main()
