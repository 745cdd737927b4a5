#!/usr/bin/python3
"""Writes large ONNX graphs for timing `tinylens-cli inspect` (issue 17).

    /usr/bin/python3 scripts/make_big_onnx.py OUT.onnx [--nodes N] [--shape chain|wide]

chain: x -> Add(x, one) -> Relu -> Add -> Relu ... (N nodes, one value N
deep), the graph a deep-chain guard meets; wide: N/2 independent Add + Relu
pairs of the input, all summed by one Sum at the end (fan-in N/2). Input and
output are float [1, 8]; every shape is static. The protobuf is encoded
here by hand (ONNX's Python package is not installed), field numbers from
onnx.proto: the file is what any exporter would write for these graphs.
"""
import argparse
import struct


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_bytes(number, payload):
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def field_int(number, value):
    return varint(number << 3) + varint(value)


def string(number, text):
    return field_bytes(number, text.encode())


def value_info(name, dims, elem=1):
    shape = b"".join(field_bytes(1, field_int(1, d)) for d in dims)           # Dimension.dim_value
    tensor = field_int(1, elem) + field_bytes(2, shape)                          # TypeProto.Tensor
    return string(1, name) + field_bytes(2, field_bytes(1, tensor))              # ValueInfoProto


def node(op, inputs, outputs, name):
    body = b"".join(string(1, i) for i in inputs) + b"".join(string(2, o) for o in outputs)
    return body + string(3, name) + string(4, op)


def initializer(name, values):
    raw = struct.pack("<%df" % len(values), *values)
    dims = field_int(1, len(values))
    return dims + field_int(2, 1) + string(8, name) + field_bytes(9, raw)       # dims, FLOAT, name, raw_data


def graph(nodes, shape):
    width = 8
    out = []
    if shape == "chain":
        prev = "x"
        for i in range(nodes):
            op = "Add" if i % 2 == 0 else "Relu"
            name = "y" if i == nodes - 1 else "v%d" % i
            out.append(node(op, [prev, "one"] if op == "Add" else [prev], [name], "n%d" % i))
            prev = name
    else:
        pairs = max(1, (nodes - 1) // 2)
        for i in range(pairs):
            out.append(node("Add", ["x", "one"], ["a%d" % i], "add%d" % i))
            out.append(node("Relu", ["a%d" % i], ["r%d" % i], "relu%d" % i))
        out.append(node("Sum", ["r%d" % i for i in range(pairs)], ["y"], "sum"))
    body = b"".join(field_bytes(1, n) for n in out) + string(2, "big_" + shape)
    body += field_bytes(5, initializer("one", [1.0] * width))
    body += field_bytes(11, value_info("x", [1, width])) + field_bytes(12, value_info("y", [1, width]))
    return body


def model_bytes(nodes, shape):
    model = field_int(1, 8) + string(2, "make_big_onnx") + field_bytes(7, graph(nodes, shape))
    return model + field_bytes(8, string(1, "") + field_int(2, 13))            # opset_import ai.onnx 13


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--nodes", type=int, default=100000)
    p.add_argument("--shape", choices=["chain", "wide"], default="chain")
    a = p.parse_args()
    with open(a.out, "wb") as f:
        f.write(model_bytes(a.nodes, a.shape))


if __name__ == "__main__":
    main()
