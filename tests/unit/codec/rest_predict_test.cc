#include "server/codec/rest_predict.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "codec_test_util.h"

namespace mf::codec {
namespace {

using runtime::DataType;
using testing::Info;
using testing::MakeStrings;
using testing::MakeTensor;
using testing::Signature;
using testing::Values;

std::vector<ModelSignature> OneFloatInput(runtime::Shape shape = {-1, 3}) {
  return {Signature({Info("x", DataType::kFloat32, std::move(shape))})};
}

RestPredictRequest ParseOk(std::string_view body, const std::vector<ModelSignature>& sigs) {
  auto parsed = ParseRestPredictRequest(body, sigs);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() ? std::move(parsed).value() : RestPredictRequest{};
}

std::string ParseError(std::string_view body, const std::vector<ModelSignature>& sigs) {
  auto parsed = ParseRestPredictRequest(body, sigs);
  EXPECT_FALSE(parsed.ok()) << body;
  if (parsed.ok()) return "";
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  return parsed.status().message();
}

TEST(RestPredictParse, RowFormSingleInput) {
  auto sigs = OneFloatInput();
  auto req = ParseOk(R"({"instances": [[1, 2.5, -3e2], [4, 5, 6]]})", sigs);
  EXPECT_EQ(req.format, RestFormat::kRow);
  EXPECT_EQ(req.signature, &sigs[0]);
  ASSERT_EQ(req.inputs.size(), 1u);
  EXPECT_EQ(req.inputs[0].shape(), (runtime::Shape{2, 3}));
  EXPECT_EQ(Values<float>(req.inputs[0]), (std::vector<float>{1, 2.5f, -300, 4, 5, 6}));
  // Whitespace around the document and unknown top-level keys are fine.
  EXPECT_EQ(ParseOk(" {\"instances\": [[1, 2, 3]], \"extra\": {\"a\": [null]}}\n", sigs).inputs[0].num_elements(), 3);
}

TEST(RestPredictParse, ColumnarFormSingleInputUnnamedAndNamed) {
  auto sigs = OneFloatInput();
  auto unnamed = ParseOk(R"({"inputs": [[1, 2, 3]]})", sigs);
  EXPECT_EQ(unnamed.format, RestFormat::kColumnar);
  EXPECT_EQ(unnamed.inputs[0].shape(), (runtime::Shape{1, 3}));
  auto named = ParseOk(R"({"signature_name": "serving_default", "inputs": {"x": [[1, 2, 3]]}})", sigs);
  EXPECT_EQ(Values<float>(named.inputs[0]), (std::vector<float>{1, 2, 3}));
}

TEST(RestPredictParse, SeveralNamedInputsInSignatureOrder) {
  std::vector<ModelSignature> sigs = {
      Signature({Info("ids", DataType::kInt64, {-1, 2}), Info("mask", DataType::kBool, {-1}),
                 Info("text", DataType::kString, {-1})})};
  auto row = ParseOk(R"({"instances": [{"text": "a", "mask": true, "ids": [1, 2]},
                                      {"ids": [3, -4], "text": {"b64": "aGk="}, "mask": false}]})",
                     sigs);
  ASSERT_EQ(row.inputs.size(), 3u);
  EXPECT_EQ(row.inputs[0].shape(), (runtime::Shape{2, 2}));
  EXPECT_EQ(Values<int64_t>(row.inputs[0]), (std::vector<int64_t>{1, 2, 3, -4}));
  EXPECT_EQ(Values<uint8_t>(row.inputs[1]), (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(row.inputs[2].strings(), (std::vector<std::string>{"a", "hi"}));

  // Columnar: dim 0 may differ between inputs.
  auto col = ParseOk(R"({"inputs": {"mask": [true], "ids": [[1, 2], [3, 4], [5, 6]], "text": ["x", "y"]}})", sigs);
  EXPECT_EQ(col.inputs[0].shape(), (runtime::Shape{3, 2}));
  EXPECT_EQ(col.inputs[1].shape(), (runtime::Shape{1}));
  EXPECT_EQ(col.inputs[2].shape(), (runtime::Shape{2}));
}

TEST(RestPredictParse, RowFormWithOneNamedInputObject) {
  auto sigs = OneFloatInput();
  auto req = ParseOk(R"({"instances": [{"x": [1, 2, 3]}, {"x": [4, 5, 6]}]})", sigs);
  EXPECT_EQ(req.inputs[0].shape(), (runtime::Shape{2, 3}));
}

TEST(RestPredictParse, NonFiniteFloatsAndIntegersForFloats) {
  std::vector<ModelSignature> sigs = {Signature({Info("x", DataType::kFloat64, {-1})})};
  auto req = ParseOk(R"({"instances": [NaN, Infinity, -Infinity, 7, 1e308]})", sigs);
  auto v = Values<double>(req.inputs[0]);
  ASSERT_EQ(v.size(), 5u);
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], std::numeric_limits<double>::infinity());
  EXPECT_EQ(v[2], -std::numeric_limits<double>::infinity());
  EXPECT_EQ(v[3], 7.0);
  EXPECT_EQ(v[4], 1e308);
}

