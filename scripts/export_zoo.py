#!/usr/bin/python3
"""Exports the model zoo: ImageNet architectures of Debian's torchvision (and
the clean EfficientNet-Lite0) as ONNX backend test-case folders, with seeded
random weights that are not degenerate, and PyTorch's output as the answer:

  OUT/<name>/model.onnx
  OUT/<name>/test_data_set_0/input_0.pb    the squirrel photo, normalised
  OUT/<name>/test_data_set_0/output_0.pb   PyTorch's logits for it, in float64

`tinylens-cli onnx-test OUT` (or tests/test_onnx_zoo.cpp) then checks any
runtime against PyTorch, model after model in one process.

Weights. torchvision zero-initialises some heads, biases and BatchNorm
gammas (and ConvNeXt's layer scale is 1e-6): logits of ~1e-10 pass any
tolerance. So every parameter and buffer is drawn again here: convolution
weights at He's scale for their fan-in, linear ones (attention's projections
too) variance-preserving, biases, BatchNorm and LayerNorm affine terms around
their neutral values, every other parameter (class tokens, position
embeddings, relative-position tables, layer scales) from a normal of its
own. BatchNorm statistics are then measured on the image and noisy copies of
it (so the activations stay within range however deep the net) and
perturbed, so no layer is an exact identity; the last layer is scaled to
logits of spread 3. Each model is checked before it is written: finite
logits that depend on the image, and float32 PyTorch within a quarter of the
tolerance of float64 PyTorch (a model whose answer float32 rounding can move
by more is ill-conditioned: with attention projections drawn at the scale of
a convolution's, ViT's softmax saturates and PyTorch's two attention paths
disagree by 0.7). The answer written is PyTorch's in float64.

Usage: scripts/export_zoo.py OUT_DIR [NAME...]   (default: every model)
Needs Debian's python3-torch and torchvision's Python package on the path
(scripts/setup unpacks python3-torchvision for this without installing it).
"""
import os
import sys

import numpy as np
import torch
import torchvision.models as tvm

HERE = os.path.dirname(os.path.abspath(__file__))
IMAGE = os.environ.get("TINYLENS_ZOO_IMAGE", "/usr/share/doc/opencv-doc/examples/data/squirrel_cls.jpg")


def zoo():
    """name -> (constructor, input size). The classes users bring: classic
    CNNs, concatenations, mobile nets (ReLU6, hardswish, SiLU, squeeze-
    excite, 5x5 depthwise), grouped convolutions, channel shuffles, ConvNeXt
    (LayerNorm, GELU, 7x7 depthwise) and transformers (ViT, Swin)."""
    return {
        "resnet18": (lambda: tvm.resnet18(), 224),
        "googlenet": (lambda: tvm.googlenet(aux_logits=False, init_weights=False, transform_input=False), 224),
        "densenet121": (lambda: tvm.densenet121(), 224),
        "squeezenet1_1": (lambda: tvm.squeezenet1_1(), 224),
        "mobilenet_v2": (lambda: tvm.mobilenet_v2(), 224),
        "mobilenet_v3_large": (lambda: tvm.mobilenet_v3_large(), 224),
        "efficientnet_b0": (lambda: tvm.efficientnet_b0(), 224),
        "regnet_y_400mf": (lambda: tvm.regnet_y_400mf(), 224),
        "shufflenet_v2_x1_0": (lambda: tvm.shufflenet_v2_x1_0(), 224),
        "mnasnet0_5": (lambda: tvm.mnasnet0_5(), 224),
        "convnext_tiny": (lambda: tvm.convnext_tiny(), 224),
        "vit_b_16": (lambda: tvm.vit_b_16(), 224),
        "swin_t": (lambda: tvm.swin_t(), 224),
        "efficientnet_lite0": (lite0, 224),
    }


def lite0():
    """The clean EfficientNet-Lite0 export (export_onnx.py's module, real
    weights): kept as trained, not redrawn."""
    sys.path.insert(0, HERE)
    import export_onnx
    import reference_efficientnet as ref
    sd = {k: v for k, v in ref.load().items() if not k.endswith("num_batches_tracked")}
    model = export_onnx.Lite0(sd)
    model.trained = True
    return model


