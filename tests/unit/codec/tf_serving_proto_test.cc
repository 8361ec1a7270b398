#include "server/codec/tf_serving_proto.h"

#include <gtest/gtest.h>

#include "codec_test_util.h"

namespace mf::codec {
namespace {

using runtime::DataType;

TEST(TfServingProto, PredictRequestInputsAndResponse) {
  tensorflow::serving::PredictRequest request;
  auto& x = (*request.mutable_inputs())["x"];
  x.set_dtype(tensorflow::DT_FLOAT);
  x.mutable_tensor_shape()->add_dim()->set_size(2);
  x.add_float_val(1);
  x.add_float_val(2);
  const std::vector<runtime::TensorInfo> sig = {testing::Info("x", DataType::kFloat32, {-1})};
  auto inputs = InputsFromPredictRequest(request, sig);
  ASSERT_TRUE(inputs.ok()) << inputs.status().ToString();
  ASSERT_EQ(inputs->size(), 1u);
  EXPECT_EQ(testing::Values<float>((*inputs)[0]), (std::vector<float>{1, 2}));

  x.add_float_val(3);
  auto bad = InputsFromPredictRequest(request, sig);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("input 'x': ", 0), 0u);
  // TF Serving's VerifyRequestInputsSize, then its alias check, before anything is decoded (even
  // a huge broadcast).
  EXPECT_EQ(InputsFromPredictRequest(tensorflow::serving::PredictRequest(), sig).status().message(),
            "input size does not match signature: 0!=1 len({}) != len({x}). Sent extra: {}. Missing but "
            "required: {x}.");
  auto& extra = (*request.mutable_inputs())["z"];
  extra.set_dtype(tensorflow::DT_FLOAT);
  extra.mutable_tensor_shape()->add_dim()->set_size(1 << 22);
  extra.add_float_val(1);
  EXPECT_EQ(InputsFromPredictRequest(request, sig).status().message(),
            "input size does not match signature: 2!=1 len({x,z}) != len({x}). Sent extra: {z}. Missing but "
            "required: {}.");
  const std::vector<runtime::TensorInfo> two = {testing::Info("x", DataType::kFloat32, {-1}),
                                                testing::Info("b", DataType::kFloat32, {-1})};
  tensorflow::serving::PredictRequest renamed;
  (*renamed.mutable_inputs())["x"] = request.inputs().at("x");
  (*renamed.mutable_inputs())["z"] = extra;
  EXPECT_EQ(InputsFromPredictRequest(renamed, two).status().message(),
            "input tensor alias not found in signature: z. Inputs expected to be in the set {b,x}.");
  const std::vector<runtime::TensorInfo> matrix = {testing::Info("x", DataType::kFloat32, {-1, 2})};
  request.mutable_inputs()->erase("z");
  x.clear_float_val();
  x.add_float_val(1);
  EXPECT_NE(InputsFromPredictRequest(request, matrix).status().message().find("has shape [2]"), std::string::npos);

  tensorflow::serving::PredictResponse response;
  std::vector<NamedTensorView> outputs = {{"y", &(*inputs)[0]}};
  AddOutputsToPredictResponse(outputs, TensorProtoEncoding::kTensorContent, &response);
  ASSERT_EQ(response.outputs().count("y"), 1u);
  EXPECT_EQ(response.outputs().at("y").tensor_content().size(), 8u);
  AddOutputsToPredictResponse(outputs, TensorProtoEncoding::kTypedValues, &response);
  EXPECT_EQ(response.outputs().at("y").float_val_size(), 2);
}

TEST(TfServingProto, OutputFilter) {
  const std::vector<runtime::TensorInfo> sig = {testing::Info("b", DataType::kFloat32, {}),
                                                testing::Info("a", DataType::kFloat32, {})};
  google::protobuf::RepeatedPtrField<std::string> filter;
  EXPECT_EQ(*SelectOutputs(sig, filter), (std::vector<size_t>{0, 1}));
  *filter.Add() = "b";
  EXPECT_EQ(*SelectOutputs(sig, filter), (std::vector<size_t>{0}));
  *filter.Add() = "b";
  EXPECT_EQ(SelectOutputs(sig, filter).status().message(), "duplicate output tensor alias: b");
  filter.Clear();
  *filter.Add() = "c";
  EXPECT_EQ(SelectOutputs(sig, filter).status().message(),
            "output tensor alias not found in signature: c Outputs expected to be in the set {a,b}.");
}

TEST(TfServingProto, MetadataAndStatus) {
  std::vector<ModelSignature> sigs = {testing::Signature({testing::Info("x", DataType::kFloat32, {-1})})};
  google::protobuf::RepeatedPtrField<std::string> fields;
  EXPECT_EQ(CheckMetadataFields(fields).message(), "GetModelMetadataRequest must specify at least one metadata_field");
  *fields.Add() = "signature_def";
  EXPECT_TRUE(CheckMetadataFields(fields).ok());
  *fields.Add() = "other";
  EXPECT_EQ(CheckMetadataFields(fields).message(), "Metadata field other is not supported");
  tensorflow::serving::GetModelMetadataResponse response;
  FillModelMetadataResponse("m", 4, sigs, &response);
  EXPECT_EQ(response.model_spec().name(), "m");
  EXPECT_EQ(response.model_spec().version().value(), 4);
  EXPECT_TRUE(response.model_spec().signature_name().empty());
  tensorflow::serving::SignatureDefMap map;
  ASSERT_TRUE(response.metadata().at("signature_def").UnpackTo(&map));
  EXPECT_EQ(map.signature_def().at("serving_default").inputs().at("x").dtype(), tensorflow::DT_FLOAT);

  tensorflow::serving::GetModelStatusResponse status;
  std::vector<ModelVersionStatus> versions = {{1, ModelVersionState::kAvailable, Status::Ok()}};
  FillModelStatusResponse(versions, &status);
  ASSERT_EQ(status.model_version_status_size(), 1);
  EXPECT_EQ(status.model_version_status(0).state(), tensorflow::serving::ModelVersionStatus::AVAILABLE);
}

}  // namespace
}  // namespace mf::codec