TEST(RestPredictParse, HalfAndBFloat16FromNumbers) {
  std::vector<ModelSignature> sigs = {
      Signature({Info("h", DataType::kFloat16, {2}), Info("b", DataType::kBFloat16, {2})})};
  auto req = ParseOk(R"({"inputs": {"h": [1.0, -2.5], "b": [1.0, 0.5]}})", sigs);
  EXPECT_EQ(Values<uint16_t>(req.inputs[0]), (std::vector<uint16_t>{0x3C00, 0xC100}));
  EXPECT_EQ(Values<uint16_t>(req.inputs[1]), (std::vector<uint16_t>{0x3F80, 0x3F00}));
}

TEST(RestPredictParse, IntegerInputsNeedIntegersInRange) {
  std::vector<ModelSignature> sigs = {Signature({Info("x", DataType::kInt32, {-1})})};
  EXPECT_EQ(Values<int32_t>(ParseOk(R"({"instances": [2147483647, -2147483648]})", sigs).inputs[0]),
            (std::vector<int32_t>{2147483647, -2147483647 - 1}));
  EXPECT_EQ(ParseError(R"({"instances": [1.5]})", sigs),
            "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: JSON Value: 1.5 Type: "
            "Number is not of expected type: int32");
  EXPECT_NE(ParseError(R"({"instances": [1.0]})", sigs).find("not of expected type: int32"), std::string::npos);
  EXPECT_NE(ParseError(R"({"instances": [2147483648]})", sigs).find("out of range for type: int32"), std::string::npos);
  EXPECT_NE(ParseError(R"({"instances": ["1"]})", sigs).find("Type: String is not of expected type"),
            std::string::npos);
  std::vector<ModelSignature> u8 = {Signature({Info("x", DataType::kUInt8, {-1})})};
  EXPECT_NE(ParseError(R"({"instances": [256]})", u8).find("out of range for type: uint8"), std::string::npos);
  EXPECT_NE(ParseError(R"({"instances": [-1]})", u8).find("out of range"), std::string::npos);
  std::vector<ModelSignature> u64 = {Signature({Info("x", DataType::kUInt64, {-1})})};
  EXPECT_EQ(Values<uint64_t>(ParseOk(R"({"instances": [18446744073709551615]})", u64).inputs[0]),
            (std::vector<uint64_t>{18446744073709551615ull}));
}

TEST(RestPredictParse, StringsForFloatsAndBoolsAreTypeErrors) {
  auto sigs = OneFloatInput({-1});
  EXPECT_NE(ParseError(R"({"instances": ["a"]})", sigs).find("is not of expected type: float"), std::string::npos);
  EXPECT_NE(ParseError(R"({"instances": [true]})", sigs).find("Type: Boolean"), std::string::npos);
  EXPECT_NE(ParseError(R"({"instances": [null]})", sigs).find("Type: Null"), std::string::npos);
  EXPECT_NE(ParseError(R"({"instances": [nan]})", sigs).find("JSON Parse error"), std::string::npos);
}

