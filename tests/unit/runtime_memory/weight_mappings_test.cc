// Weight mappings kept for the next load (runtime/weight_mappings.h): off by default; with
// retention on, a released mapping whose pages are resident serves the next weight of about its
// size without a page fault, one whose pages were handed back is not kept, and ReleaseRetained()
// or turning retention off gives everything back.
#include "runtime/weight_mappings.h"

#include <gtest/gtest.h>

#include <cstring>

#include "runtime/tensor.h"
#include "tests/unit/runtime_memory/page_probe.h"

namespace mf::runtime::weight_mappings {
namespace {

using page_probe::Mapped;
using page_probe::MinorFaults;

constexpr size_t kBytes = size_t{8} << 20;

// Minor faults taken while writing every page of [data, data + bytes).
long FaultsToTouch(void* data, size_t bytes) {
  const long before = MinorFaults();
  std::memset(data, 0x5a, bytes);
  return MinorFaults() - before;
}

// Maps kBytes, writes every page (so all are resident) and releases the mapping; returns where
// it was.
void* TouchAndRelease() {
  void* data = Map(kBytes);
  EXPECT_NE(data, nullptr);
  FaultsToTouch(data, kBytes);
  Unmap(data);
  return data;
}

class WeightMappingsTest : public ::testing::Test {
 protected:
  void SetUp() override { SetRetention(true); }
  void TearDown() override { SetRetention(false); }
};

TEST(WeightMappingsOffTest, ReleasedMappingsAreUnmappedByDefault) {
  void* data = TouchAndRelease();
  EXPECT_EQ(RetainedBytes(), 0u);
  EXPECT_FALSE(Mapped(data));
}

TEST_F(WeightMappingsTest, TheNextWeightOfTheSameSizeReusesResidentPages) {
  void* first = Map(kBytes);
  ASSERT_NE(first, nullptr);
  EXPECT_GT(FaultsToTouch(first, kBytes), static_cast<long>(kBytes / 4096 / 2));  // new pages fault in
  Unmap(first);
  EXPECT_GE(RetainedBytes(), kBytes);

  void* second = Map(kBytes);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second, first);
  EXPECT_EQ(RetainedBytes(), 0u);
  EXPECT_LT(FaultsToTouch(second, kBytes), 16);  // already resident
  Unmap(second);
}

TEST_F(WeightMappingsTest, ServesSlightlySmallerWeightsButNotMuchSmallerOnes) {
  void* kept = TouchAndRelease();
  void* half = Map(kBytes / 2);  // would leave half the kept mapping unused: a new mapping
  EXPECT_NE(half, kept);
  void* nearly = Map(kBytes - kBytes / 16);
  EXPECT_EQ(nearly, kept);
  Unmap(half);
  Unmap(nearly);
}

TEST_F(WeightMappingsTest, AMappingWhosePagesWereHandedBackIsNotKept) {
  void* data = Map(kBytes);
  FaultsToTouch(data, kBytes);
  ReleaseResidentPages(data, kBytes);  // what a load does to a copy it consumed
  Unmap(data);
  EXPECT_EQ(RetainedBytes(), 0u);
  EXPECT_FALSE(Mapped(data));
}

TEST_F(WeightMappingsTest, ReleaseRetainedUnmapsWhatIsKept) {
  void* data = TouchAndRelease();
  ASSERT_GT(RetainedBytes(), 0u);
  EXPECT_GE(ReleaseRetained(), kBytes);
  EXPECT_EQ(RetainedBytes(), 0u);
  EXPECT_FALSE(Mapped(data));
}

TEST_F(WeightMappingsTest, TurningRetentionOffUnmapsWhatIsKeptAndStopsKeeping) {
  void* data = TouchAndRelease();
  SetRetention(false);
  EXPECT_EQ(RetainedBytes(), 0u);
  EXPECT_FALSE(Mapped(data));
  TouchAndRelease();  // released while retention is off: not kept
  EXPECT_EQ(RetainedBytes(), 0u);
}

TEST_F(WeightMappingsTest, WeightBuffersGoThroughThePool) {
  auto buffer = AllocateWeightBuffer(kBytes);
  ASSERT_NE(buffer, nullptr);
  void* address = buffer.get();
  FaultsToTouch(address, kBytes);
  buffer.reset();
  EXPECT_GE(RetainedBytes(), kBytes);
  auto again = AllocateWeightBuffer(kBytes);
  EXPECT_EQ(again.get(), address);
}

}  // namespace
}  // namespace mf::runtime::weight_mappings
