// Unit tests of what the node agent does as a kubelet beyond running processes: termination
// messages, GPU devices and simulated pods.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tools/local/kubelet/gpu_devices.h"
#include "tools/local/kubelet/simulated_pods.h"
#include "tools/local/kubelet/termination_message.h"
#include "tools/local/kubelet/volumes.h"

namespace mf::local {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "mf-node-features-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  fs::path Write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name, std::ios::binary) << text;
    return path_ / name;
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

TEST(LastLinesTest, LinesThenBytes) {
  EXPECT_EQ(LastLines("a\nb\nc\n", 2, 100), "b\nc\n");
  EXPECT_EQ(LastLines("a\nb\nc", 2, 100), "b\nc");
  EXPECT_EQ(LastLines("a\nb\nc\n", 5, 100), "a\nb\nc\n");
  EXPECT_EQ(LastLines("only", 80, 100), "only");
  EXPECT_EQ(LastLines("", 80, 100), "");
  EXPECT_EQ(LastLines("a\nbcdef\n", 80, 4), "def\n");
  EXPECT_EQ(LastLines("a\n\n\n", 2, 100), "\n\n");
}

TEST(TerminationMessageTest, FileThenLogsOnErrorAsTheKubeletDoes) {
  TempDir dir;
  const fs::path log = dir.Write("c.log", "starting\nloading model\nerror: no CUDA device\n");
  const fs::path empty = dir.Write("empty", "");
  const fs::path written = dir.Write("msg", "model file is corrupt");
  const Json file_policy = Json::object();
  const Json fallback = {{"terminationMessagePolicy", "FallbackToLogsOnError"}};

  EXPECT_EQ(ReadTerminationMessage(file_policy, 1, written, log), "model file is corrupt");
  EXPECT_EQ(ReadTerminationMessage(fallback, 1, written, log), "model file is corrupt");  // the file wins
  EXPECT_EQ(ReadTerminationMessage(file_policy, 1, empty, log), "");
  EXPECT_EQ(ReadTerminationMessage(fallback, 1, empty, log), "starting\nloading model\nerror: no CUDA device\n");
  EXPECT_EQ(ReadTerminationMessage(fallback, 1, dir.path() / "missing", log),
            "starting\nloading model\nerror: no CUDA device\n");
  EXPECT_EQ(ReadTerminationMessage(fallback, 0, empty, log), "");  // only on error
  EXPECT_EQ(ReadTerminationMessage(fallback, 1, empty, dir.path() / "no-log"), "");

  // The file is capped to its last 4096 bytes; the log to its last 80 lines, then 2048 bytes.
  const fs::path big = dir.Write("big", std::string(5000, 'x') + "END");
  std::string message = ReadTerminationMessage(file_policy, 1, big, log);
  EXPECT_EQ(message.size(), kMaxTerminationMessageBytes);
  EXPECT_EQ(message.substr(message.size() - 3), "END");
  std::string many;
  for (int i = 0; i < 100; ++i) many += "line " + std::to_string(i) + "\n";
  const fs::path many_log = dir.Write("many.log", many);
  message = ReadTerminationMessage(fallback, 2, empty, many_log);
  EXPECT_EQ(message.rfind("line 20\n", 0), 0u) << message;
  EXPECT_EQ(message.substr(message.size() - 8), "line 99\n");
  const fs::path wide_log = dir.Write("wide.log", std::string(3000, 'y') + "\nlast\n");
  EXPECT_EQ(ReadTerminationMessage(fallback, 2, empty, wide_log).size(), kMaxTerminationLogBytes);

  EXPECT_EQ(TerminationMessagePath(Json::object()), "/dev/termination-log");
  EXPECT_EQ(TerminationMessagePath({{"terminationMessagePath", "/tmp/why"}}), "/tmp/why");
}

TEST(TerminationMessageTest, PathRewrittenLikeAMount) {
  auto mounts = MountTable::ForContainer({{"volumeMounts", Json::array({{{"name", "data"}, {"mountPath", "/dev"}}})}},
                                         {{"data", "/host/data"}});
  ASSERT_TRUE(mounts.ok());
  mounts->AddFile("/dev/termination-log", "/d/pods/ml_web-0/web.termination-log");
  EXPECT_EQ(mounts->Rewrite("/dev/termination-log"), "/d/pods/ml_web-0/web.termination-log");  // longer path wins
  EXPECT_EQ(mounts->Rewrite("--termination-log=/dev/termination-log"),
            "--termination-log=/d/pods/ml_web-0/web.termination-log");
  EXPECT_EQ(mounts->Rewrite("/dev/other"), "/host/data/other");
  ASSERT_EQ(mounts->VolumeEnv().size(), 1u);  // the file is no volume
  EXPECT_EQ(mounts->VolumeEnv()[0].first, "MODELFLEET_VOLUME_DATA");
}

TEST(GpuDetectionTest, NvidiaSmiListAndDeviceNodes) {
  EXPECT_EQ(CountGpusInNvidiaSmiList("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1b2c)\n"
                                     "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-3d4e)\n"
                                     "  MIG 1g.10gb Device 0: (UUID: MIG-5f6a)\n"),
            2);
  EXPECT_EQ(CountGpusInNvidiaSmiList("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"),
            0);
  EXPECT_EQ(CountGpusInNvidiaSmiList(""), 0);
  TempDir dev;
  for (const char* name : {"nvidia0", "nvidia1", "nvidia12", "nvidiactl", "nvidia-uvm", "nvidia-caps", "null"}) {
    dev.Write(name, "");
  }
  EXPECT_EQ(CountNvidiaDeviceNodes(dev.path()), 3);
  EXPECT_EQ(CountNvidiaDeviceNodes(dev.path() / "missing"), 0);
}

TEST(GpuLimitTest, WholeNumbersFromLimits) {
  struct Case {
    Json container;
    int want;
    bool ok;
  };
  const Case cases[] = {
      {Json::object(), 0, true},
      {{{"resources", {{"limits", {{"cpu", "2"}}}}}}, 0, true},
      {{{"resources", {{"limits", {{"nvidia.com/gpu", "2"}}}}}}, 2, true},
      {{{"resources", {{"limits", {{"nvidia.com/gpu", 1}}}}}}, 1, true},
      {{{"resources", {{"requests", {{"nvidia.com/gpu", "1"}}}}}}, 0, true},  // limits decide, as for the plugin
      {{{"resources", {{"limits", {{"nvidia.com/gpu", "500m"}}}}}}, 0, false},
      {{{"resources", {{"limits", {{"nvidia.com/gpu", "-1"}}}}}}, 0, false},
  };
  for (const Case& c : cases) {
    auto got = GpuLimit(c.container);
    EXPECT_EQ(got.ok(), c.ok) << c.container.dump();
    if (c.ok && got.ok()) {
      EXPECT_EQ(*got, c.want) << c.container.dump();
    }
  }
}

TEST(GpuEnvTest, VisibleDevicesOrVoid) {
  auto env = [](std::vector<int> devices) {
    auto list = GpuEnv(devices);
    return std::map<std::string, std::string>(list.begin(), list.end());
  };
  EXPECT_EQ(env({})["NVIDIA_VISIBLE_DEVICES"], "void");
  EXPECT_EQ(env({})["CUDA_VISIBLE_DEVICES"], "");
  EXPECT_EQ(env({2})["NVIDIA_VISIBLE_DEVICES"], "2");
  EXPECT_EQ(env({0, 3})["CUDA_VISIBLE_DEVICES"], "0,3");
  EXPECT_EQ(env({0, 3})["CUDA_DEVICE_ORDER"], "PCI_BUS_ID");
}

TEST(GpuAllocatorTest, ExclusiveLowestFreeStableAndReleased) {
  GpuAllocator gpus(4);
  struct Step {
    std::string op;  // "alloc", "release", "release-pod"
    std::string pod, container;
    int want;
    std::vector<int> expect;  // for alloc; empty with fails = true when exhausted
    bool fails = false;
  };
  const std::vector<Step> steps = {
      {"alloc", "a", "main", 2, {0, 1}},   {"alloc", "b", "main", 1, {2}},
      {"alloc", "a", "main", 2, {0, 1}},  // a restart keeps its devices
      {"alloc", "c", "main", 0, {}},      // asks for none
      {"alloc", "c", "side", 2, {}, true}, {"alloc", "c", "side", 1, {3}},
      {"release-pod", "a", "", 0, {}},     {"alloc", "d", "main", 3, {}, true},
      {"alloc", "d", "main", 2, {0, 1}},  // lowest free first
      {"release", "b", "main", 0, {}},     {"alloc", "e", "init", 1, {2}},
      {"release", "e", "init", 0, {}},  // a finished init container hands its device on
      {"alloc", "e", "main", 1, {2}},
  };
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    if (s.op == "release") {
      gpus.Release(s.pod, s.container);
    } else if (s.op == "release-pod") {
      gpus.ReleasePod(s.pod);
    } else {
      auto got = gpus.Allocate(s.pod, s.container, s.want);
      if (s.fails) {
        EXPECT_EQ(got.status().code(), StatusCode::kResourceExhausted) << "step " << i;
        EXPECT_NE(got.status().message().find("free"), std::string::npos);
      } else {
        ASSERT_TRUE(got.ok()) << "step " << i << ": " << got.status().ToString();
        EXPECT_EQ(*got, s.expect) << "step " << i;
      }
    }
  }
}