TEST(RestPredictParse, RaggedListsAreRefused) {
  auto sigs = OneFloatInput({-1, -1});
  EXPECT_NE(ParseError(R"({"instances": [[1, 2], [3]]})", sigs).find("Expecting tensor size: 2 but got: 1"),
            std::string::npos);
  // A list that is ragged inside one instance is TF Serving's FillTensorProto error.
  EXPECT_NE(ParseError(R"({"instances": [[[1, 2], [3]]]})", OneFloatInput({-1, -1, -1}))
                .find("Encountered list at unexpected size"),
            std::string::npos);
  EXPECT_NE(ParseError(R"({"inputs": [[1, 2], 3]})", sigs).find("found at incorrect level"), std::string::npos);
  EXPECT_NE(ParseError(R"({"inputs": [1, [2]]})", sigs).find("Encountered list at unexpected level: 1 expected < 1"),
            std::string::npos);
  EXPECT_NE(ParseError(R"({"inputs": [[], [1]]})", sigs).find("unexpected"), std::string::npos);
}

TEST(RestPredictParse, ShapeMustMatchTheSignature) {
  auto sigs = OneFloatInput({-1, 3});
  EXPECT_EQ(ParseError(R"({"instances": [[1, 2]]})", sigs),
            "input 'x' has shape [1, 2] but the model expects [-1, 3] (-1: any size)");
  EXPECT_NE(ParseError(R"({"instances": [1, 2]})", sigs).find("has shape [2]"), std::string::npos);
}

TEST(RestPredictParse, Base64Objects) {
  std::vector<ModelSignature> sigs = {Signature({Info("s", DataType::kString, {-1})})};
  auto req = ParseOk(R"({"instances": [{"b64": "AAH/"}, "plain", {"b64": ""}]})", sigs);
  EXPECT_EQ(req.inputs[0].strings(), (std::vector<std::string>{std::string("\0\1\xff", 3), "plain", ""}));
  EXPECT_EQ(ParseError(R"({"instances": [{"b64": "!!!!"}]})", sigs),
            "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: Unable to base64 decode");
  EXPECT_NE(ParseError(R"({"instances": ["a", {"b64": "QQ==", "x": 1}]})", sigs)
                .find("not formatted correctly for base64 data"),
            std::string::npos);
  // A columnar single string given as a b64 object is a scalar, not a named map.
  std::vector<ModelSignature> scalar = {Signature({Info("s", DataType::kString, {})})};
  EXPECT_EQ(ParseOk(R"({"inputs": {"b64": "QQ=="}})", scalar).inputs[0].strings(), (std::vector<std::string>{"A"}));
}

