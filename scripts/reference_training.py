#!/usr/bin/python3
"""Golden values for the training tests, and PyTorch's side of the training
benchmark.

  /usr/bin/python3 scripts/reference_training.py            # writes tests/data/train/
  /usr/bin/python3 scripts/reference_training.py --bench    # times torch training the digits CNN

The golden file is safetensors (written here by hand: Debian has no
safetensors package) so the C++ test reads it with tl::load_safetensors.
"""
import argparse
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "train")


def save_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        blobs.append(a.tobytes())
        offset += a.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def optimizer_goldens():
    # Values on a grid, not from an RNG, so anyone can rebuild them by hand.
    p0 = (torch.arange(12, dtype=torch.float32).reshape(3, 4) - 5.5) / 4
    grads = [torch.sin(torch.arange(12, dtype=torch.float32) * (k + 1) * 0.7).reshape(3, 4) for k in range(3)]
    out = {"p0": p0.numpy()}
    for k, g in enumerate(grads):
        out[f"g{k + 1}"] = g.numpy()
    configs = {
        "sgd": lambda p: torch.optim.SGD([p], lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
        "sgd_plain": lambda p: torch.optim.SGD([p], lr=0.1),
        "sgd_momentum": lambda p: torch.optim.SGD([p], lr=0.1, momentum=0.8, dampening=0.1),
        "adam": lambda p: torch.optim.Adam([p], lr=0.01, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1),
        "adamw": lambda p: torch.optim.AdamW([p], lr=0.01, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1),
    }
    for name, make in configs.items():
        p = p0.clone().requires_grad_(True)
        opt = make(p)
        for k, g in enumerate(grads):
            opt.zero_grad()
            (p * g).sum().backward()
            opt.step()
            out[f"{name}.{k + 1}"] = p.detach().numpy().copy()
    # learning-rate schedules over 10 epochs from 0.1
    for name, make in {
        "lr.step": lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5),
        "lr.cosine": lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=10, eta_min=0.001),
    }.items():
        o = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
        s = make(o)
        lrs = []
        for _ in range(10):
            lrs.append(o.param_groups[0]["lr"])
            o.step()
            s.step()
        out[name] = np.array(lrs, dtype=np.float32)
    return out


def digits(path="/usr/share/doc/opencv-doc/examples/data/digits.png"):
    from PIL import Image
    img = np.asarray(Image.open(path).convert("L"), dtype=np.float32) / 255.0
    x = img.reshape(50, 20, 100, 20).transpose(0, 2, 1, 3).reshape(5000, 1, 20, 20)
    y = np.repeat(np.arange(10), 500)
    return x, y


def cnn(classes=10):
    # tl::train::make_cnn, key for key
    nn = torch.nn

    def block(i, o):
        return [nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU()]
    return nn.Sequential(*block(1, 32), *block(32, 32), nn.MaxPool2d(2), *block(32, 64), *block(64, 64),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * 5 * 5, classes))


def mlp(classes=10):
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(400, 128), torch.nn.ReLU(),
                               torch.nn.Linear(128, classes))


def bench(args):
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    x, y = digits(args.digits) if args.digits else digits()
    # stratified 80/20 like tl::data::split (its own permutation)
    rng = np.random.default_rng(args.seed)
    test_idx = np.concatenate([rng.permutation(np.arange(c * 500, (c + 1) * 500))[:100] for c in range(10)])
    train_mask = np.ones(5000, bool)
    train_mask[test_idx] = False
    xtr, ytr = torch.from_numpy(x[train_mask]), torch.from_numpy(y[train_mask]).long()
    xte, yte = torch.from_numpy(x[test_idx]), torch.from_numpy(y[test_idx]).long()
    dev = torch.device(args.device)
    if dev.type == "cuda":  # plain fp32, as tinylens computes
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    xtr, ytr, xte, yte = xtr.to(dev), ytr.to(dev), xte.to(dev), yte.to(dev)
    model = (cnn() if args.model == "cnn" else mlp()).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.model}, adam lr {args.lr}, "
          f"batch {args.batch}, device {dev}")
    print("%5s %10s %10s %10s %9s" % ("epoch", "train loss", "train acc", "test acc", "train s"))
    times = []
    for epoch in range(args.epochs):
        model.train()
        perm = torch.randperm(len(ytr), device=dev)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss_sum, right = 0.0, 0
        for i in range(0, len(ytr), args.batch):
            idx = perm[i:i + args.batch]
            opt.zero_grad()
            logits = model(xtr[idx])
            loss = torch.nn.functional.cross_entropy(logits, ytr[idx])
            loss.backward()
            opt.step()
            loss_sum += loss.item() * len(idx)
            right += (logits.argmax(1) == ytr[idx]).sum().item()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        times.append(dt)
        model.eval()
        with torch.no_grad():
            acc = (model(xte).argmax(1) == yte).float().mean().item()
        print("%5d %10.4f %9.2f%% %9.2f%% %9.2f" % (epoch + 1, loss_sum / len(ytr), 100 * right / len(ytr),
                                                  100 * acc, dt))
    print("torch seconds per epoch: %.3f" % (sum(times) / len(times)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--model", default="cnn")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu", help="cpu or cuda (the GPU benchmark, scripts/bench-gpu)")
    ap.add_argument("--digits", default="", help="OpenCV's digits.png (default: opencv-doc's copy)")
    args = ap.parse_args()
    if args.bench:
        bench(args)
        return
    os.makedirs(OUT, exist_ok=True)
    save_safetensors(os.path.join(OUT, "optim.safetensors"), optimizer_goldens())
    print("wrote", os.path.join(OUT, "optim.safetensors"))


if __name__ == "__main__":
    main()