TEST(SimulatedPodStatusTest, RunningReadyAndStable) {
  Json pod = {
      {"metadata", {{"name", "m-0"}, {"namespace", "ml"}, {"uid", "u-9"}}},
      {"spec",
       {{"nodeName", "local"},
        {"initContainers", Json::array({{{"name", "fetch"}, {"image", "busybox"}}})},
        {"containers", Json::array({{{"name", "server"}, {"image", "modelfleet/server:1"}},
                                    {{"name", "sidecar"}, {"image", "envoy:1"}}})}}},
      {"status",
       {{"phase", "Pending"},
        {"conditions",
         Json::array(
             {{{"type", "PodScheduled"}, {"status", "True"}, {"lastTransitionTime", "2026-01-01T00:00:00Z"}}})}}}};
  const auto t0 = Clock::now();
  Json status = SimulatedPodStatus(pod, "10.244.1.9", "10.244.0.1", t0);
  EXPECT_EQ(status["phase"], "Running");
  EXPECT_EQ(status["podIP"], "10.244.1.9");
  EXPECT_EQ(status["hostIP"], "10.244.0.1");
  EXPECT_EQ(status["startTime"], FormatTime(t0));
  ASSERT_EQ(status["containerStatuses"].size(), 2u);
  for (const Json& c : status["containerStatuses"]) {
    EXPECT_TRUE(c["ready"].get<bool>()) << c.dump();
    EXPECT_TRUE(c["started"].get<bool>()) << c.dump();
    EXPECT_EQ(c["state"]["running"]["startedAt"], FormatTime(t0));
  }
  EXPECT_EQ(status["containerStatuses"][0]["image"], "modelfleet/server:1");
  EXPECT_EQ(status["initContainerStatuses"][0]["state"]["terminated"]["reason"], "Completed");
  std::map<std::string, std::string> conditions;
  for (const Json& c : status["conditions"]) conditions[c["type"]] = c["status"];
  EXPECT_EQ(conditions,
            (std::map<std::string, std::string>{
                {"PodScheduled", "True"}, {"Initialized", "True"}, {"ContainersReady", "True"}, {"Ready", "True"}}));
  // Once stored, a later pass computes the same status: no second write, no write loop.
  pod["status"] = status;
  EXPECT_EQ(SimulatedPodStatus(pod, "10.244.1.9", "10.244.0.1", t0 + std::chrono::minutes(5)), status);
}

}  // namespace
}  // namespace mf::local
