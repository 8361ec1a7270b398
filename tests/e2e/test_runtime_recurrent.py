"""ONNX LSTM and GRU through the runtime (issue 21's sequence models).

PyTorch models (nn.LSTM, nn.GRU: random weights, fixed seed) exported with torch.onnx are run by
modelfleet-run and compared with PyTorch and with ONNX Runtime on the same file; hand-built ONNX
graphs cover what PyTorch never exports (reverse direction, peepholes, per-entry sequence_lens,
GRU's linear_before_reset = 0, omitted outputs) against ONNX Runtime, and a model the runtime
refuses must fail with a clear message. Max relative error bar: 1e-4 (FP32)."""
import inspect
import subprocess

import numpy as np
import onnx
import onnxruntime
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from conftest import build_dir
import runtime_fixtures as rf

TOLERANCE = 1e-4


def export(model, args, path, input_names, output_names, opset=14, dynamic_axes=None):
    legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.onnx.export(model, args, str(path), opset_version=opset, input_names=input_names,
                      output_names=output_names, dynamic_axes=dynamic_axes or {}, **legacy)
    return path


def run_ort(path, inputs):
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, inputs)))


def run_runtime(path, inputs, out_dir):
    _, outputs = rf.run_cli(rf.cli(build_dir()), path, inputs, out_dir,
                            extra=["--warmup", "0", "--backend", rf.backend_under_test()])
    return outputs


def compare(name, got, references):
    """Each reference is (label, [arrays]); every output must match within TOLERANCE."""
    for label, want in references:
        assert len(got) == len(want), f"{name}: {len(got)} outputs, {label} has {len(want)}"
        errors = []
        for k, (g, w) in enumerate(zip(got, want)):
            assert g.shape == w.shape, f"{name} output {k}: shape {g.shape}, {label} {w.shape}"
            errors.append(rf.max_relative_error(g, w))
        print(f"{name}: max relative error vs {label} {max(errors):.2e}")
        assert max(errors) <= TOLERANCE, f"{name}: max relative error vs {label} {max(errors):.3g}"