TEST(RestPredictParse, EnvelopeErrors) {
  auto sigs = OneFloatInput({-1});
  EXPECT_EQ(ParseError("", sigs), "JSON Parse error: The document is empty");
  EXPECT_NE(ParseError("{", sigs).find("JSON Parse error"), std::string::npos);
  EXPECT_NE(ParseError("[1]", sigs).find("Is not object"), std::string::npos);
  EXPECT_EQ(ParseError(R"({"signature_name": "serving_default"})", sigs), "Missing 'inputs' or 'instances' key");
  // TF Serving finds the signature before it looks for the tensors.
  EXPECT_EQ(ParseError(R"({"signature_name": "x"})", sigs), "Serving signature name: \"x\" not found in signature def");
  EXPECT_NE(ParseError(R"({"instances": [1], "inputs": [1]})", sigs).find("only one of 'inputs' or 'instances'"),
            std::string::npos);
  EXPECT_EQ(ParseError(R"({"signature_name": "other", "instances": [1]})", sigs),
            "Serving signature name: \"other\" not found in signature def");
  EXPECT_NE(ParseError(R"({"signature_name": 3, "instances": [1]})", sigs).find("must be a string"), std::string::npos);
  EXPECT_EQ(ParseError(R"({"instances": []})", sigs), "No values in 'instances' array");
  EXPECT_NE(ParseError(R"({"instances": 1})", sigs).find("to be an list/array"), std::string::npos);
  EXPECT_NE(ParseError(R"({"instances": [1]} {})", sigs).find("JSON Parse error"), std::string::npos);
  // Malformed JSON met while peeking at the value (found by fuzzing: the document was rewound
  // after simdjson had abandoned it).
  EXPECT_NE(ParseError(R"({"inputs": {"x": i[[1]]}})", sigs).find("JSON Parse error"), std::string::npos);
  EXPECT_NE(ParseError(R"({"instances": [{"x": i[[1]]}]})", sigs).find("JSON Parse error"), std::string::npos);
}

// TF Serving (json_tensor.cc) parses the body, then reads signature_name, then looks the model
// up: a malformed body is a 400 even for a model that does not exist, and a well-formed one
// gets the lookup's own error.
TEST(RestPredictParse, BodyIsParsedBeforeTheModelIsLookedUp) {
  int lookups = 0;
  const SignatureLookup unknown_model = [&]() -> StatusOr<std::span<const ModelSignature>> {
    ++lookups;
    return NotFound("Servable not found for request: Latest(nope)");
  };
  auto error = [&](std::string_view body) {
    auto parsed = ParseRestPredictRequest(body, unknown_model);
    EXPECT_FALSE(parsed.ok());
    return parsed.status();
  };
  EXPECT_EQ(error("").message(), "JSON Parse error: The document is empty");
  EXPECT_EQ(error("{").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(error("{").message().rfind("JSON Parse error: ", 0), 0u) << error("{").message();
  EXPECT_EQ(error("not json").message().rfind("JSON Parse error: ", 0), 0u);
  EXPECT_EQ(lookups, 0);
  // The lazy first pass skips the tensors; a syntax error inside them is still found first.
  const Status deep = error(R"({"instances": [[1, 2], [3,, 4]]})");
  EXPECT_EQ(deep.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(deep.message().rfind("JSON Parse error: ", 0), 0u) << deep.message();
  EXPECT_EQ(error(R"({"signature_name": 3, "instances": [1]})").code(), StatusCode::kInvalidArgument);
  const Status missing = error(R"({"instances": [[1, 2, 3]]})");
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.message(), "Servable not found for request: Latest(nope)");
  EXPECT_EQ(error(R"({})").code(), StatusCode::kNotFound);

  // With the model found, a syntax error anywhere still comes before what the decoder met first.
  auto sigs = OneFloatInput({-1, -1});
  EXPECT_EQ(ParseError(R"({"instances": [[1, 2, 3], [3,, 4]]})", OneFloatInput({-1, 2})).rfind("JSON Parse error: ", 0),
            0u);
  // NaN and Infinity are numbers to TF Serving: the decoder's own error stays.
  EXPECT_NE(ParseError(R"({"instances": [[NaN, Infinity], [-Infinity, 1, 2]], "x": "NaN\"Infinity"})", sigs)
                .find("Expecting tensor size: 2 but got: 3"),
            std::string::npos);
}

