#!/usr/bin/python3
"""Writes the small files tests/test_io.cpp reads, into tests/data/io/.

Run with Debian's interpreter (it has numpy, torch 1.13 and PIL):
    /usr/bin/python3 scripts/make_io_fixtures.py
The outputs are committed; rerunning rewrites them. The JSON files hold the
values the C++ loaders must reproduce, taken from torch / PIL reading the same
files back, so the tests compare against the reference implementations.
"""
import collections
import io
import json
import os
import shutil
import struct
import sys
import zipfile
import zlib

import numpy as np
import torch
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "data", "io")
ORANGE = "/usr/share/doc/opencv-doc/examples/data/orange.jpg"


def path(name):
    return os.path.join(OUT, name)


def write(name, data):
    with open(path(name), "wb") as f:
        f.write(data)


def expected_tensor(t):
    """dtype/shape/values as the C++ HostTensor reports them."""
    names = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.bfloat16: "BF16",
             torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
             torch.uint8: "U8", torch.bool: "BOOL"}
    return {"dtype": names[t.dtype], "shape": list(t.shape),
            "values": [float(v) for v in t.detach().to(torch.float32).flatten().tolist()]}


# ---------------------------------------------------------------- checkpoints
def state_dict():
    base = torch.arange(8, dtype=torch.float32)
    sd = collections.OrderedDict()
    sd["conv.weight"] = torch.tensor([[0.5, -1.25, 2.0], [3.0, -4.5, 1e-3]])
    sd["fc.weight"] = torch.nn.Parameter(torch.arange(6, dtype=torch.float32).reshape(2, 3) * 0.25)
    # Saved as views of their storages: strides (1, 4), and offset 3 stride 2.
    sd["transposed"] = torch.arange(12, dtype=torch.float32).reshape(3, 4).t()
    sd["sliced"] = torch.arange(10, dtype=torch.float32)[3:9:2]
    sd["steps"] = torch.tensor([1, -2, 3000000000, 7], dtype=torch.int64)
    sd["half"] = torch.tensor([1.5, -0.25, 65504.0, 6e-8], dtype=torch.float16)
    sd["bf16"] = torch.tensor([1.0, -2.5, 3.140625], dtype=torch.bfloat16)
    sd["double"] = torch.tensor([[1.0 / 3.0, -1e10]], dtype=torch.float64)
    sd["mask"] = torch.tensor([True, False, True])
    sd["bytes"] = torch.tensor([0, 255, 7], dtype=torch.uint8)
    sd["int32"] = torch.tensor([-5, 6], dtype=torch.int32)
    sd["scalar"] = torch.tensor(2.5)
    sd["shared_a"] = base[:4]
    sd["shared_b"] = base[4:].view(2, 2)
    sd["empty"] = torch.zeros(0, 3)
    assert not sd["transposed"].is_contiguous() and sd["sliced"].storage_offset() == 3
    return sd


def make_checkpoints(expected):
    sd = state_dict()
    torch.save(sd, path("state_zip.pth"))
    torch.save(sd, path("state_legacy.pth"), _use_new_zipfile_serialization=False)
    # Training-script style wrappers around the same weights.
    torch.save({"epoch": 3, "state_dict": sd}, path("wrapped_zip.pth"))
    torch.save({"model": sd, "step": 10}, path("wrapped_legacy.pth"), _use_new_zipfile_serialization=False)
    # A whole pickled module: must be refused by class name, not executed.
    torch.save(torch.nn.Linear(2, 2), path("whole_module.pth"))
    # Check torch reads back what we promise, and record it.
    for name in ["state_zip.pth", "state_legacy.pth"]:
        back = torch.load(path(name))
        for k, v in sd.items():
            assert torch.equal(back[k], v.detach()), (name, k)
    expected["state_dict"] = {k: expected_tensor(v) for k, v in sd.items()}


def make_malicious():
    # Hand-assembled; the equivalent of pickling os.system("echo pwned"). Never
    # unpickled here.
    cmd = b"echo pwned"
    evil = (b"\x80\x02" + b"cposix\nsystem\n" + b"q\x00" + b"X" + struct.pack("<I", len(cmd)) + cmd +
            b"\x85" + b"R" + b".")
    write("malicious.pkl", evil)
    # The same through protocol 4's STACK_GLOBAL, inside a zip checkpoint.
    code = b"__import__('os').system('echo pwned')"
    evil4 = (b"\x80\x04" + b"\x8c\x08builtins" + b"\x94" + b"\x8c\x04eval" + b"\x94" + b"\x93" + b"\x94" +
             b"\x8c" + bytes([len(code)]) + code + b"\x94" + b"\x85" + b"R" + b".")
    with zipfile.ZipFile(path("malicious_zip.pth"), "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", evil4)
        z.writestr("archive/version", "3\n")


