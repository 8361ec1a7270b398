#include "server/codec/rest_metadata.h"

#include <gtest/gtest.h>

#include "codec_test_util.h"

namespace mf::codec {
namespace {

using runtime::DataType;

TEST(RestMetadata, ModelStatusMatchesTfServing) {
  std::vector<ModelVersionStatus> versions = {{2, ModelVersionState::kAvailable, Status::Ok()},
                                              {1, ModelVersionState::kEnd, InvalidArgument("bad \"model\"")}};
  EXPECT_EQ(
      WriteRestModelStatus(versions),
      R"({"model_version_status":[{"version":"2","state":"AVAILABLE","status":{"error_code":"OK","error_message":""}},)"
      R"({"version":"1","state":"END","status":{"error_code":"INVALID_ARGUMENT","error_message":"bad \"model\""}}]})");
  EXPECT_EQ(WriteRestModelStatus({}), R"({"model_version_status":[]})");
}

TEST(RestMetadata, SignatureDefIsDoubled) {
  std::vector<ModelSignature> sigs = {testing::Signature({testing::Info("x", DataType::kFloat32, {-1, 2})},
                                                         {testing::Info("y", DataType::kInt64, {})})};
  EXPECT_EQ(
      WriteRestModelMetadata("mnist", 3, sigs),
      R"({"model_spec":{"name":"mnist","signature_name":"","version":"3"},"metadata":{"signature_def":{"signature_def":{)"
      R"("serving_default":{"inputs":{"x":{"dtype":"DT_FLOAT","tensor_shape":{"dim":[{"size":"-1","name":""},)"
      R"({"size":"2","name":""}],"unknown_rank":false},"name":"x"}},"outputs":{"y":{"dtype":"DT_INT64",)"
      R"("tensor_shape":{"dim":[],"unknown_rank":false},"name":"y"}},"method_name":"tensorflow/serving/predict"}}}}})");
}

TEST(ModelInfo, StateNamesAndRuntimeSignature) {
  EXPECT_EQ(ModelVersionStateName(ModelVersionState::kLoading), "LOADING");
  EXPECT_EQ(ModelVersionStateName(ModelVersionState::kUnloading), "UNLOADING");
  runtime::Signature runtime_sig;
  runtime_sig.inputs.push_back(testing::Info("in", DataType::kUInt8, {-1, 224, 224, 3}));
  runtime_sig.outputs.push_back(testing::Info("out", DataType::kFloat32, {-1, 1000}));
  ModelSignature sig = ModelSignature::FromRuntime(runtime_sig);
  EXPECT_EQ(sig.name, "serving_default");
  EXPECT_EQ(sig.inputs[0].shape, (runtime::Shape{-1, 224, 224, 3}));
  EXPECT_EQ(sig.outputs[0].name, "out");
}

}  // namespace
}  // namespace mf::codec
