#!/usr/bin/env python3
"""Writes the seed corpora of the codec fuzzers (tests/fuzz/codec/corpus/<target>/).

Run from anywhere with /usr/bin/python3; the protobuf seeds are built with messages generated
from our own .proto files (tests/e2e/proto_stubs.py), so they track the schema.
"""
import pathlib
import struct
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "e2e"))
import proto_stubs  # noqa: E402
import tfrecord  # noqa: E402

REST = {
    "row_single.json": '{"instances": [[1, 2.5, -3e2], [4, 5, 6]]}',
    "columnar_single.json": '{"inputs": [[1, 2], [3, 4]]}',
    "nonfinite.json": '{"instances": [[NaN, Infinity, -Infinity]]}',
    "row_multi.json": '{"signature_name": "multi", "instances": [{"ids": [1, 2], "mask": true, "text": '
                      '{"b64": "aGk="}, "h": 1.5, "b": 2, "d": 0.1, "i8": -1, "u8": 255, "i16": 3, '
                      '"u16": 4, "i32": 5, "u32": 6, "u64": 18446744073709551615}]}',
    "columnar_multi.json": '{"signature_name": "multi", "inputs": {"ids": [[1, 2]], "mask": [false], '
                           '"text": ["x"], "h": [1], "b": [1], "d": [1], "i8": [1], "u8": [1], "i16": [1], '
                           '"u16": [1], "i32": [1], "u32": [1], "u64": [1]}}',
    "b64_scalar.json": '{"signature_name": "strings", "inputs": {"b64": "QUJD"}}',
    "ragged.json": '{"instances": [[1, 2], [3]]}',
    "bad_type.json": '{"instances": [["a"]]}',
    "truncated.json": '{"instances": [[1, 2',
}

KSERVE_JSON = {
    "typed.json": '{"id": "1", "inputs": [{"name": "x", "shape": [2, 2], "datatype": "FP32", '
                  '"data": [[1, 2], [3, 4]]}, {"name": "s", "shape": [1], "datatype": "BYTES", '
                  '"data": ["hi"]}], "outputs": [{"name": "y", "parameters": {"binary_data": true}}], '
                  '"parameters": {"binary_data_output": false}}',
    "every_type.json": '{"inputs": [' + ", ".join(
        f'{{"name": "{t}", "shape": [1], "datatype": "{t}", "data": [{v}]}}' for t, v in [
            ("BOOL", "true"), ("UINT8", 1), ("UINT16", 1), ("UINT32", 1), ("UINT64", 1), ("INT8", -1),
            ("INT16", -1), ("INT32", -1), ("INT64", -1), ("FP16", 0.5), ("BF16", 0.5), ("FP32", 0.5),
            ("FP64", 0.5), ("BYTES", '"b"')]) + ']}',
}


def kserve_binary():
    header = ('{"inputs": [{"name": "x", "shape": [2], "datatype": "INT32", "parameters": '
              '{"binary_data_size": 8}}, {"name": "s", "shape": [1], "datatype": "BYTES", '
              '"parameters": {"binary_data_size": 6}}]}').encode()
    raw = struct.pack("<2i", 7, -1) + struct.pack("<I", 2) + b"ab"
    return struct.pack("<H", len(header)) + header + raw


def tensor_protos():
    stubs = proto_stubs.module("tensorflow.core.framework.tensor_pb2")
    types = proto_stubs.module("tensorflow.core.framework.types_pb2")
    seeds = {}

    def make(name, dtype, dims, **fields):
        t = stubs.TensorProto(dtype=dtype)
        for d in dims:
            t.tensor_shape.dim.add(size=d)
        for key, value in fields.items():
            if key == "tensor_content":
                t.tensor_content = value
            else:
                getattr(t, key).extend(value)
        seeds[name] = t.SerializeToString()

    make("float_content.bin", types.DT_FLOAT, [2, 2], tensor_content=struct.pack("<4f", 1, 2, 3, 4))
    make("float_val.bin", types.DT_FLOAT, [3], float_val=[0.5, 1.5, 2.5])
    make("broadcast.bin", types.DT_DOUBLE, [2, 3], double_val=[7.0])
    make("half.bin", types.DT_HALF, [2], half_val=[0x3C00, 0xC000])
    make("int8.bin", types.DT_INT8, [2], int_val=[-128, 127])
    make("uint16.bin", types.DT_UINT16, [1], int_val=[65535])
    make("int64.bin", types.DT_INT64, [], int64_val=[-5])
    make("bool.bin", types.DT_BOOL, [2], bool_val=[True, False])
    make("strings.bin", types.DT_STRING, [2], string_val=[b"a", b"\x00\xff"])
    make("uint64.bin", types.DT_UINT64, [1], uint64_val=[2**64 - 1])
    make("wrong_field.bin", types.DT_FLOAT, [1], int_val=[1])
    return seeds


def model_infer_requests():
    v2 = proto_stubs.module("inference.grpc_predict_v2_pb2")
    typed = v2.ModelInferRequest(model_name="m")
    x = typed.inputs.add(name="x", datatype="FP32", shape=[2])
    x.contents.fp32_contents.extend([1.0, 2.0])
    s = typed.inputs.add(name="s", datatype="BYTES", shape=[1])
    s.contents.bytes_contents.append(b"hi")
    raw = v2.ModelInferRequest(model_name="m")
    raw.inputs.add(name="h", datatype="FP16", shape=[2])
    raw.inputs.add(name="t", datatype="BYTES", shape=[1])
    raw.raw_input_contents.extend([struct.pack("<2H", 0x3C00, 0xC000), struct.pack("<I", 1) + b"z"])
    return {"typed.bin": typed.SerializeToString(), "raw.bin": raw.SerializeToString()}


def warmup_files():
    logs = proto_stubs.module("tensorflow_serving.apis.prediction_log_pb2")
    tensor_pb2 = proto_stubs.module("tensorflow.core.framework.tensor_pb2")
    types = proto_stubs.module("tensorflow.core.framework.types_pb2")
    predict = logs.PredictionLog()
    predict.predict_log.request.model_spec.name = "m"
    x = tensor_pb2.TensorProto(dtype=types.DT_FLOAT, float_val=[1.0, 2.0])
    x.tensor_shape.dim.add(size=2)
    predict.predict_log.request.inputs["x"].CopyFrom(x)
    classify = logs.PredictionLog()
    classify.classify_log.request.model_spec.name = "m"
    record = tfrecord.frame(predict.SerializeToString())
    return {"two_predict.bin": record * 2, "classify.bin": tfrecord.frame(classify.SerializeToString()),
            "truncated.bin": record[:-3]}


def write(target, files):
    folder = HERE / "corpus" / target
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def main():
    write("rest_predict", REST)
    no_header = {name: b"\xff\xff" + text.encode() for name, text in KSERVE_JSON.items()}
    write("kserve_json", {**no_header, "binary.bin": kserve_binary()})
    write("tensor_proto", tensor_protos())
    write("kserve_proto", model_infer_requests())
    write("warmup_records", warmup_files())


if __name__ == "__main__":
    main()
