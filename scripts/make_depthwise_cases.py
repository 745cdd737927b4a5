#!/usr/bin/env python3
"""Writes ONNX test cases (model.onnx + test_data_set_0) of depthwise
convolutions and max pools over several images, with ONNX Runtime's answers,
for `tinylens-cli onnx-test DIR --device cuda:0` on the GPU machine, where
no test binary builds (no Qt): kernels/depthwise.cu reads the weights of N
images' planes through MatmulHint::a_period and puts the batch on the grid's
x, which batch-1 zoo models never exercise. scripts/gpu-prepare carries them
in .device/dwcases.

  build/bench-venv/bin/python scripts/make_depthwise_cases.py OUT_DIR
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


def case(root, name, n, c, h, w, k, s, d, pool=False, relu=True):
    rng = np.random.default_rng(len(name) * 7919 + n * 31 + c)
    p = (k // 2) * d
    inits, nodes = [], []
    if pool:
        nodes.append(helper.make_node("MaxPool", ["x"], ["z"], kernel_shape=[k, k], strides=[s, s], pads=[p] * 4,
                                      dilations=[d, d]))
    else:
        inits.append(numpy_helper.from_array(rng.standard_normal((c, 1, k, k)).astype(np.float32), "w"))
        inits.append(numpy_helper.from_array(rng.standard_normal((c,)).astype(np.float32), "b"))
        nodes.append(helper.make_node("Conv", ["x", "w", "b"], ["y" if relu else "z"], group=c, kernel_shape=[k, k],
                                      strides=[s, s], pads=[p] * 4, dilations=[d, d]))
        if relu:
            nodes.append(helper.make_node("Relu", ["y"], ["z"]))
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, h, w])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    folder = os.path.join(root, name)
    os.makedirs(os.path.join(folder, "test_data_set_0"), exist_ok=True)
    onnx.save(model, os.path.join(folder, "model.onnx"))
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    sess = ort.InferenceSession(os.path.join(folder, "model.onnx"), providers=["CPUExecutionProvider"])
    z = sess.run(None, {"x": x})[0]
    for kind, name_, value in (("input", "x", x), ("output", "z", z)):
        with open(os.path.join(folder, "test_data_set_0", kind + "_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(value, name_).SerializeToString())


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    case(root, "dw7x7_n3", 3, 8, 14, 14, 7, 1, 1)
    case(root, "dw3x3s2_n2", 2, 16, 29, 29, 3, 2, 1)
    case(root, "dw5x5s2_n4", 4, 5, 17, 23, 5, 2, 1)
    case(root, "dw3x3d2_n2", 2, 6, 40, 70, 3, 1, 2, relu=False)
    case(root, "dw3x3_n2_big", 2, 24, 112, 112, 3, 1, 1)
    case(root, "dw3x3_many_planes", 3, 22000, 3, 3, 3, 1, 1)  # 66000 planes: more than a grid's y or z
    case(root, "pool3x3s2_n2", 2, 6, 57, 57, 3, 2, 1, pool=True)
    case(root, "pool2x2s2_n3", 3, 4, 20, 33, 2, 2, 1, pool=True)


if __name__ == "__main__":
    main()
