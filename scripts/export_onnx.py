#!/usr/bin/python3
"""Exports EfficientNet-Lite0 (the independent PyTorch definition in
scripts/reference_efficientnet.py, same weights file) to ONNX with Debian's
torch.onnx.export at opset 13, batch dimension dynamic ("batch").

The SAME padding amounts are computed from Python ints so they are baked into
the graph as constants: the model then has plain Pad nodes with static pads,
like most exported CNNs (traced sizes would become ~500 Shape/Gather/Cast/Sub
nodes per image that every runtime evaluates), while the batch dimension
stays a dim_param. torch 1.13's own Pad symbolic still builds each pads
input from a subgraph (ConstantOfShape, Concat, Slice, Transpose, Cast,
Reshape) that its constant folding leaves in place, which costs ONNX Runtime
half its speed; constant_pad_nd below writes the pads as one constant, the
graph a careful user exports.

Usage:
  scripts/export_onnx.py [OUT]   # default resources/models/efficientnet-lite0.onnx
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_efficientnet as ref  # noqa: E402


def static_same_pad(x, k, s):
    """reference_efficientnet.same_pad with the input's size read as Python
    ints, so the exporter writes the amounts as constants."""
    def amount(size):
        out = (size + s - 1) // s
        total = max((out - 1) * s + k - size, 0)
        return total // 2, total - total // 2

    top, bottom = amount(int(x.shape[2]))
    left, right = amount(int(x.shape[3]))
    return torch.nn.functional.pad(x, [left, right, top, bottom])


ref.same_pad = static_same_pad


def constant_pad_nd(g, x, pad, value):
    """aten::constant_pad_nd as one Pad whose pads are a constant: torch's
    (left, right) pairs from the last axis back become ONNX's begins then
    ends from the first axis on."""
    from torch.onnx import symbolic_helper
    pairs = symbolic_helper._parse_arg(pad, "is")
    rank = symbolic_helper._get_tensor_rank(x) or 4
    begins, ends = [0] * rank, [0] * rank
    for i in range(len(pairs) // 2):
        begins[rank - 1 - i], ends[rank - 1 - i] = pairs[2 * i], pairs[2 * i + 1]
    pads = g.op("Constant", value_t=torch.tensor(begins + ends, dtype=torch.int64))
    fill = g.op("Constant", value_t=torch.tensor(symbolic_helper._parse_arg(value, "f"), dtype=torch.float32))
    return g.op("Pad", x, pads, fill, mode_s="constant")


def pad(g, x, pads, mode, value):
    """aten::pad (what F.pad traces to in torch 1.13) in constant mode."""
    from torch.onnx import symbolic_helper
    if symbolic_helper._parse_arg(mode, "s") != "constant":
        raise RuntimeError("export_onnx: only constant padding is exported")
    if symbolic_helper._is_none(value):
        value = g.op("Constant", value_t=torch.tensor(0.0))
    return constant_pad_nd(g, x, pads, value)


torch.onnx.register_custom_op_symbolic("aten::constant_pad_nd", constant_pad_nd, 13)
torch.onnx.register_custom_op_symbolic("aten::pad", pad, 13)


class Lite0(torch.nn.Module):
    def __init__(self, sd):
        super().__init__()
        # Parameters (not plain dict entries) so the exporter writes them as
        # initializers with their state-dict names.
        self.params = torch.nn.ParameterDict(
            {k.replace(".", "__"): torch.nn.Parameter(v, requires_grad=False) for k, v in sd.items()})

    def forward(self, x):
        sd = {k.replace("__", "."): v for k, v in self.params.items()}
        return ref.forward(sd, x)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ref.ROOT, "resources", "models",
                                                             "efficientnet-lite0.onnx")
    sd = {k: v for k, v in ref.load().items() if not k.endswith("num_batches_tracked")}
    model = Lite0(sd).eval()
    x = torch.zeros(1, 3, ref.CROP, ref.CROP)
    tmp = out + ".part"
    with torch.no_grad():
        torch.onnx.export(model, (x,), tmp, opset_version=13, input_names=["input"], output_names=["logits"],
                          dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}}, do_constant_folding=True)
    os.replace(tmp, out)
    print("wrote", out, os.path.getsize(out), "bytes")


if __name__ == "__main__":
    main()
