#include "server/codec/warmup_records.h"

#include <gtest/gtest.h>

#include "server/codec/tfrecord.h"
#include "tensorflow_serving/apis/prediction_log.pb.h"

namespace mf::codec {
namespace {

std::string PredictRecord(const std::string& input_name, float value) {
  tensorflow::serving::PredictionLog log;
  auto* request = log.mutable_predict_log()->mutable_request();
  request->mutable_model_spec()->set_name("digits");
  auto& x = (*request->mutable_inputs())[input_name];
  x.set_dtype(tensorflow::DT_FLOAT);
  x.mutable_tensor_shape()->add_dim()->set_size(1);
  x.add_float_val(value);
  return FrameTfRecord(log.SerializeAsString());
}

TEST(TfRecord, Crc32cMatchesTheCastagnoliCheckValue) {
  EXPECT_EQ(Crc32c("123456789"), 0xe3069283u);  // the standard check value of CRC-32C
  EXPECT_EQ(Crc32c(""), 0u);
}

// The bytes of a record tf.io.TFRecordWriter writes for b"hello" (its masked CRCs included).
TEST(TfRecord, FramesAsTensorFlowWritesIt) {
  const std::string framed = FrameTfRecord("hello");
  ASSERT_EQ(framed.size(), 8u + 4 + 5 + 4);
  EXPECT_EQ(framed.substr(0, 8), std::string("\x05\0\0\0\0\0\0\0", 8));
  EXPECT_EQ(framed.substr(12, 5), "hello");
  const std::string file = framed + FrameTfRecord("") + FrameTfRecord("world");
  auto split = SplitTfRecords(file, 10);  // views into `file`
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  EXPECT_EQ(*split, (std::vector<std::string_view>{"hello", "", "world"}));
  EXPECT_TRUE(SplitTfRecords("", 10)->empty());
}

TEST(TfRecord, RefusesTruncationCorruptionAndTooManyRecords) {
  const std::string two = FrameTfRecord("hello") + FrameTfRecord("world");
  for (size_t cut = 1; cut < two.size(); ++cut) {
    if (cut == FrameTfRecord("hello").size()) continue;  // a whole first record
    auto split = SplitTfRecords(std::string_view(two).substr(0, cut), 10);
    ASSERT_FALSE(split.ok()) << "cut at " << cut;
    EXPECT_EQ(split.status().code(), StatusCode::kDataLoss) << split.status().ToString();
  }
  std::string flipped = two;
  flipped[13] ^= 1;  // a data byte of the first record
  EXPECT_EQ(SplitTfRecords(flipped, 10).status().message(), "TFRecord 0 at byte 0: the data's checksum does not match");
  std::string huge = two;
  huge[7] = '\x7f';  // a length near 2^63, checksum then wrong
  EXPECT_EQ(SplitTfRecords(huge, 10).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(SplitTfRecords(two, 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SplitTfRecords("not a tfrecord file, just text", 10).status().code(), StatusCode::kDataLoss);
}

TEST(WarmupRecords, PredictLogsGiveTheirRequestsInOrder) {
  auto requests = ParseWarmupRecords(PredictRecord("x", 1) + PredictRecord("x", 2));
  ASSERT_TRUE(requests.ok()) << requests.status().ToString();
  ASSERT_EQ(requests->size(), 2u);
  EXPECT_EQ((*requests)[1].inputs().at("x").float_val(0), 2);
  EXPECT_EQ((*requests)[0].model_spec().name(), "digits");
}

TEST(WarmupRecords, OtherLogKindsAndGarbageAreRefusedByRecord) {
  tensorflow::serving::PredictionLog classify;
  classify.mutable_classify_log()->mutable_request()->mutable_model_spec()->set_name("m");
  auto refused = ParseWarmupRecords(PredictRecord("x", 1) + FrameTfRecord(classify.SerializeAsString()));
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message().rfind("warm-up record 1 is a classify_log record", 0), 0u)
      << refused.status().message();
  auto empty = ParseWarmupRecords(FrameTfRecord(""));
  EXPECT_EQ(empty.status().message(), "warm-up record 0 holds no log (expected a predict_log)");
  auto garbage = ParseWarmupRecords(FrameTfRecord("\xff\xff\xff"));
  EXPECT_EQ(garbage.status().message(), "warm-up record 0 is not a tensorflow.serving.PredictionLog");
  std::string too_many;
  for (size_t i = 0; i <= kMaxWarmupRecords; ++i) too_many += PredictRecord("x", 0);
  EXPECT_EQ(ParseWarmupRecords(too_many).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mf::codec
