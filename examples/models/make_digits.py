#!/usr/bin/python3
"""Trains two small MLPs on scikit-learn's 8x8 digits and exports them as versions 1 and 2 of
the example model `digits` (TF Serving layout: <base>/<version>/model.onnx).

The signature is one input "images" [N, 64] float32 (pixel values 0..16, as load_digits gives
them) and one output "scores" [N, 10] float32 (logits). The batch dimension is dynamic, so the
server can batch requests. Version 2 is wider and trained longer, so the two give different
numbers and a test can tell which version answered.

    /usr/bin/python3 examples/models/make_digits.py [--out examples/models/digits]
"""
import argparse
import pathlib

import torch
from sklearn.datasets import load_digits

VERSIONS = {1: {"hidden": 32, "epochs": 60}, 2: {"hidden": 64, "epochs": 120}}


def build_mlp(hidden: int) -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(64, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 10))


def train(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, epochs: int) -> float:
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    loss_fn = torch.nn.CrossEntropyLoss()
    for _ in range(epochs):
        for start in range(0, len(x), 256):
            optimizer.zero_grad()
            loss = loss_fn(model(x[start:start + 256]), y[start:start + 256])
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        return (model(x).argmax(dim=1) == y).float().mean().item()


def export(model: torch.nn.Module, path: pathlib.Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    model.eval()
    torch.onnx.export(
        model, torch.zeros(1, 64), str(path), input_names=["images"], output_names=["scores"],
        dynamic_axes={"images": {0: "batch"}, "scores": {0: "batch"}}, opset_version=13)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(pathlib.Path(__file__).parent / "digits"),
                        help="model base path; versions go in <out>/1 and <out>/2")
    args = parser.parse_args()
    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32)
    y = torch.tensor(digits.target, dtype=torch.long)
    for version, spec in VERSIONS.items():
        torch.manual_seed(version)
        model = build_mlp(spec["hidden"])
        accuracy = train(model, x, y, spec["epochs"])
        path = pathlib.Path(args.out) / str(version) / "model.onnx"
        export(model, path)
        print(f"version {version}: hidden={spec['hidden']} train accuracy={accuracy:.3f} -> {path}")


if __name__ == "__main__":
    main()
