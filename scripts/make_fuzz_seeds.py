#!/usr/bin/python3
"""Writes the seed corpora of the fuzz targets in tests/fuzz/.

    /usr/bin/python3 scripts/make_fuzz_seeds.py [OUT_DIR]    (default build-fuzz/seeds)

One folder per target (pth, pickle, safetensors, image, onnx), each holding
small, valid, real-world files for libFuzzer to mutate: checkpoints written by
torch.save in both layouts (dtypes, views, stride 0, wrapped dicts), their
pickles, safetensors written by hand, images written by PIL in every format
the loader supports, and the smallest models of ONNX's conformance cases
(resources/onnx-node-tests, installed by scripts/setup). Run with Debian's
interpreter, which has torch, numpy and PIL. The seeds are generated, not
committed; scripts/fuzz runs this when they are missing.
"""
import collections
import hashlib
import io
import os
import pickle
import shutil
import struct
import sys
import zipfile

import numpy as np
import torch
from PIL import Image

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
ORANGE = "/usr/share/doc/opencv-doc/examples/data/orange.jpg"


def writer(out, target):
    folder = os.path.join(out, target)
    os.makedirs(folder, exist_ok=True)

    def write(name, data):
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)

    return write


def torch_bytes(obj, legacy=False):
    buf = io.BytesIO()
    torch.save(obj, buf, _use_new_zipfile_serialization=not legacy)
    return buf.getvalue()


def state_dicts():
    torch.manual_seed(0)
    base = torch.arange(12, dtype=torch.float32)
    linear = torch.nn.Linear(3, 2)
    conv = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 2), torch.nn.BatchNorm2d(2))
    yield "linear", linear.state_dict()
    yield "conv_bn", conv.state_dict()
    yield "plain", {"w": base.reshape(3, 4).clone(), "b": torch.tensor([1, 2], dtype=torch.int64)}
    yield "views", {"slice": base[2:5], "transposed": base.view(3, 4).t(), "whole": base}
    yield "stride0", {"expanded": torch.zeros(1).expand(4, 3), "scalar": torch.tensor(3.5)}
    yield "dtypes", {
        str(dt).split(".")[1]: torch.arange(4).to(dt)
        for dt in (torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int16, torch.int8,
                   torch.uint8, torch.bool)
    }
    yield "wrapped", {"state_dict": {"w": torch.ones(2, 2)}, "epoch": 3, "name": "run"}
    yield "model_key", {"model": collections.OrderedDict(w=torch.full((2,), 2.0)), "optimizer": {"lr": 0.1}}
    yield "empty_tensor", {"e": torch.zeros(0, 3), "w": torch.ones(1)}


def make_pth(out):
    write = writer(out, "pth")
    write_pickle = writer(out, "pickle")
    for name, sd in state_dicts():
        data = torch_bytes(sd)
        write(name + ".pth", data)
        write(name + "_legacy.pth", torch_bytes(sd, legacy=True))
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            for entry in z.namelist():
                if entry.endswith("/data.pkl"):
                    write_pickle(name + "_data.pkl", z.read(entry))
    for fixture in ("state_zip.pth", "state_legacy.pth", "wrapped_zip.pth", "wrapped_legacy.pth"):
        path = os.path.join(ROOT, "tests", "data", "io", fixture)
        if os.path.exists(path):
            write("fixture_" + fixture, open(path, "rb").read())
    # Plain pickles in every protocol the reader accepts.
    objects = {
        "containers": {"a": [1, 2, (3, 4.5)], "b": {"c": None, "d": True}, "e": "text", "f": b"\x00\x01"},
        "numbers": [0, -1, 255, 65535, 2**31 - 1, -(2**31), 2**63 - 1, 2**70, 1.5, -0.0],
        "ordered": collections.OrderedDict([("x", 1), ("y", [2, 3])]),
        "shared": (lambda l: {"one": l, "two": l})([1, 2, 3]),
    }
    for name, obj in objects.items():
        for protocol in (2, 3, 4, 5):
            write_pickle("%s_p%d.pkl" % (name, protocol), pickle.dumps(obj, protocol=protocol))