// Every instance must have the first one's size, then its shape (TF Serving's AddInstanceItem).
TEST(RestPredictParse, RaggedInstancesSayWhatTheFirstOneHad) {
  auto sigs = OneFloatInput({-1, -1});
  EXPECT_EQ(ParseError(R"({"instances": [[1,2],[3,4],[5,6,7]]})", sigs),
            "Failed to process element: 2 of 'instances' list. Error: INVALID_ARGUMENT: Expecting tensor size: 2 but "
            "got: 3");
  auto matrices = OneFloatInput({-1, -1, -1});
  EXPECT_EQ(ParseError(R"({"instances": [[[1,2],[3,4],[5,6]], [[1,2,3],[4,5,6]]]})", matrices),
            "Failed to process element: 1 of 'instances' list. Error: INVALID_ARGUMENT: Expecting shape [3,2] but "
            "got: [2,3]");
  std::vector<ModelSignature> named = {
      Signature({Info("a", DataType::kFloat32, {-1, -1}), Info("b", DataType::kFloat32, {-1})})};
  EXPECT_EQ(ParseError(R"({"instances": [{"a": [1,2], "b": 1}, {"a": [3,4,5], "b": 2}]})", named),
            "Failed to process element: 1 key: a of 'instances' list. Error: INVALID_ARGUMENT: Expecting tensor size: "
            "2 but got: 3");
}

TEST(RestPredictParse, NamedFormErrors) {
  std::vector<ModelSignature> sigs = {
      Signature({Info("a", DataType::kFloat32, {-1}), Info("b", DataType::kFloat32, {-1})})};
  EXPECT_NE(ParseError(R"({"instances": [1, 2]})", sigs).find("instances is a plain list"), std::string::npos);
  EXPECT_NE(ParseError(R"({"inputs": [1, 2]})", sigs).find("inputs is a plain value/list"), std::string::npos);
  EXPECT_NE(ParseError(R"({"instances": [{"a": 1}]})", sigs).find("keys must be equal to: a,b"), std::string::npos);
  EXPECT_NE(ParseError(R"({"instances": [{"a": 1, "b": 2, "c": 3}]})", sigs).find("does not have named input: c"),
            std::string::npos);
  EXPECT_NE(
      ParseError(R"({"instances": [{"a": 1, "b": 2}, [1]]})", sigs).find("Expecting object but got list at item 1"),
      std::string::npos);
  EXPECT_NE(ParseError(R"({"instances": [{"a": 1, "b": 2, "a": 3}]})", sigs).find("appears twice"), std::string::npos);
  EXPECT_EQ(ParseError(R"({"inputs": {"a": [1]}})", sigs), "Missing named input: b in 'inputs' object.");
  EXPECT_NE(ParseError(R"({"inputs": {"a": [1], "b": [2], "z": 1}})", sigs).find("Unknown input: z"),
            std::string::npos);
  // Row form: every row of an input has the same shape.
  EXPECT_NE(ParseError(R"({"instances": [{"a": 1, "b": 2}, {"a": [1], "b": 2}]})", sigs).find("key: a"),
            std::string::npos);
}

TEST(RestPredictParse, DeepNestingIsRefusedWithoutRecursingFurther) {
  auto sigs = OneFloatInput({-1});
  std::string body = R"({"inputs": )" + std::string(5000, '[') + std::string(5000, ']') + "}";
  EXPECT_FALSE(ParseRestPredictRequest(body, sigs).ok());
}

std::string Write(RestFormat format, std::vector<NamedTensorView> outputs) {
  std::string body;
  Status status = WriteRestPredictResponse(format, outputs, &body);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return body;
}

TEST(RestPredictWrite, SingleOutputDropsTheName) {
  auto t = MakeTensor<float>(DataType::kFloat32, {2, 2}, {1.0f, 0.1f, -2.5f, 1e10f});
  EXPECT_EQ(Write(RestFormat::kRow, {{"y", &t}}), R"({"predictions":[[1.0,0.1],[-2.5,1e+10]]})");
  EXPECT_EQ(Write(RestFormat::kColumnar, {{"y", &t}}), R"({"outputs":[[1.0,0.1],[-2.5,1e+10]]})");
}

