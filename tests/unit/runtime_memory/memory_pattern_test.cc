// Activation memory planned from an earlier run (runtime/memory_pattern.h): the offsets never
// overlap two buffers alive at once, a run that repeats the recorded one takes its buffers from
// one slab, and a run that does not (or a buffer that escapes) never shares bytes with another.
#include "runtime/memory_pattern.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>

#include "runtime/tensor.h"
#include "tests/unit/runtime_memory/page_probe.h"

namespace mf::runtime {
namespace {

using Interval = MemoryPatterns::Interval;

struct PlanCase {
  std::string name;
  std::vector<Interval> buffers;
  size_t extent;  // the widest cut, which the plan reaches for these
};

class PlanOffsetsTest : public ::testing::TestWithParam<PlanCase> {};

TEST_P(PlanOffsetsTest, ReachesTheWidestCut) {
  size_t extent = 0;
  MemoryPatterns::PlanOffsets(GetParam().buffers, &extent);
  EXPECT_EQ(extent, GetParam().extent);
}

constexpr size_t kMiB = size_t{1} << 20;

INSTANTIATE_TEST_SUITE_P(
    Cases, PlanOffsetsTest,
    ::testing::Values(PlanCase{"none", {}, 0}, PlanCase{"one", {{0, 1, kMiB}}, kMiB},
                      // A chain of layers: each output lives until the next layer has read it.
                      PlanCase{"chain", {{0, 2, kMiB}, {1, 4, 2 * kMiB}, {3, 6, kMiB}, {5, 7, 3 * kMiB}}, 4 * kMiB},
                      // Apart in time, the same bytes.
                      PlanCase{"apart", {{0, 1, 4 * kMiB}, {2, 3, 4 * kMiB}, {4, 5, kMiB}}, 4 * kMiB},
                      // A residual held across a block.
                      PlanCase{
                          "residual", {{0, 9, kMiB}, {1, 3, 2 * kMiB}, {2, 5, 2 * kMiB}, {4, 8, 2 * kMiB}}, 5 * kMiB},
                      // Sizes round up to 64 bytes.
                      PlanCase{"unaligned", {{0, 2, 100}, {1, 3, 1}}, 192}),
    [](const auto& info) { return info.param.name; });

TEST(PlanOffsets, BuffersAliveAtOnceNeverOverlap) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<Interval> buffers;
    const int n = 1 + static_cast<int>(rng() % 60);
    for (int i = 0; i < n; ++i) {
      const size_t start = rng() % 100;
      buffers.push_back({start, start + 1 + rng() % 30, 1 + rng() % (4 * kMiB)});
    }
    size_t extent = 0;
    const std::vector<size_t> offsets = MemoryPatterns::PlanOffsets(buffers, &extent);
    size_t widest = 0;
    for (size_t t = 0; t < 130; ++t) {
      size_t cut = 0;
      for (const Interval& b : buffers) cut += (b.start <= t && t < b.end) ? b.bytes : 0;
      widest = std::max(widest, cut);
    }
    EXPECT_GE(extent, widest);
    for (size_t i = 0; i < buffers.size(); ++i) {
      EXPECT_LE(offsets[i] + buffers[i].bytes, extent);
      EXPECT_EQ(offsets[i] % 64, 0u);
      for (size_t j = i + 1; j < buffers.size(); ++j) {
        const bool together = buffers[i].start < buffers[j].end && buffers[j].start < buffers[i].end;
        const bool disjoint =
            offsets[i] + buffers[i].bytes <= offsets[j] || offsets[j] + buffers[j].bytes <= offsets[i];
        ASSERT_TRUE(!together || disjoint) << "trial " << trial << ": buffers " << i << " and " << j;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Runs: allocations through Tensor, as kernels make them.

Tensor Make(size_t bytes, unsigned char fill) {
  StatusOr<Tensor> t = Tensor::AllocateUninitialized(DataType::kUInt8, {static_cast<int64_t>(bytes)});
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  std::memset(t->raw_data(), fill, bytes);
  return std::move(t).value();
}

bool Holds(const Tensor& t, unsigned char fill) {
  const auto* p = static_cast<const unsigned char*>(t.raw_data());
  for (size_t i = 0; i < t.byte_size(); ++i) {
    if (p[i] != fill) return false;
  }
  return true;
}

struct Addresses {
  const void *a, *b, *c;
};

// A layer chain: A, then B from A, A freed, C from B, B freed; C is the output (outlives).
Addresses RunChain(MemoryPatterns& patterns, Tensor* output, size_t a_bytes = kMiB) {
  MemoryPatterns::Run run(patterns, "chain");
  Tensor a = Make(a_bytes, 1);
  Tensor b = Make(2 * kMiB, 2);
  EXPECT_TRUE(Holds(a, 1));
  Addresses out{a.raw_data(), b.raw_data(), nullptr};
  a = Tensor();
  Tensor c = Make(kMiB, 3);
  out.c = c.raw_data();
  EXPECT_TRUE(Holds(b, 2));
  b = Tensor();
  *output = std::move(c);
  run.Succeeded();
  return out;
}

bool Within(const void* p, const void* base, size_t bytes) {
  return p >= base && static_cast<const char*>(p) < static_cast<const char*>(base) + bytes;
}

TEST(MemoryPatterns, TheSecondRunTakesItsBuffersFromOneSlab) {
  MemoryPatterns patterns;
  Tensor out1, out2, out3;
  const Addresses recorded = RunChain(patterns, &out1);
  EXPECT_EQ(patterns.slab_bytes(), 0u);  // recorded, nothing planned yet
  const Addresses replayed = RunChain(patterns, &out2);
  // A and B were freed in the run: 3 MiB alive at once. C outlived it.
  EXPECT_EQ(patterns.slab_bytes(), 3 * kMiB);
  EXPECT_EQ(static_cast<const char*>(replayed.a) - static_cast<const char*>(replayed.b), 2 * kMiB)
      << "B, the larger, is placed first at 0; A after it";
  EXPECT_FALSE(Within(replayed.c, replayed.b, 2 * kMiB));
  const Addresses again = RunChain(patterns, &out3);
  EXPECT_EQ(again.a, replayed.a);  // the same bytes every run: no page faults, no heap growth
  EXPECT_EQ(again.b, replayed.b);
  EXPECT_NE(recorded.a, replayed.a);
  // The outputs outlive their runs and are all intact.
  EXPECT_TRUE(Holds(out1, 3));
  EXPECT_TRUE(Holds(out2, 3));
  EXPECT_TRUE(Holds(out3, 3));
}

TEST(MemoryPatterns, ARunThatAllocatesOtherwiseLeavesTheSlabAndPlansTheNext) {
  MemoryPatterns patterns;
  Tensor out;
  RunChain(patterns, &out);
  RunChain(patterns, &out);
  ASSERT_EQ(patterns.slab_bytes(), 3 * kMiB);
  // Same shapes, but a buffer the recording did not have comes where it had B: from there on
  // nothing comes from the slab, so nothing lands on A, still alive.
  {
    MemoryPatterns::Run run(patterns, "chain");
    Tensor a = Make(kMiB, 1);
    Tensor d = Make(3 * kMiB, 4);  // the recording had B (2 MiB) here
    Tensor b = Make(2 * kMiB, 2);
    EXPECT_TRUE(Holds(a, 1));
    EXPECT_TRUE(Holds(d, 4));
    EXPECT_TRUE(Holds(b, 2));
    run.Succeeded();
  }
  // The next run plans from that one: the slab grows to its widest cut, 6 MiB.
  {
    MemoryPatterns::Run run(patterns, "chain");
    Tensor a = Make(kMiB, 1);
    Tensor d = Make(3 * kMiB, 4);
    Tensor b = Make(2 * kMiB, 2);
    EXPECT_TRUE(Holds(a, 1) && Holds(d, 4) && Holds(b, 2));
    run.Succeeded();
  }
  EXPECT_EQ(patterns.slab_bytes(), 6 * kMiB);
}

TEST(MemoryPatterns, ShapesWhoseRunsKeepChangingAllocateAsUsual) {
  MemoryPatterns patterns;
  Tensor out;
  RunChain(patterns, &out);
  std::vector<size_t> slab;
  for (size_t i = 1; i <= 6; ++i) {
    // A data-dependent size, never what the last run had: each run leaves the pattern and
    // plans the next (a larger slab), until the third in a row gives up.
    RunChain(patterns, &out, kMiB + i * (size_t{64} << 10));
    EXPECT_TRUE(Holds(out, 3));
    slab.push_back(patterns.slab_bytes());
  }
  EXPECT_EQ(slab[0], 3 * kMiB);
  EXPECT_GT(slab[1], slab[0]);
  EXPECT_GT(slab[2], slab[1]);
  EXPECT_EQ(slab[3], slab[2]);
  EXPECT_EQ(slab[5], slab[2]);
}

TEST(MemoryPatterns, ABufferThatEscapesItsRunStaysIntact) {
  MemoryPatterns patterns;
  Tensor out;
  RunChain(patterns, &out);
  RunChain(patterns, &out);
  Tensor escaped;
  {
    MemoryPatterns::Run run(patterns, "chain");
    Tensor a = Make(kMiB, 1);
    escaped = std::move(a);  // in the slab, and never freed in the run
    Tensor b = Make(2 * kMiB, 2);
    run.Succeeded();
  }
  // The next replays must not hand out its bytes.
  for (int i = 0; i < 3; ++i) {
    const Addresses next = RunChain(patterns, &out);
    EXPECT_FALSE(Within(escaped.raw_data(), next.a, kMiB));
    EXPECT_FALSE(Within(escaped.raw_data(), next.b, 2 * kMiB));
  }
  EXPECT_TRUE(Holds(escaped, 1));
  const void* address = escaped.raw_data();
  escaped = Tensor();  // the retired slab goes with its last buffer
  EXPECT_FALSE(page_probe::Mapped(address));
}

TEST(MemoryPatterns, AFailedRunTeachesNothing) {
  MemoryPatterns patterns;
  {
    MemoryPatterns::Run run(patterns, "chain");
    Tensor a = Make(kMiB, 1);
  }
  Tensor out;
  RunChain(patterns, &out);
  EXPECT_EQ(patterns.slab_bytes(), 0u) << "the failed run planned nothing; this one recorded";
}

TEST(MemoryPatterns, ConcurrentRunsNeverShareBytes) {
  MemoryPatterns patterns;
  Tensor out;
  RunChain(patterns, &out);
  std::vector<std::thread> threads;
  std::atomic<int> corrupt{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        MemoryPatterns::Run run(patterns, "chain");
        const auto fill = static_cast<unsigned char>(10 + t);
        Tensor a = Make(kMiB, fill);
        Tensor b = Make(2 * kMiB, fill);
        std::this_thread::yield();
        if (!Holds(a, fill)) ++corrupt;
        a = Tensor();
        Tensor c = Make(kMiB, fill);
        if (!Holds(b, fill) || !Holds(c, fill)) ++corrupt;
        run.Succeeded();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(corrupt.load(), 0);
}

TEST(MemoryPatterns, ARunInsideARunAllocatesAsUsual) {
  MemoryPatterns outer_patterns, inner_patterns;
  Tensor out;
  RunChain(outer_patterns, &out);
  RunChain(outer_patterns, &out);
  MemoryPatterns::Run outer(outer_patterns, "chain");
  for (int i = 0; i < 3; ++i) {
    MemoryPatterns::Run inner(inner_patterns, "sub");
    Tensor x = Make(kMiB, 5);
    inner.Succeeded();
  }
  EXPECT_EQ(inner_patterns.slab_bytes(), 0u);
}

TEST(MemoryPatterns, SmallBuffersAreNotPlanned) {
  MemoryPatterns patterns;
  for (int i = 0; i < 3; ++i) {
    MemoryPatterns::Run run(patterns, "small");
    Tensor a = Make(kPatternMinBytes - 1, 1);
    a = Tensor();
    Tensor b = Make(100, 2);
    run.Succeeded();
  }
  EXPECT_EQ(patterns.slab_bytes(), 0u);
}

}  // namespace
}  // namespace mf::runtime
