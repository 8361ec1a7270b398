#include "server/codec/kserve_json.h"

#include <gtest/gtest.h>

#include "codec_test_util.h"
#include "server/codec/kserve_raw.h"

namespace mf::codec {
namespace {

using runtime::DataType;
using testing::MakeStrings;
using testing::MakeTensor;
using testing::Values;

V2InferRequest ParseOk(std::string_view body, std::optional<size_t> json_length = std::nullopt) {
  auto parsed = ParseV2InferRequest(body, json_length);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() ? std::move(parsed).value() : V2InferRequest{};
}

std::string ParseError(std::string_view body, std::optional<size_t> json_length = std::nullopt) {
  auto parsed = ParseV2InferRequest(body, json_length);
  EXPECT_FALSE(parsed.ok()) << body;
  if (parsed.ok()) return "";
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  return parsed.status().message();
}

TEST(KServeJsonParse, TypedDataFlatAndNested) {
  auto req = ParseOk(R"({"id": "r1", "inputs": [
      {"data": [[1, 2], [3, 4.5]], "datatype": "FP32", "shape": [2, 2], "name": "x"},
      {"name": "ids", "shape": [3], "datatype": "INT64", "data": [1, -2, 9007199254740993]},
      {"name": "t", "shape": [1], "datatype": "BYTES", "data": ["héllo"]},
      {"name": "m", "shape": [2], "datatype": "BOOL", "data": [true, false]},
      {"name": "h", "shape": [1], "datatype": "FP16", "data": [1.0]}],
    "outputs": [{"name": "y", "parameters": {"binary_data": true}}, {"name": "z"}],
    "parameters": {"binary_data_output": true, "other": 3}})");
  EXPECT_EQ(req.id, "r1");
  ASSERT_EQ(req.inputs.size(), 5u);
  EXPECT_EQ(req.inputs[0].name, "x");
  EXPECT_EQ(req.inputs[0].tensor.shape(), (runtime::Shape{2, 2}));
  EXPECT_EQ(Values<float>(req.inputs[0].tensor), (std::vector<float>{1, 2, 3, 4.5f}));
  EXPECT_EQ(Values<int64_t>(req.inputs[1].tensor), (std::vector<int64_t>{1, -2, 9007199254740993}));
  EXPECT_EQ(req.inputs[2].tensor.strings(), (std::vector<std::string>{"héllo"}));
  EXPECT_EQ(Values<uint8_t>(req.inputs[3].tensor), (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(Values<uint16_t>(req.inputs[4].tensor), (std::vector<uint16_t>{0x3C00}));
  ASSERT_EQ(req.outputs.size(), 2u);
  EXPECT_EQ(req.outputs[0].binary_data, true);
  EXPECT_FALSE(req.outputs[1].binary_data.has_value());
  EXPECT_TRUE(req.binary_data_output);
}

TEST(KServeJsonParse, BinaryExtension) {
  std::string json =
      R"({"inputs": [{"name": "x", "shape": [2], "datatype": "INT32", "parameters": {"binary_data_size": 8}},
                                    {"name": "s", "shape": [2], "datatype": "BYTES", "parameters": {"binary_data_size": 11}},
                                    {"name": "j", "shape": [1], "datatype": "FP64", "data": [0.5]}]})";
  std::string body = json;
  auto ints = MakeTensor<int32_t>(DataType::kInt32, {2}, {7, -1});
  AppendV2Raw(ints, &body);
  AppendV2Raw(MakeStrings({2}, {"ab", "c"}), &body);
  ASSERT_EQ(body.size(), json.size() + 8 + 11);
  auto req = ParseOk(body, json.size());
  EXPECT_EQ(Values<int32_t>(req.inputs[0].tensor), (std::vector<int32_t>{7, -1}));
  EXPECT_EQ(req.inputs[1].tensor.strings(), (std::vector<std::string>{"ab", "c"}));
  EXPECT_EQ(Values<double>(req.inputs[2].tensor), (std::vector<double>{0.5}));

  EXPECT_NE(ParseError(body + "x", json.size()).find("1 bytes of binary data"), std::string::npos);
  EXPECT_NE(ParseError(body.substr(0, body.size() - 1), json.size()).find("exceeds the 10 binary bytes left"),
            std::string::npos);
  EXPECT_NE(ParseError(body, body.size() + 1).find("exceeds the body size"), std::string::npos);
}

