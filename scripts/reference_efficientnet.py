#!/usr/bin/python3
"""Reference EfficientNet-Lite0 in plain PyTorch, and the golden data of
tests/test_models.cpp.

The network is written out here (not imported from efficientnet_lite_pytorch)
so the test compares two independent definitions that share only the weights
file. What the port of the TensorFlow weights expects, read from the
efficientnet_lite_pytorch 0.1.0 package code:
  - TensorFlow "SAME" padding: total = max((out - 1) * stride + k - in, 0),
    total // 2 before, the rest after (asymmetric on the stride-2 convs);
  - batch-norm epsilon 1e-3;
  - ReLU6 everywhere, no squeeze-excite, stem (32) and head (1280) not scaled;
  - identity skip when stride 1 and in == out channels.
Input: the TF EfficientNet-Lite builder normalises with mean 127 and std 128 on
0..255 pixels (the PyTorch port's README shows ImageNet's mean/std instead;
the weights were trained the TF way; checked on the two test images: orange
70.6% vs 37.5%, fox squirrel 88.5% vs 93.1%). This definition matches the
package's EfficientNet.from_pretrained('efficientnet-lite0') bit for bit. Resizing: short side 256, centre crop 224 (TF's eval
crop fraction 0.875), PIL bilinear with antialiasing, as core/io/image.h.

Usage:
  scripts/reference_efficientnet.py golden      # writes tests/data/models/*
  scripts/reference_efficientnet.py bench N     # warm median of N runs, ms
  scripts/reference_efficientnet.py classify IMAGE...
"""
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.environ.get("TINYLENS_MODELS") or os.path.join(ROOT, "resources", "models")
WEIGHTS = os.path.join(MODELS, "efficientnet-lite0-57934424.pth")
SAFETENSORS = os.path.join(MODELS, "efficientnet-lite0.safetensors")
LABELS = os.path.join(MODELS, "imagenet_classes.txt")
OUT = os.path.join(ROOT, "tests", "data", "models")
IMAGES = {
    "squirrel": "/usr/share/doc/opencv-doc/examples/data/squirrel_cls.jpg",
    "orange": "/usr/share/doc/opencv-doc/examples/data/orange.jpg",
}

MEAN = [127.0 / 255.0] * 3
STD = [128.0 / 255.0] * 3
RESIZE, CROP = 256, 224
BN_EPS = 1e-3

# (repeats, kernel, stride, expand ratio, in channels, out channels) per stage
STAGES = [
    (1, 3, 1, 1, 32, 16),
    (2, 3, 2, 6, 16, 24),
    (2, 5, 2, 6, 24, 40),
    (3, 3, 2, 6, 40, 80),
    (3, 5, 1, 6, 80, 112),
    (4, 5, 2, 6, 112, 192),
    (1, 3, 1, 6, 192, 320),
]


def blocks():
    """(kernel, stride, expand, cin, cout) of each of the 16 MBConv blocks."""
    out = []
    for repeats, k, s, e, cin, cout in STAGES:
        for r in range(repeats):
            out.append((k, s if r == 0 else 1, e, cin if r == 0 else cout, cout))
    return out


def same_pad(x, k, s):
    def amount(size):
        out = (size + s - 1) // s
        total = max((out - 1) * s + k - size, 0)
        return total // 2, total - total // 2

    top, bottom = amount(x.shape[2])
    left, right = amount(x.shape[3])
    return F.pad(x, [left, right, top, bottom])


def bn(x, sd, prefix):
    return F.batch_norm(x, sd[prefix + ".running_mean"], sd[prefix + ".running_var"], sd[prefix + ".weight"],
                        sd[prefix + ".bias"], False, 0.0, BN_EPS)


