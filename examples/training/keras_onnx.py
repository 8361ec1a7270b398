"""Writes a Keras Sequential MLP (Rescaling, Dense, Dropout, ReLU/Softmax layers) as an ONNX model
with the onnx package alone.

Keras's own ONNX export (`model.export(path, format="onnx")`) needs tf2onnx, which this
environment does not have; the trainers' models are small MLPs, whose graph is a few MatMul/Add
nodes, so they are written directly. Any other layer is refused with its name, so a model this
module cannot express is never exported wrongly.
"""
from typing import List

import numpy as np

ACTIVATIONS = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "softmax": "Softmax"}


def available() -> bool:
    try:
        import onnx  # noqa: F401
    except ImportError:
        return False
    return True


def _activation_name(fn) -> str:
    name = getattr(fn, "__name__", str(fn))
    return "linear" if name in ("linear", "identity") else name


def mlp_to_onnx(model, input_name: str = "images", output_name: str = "scores", opset: int = 13):
    """Returns an onnx.ModelProto computing `model` on a [batch, features] float32 input."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    features = int(model.inputs[0].shape[-1])
    nodes: List = []
    initializers: List = []
    current = input_name

    def add(op: str, inputs: List[str], **attrs) -> str:
        nonlocal current
        out = f"{op.lower()}_{len(nodes)}"
        nodes.append(helper.make_node(op, inputs, [out], **attrs))
        current = out
        return out

    def constant(name: str, value) -> str:
        initializers.append(numpy_helper.from_array(np.asarray(value, dtype=np.float32), name))
        return name

    for i, layer in enumerate(model.layers):
        kind = type(layer).__name__
        if kind == "Rescaling":
            add("Mul", [current, constant(f"scale_{i}", layer.scale)])
            if np.any(np.asarray(layer.offset) != 0):
                add("Add", [current, constant(f"offset_{i}", layer.offset)])
        elif kind == "Dense":
            weights = layer.get_weights()
            add("MatMul", [current, constant(f"kernel_{i}", weights[0])])
            if layer.use_bias:
                add("Add", [current, constant(f"bias_{i}", weights[1])])
            activation = _activation_name(layer.activation)
            if activation != "linear":
                if activation not in ACTIVATIONS:
                    raise ValueError(f"layer {layer.name}: activation {activation!r} has no ONNX mapping here")
                add(ACTIVATIONS[activation], [current], **({"axis": -1} if activation == "softmax" else {}))
        elif kind == "ReLU" and not layer.max_value and not layer.negative_slope and not layer.threshold:
            add("Relu", [current])
        elif kind in ("Dropout", "InputLayer"):
            continue  # identity at inference
        else:
            raise ValueError(f"layer {layer.name} ({kind}) cannot be written as ONNX by keras_onnx; "
                             f"supported: Rescaling, Dense, Dropout, ReLU")
    nodes[-1].output[0] = output_name
    classes = int(model.outputs[0].shape[-1])
    graph = helper.make_graph(
        nodes, "keras_mlp",
        [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, ["batch", features])],
        [helper.make_tensor_value_info(output_name, TensorProto.FLOAT, ["batch", classes])],
        initializers)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="modelfleet-keras-onnx")
    proto.ir_version = 8  # readable by every ONNX Runtime from 1.10 on
    onnx.checker.check_model(proto)
    return proto


def check_against(proto, model, sample: np.ndarray, atol: float = 1e-4) -> float:
    """Runs the ONNX model in ONNX Runtime (when installed) on `sample` and compares it with Keras.
    Returns the largest absolute difference, or -1 without ONNX Runtime; raises past `atol`."""
    try:
        import onnxruntime
    except ImportError:
        return -1.0
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, {session.get_inputs()[0].name: sample.astype(np.float32)})[0]
    want = np.asarray(model(sample.astype(np.float32), training=False))
    diff = float(np.max(np.abs(got - want)))
    if diff > atol:
        raise ValueError(f"the exported ONNX model differs from Keras by {diff} (> {atol})")
    return diff
