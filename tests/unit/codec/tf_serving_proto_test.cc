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
  ModelSignature sig = testing::Signature({testing::Info("x", DataType::kFloat32, {-1})});
  auto inputs = InputsFromPredictRequest(request, sig);
  ASSERT_TRUE(inputs.ok()) << inputs.status().ToString();
  ASSERT_EQ(inputs->size(), 1u);
  EXPECT_EQ(testing::Values<float>((*inputs)[0]), (std::vector<float>{1, 2}));

  x.add_float_val(3);
  auto bad = InputsFromPredictRequest(request, sig);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("input 'x': ", 0), 0u);
  EXPECT_EQ(InputsFromPredictRequest(tensorflow::serving::PredictRequest(), sig).status().message(),
            "missing input 'x'");
  // Unknown names are refused before anything is decoded, even a huge broadcast.
  auto& extra = (*request.mutable_inputs())["z"];
  extra.set_dtype(tensorflow::DT_FLOAT);
  extra.mutable_tensor_shape()->add_dim()->set_size(1 << 22);
  extra.add_float_val(1);
  EXPECT_EQ(InputsFromPredictRequest(request, sig).status().message(), "unknown input 'z'; the model's inputs are: x");
  ModelSignature matrix = testing::Signature({testing::Info("x", DataType::kFloat32, {-1, 2})});
  request.mutable_inputs()->erase("z");
  x.clear_float_val();
  x.add_float_val(1);
  EXPECT_NE(InputsFromPredictRequest(request, matrix).status().message().find("has shape [2]"), std::string::npos);

  tensorflow::serving::PredictResponse response;
  std::vector<NamedTensorView> outputs = {{"y", &(*inputs)[0]}};
  AddOutputsToPredictResponse(outputs, &response);
  ASSERT_EQ(response.outputs().count("y"), 1u);
  EXPECT_EQ(response.outputs().at("y").tensor_content().size(), 8u);
}

TEST(TfServingProto, OutputFilter) {
  ModelSignature sig =
      testing::Signature({}, {testing::Info("a", DataType::kFloat32, {}), testing::Info("b", DataType::kFloat32, {})});
  google::protobuf::RepeatedPtrField<std::string> filter;
  EXPECT_EQ(*SelectOutputs(sig, filter), (std::vector<size_t>{0, 1}));
  *filter.Add() = "b";
  EXPECT_EQ(*SelectOutputs(sig, filter), (std::vector<size_t>{1}));
  *filter.Add() = "b";
  EXPECT_NE(SelectOutputs(sig, filter).status().message().find("duplicate"), std::string::npos);
  filter.Clear();
  *filter.Add() = "c";
  EXPECT_EQ(SelectOutputs(sig, filter).status().message(),
            "output tensor alias not found in signature: c Outputs expected to be in the set {a, b}.");
}

TEST(TfServingProto, MetadataAndStatus) {
  std::vector<ModelSignature> sigs = {testing::Signature({testing::Info("x", DataType::kFloat32, {-1})})};
  google::protobuf::RepeatedPtrField<std::string> fields;
  tensorflow::serving::GetModelMetadataResponse response;
  EXPECT_FALSE(FillModelMetadataResponse("m", 4, sigs, fields, &response).ok());
  *fields.Add() = "signature_def";
  ASSERT_TRUE(FillModelMetadataResponse("m", 4, sigs, fields, &response).ok());
  EXPECT_EQ(response.model_spec().version().value(), 4);
  tensorflow::serving::SignatureDefMap map;
  ASSERT_TRUE(response.metadata().at("signature_def").UnpackTo(&map));
  EXPECT_EQ(map.signature_def().at("serving_default").inputs().at("x").dtype(), tensorflow::DT_FLOAT);
  *fields.Add() = "other";
  EXPECT_EQ(FillModelMetadataResponse("m", 4, sigs, fields, &response).message(),
            "Metadata field other is not supported");

  tensorflow::serving::GetModelStatusResponse status;
  std::vector<ModelVersionStatus> versions = {{1, ModelVersionState::kAvailable, Status::Ok()}};
  FillModelStatusResponse(versions, &status);
  ASSERT_EQ(status.model_version_status_size(), 1);
  EXPECT_EQ(status.model_version_status(0).state(), tensorflow::serving::ModelVersionStatus::AVAILABLE);
}

}  // namespace
}  // namespace mf::codec
