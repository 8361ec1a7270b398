"""Real models through the runtime vs PyTorch: ResNet-18, ResNet-50, MobileNetV2 and a 4-layer
BERT-style encoder, exported with torch.onnx (random weights, fixed seed), run by modelfleet-run at
batch 1 and 8; the outputs must match PyTorch's within a max relative error of 1e-4 (FP32).
MODELFLEET_TEST_BACKEND=cuda runs them on the GPU (scripts/device-run.sh models)."""
import pytest

from conftest import build_dir
import runtime_fixtures as rf

CASES = ["resnet18", "resnet50", "mobilenet_v2", "bert_encoder"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    directory = tmp_path_factory.mktemp("models")
    return {name: rf.export(name, directory) for name in CASES}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("batch", [1, 8])
def test_matches_pytorch(exported, tmp_path, name, batch):
    binary = rf.cli(build_dir())
    x, want = rf.reference(name, batch)
    # Three runs on the GPU: the first, the one captured into a CUDA graph, and a replay.
    runs = ["--warmup", "2"] if rf.backend_under_test() == "cuda" else ["--warmup", "0"]
    stdout, outputs = rf.run_cli(binary, exported[name], [x], tmp_path, extra=[*runs, "--backend", rf.backend_under_test()])
    assert len(outputs) == 1, stdout
    assert outputs[0].shape == want.shape
    error = rf.max_relative_error(outputs[0], want)
    assert error <= 1e-4, f"{name} batch {batch}: max relative error {error:.3g}"


def test_unoptimized_graph_gives_the_same_answer(exported, tmp_path):
    """Folding BN into Conv and fusing activations must not change the result beyond rounding."""
    binary = rf.cli(build_dir())
    x, want = rf.reference("resnet18", 2)
    backend = ["--backend", rf.backend_under_test()]
    _, fast = rf.run_cli(binary, exported["resnet18"], [x], tmp_path / "fast", extra=["--warmup", "0", *backend])
    _, slow = rf.run_cli(binary, exported["resnet18"], [x], tmp_path / "slow", extra=["--warmup", "0", "--no_optimize", *backend])
    assert rf.max_relative_error(slow[0], want) <= 1e-4
    assert rf.max_relative_error(fast[0], slow[0]) <= 1e-4