def redraw(model, gen):
    """Every parameter drawn again (see the module's comment)."""
    def normal(t, std, mean=0.0):
        t.copy_(torch.randn(t.shape, generator=gen) * std + mean)

    def uniform(t, lo, hi):
        t.copy_(torch.rand(t.shape, generator=gen) * (hi - lo) + lo)

    done = set()
    for module in model.modules():
        if isinstance(module, (torch.nn.Conv2d, torch.nn.Linear)):
            # He's scale for convolutions (ReLU nets), variance-preserving
            # for linear layers (attention's projections, MLPs, heads).
            fan_in = module.weight[0].numel()
            gain = 2.0 if isinstance(module, torch.nn.Conv2d) else 1.0
            normal(module.weight, (gain / fan_in) ** 0.5)
            if module.bias is not None:
                normal(module.bias, 0.1)
        elif isinstance(module, (torch.nn.BatchNorm2d, torch.nn.LayerNorm, torch.nn.GroupNorm)):
            if module.weight is not None:
                uniform(module.weight, 0.5, 1.5)
                normal(module.bias, 0.1)
        else:
            continue
        done.update(id(p) for p in module.parameters(recurse=False))
    for name, p in model.named_parameters():
        if id(p) in done:
            continue
        if "layer_scale" in name:
            uniform(p, 0.2, 1.0)
        elif name.endswith("weight") and p.dim() >= 2:  # a projection held as a plain parameter (attention's in_proj)
            normal(p, (1.0 / p[0].numel()) ** 0.5)
        elif name.endswith("bias"):
            normal(p, 0.1)
        else:  # class tokens, position embeddings, relative-position tables
            normal(p, 0.2)


def calibrate(model, x, gen):
    """BatchNorm statistics measured on the image, a flipped, a noisy and a
    darker copy of it and noise (so the activations of the real input stay
    within range however deep the net), then perturbed."""
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    if not bns:
        return
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None  # a cumulative average over the calibration batches
    model.train()
    noise = torch.randn(x.shape, generator=gen)
    batch = torch.cat([x, torch.flip(x, dims=[3]), 0.7 * x + 0.3 * noise, 0.5 * x, noise])
    with torch.no_grad():
        model(batch)
    for bn in bns:
        var = bn.running_var
        bn.running_var.copy_(var * (torch.rand(var.shape, generator=gen) * 0.6 + 0.7))
        bn.running_mean.add_(torch.randn(var.shape, generator=gen) * 0.1 * var.sqrt())
    model.eval()


def scale_head(model, x, target=3.0):
    """Scales the last layer (a Linear, or SqueezeNet's final convolution,
    whose ReLU and average commute with a positive factor) so the logits'
    spread is `target`: deep stacks of random layers can leave it in the
    hundreds, where the conformance tolerance (1e-4 + 1e-3 |y|, made for
    values near 1) would flag float32 rounding as an error."""
    last = [m for m in model.modules() if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d))][-1]
    with torch.no_grad():
        factor = target / float(model(x).float().std())
        last.weight.mul_(factor)
        if last.bias is not None:
            last.bias.mul_(factor)


def image(size):
    """The squirrel photo: resized, centre-cropped, ImageNet-normalised."""
    from PIL import Image
    img = Image.open(IMAGE).convert("RGB")
    w, h = img.size
    scale = size * 256 / 224 / min(w, h)
    img = img.resize((max(size, round(w * scale)), max(size, round(h * scale))), Image.BILINEAR)
    w, h = img.size
    left, top = (w - size) // 2, (h - size) // 2
    img = img.crop((left, top, left + size, top + size))
    x = np.asarray(img, dtype=np.float32) / 255.0
    x = (x - np.array([0.485, 0.456, 0.406], np.float32)) / np.array([0.229, 0.224, 0.225], np.float32)
    return torch.from_numpy(np.ascontiguousarray(x.transpose(2, 0, 1)[None]))


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def tensor_proto(name, array):
    """An ONNX TensorProto of float32 (dims, data_type, name, raw_data)."""
    array = np.ascontiguousarray(array, dtype="<f4")
    out = b"".join(varint(1 << 3) + varint(d) for d in array.shape)
    out += varint(2 << 3) + varint(1)
    raw = array.tobytes()
    out += varint((8 << 3) | 2) + varint(len(name)) + name.encode()
    out += varint((9 << 3) | 2) + varint(len(raw)) + raw
    return out