def forward(sd, x):
    x = F.conv2d(same_pad(x, 3, 2), sd["_conv_stem.weight"], stride=2)
    x = F.relu6(bn(x, sd, "_bn0"))
    for i, (k, s, e, cin, cout) in enumerate(blocks()):
        p = "_blocks.%d." % i
        inputs = x
        if e != 1:
            x = F.relu6(bn(F.conv2d(x, sd[p + "_expand_conv.weight"]), sd, p + "_bn0"))
        x = F.conv2d(same_pad(x, k, s), sd[p + "_depthwise_conv.weight"], stride=s, groups=x.shape[1])
        x = F.relu6(bn(x, sd, p + "_bn1"))
        x = bn(F.conv2d(x, sd[p + "_project_conv.weight"]), sd, p + "_bn2")
        if s == 1 and cin == cout:
            x = x + inputs
    x = F.relu6(bn(F.conv2d(x, sd["_conv_head.weight"]), sd, "_bn1"))
    x = x.mean((2, 3))
    return F.linear(x, sd["_fc.weight"], sd["_fc.bias"])


def preprocess(path):
    img = Image.open(path).convert("RGB")
    w, h = img.size
    # torchvision's Resize(int): the long side is truncated, not rounded.
    if w <= h:
        size = (RESIZE, int(RESIZE * h / w))
    else:
        size = (int(RESIZE * w / h), RESIZE)
    img = img.resize(size, Image.BILINEAR)
    w, h = img.size
    top, left = int(round((h - CROP) / 2.0)), int(round((w - CROP) / 2.0))
    img = img.crop((left, top, left + CROP, top + CROP))
    a = np.asarray(img, dtype=np.float32) / 255.0
    a = (a - np.array(MEAN, dtype=np.float32)) / np.array(STD, dtype=np.float32)
    return torch.from_numpy(np.ascontiguousarray(a.transpose(2, 0, 1)))[None]


def load():
    """The weights from the .pth, or, where only the safetensors copy travelled
    (the GPU machine: scripts/gpu-prepare), from that."""
    if not os.path.exists(WEIGHTS) and os.path.exists(SAFETENSORS):
        import json
        import struct
        with open(SAFETENSORS, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
            data = f.read()
        return {k: torch.from_numpy(np.frombuffer(data[v["data_offsets"][0]:v["data_offsets"][1]], dtype="<f4")
                                    .reshape(v["shape"]).copy())
                for k, v in header.items() if k != "__metadata__" and v["dtype"] == "F32"}
    sd = torch.load(WEIGHTS, map_location="cpu")
    return {k: v.float() for k, v in sd.items()}


def labels():
    with open(LABELS) as f:
        return [line.strip() for line in f]


def golden():
    os.makedirs(OUT, exist_ok=True)
    sd = load()
    names = labels()
    with torch.no_grad():
        for name, path in IMAGES.items():
            x = preprocess(path)
            logits = forward(sd, x)[0]
            x.numpy().astype("<f4").tofile(os.path.join(OUT, name + "_input.bin"))
            logits.numpy().astype("<f4").tofile(os.path.join(OUT, name + "_logits.bin"))
            p = torch.softmax(logits, 0)
            top = torch.topk(p, 5)
            print(name, ", ".join("%s %.4f" % (names[i], v) for v, i in zip(top.values.tolist(), top.indices.tolist())))


def bench(runs):
    torch.set_num_threads(2)
    sd = load()
    x = preprocess(IMAGES["squirrel"])
    times = []
    with torch.no_grad():
        forward(sd, x)  # warm-up, as our cold run
        for _ in range(runs):
            t0 = time.perf_counter()
            forward(sd, x)
            times.append(time.perf_counter() - t0)
    print("pytorch %s cpu (2 threads): warm median %.2f ms over %d runs" % (torch.__version__,
                                                                             statistics.median(times) * 1e3, runs))


def classify(paths):
    sd = load()
    names = labels()
    with torch.no_grad():
        for path in paths:
            p = torch.softmax(forward(sd, preprocess(path))[0], 0)
            top = torch.topk(p, 5)
            print(path)
            for v, i in zip(top.values.tolist(), top.indices.tolist()):
                print("  %6.2f%%  %s" % (v * 100, names[i]))


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else "golden"
    if cmd == "golden":
        golden()
    elif cmd == "bench":
        bench(int(sys.argv[2]) if len(sys.argv) > 2 else 10)
    elif cmd == "classify":
        classify(sys.argv[2:])
    else:
        sys.exit(__doc__)
