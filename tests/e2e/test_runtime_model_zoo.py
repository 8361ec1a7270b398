"""More architectures through the runtime, against two references: PyTorch (the model as written)
and ONNX Runtime (the same ONNX file, all graph optimizations on). DenseNet (concatenations),
EfficientNet (SiLU, squeeze-excite), GoogLeNet (Inception branches), RegNet (grouped convs, SE),
ShuffleNet (channel shuffle), SqueezeNet (fire modules), MobileNetV3 (HardSigmoid, HardSwish), a
ViT (patch embedding, attention, LayerNormalization), a Keras-style NHWC classifier (a Transpose in
front) and the BERT-style encoder on int64 token ids. Random weights, fixed seed, nothing
downloaded; batch 2; max relative error <= 1e-4 against each reference."""
import numpy as np
import onnxruntime as ort
import pytest

from conftest import build_dir
import runtime_fixtures as rf

CASES = ["densenet121", "efficientnet_b0", "googlenet", "regnet_y_400mf", "shufflenet_v2", "squeezenet1_1",
         "mobilenet_v3_small", "vit", "keras_nhwc", "bert_encoder"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    return tmp_path_factory.mktemp("zoo")


def onnx_runtime(model_path, x):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", CASES)
def test_matches_pytorch_and_onnx_runtime(exported, tmp_path, name):
    model = rf.export(name, exported)
    x, want = rf.reference(name, 2)
    backend = rf.backend_under_test()
    runs = ["--warmup", "2"] if backend == "cuda" else ["--warmup", "0"]
    stdout, outputs = rf.run_cli(rf.cli(build_dir()), model, [x], tmp_path, extra=[*runs, "--backend", backend])
    assert len(outputs) == 1, stdout
    got = outputs[0]
    assert got.shape == want.shape
    peer = onnx_runtime(model, x)
    assert rf.max_relative_error(peer, want) <= 1e-4, f"{name}: ONNX Runtime itself differs from PyTorch"
    vs_torch = rf.max_relative_error(got, want)
    vs_ort = rf.max_relative_error(got, peer)
    assert vs_torch <= 1e-4 and vs_ort <= 1e-4, (
        f"{name}: max relative error {vs_torch:.3g} vs PyTorch, {vs_ort:.3g} vs ONNX Runtime")
    assert np.isfinite(got).all()
