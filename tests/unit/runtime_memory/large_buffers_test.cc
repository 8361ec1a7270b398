// Host tensors of 32 MiB or more (tensor.h, KeepLargeBuffersForReuse): off by default, a freed
// one is unmapped; with a limit set, the next tensor of about its size takes its pages without a
// page fault, and what would pass the limit is unmapped instead of kept.
#include <gtest/gtest.h>

#include <cstring>

#include "runtime/tensor.h"
#include "tests/unit/runtime_memory/page_probe.h"

namespace mf::runtime {
namespace {

using page_probe::Mapped;
using page_probe::MinorFaults;

constexpr int64_t kFloats = int64_t{40} << 18;  // 40 MiB of floats
constexpr size_t kBytes = static_cast<size_t>(kFloats) * sizeof(float);

// Writes every page of `t`; returns the page faults that took.
long Touch(Tensor& t) {
  const long before = MinorFaults();
  std::memset(t.raw_data(), 0x5a, t.byte_size());
  return MinorFaults() - before;
}

Tensor Make(int64_t floats) {
  StatusOr<Tensor> t = Tensor::AllocateUninitialized(DataType::kFloat32, {floats});
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::move(t).value();
}

class LargeBuffersTest : public ::testing::Test {
 protected:
  void TearDown() override { KeepLargeBuffersForReuse(0); }
};

TEST_F(LargeBuffersTest, FreedLargeTensorsAreUnmappedByDefault) {
  const void* address = nullptr;
  {
    Tensor t = Make(kFloats);
    Touch(t);
    address = t.raw_data();
  }
  EXPECT_EQ(KeptLargeBufferBytes(), 0u);
  EXPECT_FALSE(Mapped(address));
}

TEST_F(LargeBuffersTest, TheNextRunsTensorReusesResidentPages) {
  KeepLargeBuffersForReuse(size_t{256} << 20);
  const void* address = nullptr;
  {
    Tensor first = Make(kFloats);
    EXPECT_GT(Touch(first), static_cast<long>(kBytes / 4096 / 2));  // new pages fault in
    address = first.raw_data();
  }
  EXPECT_GE(KeptLargeBufferBytes(), kBytes);
  Tensor second = Make(kFloats - 1000);  // a little smaller serves too
  EXPECT_EQ(second.raw_data(), address);
  EXPECT_EQ(KeptLargeBufferBytes(), 0u);
  EXPECT_LT(Touch(second), 16);  // already resident
}

TEST_F(LargeBuffersTest, WhatPassesTheLimitIsUnmapped) {
  KeepLargeBuffersForReuse(kBytes + (size_t{1} << 20));  // room for one
  const void* first_address = nullptr;
  const void* second_address = nullptr;
  {
    Tensor first = Make(kFloats);
    Tensor second = Make(kFloats);
    Touch(first);
    Touch(second);
    first_address = first.raw_data();
    second_address = second.raw_data();
  }  // second dies first: kept; then first: over the limit
  EXPECT_TRUE(Mapped(second_address));
  EXPECT_FALSE(Mapped(first_address));
  EXPECT_LE(KeptLargeBufferBytes(), kBytes + (size_t{1} << 20));
  KeepLargeBuffersForReuse(0);  // lowering to 0 unmaps what is kept
  EXPECT_EQ(KeptLargeBufferBytes(), 0u);
  EXPECT_FALSE(Mapped(second_address));
}

TEST_F(LargeBuffersTest, ZeroFilledTensorsFromThePoolAreZero) {
  KeepLargeBuffersForReuse(size_t{256} << 20);
  {
    Tensor dirty = Make(kFloats);
    Touch(dirty);
  }
  StatusOr<Tensor> zeroed = Tensor::Allocate(DataType::kFloat32, {kFloats});
  ASSERT_TRUE(zeroed.ok());
  const float* p = zeroed->data<float>();
  for (int64_t i = 0; i < kFloats; i += 4099) ASSERT_EQ(p[i], 0.f) << i;
}

}  // namespace
}  // namespace mf::runtime