TEST(KServeJsonParse, Errors) {
  EXPECT_EQ(ParseError(""), "JSON Parse error: The document is empty");
  EXPECT_NE(ParseError("[]").find("must be a JSON object"), std::string::npos);
  EXPECT_EQ(ParseError(R"({"id": "x"})"), "the inference request has no 'inputs'");
  EXPECT_EQ(ParseError(R"({"inputs": [{"name": "x", "shape": [2], "datatype": "FP32", "data": [1]}]})"),
            "input 'x': 'data' has 1 values but shape [2] needs 2");
  EXPECT_NE(ParseError(R"({"inputs": [{"name": "x", "shape": [1], "datatype": "FP33", "data": [1]}]})")
                .find("unknown datatype 'FP33'"),
            std::string::npos);
  EXPECT_NE(ParseError(R"({"inputs": [{"name": "x", "shape": [-1], "datatype": "FP32", "data": []}]})")
                .find("negative dimension"),
            std::string::npos);
  EXPECT_NE(ParseError(R"({"inputs": [{"name": "x", "shape": [1], "datatype": "INT8", "data": [200]}]})")
                .find("out of range for type: int8"),
            std::string::npos);
  EXPECT_NE(ParseError(R"({"inputs": [{"name": "x", "shape": [1], "datatype": "INT32", "data": ["1"]}]})")
                .find("not of expected type: int32"),
            std::string::npos);
  EXPECT_NE(ParseError(R"({"inputs": [{"name": "x", "shape": [1], "datatype": "FP32"}]})").find("neither 'data' nor"),
            std::string::npos);
  EXPECT_NE(ParseError(R"({"inputs": [{"shape": [1], "datatype": "FP32", "data": [1]}]})").find("has no 'name'"),
            std::string::npos);
  EXPECT_NE(ParseError(R"({"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1]},
                                      {"name": "x", "shape": [1], "datatype": "FP32", "data": [1]}]})")
                .find("given twice"),
            std::string::npos);
  EXPECT_NE(
      ParseError(
          R"({"inputs": [{"name": "x", "shape": [1099511627776, 1099511627776], "datatype": "FP32", "data": [1]}]})")
          .find("too large"),
      std::string::npos);
  // BYTES data are plain strings: TF Serving's {"b64": ...} objects are not part of v2.
  EXPECT_NE(ParseError(R"({"inputs": [{"name": "s", "shape": [1], "datatype": "BYTES", "data": [{"b64": "QQ=="}]}]})")
                .find("not of expected type: string"),
            std::string::npos);
  EXPECT_NE(ParseError(R"({"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1]}],
                          "outputs": [{"name": "y"}, {"name": "y"}]})")
                .find("requested twice"),
            std::string::npos);
}

TEST(KServeJsonWrite, JsonAndBinaryOutputs) {
  auto y = MakeTensor<float>(DataType::kFloat32, {1, 2}, {0.5f, 2.0f});
  auto s = MakeStrings({1}, {"ok"});
  std::vector<NamedTensorView> outputs = {{"y", &y}, {"s", &s}};
  bool json_only[] = {false, false};
  auto body = WriteV2InferResponse("m", "3", std::string("r1"), outputs, json_only);
  ASSERT_TRUE(body.ok());
  EXPECT_FALSE(body->json_length.has_value());
  EXPECT_EQ(
      body->body,
      R"({"model_name":"m","model_version":"3","id":"r1","outputs":[{"name":"y","datatype":"FP32","shape":[1,2],"data":[0.5,2.0]},{"name":"s","datatype":"BYTES","shape":[1],"data":["ok"]}]})");

  bool binary[] = {true, true};
  auto mixed = WriteV2InferResponse("m", "3", std::nullopt, outputs, binary);
  ASSERT_TRUE(mixed.ok());
  ASSERT_TRUE(mixed->json_length.has_value());
  std::string json = mixed->body.substr(0, *mixed->json_length);
  EXPECT_EQ(
      json,
      R"({"model_name":"m","model_version":"3","outputs":[{"name":"y","datatype":"FP32","shape":[1,2],"parameters":{"binary_data_size":8}},{"name":"s","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":6}}]})");
  std::string raw = mixed->body.substr(*mixed->json_length);
  ASSERT_EQ(raw.size(), 14u);
  EXPECT_EQ(raw.substr(8), std::string("\x02\0\0\0ok", 6));

  auto binary_string = MakeStrings({1}, {std::string("\xff", 1)});
  std::vector<NamedTensorView> bad = {{"s", &binary_string}};
  bool no[] = {false};
  auto refused = WriteV2InferResponse("m", "1", std::nullopt, bad, no);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("binary_data"), std::string::npos);
}

TEST(KServeJsonWrite, Metadata) {
  ModelSignature sig = testing::Signature({testing::Info("x", DataType::kFloat32, {-1, 4})},
                                          {testing::Info("y", DataType::kInt64, {-1})});
  std::vector<std::string> versions = {"1", "2"};
  EXPECT_EQ(
      WriteV2ModelMetadata("m", versions, "onnx_onnxv1", sig),
      R"({"name":"m","versions":["1","2"],"platform":"onnx_onnxv1","inputs":[{"name":"x","datatype":"FP32","shape":[-1,4]}],"outputs":[{"name":"y","datatype":"INT64","shape":[-1]}]})");
  std::vector<std::string> extensions = {"binary_tensor_data"};
  EXPECT_EQ(WriteV2ServerMetadata("modelfleet", "0.1.0", extensions),
            R"({"name":"modelfleet","version":"0.1.0","extensions":["binary_tensor_data"]})");
}

TEST(KServeRaw, LengthPrefixedBytesAreChecked) {
  auto ok = TensorFromV2Raw(DataType::kString, {2}, std::string("\1\0\0\0a\0\0\0\0", 9), "x");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->strings(), (std::vector<std::string>{"a", ""}));
  EXPECT_FALSE(TensorFromV2Raw(DataType::kString, {1}, std::string("\5\0\0\0a", 5), "x").ok());
  EXPECT_FALSE(TensorFromV2Raw(DataType::kString, {1}, std::string("\1\0", 2), "x").ok());
  EXPECT_FALSE(TensorFromV2Raw(DataType::kString, {1}, std::string("\0\0\0\0z", 5), "x").ok());
  // A billion elements cannot fit in 8 bytes: refused before reserving anything.
  EXPECT_FALSE(TensorFromV2Raw(DataType::kString, {1000000000}, std::string(8, '\0'), "x").ok());
  EXPECT_FALSE(TensorFromV2Raw(DataType::kFloat32, {2}, std::string(7, '\0'), "x").ok());
}

}  // namespace
}  // namespace mf::codec
