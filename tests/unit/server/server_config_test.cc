#include <gtest/gtest.h>

#include "server/config/batching_parameters.h"
#include "server/config/model_server_config.h"
#include "server/config/server_flags.h"
#include "server/config/text_proto.h"

namespace mf::server {
namespace {

StatusOr<std::vector<ModelConfig>> FromText(const std::string& text) {
  tensorflow::serving::ModelServerConfig proto;
  MF_RETURN_IF_ERROR(ParseTextProto(text, "test.config", &proto));
  return ModelConfigsFromProto(proto);
}

TEST(ModelServerConfigTest, ParsesTfServingTextFormat) {
  auto configs = FromText(R"(
    model_config_list {
      config {
        name: "digits"
        base_path: "/models/digits"
        model_platform: "onnx"
        model_version_policy { specific { versions: 1 versions: 2 } }
        version_labels { key: "stable" value: 1 }
        version_labels { key: "canary" value: 2 }
      }
      config { name: "cnn" base_path: "/models/cnn" model_version_policy { all {} } }
      config { name: "plain" base_path: "/models/plain" }
    })");
  ASSERT_TRUE(configs.ok()) << configs.status().ToString();
  ASSERT_EQ(configs->size(), 3u);
  EXPECT_EQ((*configs)[0].policy, VersionPolicy::Specific({1, 2}));
  EXPECT_EQ((*configs)[0].version_labels.at("canary"), 2);
  EXPECT_EQ((*configs)[1].policy, VersionPolicy::All());
  EXPECT_EQ((*configs)[2].policy, VersionPolicy::Latest(1));
}

TEST(ModelServerConfigTest, RefusesWhatItCannotServe) {
  auto syntax = FromText("model_config_list { config { name: \"m\" base_path: }");
  ASSERT_FALSE(syntax.ok());
  EXPECT_NE(syntax.status().message().find("test.config:1:"), std::string::npos) << syntax.status().message();
  auto platform = FromText(R"(model_config_list { config { name: "m" base_path: "/m" model_platform: "pytorch" } })");
  EXPECT_NE(platform.status().message().find("model_platform 'pytorch'"), std::string::npos);
  // A TF Serving config moved over unchanged: its model.onnx files are served.
  EXPECT_TRUE(
      FromText(R"(model_config_list { config { name: "m" base_path: "/m" model_platform: "tensorflow" } })").ok());
  auto dup = FromText(R"(model_config_list { config { name: "m" base_path: "/a" }
                                              config { name: "m" base_path: "/b" } })");
  EXPECT_NE(dup.status().message().find("listed twice"), std::string::npos);
  auto empty = FromText("");
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  auto zero = FromText(
      R"(model_config_list { config { name: "m" base_path: "/m" model_version_policy { latest { num_versions: 0 } } } })");
  EXPECT_FALSE(zero.ok());
}

TEST(BatchingParametersTest, WrapperValuesAndValidation) {
  tensorflow::serving::BatchingParameters proto;
  ASSERT_TRUE(ParseTextProto(R"(
      max_batch_size { value: 64 }
      batch_timeout_micros { value: 2000 }
      max_enqueued_batches { value: 10 }
      num_batch_threads { value: 3 }
      allowed_batch_sizes: 16 allowed_batch_sizes: 32 allowed_batch_sizes: 64)",
                             "batching.config", &proto)
                  .ok());
  auto options = BatchingOptionsFromProto(proto);
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_EQ(options->max_batch_size, 64);
  EXPECT_EQ(options->batch_timeout, std::chrono::microseconds(2000));
  EXPECT_EQ(options->max_enqueued_batches, 10);
  EXPECT_EQ(options->num_batch_threads, 3);
  EXPECT_EQ(options->allowed_batch_sizes, (std::vector<int64_t>{16, 32, 64}));

  proto.clear_allowed_batch_sizes();
  proto.add_allowed_batch_sizes(8);
  EXPECT_FALSE(BatchingOptionsFromProto(proto).ok()) << "last allowed size must be max_batch_size";
  proto.clear_allowed_batch_sizes();
  EXPECT_FALSE(BatchingOptionsFromProto(proto)->pad_variable_length_inputs);
  proto.set_pad_variable_length_inputs(true);
  auto padded = BatchingOptionsFromProto(proto);
  ASSERT_TRUE(padded.ok()) << padded.status().ToString();
  EXPECT_TRUE(padded->pad_variable_length_inputs);
}

}  // namespace
}  // namespace mf::server

namespace mf::server {
namespace {

TEST(GrpcChannelArgumentsTest, MaxReceiveMessageLengthAsTfServingTakesIt) {
  auto none = ParseGrpcChannelArguments("");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->max_receive_message_bytes);
  auto set = ParseGrpcChannelArguments("grpc.max_connection_age_ms=2000,grpc.max_receive_message_length=1048576");
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_EQ(set->max_receive_message_bytes.value(), 1048576u);
  EXPECT_EQ(set->ignored, std::vector<std::string>{"grpc.max_connection_age_ms"});
  EXPECT_EQ(ParseGrpcChannelArguments("grpc.max_receive_message_length=-1")->max_receive_message_bytes.value(),
            (size_t{1} << 31) - 1);
  for (const char* bad : {"grpc.max_receive_message_length=0", "grpc.max_receive_message_length=12k",
                          "grpc.max_receive_message_length=-5", "novalue", "=3"}) {
    EXPECT_EQ(ParseGrpcChannelArguments(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace mf::server
