"""Regenerates the seed corpus of tiny ONNX models for runtime_onnx_loader_fuzzer.

Run with /usr/bin/python3 (Debian's python3-onnx); the outputs are committed.
"""
import pathlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = pathlib.Path(__file__).resolve().parent / "corpus"


def model(nodes, inputs, outputs, inits=(), opset=13):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def main():
    OUT.mkdir(exist_ok=True)
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((2, 1, 3, 3)).astype(np.float32), "w")
    models = {
        "relu.onnx": model([helper.make_node("Relu", ["x"], ["y"])], [f32("x", ["N", 4])], [f32("y", None)]),
        "conv_bn_relu.onnx": model(
            [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"]),
             helper.make_node("Relu", ["n"], ["y"])],
            [f32("x", ["N", 1, 5, 5])], [f32("y", None)],
            [w] + [numpy_helper.from_array(np.ones(2, np.float32), n) for n in "sbmv"]),
        "gemm_softmax.onnx": model(
            [helper.make_node("Gemm", ["x", "w2"], ["g"], transB=1), helper.make_node("Softmax", ["g"], ["y"])],
            [f32("x", ["N", 3])], [f32("y", None)],
            [numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "w2")]),
        "shape_reshape.onnx": model(
            [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["y"])],
            [f32("x", ["N", 2, 3])], [f32("y", None)],
            [numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array([0], np.int64), "axes"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1")]),
        "cycle.onnx": model([helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Relu", ["a"], ["b"])],
                            [f32("x", [2])], [f32("b", None)]),
    }
    # Found by mutation fuzzing: Concat of scalars along axis 0 wrote through an empty shape.
    models["concat_scalars.onnx"] = model(
        [helper.make_node("Concat", ["x", "x"], ["y"], axis=0)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [])], [f32("y", None)])
    for name, m in models.items():
        (OUT / name).write_bytes(m.SerializeToString())
    # A truncated model: the parser must refuse it.
    (OUT / "truncated.onnx").write_bytes(models["conv_bn_relu.onnx"].SerializeToString()[:57])


if __name__ == "__main__":
    main()