# ----------------------------------------------------------------- safetensors
def make_safetensors(expected):
    tensors = [  # name, dtype, numpy array in that dtype
        ("weight", "F32", np.array([[0.5, -1.5, 2.25], [1e-3, 1e6, -0.0]], dtype="<f4")),
        ("bias", "F16", np.array([0.5, -65504.0], dtype="<f2")),
        ("ids", "I64", np.array([-1, 2, 1 << 40], dtype="<i8")),
        ("bf", "BF16", np.array([0x3FC0, 0xC020], dtype="<u2")),  # 1.5, -2.5 as raw bfloat16 bits
        ("flags", "BOOL", np.array([1, 0, 1], dtype="u1")),
        ("pixels", "U8", np.array([[0, 128], [255, 3]], dtype="u1")),
        ("d", "F64", np.array([0.1], dtype="<f8")),
        ("scalar", "I32", np.array(-7, dtype="<i4")),
    ]
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, dtype, arr in tensors:
        blob = arr.tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    write("tensors.safetensors", struct.pack("<Q", len(text)) + text + b"".join(blobs))
    exp = {}
    for name, dtype, arr in tensors:
        values = arr.astype(np.float64)
        if dtype == "BF16":
            values = (arr.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        exp[name] = {"dtype": dtype, "shape": list(arr.shape), "values": [float(v) for v in values.flatten()]}
    expected["safetensors"] = exp


# ---------------------------------------------------------------------- images
def png16(pixels):
    """A 16-bit RGB PNG written by hand (PIL cannot write 16-bit colour)."""
    h, w, _ = pixels.shape

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + pixels[y].astype(">u2").tobytes() for y in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def make_images(expected):
    w, h = 5, 4
    y, x = np.mgrid[0:h, 0:w]
    rgb = np.stack([(x * 50 + y * 7) % 256, (255 - y * 60 - x) % 256, (x * y * 13 + 5) % 256], -1).astype(np.uint8)
    img = Image.fromarray(rgb, "RGB")
    img.save(path("rgb.png"))
    img.save(path("rgb.bmp"))
    img.save(path("rgb.tga"))
    img.save(path("rgb_rle.tga"), compression="tga_rle")
    img.save(path("rgb.ppm"))
    Image.fromarray(rgb[..., 0], "L").save(path("grey.png"))
    Image.fromarray(np.stack([rgb[..., 1], rgb[..., 2]], -1), "LA").save(path("grey_alpha.png"))
    alpha = np.array([[0, 64, 128, 200, 255]] * h, dtype=np.uint8)
    Image.fromarray(np.concatenate([rgb, alpha[..., None]], -1), "RGBA").save(path("rgba.png"))

    # Palette GIF, two frames; the loader must return the first.
    frame1 = img.quantize(colors=32, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    frame2 = Image.fromarray(255 - rgb, "RGB").quantize(colors=32, dither=Image.Dither.NONE)
    frame1.save(path("anim.gif"), save_all=True, append_images=[frame2], duration=100, loop=0)
    gif_first = np.asarray(Image.open(path("anim.gif")).convert("RGB"))

    rgb16 = (rgb.astype(np.uint32) * 257).astype(np.uint16)
    rgb16[0, 0] = [1, 1234, 65535]  # values that 8-bit decoding would lose
    write("rgb16.png", png16(rgb16))

    # JPEG: solid 8x8 blocks, no chroma subsampling, quality 100, so decoders
    # with different IDCTs still agree to within rounding.
    blocks = np.zeros((16, 16, 3), np.uint8)
    for i, colour in enumerate([(200, 30, 40), (20, 180, 60), (30, 40, 210), (128, 128, 128)]):
        blocks[(i // 2) * 8:(i // 2) * 8 + 8, (i % 2) * 8:(i % 2) * 8 + 8] = colour
    Image.fromarray(blocks, "RGB").save(path("blocks.jpg"), quality=100, subsampling=0)
    jpeg_back = np.asarray(Image.open(path("blocks.jpg")).convert("RGB"))

    # Broken inputs.
    with open(ORANGE, "rb") as f:
        orange = f.read()
    write("truncated.jpg", orange[: len(orange) // 3])
    write("not_an_image.png", b"this is a text file that claims to be a PNG\n")
    write("empty.png", b"")

    def pixels(a):
        return [int(v) for v in np.asarray(a).flatten()]

    expected["images"] = {
        "rgb": {"width": w, "height": h, "pixels": pixels(rgb)},
        "grey": pixels(np.repeat(rgb[..., :1], 3, -1)),
        "grey_alpha": pixels(np.repeat(rgb[..., 1:2], 3, -1)),
        "gif_first_frame": pixels(gif_first),
        "rgb16": pixels(rgb16),
        "jpeg_blocks_pil": {"width": 16, "height": 16, "pixels": pixels(jpeg_back)},
    }


# ---------------------------------------------------------------------- resize
def make_resize_goldens(expected):
    # Shrinking a real photo (PIL antialiases BILINEAR when shrinking).
    shutil.copyfile(ORANGE, path("orange.jpg"))
    orange = Image.open(path("orange.jpg")).convert("RGB")
    small = orange.resize((100, 75), Image.BILINEAR)
    write("orange_pil_bilinear_100x75.u8", np.asarray(small).tobytes())

    # Enlarging the small lossless image: plain bilinear.
    big = Image.open(path("rgb.png")).convert("RGB").resize((11, 7), Image.BILINEAR)
    write("rgb_pil_bilinear_11x7.u8", np.asarray(big).tobytes())

    # torchvision-style preprocessing on a lossless, non-square image:
    # Resize(short side 40) -> 60x40, CenterCrop(32), Normalize.
    hh, ww = 64, 96
    yy, xx = np.mgrid[0:hh, 0:ww].astype(np.float64)
    src = np.stack([128 + 120 * np.sin(xx / 7.0) * np.cos(yy / 5.0),
                    (xx * 2.5 + yy) % 256,
                    255 * ((xx // 8 + yy // 8) % 2)], -1).clip(0, 255).astype(np.uint8)
    Image.fromarray(src, "RGB").save(path("pattern_96x64.png"))
    im = Image.open(path("pattern_96x64.png")).convert("RGB")
    short = 40
    rw, rh = (int(short * ww / hh), short) if ww > hh else (short, int(short * hh / ww))
    resized = im.resize((rw, rh), Image.BILINEAR)
    crop = 32
    left, top = int(round((rw - crop) / 2.0)), int(round((rh - crop) / 2.0))
    cropped = resized.crop((left, top, left + crop, top + crop))
    write("pattern_preprocess_32x32.u8", np.asarray(cropped).tobytes())
    expected["resize"] = {
        "orange": {"file": "orange.jpg", "out": [100, 75], "golden": "orange_pil_bilinear_100x75.u8"},
        "enlarge": {"file": "rgb.png", "out": [11, 7], "golden": "rgb_pil_bilinear_11x7.u8"},
        "preprocess": {"file": "pattern_96x64.png", "short_side": short, "crop": crop,
                       "resized": [rw, rh], "golden": "pattern_preprocess_32x32.u8"},
    }


def record_real_model(expected):
    """A few values of the downloaded model (scripts/setup), if present."""
    model = os.path.join(HERE, "..", "resources", "models", "efficientnet-lite0-57934424.pth")
    if not os.path.exists(model):
        print("note: resources/models has no EfficientNet-Lite0; run scripts/setup to record its values")
        return
    sd = torch.load(model)
    picked = {}
    for k in ["_conv_stem.weight", "_fc.bias", "_blocks.15._project_conv.weight", "_bn1.num_batches_tracked"]:
        t = sd[k]
        e = expected_tensor(t)
        picked[k] = {"dtype": e["dtype"], "shape": e["shape"], "first": e["values"][:5],
                     "sum": float(t.double().sum())}
    expected["efficientnet_lite0"] = {"keys": len(sd), "tensors": picked}


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    expected = {}
    make_checkpoints(expected)
    make_malicious()
    make_safetensors(expected)
    make_images(expected)
    make_resize_goldens(expected)
    record_real_model(expected)
    with open(path("expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    total = sum(os.path.getsize(path(n)) for n in os.listdir(OUT))
    print(f"wrote {len(os.listdir(OUT))} files, {total / 1024:.0f} KiB, into {os.path.normpath(OUT)}")


if __name__ == "__main__":
    sys.exit(main())
