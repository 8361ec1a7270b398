#include "server/config/triton_model_config.h"

#include <gtest/gtest.h>

namespace mf::server {
namespace {

// A servable with a fixed signature, on the CPU, batched or not.
class DescribedServable : public Servable {
 public:
  explicit DescribedServable(std::optional<Batching> batching, std::string_view device = "cpu")
      : batching_(std::move(batching)), device_(device) {
    signature_.inputs = {{"images", runtime::DataType::kFloat32, {-1, 64}},
                         {"ids", runtime::DataType::kInt64, {-1, 7}}};
    signature_.outputs = {{"scores", runtime::DataType::kFloat32, {-1, 10}},
                          {"text", runtime::DataType::kString, {-1}}};
  }
  const runtime::Signature& signature() const override { return signature_; }
  Status Run(const std::vector<const runtime::Tensor*>&, Outputs*) const override { return Unimplemented("not run"); }
  size_t memory_bytes() const override { return 0; }
  std::string_view device() const override { return device_; }
  std::optional<Batching> batching() const override { return batching_; }

 private:
  runtime::Signature signature_;
  std::optional<Batching> batching_;
  std::string device_;
};

TEST(TritonModelConfigTest, UnbatchedModelKeepsFullDimsAndNoScheduler) {
  const DescribedServable servable(std::nullopt);
  const inference::ModelConfig config = TritonModelConfig("digits", servable, VersionPolicy::Latest(2));
  EXPECT_EQ(config.name(), "digits");
  EXPECT_EQ(config.platform(), "onnxruntime_onnx");
  EXPECT_EQ(config.max_batch_size(), 0);
  EXPECT_FALSE(config.has_dynamic_batching());
  ASSERT_EQ(config.input_size(), 2);
  EXPECT_EQ(config.input(0).data_type(), inference::TYPE_FP32);
  EXPECT_EQ(config.input(1).data_type(), inference::TYPE_INT64);
  EXPECT_EQ(std::vector<int64_t>(config.input(0).dims().begin(), config.input(0).dims().end()),
            (std::vector<int64_t>{-1, 64}));
  EXPECT_EQ(config.output(1).data_type(), inference::TYPE_STRING);
  EXPECT_EQ(config.version_policy().latest().num_versions(), 2u);
  ASSERT_EQ(config.instance_group_size(), 1);
  EXPECT_EQ(config.instance_group(0).kind(), inference::ModelInstanceGroup::KIND_CPU);

  EXPECT_EQ(TritonModelConfigJson(config),
            R"({"name":"digits","platform":"onnxruntime_onnx","backend":"onnxruntime",)"
            R"("version_policy":{"latest":{"num_versions":2}},"max_batch_size":0,"input":[)"
            R"({"name":"images","data_type":"TYPE_FP32","format":"FORMAT_NONE","dims":[-1,64],)"
            R"("is_shape_tensor":false,"allow_ragged_batch":false,"optional":false},)"
            R"({"name":"ids","data_type":"TYPE_INT64","format":"FORMAT_NONE","dims":[-1,7],)"
            R"("is_shape_tensor":false,"allow_ragged_batch":false,"optional":false}],"output":[)"
            R"({"name":"scores","data_type":"TYPE_FP32","dims":[-1,10],"label_filename":"","is_shape_tensor":false},)"
            R"({"name":"text","data_type":"TYPE_STRING","dims":[-1],"label_filename":"","is_shape_tensor":false}],)"
            R"("instance_group":[{"name":"digits","kind":"KIND_CPU","count":1,"gpus":[]}],)"
            R"("default_model_filename":"model.onnx"})");
}

TEST(TritonModelConfigTest, BatchedModelLeavesTheBatchDimensionOut) {
  const DescribedServable servable(Servable::Batching{16, std::chrono::microseconds(250), {4, 16}}, "cuda");
  const inference::ModelConfig config = TritonModelConfig("m", servable, VersionPolicy::Specific({3, 5}));
  EXPECT_EQ(config.max_batch_size(), 16);
  EXPECT_EQ(std::vector<int64_t>(config.input(0).dims().begin(), config.input(0).dims().end()),
            (std::vector<int64_t>{64}));
  EXPECT_EQ(config.output(1).dims_size(), 0);
  EXPECT_EQ(config.instance_group(0).kind(), inference::ModelInstanceGroup::KIND_GPU);
  const std::string json = TritonModelConfigJson(config);
  EXPECT_NE(json.find(R"("version_policy":{"specific":{"versions":[3,5]}})"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("dynamic_batching":{"preferred_batch_size":[4,16],"max_queue_delay_microseconds":250,)"
                      R"("preserve_ordering":false})"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find(R"("kind":"KIND_GPU","count":1,"gpus":[0]})"), std::string::npos) << json;
  // The gRPC answer carries the same message: what Triton's own .proto decodes.
  inference::ModelConfigResponse response;
  *response.mutable_config() = config;
  inference::ModelConfigResponse decoded;
  ASSERT_TRUE(decoded.ParseFromString(response.SerializeAsString()));
  EXPECT_EQ(decoded.config().dynamic_batching().max_queue_delay_microseconds(), 250u);
}

TEST(TritonModelConfigTest, AllVersionsPolicy) {
  const DescribedServable servable(std::nullopt);
  EXPECT_NE(TritonModelConfigJson(TritonModelConfig("m", servable, VersionPolicy::All()))
                .find(R"("version_policy":{"all":{}})"),
            std::string::npos);
}

}  // namespace
}  // namespace mf::server