class SequenceClassifier(torch.nn.Module):
    """Embedding(int64 ids) -> 2-layer LSTM (batch first) -> Linear on every step."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(100, 16)
        self.lstm = torch.nn.LSTM(16, 32, num_layers=2, batch_first=True)
        self.head = torch.nn.Linear(32, 10)

    def forward(self, ids):
        out, _ = self.lstm(self.embed(ids))
        return self.head(out)


class WithStates(torch.nn.Module):
    """A bidirectional LSTM whose initial h and c are model inputs."""

    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(8, 12, bidirectional=True)

    def forward(self, x, h0, c0):
        out, (h, c) = self.lstm(x, (h0, c0))
        return out, h, c


# name: (module factory, example inputs (seq 5, batch 3), output names, inputs of the compared run)
TORCH_CASES = {
    "lstm_1_layer": (lambda: torch.nn.LSTM(8, 16), lambda: (torch.randn(5, 3, 8),), ["y", "h", "c"]),
    "lstm_2_layers_bidirectional": (lambda: torch.nn.LSTM(8, 16, num_layers=2, bidirectional=True),
                                    lambda: (torch.randn(5, 3, 8),), ["y", "h", "c"]),
    "gru_bidirectional": (lambda: torch.nn.GRU(8, 16, bidirectional=True), lambda: (torch.randn(5, 3, 8),),
                          ["y", "h"]),
    "lstm_batch_first": (lambda: torch.nn.LSTM(8, 16, batch_first=True), lambda: (torch.randn(3, 5, 8),),
                         ["y", "h", "c"]),
    "gru_2_layers_batch_first": (lambda: torch.nn.GRU(8, 16, num_layers=2, batch_first=True),
                                 lambda: (torch.randn(3, 5, 8),), ["y", "h"]),
    "lstm_initial_states": (WithStates, lambda: (torch.randn(5, 3, 8), torch.randn(2, 3, 12), torch.randn(2, 3, 12)),
                            ["y", "h", "c"]),
    "embedding_lstm_linear": (SequenceClassifier, lambda: (torch.randint(0, 100, (3, 7)),), ["logits"]),
}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", list(TORCH_CASES))
def test_pytorch_models_match_pytorch_and_onnxruntime(tmp_path, name):
    factory, make_inputs, output_names = TORCH_CASES[name]
    torch.manual_seed(0)
    model = factory().eval()
    inputs = make_inputs()
    input_names = [f"input_{i}" for i in range(len(inputs))]
    path = export(model, inputs, tmp_path / f"{name}.onnx", input_names, output_names)
    with torch.no_grad():
        want = model(*inputs)
    flat = []
    for value in want if isinstance(want, tuple) else (want,):
        flat.extend(value if isinstance(value, tuple) else (value,))
    arrays = [t.numpy() for t in inputs]
    got = run_runtime(path, arrays, tmp_path / "out")
    compare(name, got, [("pytorch", [t.numpy() for t in flat]), ("onnxruntime", run_ort(path, arrays))])


@pytest.mark.timeout(300)
def test_dynamic_sequence_and_batch(tmp_path):
    """Exported at seq 5, batch 3; run at seq 9, batch 2."""
    torch.manual_seed(0)
    model = torch.nn.GRU(8, 16, bidirectional=True).eval()
    axes = {"x": {0: "seq", 1: "batch"}, "y": {0: "seq", 2: "batch"}, "h": {1: "batch"}}
    path = export(model, (torch.randn(5, 3, 8),), tmp_path / "gru.onnx", ["x"], ["y", "h"], dynamic_axes=axes)
    x = torch.randn(9, 2, 8)
    with torch.no_grad():
        y, h = model(x)
    got = run_runtime(path, [x.numpy()], tmp_path / "out")
    compare("gru_dynamic", got, [("pytorch", [y.numpy(), h.numpy()]), ("onnxruntime", run_ort(path, [x.numpy()]))])


def recurrent_model(path, op, hidden, directions, input_size, *, bias=True, peepholes=False, attrs=None,
                    outputs=None, sequence_lens=False, initial_states=False, layout=0, seed=0):
    """One LSTM/GRU node with random weights (initializers); inputs X [and sequence_lens]
    [and initial_h (and initial_c)], as graph inputs in that order."""
    rng = np.random.default_rng(seed)
    outputs = outputs or (("Y", "Y_h", "Y_c") if op == "LSTM" else ("Y", "Y_h"))
    gates = 4 if op == "LSTM" else 3
    init = [numpy_helper.from_array(rng.uniform(-0.5, 0.5, (directions, gates * hidden, input_size))
                                    .astype(np.float32), "W"),
            numpy_helper.from_array(rng.uniform(-0.5, 0.5, (directions, gates * hidden, hidden))
                                    .astype(np.float32), "R")]
    names = ["X", "W", "R"]
    if bias:
        init.append(numpy_helper.from_array(rng.uniform(-0.5, 0.5, (directions, 2 * gates * hidden))
                                            .astype(np.float32), "B"))
    names.append("B" if bias else "")
    graph_inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None] * 3)]
    names.append("sequence_lens" if sequence_lens else "")
    if sequence_lens:
        graph_inputs.append(helper.make_tensor_value_info("sequence_lens", TensorProto.INT32, [None]))
    states = ["initial_h"] + (["initial_c"] if op == "LSTM" else [])
    for state in states:
        names.append(state if initial_states else "")
        if initial_states:
            graph_inputs.append(helper.make_tensor_value_info(state, TensorProto.FLOAT, [None] * 3))
    if peepholes:
        init.append(numpy_helper.from_array(rng.uniform(-0.5, 0.5, (directions, 3 * hidden)).astype(np.float32), "P"))
        names.append("P")
    while names and names[-1] == "":
        names.pop()
    direction = {1: "forward", 2: "bidirectional"}[directions] if not (attrs or {}).get("direction") else None
    node_attrs = {"hidden_size": hidden, **({"direction": direction} if direction else {}), **(attrs or {})}
    if layout:
        node_attrs["layout"] = layout
    node = helper.make_node(op, names, list(outputs), **node_attrs)
    graph = helper.make_graph([node], op.lower(), graph_inputs,
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, [None] * (4 if o == "Y" else 3))
                               for o in outputs if o],
                              init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


# name: (op, hidden, directions, builder options, X shape, sequence_lens or None)
HAND_BUILT = {
    "lstm_reverse_peepholes_states": ("LSTM", 6, 1, dict(attrs={"direction": "reverse"}, peepholes=True,
                                                          initial_states=True), (7, 4, 5), None),
    "gru_reverse_reset_after": ("GRU", 6, 1, dict(attrs={"direction": "reverse", "linear_before_reset": 0}),
                                (7, 4, 5), None),
    "gru_reset_before_states": ("GRU", 6, 2, dict(attrs={"linear_before_reset": 1}, initial_states=True),
                                (7, 4, 5), None),
    "lstm_bidirectional_sequence_lens": ("LSTM", 6, 2, dict(sequence_lens=True, initial_states=True), (7, 4, 5),
                                         [7, 3, 1, 5]),
    "gru_bidirectional_sequence_lens": ("GRU", 6, 2, dict(sequence_lens=True, attrs={"linear_before_reset": 1}),
                                        (7, 4, 5), [2, 7, 0, 1]),
    "gru_reverse_sequence_lens_reset_after": ("GRU", 6, 1, dict(sequence_lens=True, attrs={"direction": "reverse"}),
                                              (7, 4, 5), [6, 1, 7, 3]),
    "lstm_batch_first_sequence_lens": ("LSTM", 6, 2, dict(sequence_lens=True, initial_states=True, layout=1),
                                       (4, 7, 5), [7, 3, 1, 5]),
    "lstm_only_y_h_no_bias": ("LSTM", 6, 1, dict(bias=False, outputs=("", "Y_h")), (7, 4, 5), None),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", list(HAND_BUILT))
def test_hand_built_models_match_onnxruntime(tmp_path, name):
    op, hidden, directions, options, x_shape, lengths = HAND_BUILT[name]
    path = recurrent_model(tmp_path / f"{name}.onnx", op, hidden, directions, x_shape[-1], **options)
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal(x_shape).astype(np.float32)]
    if lengths is not None:
        inputs.append(np.array(lengths, dtype=np.int32))
    if options.get("initial_states"):
        batch = x_shape[0] if options.get("layout") else x_shape[1]
        state_shape = (batch, directions, hidden) if options.get("layout") else (directions, batch, hidden)
        for _ in range(2 if op == "LSTM" else 1):
            inputs.append(rng.standard_normal(state_shape).astype(np.float32))
    got = run_runtime(path, inputs, tmp_path / "out")
    if not options.get("layout"):
        compare(name, got, [("onnxruntime", run_ort(path, inputs))])
        return
    # ONNX Runtime refuses layout 1: the reference is the sequence-first twin on transposed data.
    twin = recurrent_model(tmp_path / f"{name}_layout0.onnx", op, hidden, directions, x_shape[-1],
                           **{**options, "layout": 0})
    seq_first = [a if a.ndim == 1 else a.transpose(1, 0, 2) for a in inputs]
    want = [a.transpose(2, 0, 1, 3) if a.ndim == 4 else a.transpose(1, 0, 2) for a in run_ort(twin, seq_first)]
    compare(name, got, [("onnxruntime (layout 0 twin)", want)])


# name: (builder options, what the error must say)
REFUSED = {
    "relu_activation": (dict(attrs={"activations": ["Relu", "Tanh", "Tanh"]}), "activation 'Relu' is not supported"),
    "clip": (dict(attrs={"clip": 3.0}), "clip attribute"),
    "input_forget": (dict(attrs={"input_forget": 1}), "input_forget"),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(REFUSED))
def test_refused_models_fail_clearly(tmp_path, name):
    options, message = REFUSED[name]
    path = recurrent_model(tmp_path / f"{name}.onnx", "LSTM", 4, 1, 3, **options)
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((2, 1, 3), np.float32))
    proc = subprocess.run([str(rf.cli(build_dir())), str(path), "--input", str(x), "--output_dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert message in proc.stderr and "LSTM" in proc.stderr, proc.stderr


@pytest.mark.timeout(60)
def test_weights_of_the_wrong_hidden_size_fail_at_load(tmp_path):
    path = recurrent_model(tmp_path / "bad.onnx", "GRU", 4, 1, 3)
    model = onnx.load(str(path))
    hidden_size = next(a for a in model.graph.node[0].attribute if a.name == "hidden_size")
    hidden_size.i = 5  # weights for 4
    onnx.save(model, str(path))
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((2, 1, 3), np.float32))
    proc = subprocess.run([str(rf.cli(build_dir())), str(path), "--input", str(x), "--output_dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "W has shape [1, 12, 3]; [1, 15, 3] expected" in proc.stderr, proc.stderr
