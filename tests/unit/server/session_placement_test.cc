// SessionLoader's device per load: the rules of device_placement.h (BackendsToTry), and that a
// LoadRequest's device wins over --device. Runs with or without a GPU: a strict cuda load either
// runs on the GPU or fails with UNAVAILABLE, never on the CPU.
#include <gtest/gtest.h>

#include "example_models.h"
#include "server/session/device_placement.h"
#include "server/session/session_loader.h"

namespace mf::server {
namespace {

using runtime::Backend;

using testing::kDigitsV2;

TEST(BackendsToTryTest, SameRulesForEveryChoice) {
  EXPECT_EQ(BackendsToTry(DeviceChoice::kCpu, false), std::vector<Backend>{Backend::kCpu});
  EXPECT_EQ(BackendsToTry(DeviceChoice::kCpu, true), std::vector<Backend>{Backend::kCpu});
  EXPECT_EQ(BackendsToTry(DeviceChoice::kCuda, false), std::vector<Backend>{Backend::kCuda});
  EXPECT_EQ(BackendsToTry(DeviceChoice::kCuda, true), std::vector<Backend>{Backend::kCuda}) << "strict";
  EXPECT_EQ(BackendsToTry(DeviceChoice::kAuto, false), (std::vector<Backend>{Backend::kCuda, Backend::kCpu}));
  EXPECT_EQ(BackendsToTry(DeviceChoice::kAuto, true), std::vector<Backend>{Backend::kCpu});
}

StatusOr<std::shared_ptr<const Servable>> LoadOn(SessionLoader& loader, std::optional<DeviceChoice> device) {
  return loader.Load(LoadRequest{"digits", 2, kDigitsV2, device});
}

TEST(SessionPlacementTest, RequestDeviceWinsOverTheFlag) {
  // --device=cuda, but the config asks for the CPU: the CPU, whether or not there is a GPU.
  SessionLoader cuda_flag(runtime::SessionOptions{}, nullptr, DevicePlacement{DeviceChoice::kCuda, 0});
  auto on_cpu = LoadOn(cuda_flag, DeviceChoice::kCpu);
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.status().ToString();
  EXPECT_EQ((*on_cpu)->device(), "cpu");

  // --device=cpu; no choice in the config: the flag.
  SessionLoader cpu_flag(runtime::SessionOptions{}, nullptr, DevicePlacement{DeviceChoice::kCpu, 0});
  auto by_flag = LoadOn(cpu_flag, std::nullopt);
  ASSERT_TRUE(by_flag.ok()) << by_flag.status().ToString();
  EXPECT_EQ((*by_flag)->device(), "cpu");
}

TEST(SessionPlacementTest, CudaIsStrictAndAutoFollowsWhatCudaCanDo) {
  SessionLoader loader(runtime::SessionOptions{}, nullptr, DevicePlacement{DeviceChoice::kCpu, 0});
  auto cuda = LoadOn(loader, DeviceChoice::kCuda);
  auto automatic = LoadOn(loader, DeviceChoice::kAuto);
  ASSERT_TRUE(automatic.ok()) << automatic.status().ToString();
  if (cuda.ok()) {
    EXPECT_EQ((*cuda)->device(), "cuda");
    EXPECT_EQ((*automatic)->device(), "cuda");
  } else {
    EXPECT_EQ(cuda.status().code(), StatusCode::kUnavailable) << cuda.status().ToString();
    EXPECT_EQ((*automatic)->device(), "cpu") << "auto falls back to the CPU without a GPU";
    // Once CUDA answered UNAVAILABLE to auto, cuda stays strict: still refused, never the CPU.
    auto again = LoadOn(loader, DeviceChoice::kCuda);
    EXPECT_EQ(again.status().code(), StatusCode::kUnavailable);
  }
  // The 3-argument Load keeps the loader's default (--device=cpu here).
  auto plain = loader.Load("digits", 2, kDigitsV2);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ((*plain)->device(), "cpu");
}

}  // namespace
}  // namespace mf::server
