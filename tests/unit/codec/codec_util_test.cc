// base64, fp16/bf16 conversion, JSON writing helpers and input binding.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "codec_test_util.h"
#include "server/codec/base64.h"
#include "server/codec/half.h"
#include "server/codec/json_writer.h"
#include "server/codec/named_tensor.h"

namespace mf::codec {
namespace {

using runtime::DataType;

TEST(Base64, RoundTripsEveryLength) {
  std::string bytes;
  for (int i = 0; i < 40; ++i) {
    std::string encoded;
    Base64Encode(bytes, &encoded);
    EXPECT_EQ(encoded.size() % 4, 0u);
    std::string decoded;
    ASSERT_TRUE(Base64Decode(encoded, &decoded)) << encoded;
    EXPECT_EQ(decoded, bytes);
    bytes.push_back(static_cast<char>(i * 37 + 200));
  }
  std::string out;
  Base64Encode("hello", &out);
  EXPECT_EQ(out, "aGVsbG8=");
}

TEST(Base64, RefusesMalformedText) {
  std::string out = "keep";
  for (const char* bad : {"a", "ab=c", "a===", "****", "aGVsbG8*", "aGk=aGk=", "aGl="}) {
    EXPECT_FALSE(Base64Decode(bad, &out)) << bad;
  }
  EXPECT_EQ(out, "keep");
  EXPECT_TRUE(Base64Decode("aGk", &out));  // unpadded, as absl accepts
  EXPECT_EQ(out, "keephi");
}

TEST(Half, ConvertsExactlyAndRoundsToNearestEven) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xC000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);                // rounds to infinity
  EXPECT_EQ(FloatToHalf(5.960464477539063e-08f), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToHalf(2.98e-08f), 0x0000);
  EXPECT_EQ(FloatToHalf(1.0f + 1.0f / 2048), 0x3C00);  // tie rounds to even
  EXPECT_EQ(FloatToHalf(1.0f + 3.0f / 2048), 0x3C02);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    auto h = static_cast<uint16_t>(bits);
    float f = HalfToFloat(h);
    if (std::isnan(f)) continue;
    ASSERT_EQ(FloatToHalf(f), h) << bits;
  }
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3F80);
  EXPECT_EQ(BFloat16ToFloat(0x4049), 3.140625f);
  EXPECT_EQ(FloatToBFloat16(1.00390625f), 0x3F80);  // tie to even
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(std::nanf("")))));
}

TEST(JsonWriter, StringsAndNumbers) {
  std::string out;
  json::AppendString(&out, std::string("a\"\\\n\x01\x7f", 6));
  EXPECT_EQ(out, "\"a\\\"\\\\\\n\\u0001\x7f\"");
  out.clear();
  json::AppendDouble(&out, 1e21);
  out.push_back(' ');
  json::AppendDouble(&out, -0.0);
  out.push_back(' ');
  json::AppendFloat(&out, 1.0f / 3);
  out.push_back(' ');
  json::AppendInt(&out, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(out, "1e+21 -0.0 0.33333334 -9223372036854775808");
  EXPECT_TRUE(json::IsValidUtf8("héllo"));
  EXPECT_FALSE(json::IsValidUtf8(std::string("\xc3", 1)));
}

TEST(BindInputs, OrdersChecksAndLeavesInputsOnError) {
  std::vector<runtime::TensorInfo> declared = {testing::Info("a", DataType::kFloat32, {-1, 2}),
                                               testing::Info("b", DataType::kInt64, {-1})};
  std::vector<NamedTensor> inputs;
  inputs.push_back({"b", testing::MakeTensor<int64_t>(DataType::kInt64, {1}, {5})});
  inputs.push_back({"a", testing::MakeTensor<float>(DataType::kFloat32, {1, 2}, {1, 2})});
  auto bound = BindInputs(declared, std::move(inputs));
  ASSERT_TRUE(bound.ok()) << bound.status().ToString();
  EXPECT_EQ((*bound)[0].dtype(), DataType::kFloat32);
  EXPECT_EQ((*bound)[1].dtype(), DataType::kInt64);

  std::vector<NamedTensor> wrong;
  wrong.push_back({"a", testing::MakeTensor<float>(DataType::kFloat32, {1, 3}, {1, 2, 3})});
  wrong.push_back({"b", testing::MakeTensor<int64_t>(DataType::kInt64, {1}, {5})});
  auto refused = BindInputs(declared, std::move(wrong));
  EXPECT_EQ(refused.status().message(), "input 'a' has shape [1, 3] but the model expects [-1, 2] (-1: any size)");
  EXPECT_EQ(wrong[0].tensor.num_elements(), 3);  // NOLINT(bugprone-use-after-move): documented to stay intact

  std::vector<NamedTensor> missing;
  missing.push_back({"a", testing::MakeTensor<float>(DataType::kFloat32, {1, 2}, {1, 2})});
  EXPECT_EQ(BindInputs(declared, std::move(missing)).status().message(), "missing input 'b'");
  std::vector<NamedTensor> extra;
  extra.push_back({"c", testing::MakeTensor<float>(DataType::kFloat32, {1}, {1})});
  EXPECT_EQ(BindInputs(declared, std::move(extra)).status().message(),
            "unknown input 'c'; the model's inputs are: a, b");
  std::vector<NamedTensor> typed;
  typed.push_back({"b", testing::MakeTensor<int32_t>(DataType::kInt32, {1}, {5})});
  EXPECT_EQ(BindInputs(declared, std::move(typed)).status().message(),
            "input 'b' has type INT32 but the model expects INT64");
}

}  // namespace
}  // namespace mf::codec
