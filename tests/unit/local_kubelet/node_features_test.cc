// Unit tests of what the node agent does as a kubelet beyond running processes: termination
// messages.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

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

}  // namespace
}  // namespace mf::local
