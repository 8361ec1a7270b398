"""modelfleet-run as a user meets it: clear errors for bad inputs, and a supported-operator table
that docs/ops.md reproduces exactly (so the doc cannot drift from the kernel registry)."""
import pathlib
import subprocess

import numpy as np

from conftest import ROOT, build_dir
import runtime_fixtures as rf


def cli():
    return build_dir() / "tools" / "run" / "modelfleet-run"


def test_ops_doc_is_generated_from_the_registry():
    doc = (ROOT / "docs" / "ops.md").read_text()
    table = subprocess.run([str(cli()), "--list-ops"], capture_output=True, text=True, timeout=60, check=True).stdout
    assert table.strip() in doc, "docs/ops.md is stale: regenerate it with modelfleet-run --list-ops"
    # The CUDA registry exists whenever the build has CUDA (no GPU needed to list it).
    cuda = subprocess.run([str(cli()), "--list-ops", "--backend", "cuda"], capture_output=True, text=True, timeout=60)
    if cuda.returncode == 0:
        assert cuda.stdout.strip() in doc, "docs/ops.md is stale: regenerate it with --list-ops --backend cuda"


def test_wrong_input_shape_is_a_clear_error(tmp_path):
    model = rf.export("mlp", tmp_path)
    bad = tmp_path / "bad.npy"
    np.save(bad, np.zeros((1, 7), np.float32))
    proc = subprocess.run([str(cli()), str(model), "--input", str(bad)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "input 'input' must have shape [-1, 256]" in proc.stderr


def test_missing_model_and_garbage_model(tmp_path):
    proc = subprocess.run([str(cli()), str(tmp_path / "none.onnx")], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "does not exist" in proc.stderr
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x08\x07\x12\xff\xff\xff garbage")
    proc = subprocess.run([str(cli()), str(garbage)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "not a valid ONNX model" in proc.stderr


def test_named_inputs_and_timings(tmp_path):
    model = rf.export("mlp", tmp_path)
    x, want = rf.reference("mlp", 4)
    np.save(tmp_path / "x.npy", x)
    proc = subprocess.run([str(cli()), str(model), "--input", f"input={tmp_path / 'x.npy'}", "--iterations", "5",
                           "--output_dir", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "output: FP32 [4, 10]" in proc.stdout
    assert "5 runs: mean" in proc.stdout
    assert rf.max_relative_error(np.load(tmp_path / "output_0.npy"), want) <= 1e-4


def test_unknown_precision_is_a_clear_error(tmp_path):
    model = rf.export("mlp", tmp_path)
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((1, 256), np.float32))
    proc = subprocess.run([str(cli()), str(model), "--input", str(x), "--precision", "fp8"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2
    assert "unknown precision 'fp8'" in proc.stderr


def test_profile_prints_as_many_slowest_nodes_as_asked_and_refuses_a_negative_count(tmp_path):
    model = rf.export("mlp", tmp_path)
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((2, 256), np.float32))
    base = [str(cli()), str(model), "--input", str(x), "--iterations", "2", "--profile"]
    proc = subprocess.run(base + ["--profile_nodes", "2"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    listed = proc.stdout.split("slowest nodes:\n")[1].strip().splitlines()
    assert len(listed) == 2 and all(line.endswith(" ms") for line in listed), proc.stdout
    proc = subprocess.run(base + ["--profile_nodes", "-1"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "--profile_nodes >= 0" in proc.stderr