def safetensors_bytes(tensors, metadata=None):
    import json

    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def make_safetensors(out):
    write = writer(out, "safetensors")
    f32 = np.arange(6, dtype=np.float32)
    write("one.safetensors", safetensors_bytes({"w": ("F32", [2, 3], f32.tobytes())}))
    write("meta.safetensors",
          safetensors_bytes({"w": ("F32", [6], f32.tobytes())}, metadata={"format": "pt", "note": "seed"}))
    write("empty.safetensors", safetensors_bytes({}))
    write("scalar_and_zero.safetensors",
          safetensors_bytes({"s": ("F32", [], f32[:1].tobytes()), "z": ("F32", [0, 4], b"")}))
    dtypes = {
        "F64": np.float64, "F16": np.float16, "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
        "U8": np.uint8, "BOOL": np.bool_,
    }
    write("dtypes.safetensors",
          safetensors_bytes({k: (k, [2, 2], np.arange(4).astype(v).tobytes()) for k, v in dtypes.items()}))
    bf16 = (np.arange(4, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)
    write("bf16.safetensors", safetensors_bytes({"b": ("BF16", [4], bf16.tobytes())}))
    path = os.path.join(ROOT, "tests", "data", "io", "tensors.safetensors")
    if os.path.exists(path):
        write("fixture.safetensors", open(path, "rb").read())


def make_images(out):
    write = writer(out, "image")
    if os.path.exists(ORANGE):
        photo = Image.open(ORANGE).convert("RGB").resize((24, 16), Image.BILINEAR)
    else:
        grid = np.indices((16, 24)).sum(axis=0) * 9 % 256
        photo = Image.fromarray(np.stack([grid, grid[::-1], 255 - grid], axis=-1).astype(np.uint8))

    def save(name, image, fmt, **options):
        buf = io.BytesIO()
        image.save(buf, fmt, **options)
        write(name, buf.getvalue())

    save("baseline.jpg", photo, "JPEG", quality=75)
    save("progressive.jpg", photo, "JPEG", quality=60, progressive=True)
    save("444.jpg", photo, "JPEG", quality=90, subsampling=0)
    save("grey.jpg", photo.convert("L"), "JPEG", quality=75)
    save("restart.jpg", photo, "JPEG", quality=50, optimize=True)
    save("rgb.png", photo, "PNG")
    save("rgba.png", photo.convert("RGBA"), "PNG")
    save("grey.png", photo.convert("L"), "PNG")
    save("grey_alpha.png", photo.convert("LA"), "PNG")
    save("palette.png", photo.convert("P", palette=Image.ADAPTIVE, colors=16), "PNG")
    save("bilevel.png", photo.convert("1"), "PNG")
    save("deep16.png", Image.fromarray((np.asarray(photo.convert("L"), np.uint16) * 257)), "PNG")
    save("rgb.bmp", photo, "BMP")
    save("palette.bmp", photo.convert("P", palette=Image.ADAPTIVE, colors=16), "BMP")
    save("rgb.gif", photo.convert("P", palette=Image.ADAPTIVE, colors=32), "GIF")
    save("rgb.tga", photo, "TGA")
    save("rle.tga", photo, "TGA", compression="tga_rle")
    save("rgb.ppm", photo, "PPM")
    save("grey.pgm", photo.convert("L"), "PPM")
    for fixture in sorted(os.listdir(os.path.join(ROOT, "tests", "data", "io"))):
        if fixture.rsplit(".", 1)[-1] in ("jpg", "png", "bmp", "gif", "tga", "ppm"):
            data = open(os.path.join(ROOT, "tests", "data", "io", fixture), "rb").read()
            if 0 < len(data) <= 32768:
                write("fixture_" + fixture, data)


def make_onnx(out, limit=150, max_bytes=2048):
    cases = os.path.join(ROOT, "resources", "onnx-node-tests")
    if not os.path.isdir(cases):
        print("make_fuzz_seeds: no %s (run scripts/setup); the onnx corpus starts empty" % cases, file=sys.stderr)
        os.makedirs(os.path.join(out, "onnx"), exist_ok=True)
        return
    write = writer(out, "onnx")
    found = []
    for case in sorted(os.listdir(cases)):
        model = os.path.join(cases, case, "model.onnx")
        if os.path.isfile(model) and os.path.getsize(model) <= max_bytes:
            found.append((hashlib.sha1(case.encode()).hexdigest(), case, model))
    # A fixed, spread-out choice: the same seeds on every machine.
    for _, case, model in sorted(found)[:limit]:
        write(case + ".onnx", open(model, "rb").read())
    # Graphs deeper than the runtime's lazy-depth guard (128) and wide ones,
    # as scripts/make_big_onnx.py writes them, small enough for -max_len.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import make_big_onnx
    for shape, nodes in (("chain", 300), ("wide", 200)):
        write("big_%s_%d.onnx" % (shape, nodes), make_big_onnx.model_bytes(nodes, shape))


def main():
    out = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build-fuzz", "seeds"))
    if os.path.isdir(out):
        shutil.rmtree(out)
    make_pth(out)
    make_safetensors(out)
    make_images(out)
    make_onnx(out)
    for target in sorted(os.listdir(out)):
        print("%-12s %4d seeds" % (target, len(os.listdir(os.path.join(out, target)))))


if __name__ == "__main__":
    main()
