#!/usr/bin/python3
"""Trains a small CNN on scikit-learn's 8x8 digits (as 1x8x8 images) and exports it as one
version of a TF Serving-layout model (<out>/<version>/model.onnx).

Input "images" [N, 1, 8, 8] float32 (pixel values 0..16), output "scores" [N, 10] float32
(logits), dynamic batch dimension. Used by the batching and hot-swap tests, which generate it
at run time; --channels makes the model (and its memory) larger for swap-memory tests.

    /usr/bin/python3 examples/models/make_cnn.py --out /tmp/cnn --version 1 [--channels 16]
"""
import argparse
import pathlib

import torch
from sklearn.datasets import load_digits


def build_cnn(channels: int) -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, channels, kernel_size=3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(channels, 2 * channels, kernel_size=3, padding=1), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Flatten(),
        torch.nn.Linear(2 * channels * 4 * 4, 10))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(pathlib.Path(__file__).parent / "cnn"),
                        help="model base path")
    parser.add_argument("--version", type=int, default=1, help="version directory to write")
    parser.add_argument("--channels", type=int, default=8, help="first conv layer's channels")
    parser.add_argument("--epochs", type=int, default=15, help="training epochs (seconds-scale)")
    args = parser.parse_args()
    if args.version < 0 or args.channels < 1 or args.epochs < 0:
        parser.error("--version must be >= 0, --channels >= 1, --epochs >= 0")

    digits = load_digits()
    x = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1)
    y = torch.tensor(digits.target, dtype=torch.long)
    torch.manual_seed(args.version)
    model = build_cnn(args.channels)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    for _ in range(args.epochs):
        for start in range(0, len(x), 128):
            optimizer.zero_grad()
            loss_fn(model(x[start:start + 128]), y[start:start + 128]).backward()
            optimizer.step()
    model.eval()
    with torch.no_grad():
        accuracy = (model(x).argmax(dim=1) == y).float().mean().item()

    path = pathlib.Path(args.out) / str(args.version) / "model.onnx"
    path.parent.mkdir(parents=True, exist_ok=True)
    # Export to a temporary name and rename, so a server polling the directory never sees a
    # half-written model.onnx.
    partial = path.with_suffix(".onnx.partial")
    torch.onnx.export(
        model, torch.zeros(1, 1, 8, 8), str(partial), input_names=["images"],
        output_names=["scores"], dynamic_axes={"images": {0: "batch"}, "scores": {0: "batch"}},
        opset_version=13)
    partial.rename(path)
    print(f"version {args.version}: channels={args.channels} train accuracy={accuracy:.3f} -> {path}")


if __name__ == "__main__":
    main()