def check(name, model, x):
    """The answer, computed in float64, and the reasons to refuse a model:
    logits that are not finite, hardly spread, or independent of the image
    (degenerate), or that PyTorch's own float32 run misses by more than a
    quarter of the conformance tolerance (ill-conditioned: any float32
    runtime would fail it by chance)."""
    import copy
    with torch.no_grad():
        y32 = model(x).float()
        y = copy.deepcopy(model).double()(x.double())
        other = model(torch.flip(x, dims=[2, 3]) * 0.5).float()
    if not torch.isfinite(y).all():
        sys.exit(f"export_zoo: {name}: logits are not finite")
    spread = float(y.std())
    moved = float((y32 - other).abs().max() / y32.abs().max())
    if not (1e-2 < spread < 1e4) or moved < 1e-2:
        sys.exit(f"export_zoo: {name}: degenerate logits (std {spread:.3g}, change with the image {moved:.3g})")
    rounding = float(((y32.double() - y).abs() / (1e-4 + 1e-3 * y.abs())).max())
    if rounding > 0.25:
        sys.exit(f"export_zoo: {name}: ill-conditioned (float32 PyTorch is {rounding:.3g}x the tolerance off float64)")
    return y.float(), spread, moved, rounding


def export(name, make, size, out_dir, seed):
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = make()
    x = image(size)
    if not getattr(model, "trained", False):
        with torch.no_grad():
            redraw(model, gen)
            calibrate(model, x, gen)
    model.eval()
    if not getattr(model, "trained", False):
        scale_head(model, x)
    y, spread, moved, rounding = check(name, model, x)
    case = os.path.join(out_dir, name)
    data = os.path.join(case, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    tmp = os.path.join(case, "model.onnx.part")
    # Traced with gradients on: torch 1.13's nn.MultiheadAttention takes its
    # fused inference kernel (no ONNX export) under no_grad.
    import inspect
    legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    # TINYLENS_ZOO_DYNAMIC_BATCH=1: the batch dimension left free (a file for
    # every batch size, as a deployment exports it: bench-gpu's batch 64).
    if os.environ.get("TINYLENS_ZOO_DYNAMIC_BATCH") == "1":
        legacy["dynamic_axes"] = {"input": {0: "N"}, "logits": {0: "N"}}
    torch.onnx.export(model, (x,), tmp, opset_version=17, input_names=["input"], output_names=["logits"],
                      do_constant_folding=True, **legacy)
    with open(os.path.join(data, "input_0.pb"), "wb") as f:
        f.write(tensor_proto("input", x.numpy()))
    with open(os.path.join(data, "output_0.pb"), "wb") as f:
        f.write(tensor_proto("logits", y.numpy()))
    os.replace(tmp, os.path.join(case, "model.onnx"))
    print(f"export_zoo: {name}: {os.path.getsize(os.path.join(case, 'model.onnx')) >> 20} MiB, "
          f"logits std {spread:.3g}, change with the image {moved:.3g}, float32 rounding {rounding:.2g}x the tolerance")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out_dir = sys.argv[1]
    models = zoo()
    names = sys.argv[2:] or list(models)
    for n in names:
        if n not in models:
            sys.exit(f"export_zoo: no model '{n}' (known: {' '.join(models)})")
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    for i, n in enumerate(names):
        make, size = models[n]
        export(n, make, size, out_dir, seed=1000 + sorted(models).index(n))


if __name__ == "__main__":
    main()
