"""Helpers for the runtime end-to-end tests: build small reference models in PyTorch (random
weights, fixed seed), export them to ONNX, and run them through modelfleet-run.

Everything is generated locally from torchvision's architectures; nothing is downloaded.
"""
import inspect
import os
import pathlib
import subprocess

import numpy as np
import torch
import torchvision


class Encoder(torch.nn.Module):
    """A small BERT-style encoder: embeddings, 4 post-norm transformer layers with GELU, pooler."""

    def __init__(self, vocab=1000, d_model=128, heads=4, layers=4, ff=512, max_len=64):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d_model)
        self.pos = torch.nn.Embedding(max_len, d_model)
        self.norm = torch.nn.LayerNorm(d_model)
        layer = torch.nn.TransformerEncoderLayer(d_model, heads, ff, dropout=0.0, activation="gelu",
                                                 batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.pool = torch.nn.Linear(d_model, d_model)

    def forward(self, ids):
        positions = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
        h = self.norm(self.tok(ids) + self.pos(positions))
        h = self.encoder(h)
        return torch.tanh(self.pool(h[:, 0]))


class KerasStyleNhwc(torch.nn.Module):
    """A classifier that takes NHWC images, as a Keras export does: a Transpose in front of the convs."""

    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
            torch.nn.Conv2d(16, 32, 3, stride=2, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, 10))

    def forward(self, x):
        return self.features(x.permute(0, 3, 1, 2))  # logits: a softmax would flatten the differences


def small_vit():
    return torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4,
                                                hidden_dim=64, mlp_dim=128, num_classes=10)


def mlp():
    return torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                               torch.nn.ReLU(), torch.nn.Linear(512, 10))


MODELS = {
    # name: (constructor, example input factory (batch) -> tensor, opset)
    "resnet18": (lambda: torchvision.models.resnet18(), lambda b: torch.randn(b, 3, 224, 224), 13),
    "resnet50": (lambda: torchvision.models.resnet50(), lambda b: torch.randn(b, 3, 224, 224), 13),
    "mobilenet_v2": (lambda: torchvision.models.mobilenet_v2(), lambda b: torch.randn(b, 3, 224, 224), 13),
    "bert_encoder": (Encoder, lambda b: torch.randint(0, 1000, (b, 32)), 17),
    "mlp": (mlp, lambda b: torch.randn(b, 256), 13),
    # The architecture zoo (test_runtime_model_zoo.py): small inputs keep the suite quick.
    "densenet121": (lambda: torchvision.models.densenet121(), lambda b: torch.randn(b, 3, 64, 64), 13),
    "efficientnet_b0": (lambda: torchvision.models.efficientnet_b0(), lambda b: torch.randn(b, 3, 64, 64), 13),
    "googlenet": (lambda: torchvision.models.googlenet(aux_logits=False, init_weights=True),
                  lambda b: torch.randn(b, 3, 64, 64), 13),
    "regnet_y_400mf": (lambda: torchvision.models.regnet_y_400mf(), lambda b: torch.randn(b, 3, 64, 64), 13),
    "shufflenet_v2": (lambda: torchvision.models.shufflenet_v2_x0_5(), lambda b: torch.randn(b, 3, 64, 64), 13),
    "squeezenet1_1": (lambda: torchvision.models.squeezenet1_1(), lambda b: torch.randn(b, 3, 64, 64), 13),
    # Opset 14: HardSwish is one operator there (HardSigmoid too).
    "mobilenet_v3_small": (lambda: torchvision.models.mobilenet_v3_small(), lambda b: torch.randn(b, 3, 64, 64),
                           14),
    "vit": (small_vit, lambda b: torch.randn(b, 3, 32, 32), 17),
    "keras_nhwc": (KerasStyleNhwc, lambda b: torch.randn(b, 32, 32, 3), 13),
}


def build_model(name):
    torch.manual_seed(0)
    ctor, _, _ = MODELS[name]
    model = ctor().eval()
    # Non-trivial batch-norm statistics, so folding BN into Conv is really exercised.
    with torch.no_grad():
        for m in model.modules():
            # Zero-initialized layers (ViT's classification head) would make the output a constant.
            if isinstance(m, torch.nn.Linear) and not m.weight.any():
                m.weight.normal_(0, 0.05)
                m.bias.uniform_(-0.1, 0.1)
            if isinstance(m, torch.nn.BatchNorm2d) and m.track_running_stats:
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.1, 0.1)
    return model


def export(name, directory: pathlib.Path) -> pathlib.Path:
    """Exports `name` with a symbolic batch dim; returns the model.onnx path."""
    model = build_model(name)
    _, make_input, opset = MODELS[name]
    path = directory / f"{name}.onnx"
    # Newer PyTorch defaults to the dynamo exporter; the TorchScript one is what these tests pin.
    legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.onnx.export(model, (make_input(1),), str(path), opset_version=opset, input_names=["input"],
                      output_names=["output"], dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
                      do_constant_folding=True, **legacy)
    return path


def backend_under_test():
    """The backend the runtime e2e tests run on: MODELFLEET_TEST_BACKEND (cpu by default)."""
    return os.environ.get("MODELFLEET_TEST_BACKEND", "cpu")


def cli(build_dir: pathlib.Path) -> pathlib.Path:
    """modelfleet-run: from MODELFLEET_BIN when set (a GPU machine's unpacked bundle), else the build."""
    if os.environ.get("MODELFLEET_BIN"):
        return pathlib.Path(os.environ["MODELFLEET_BIN"]) / "modelfleet-run"
    return build_dir / "tools" / "run" / "modelfleet-run"


def reference(name, batch, seed=1):
    """(input array, PyTorch output array) for a batch."""
    model = build_model(name)
    _, make_input, _ = MODELS[name]
    torch.manual_seed(seed)
    x = make_input(batch)
    with torch.no_grad():
        y = model(x)
    return x.numpy(), y.numpy()


def run_cli(binary: pathlib.Path, model: pathlib.Path, inputs, out_dir: pathlib.Path, extra=(), timeout=240):
    """Runs modelfleet-run on numpy inputs; returns (stdout, [output arrays])."""
    out_dir.mkdir(parents=True, exist_ok=True)
    args = [str(binary), str(model), "--output_dir", str(out_dir), *extra]
    for i, arr in enumerate(inputs):
        p = out_dir / f"input_{i}.npy"
        np.save(p, arr)
        args += ["--input", str(p)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    outputs = []
    i = 0
    while (out_dir / f"output_{i}.npy").exists():
        outputs.append(np.load(out_dir / f"output_{i}.npy"))
        i += 1
    return proc.stdout, outputs


def max_relative_error(got, want):
    """max |got - want| / max(|want|), the scale-aware error the acceptance bar uses."""
    scale = max(float(np.max(np.abs(want))), 1e-12)
    return float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) / scale