TEST(RestPredictWrite, SeveralOutputs) {
  auto a = MakeTensor<int64_t>(DataType::kInt64, {2}, {7, -8});
  auto b = MakeStrings({2, 1}, {"p", "q\"\n"});
  EXPECT_EQ(Write(RestFormat::kColumnar, {{"a", &a}, {"b", &b}}), R"({"outputs":{"a":[7,-8],"b":[["p"],["q\"\n"]]}})");
  EXPECT_EQ(Write(RestFormat::kRow, {{"a", &a}, {"b", &b}}),
            R"({"predictions":[{"a":7,"b":["p"]},{"a":-8,"b":["q\"\n"]}]})");
  auto c = MakeTensor<int64_t>(DataType::kInt64, {3}, {1, 2, 3});
  std::string body;
  std::vector<NamedTensorView> mismatched = {{"a", &a}, {"c", &c}};
  Status status = WriteRestPredictResponse(RestFormat::kRow, mismatched, &body);
  EXPECT_EQ(status.message(), "Tensor name: c has inconsistent batch size: 3 expecting: 2");
}

TEST(RestPredictWrite, FloatFormatting) {
  const float inf = std::numeric_limits<float>::infinity();
  auto t = MakeTensor<float>(DataType::kFloat32, {6}, {std::nanf(""), inf, -inf, 3.0f, 0.2f, 16777216.0f});
  EXPECT_EQ(Write(RestFormat::kColumnar, {{"y", &t}}), R"({"outputs":[NaN,Infinity,-Infinity,3.0,0.2,16777216.0]})");
  auto d = MakeTensor<double>(DataType::kFloat64, {2}, {0.1, 1e-7});
  EXPECT_EQ(Write(RestFormat::kColumnar, {{"y", &d}}), R"({"outputs":[0.1,1e-07]})");
  auto h = MakeTensor<uint16_t>(DataType::kFloat16, {2}, {0x3C00, 0x3555});
  EXPECT_EQ(Write(RestFormat::kColumnar, {{"y", &h}}), R"({"outputs":[1.0,0.33325195]})");
  auto scalar = MakeTensor<float>(DataType::kFloat32, {}, {2.0f});
  EXPECT_EQ(Write(RestFormat::kColumnar, {{"y", &scalar}}), R"({"outputs":2.0})");
  std::string body;
  std::vector<NamedTensorView> outputs = {{"y", &scalar}};
  EXPECT_FALSE(WriteRestPredictResponse(RestFormat::kRow, outputs, &body).ok());
}

TEST(RestPredictWrite, BytesOutputsAndNonUtf8AsBase64) {
  auto bytes = MakeStrings({2}, {"hi", std::string("\xff", 1)});
  EXPECT_EQ(Write(RestFormat::kColumnar, {{"image_bytes", &bytes}}), R"({"outputs":[{"b64":"aGk="},{"b64":"/w=="}]})");
  EXPECT_EQ(Write(RestFormat::kColumnar, {{"text", &bytes}}), R"({"outputs":["hi",{"b64":"/w=="}]})");
  auto boolean = MakeTensor<uint8_t>(DataType::kBool, {2}, {1, 0});
  EXPECT_EQ(Write(RestFormat::kRow, {{"ok", &boolean}}), R"({"predictions":[true,false]})");
}

TEST(RestPredictWrite, RoundTripThroughTheParser) {
  auto t = MakeTensor<float>(DataType::kFloat32, {2, 3}, {0.1f, 1.0f / 3, 1e-30f, -7.0f, 123456.79f, 2.0f});
  std::string body = Write(RestFormat::kColumnar, {{"y", &t}});
  // Turn the response into a request for a model whose input looks like the output.
  body.replace(body.find("outputs"), 7, "inputs");
  auto parsed = ParseOk(body, OneFloatInput({2, 3}));
  EXPECT_EQ(Values<float>(parsed.inputs[0]), Values<float>(t));
}

TEST(RestError, EscapesTheMessage) {
  EXPECT_EQ(WriteRestError("Servable not found for request: Latest(\"m\")"),
            R"j({"error":"Servable not found for request: Latest(\"m\")"})j");
}

}  // namespace
}  // namespace mf::codec
