#include "server/session/file_cache.h"

#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "temp_repository.h"

namespace mf::server {
namespace {

// Pages of `path` in the page cache, counted with mincore on a read-only mapping.
size_t CachedPages(const std::filesystem::path& path) {
  FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return 0;
  const size_t bytes = std::filesystem::file_size(path);
  void* map = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fileno(file), 0);
  std::fclose(file);
  if (map == MAP_FAILED) return 0;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident((bytes + page - 1) / page);
  size_t cached = 0;
  if (mincore(map, bytes, resident.data()) == 0) {
    for (unsigned char r : resident) cached += r & 1;
  }
  munmap(map, bytes);
  return cached;
}

// --flush_filesystem_caches: a loaded version's files (and those in subfolders, where external
// data may be) leave the page cache.
TEST(FileCacheTest, DropsAVersionDirectorysFilesFromThePageCache) {
  testing::TempRepository repo;
  struct statfs fs {};
  if (statfs(repo.base().c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC) {
    GTEST_SKIP() << "tmpfs pages are the files themselves: nothing to drop";
  }
  const std::filesystem::path version = std::filesystem::path(repo.base()) / "1";
  std::filesystem::create_directories(version / "data");
  const std::string contents(4 << 20, 'w');
  for (const auto& file : {version / "model.onnx", version / "data" / "weights.bin"}) {
    std::ofstream(file, std::ios::binary) << contents;
    // Written back first: only clean pages can be dropped.
    FILE* f = std::fopen(file.c_str(), "rb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(fsync(fileno(f)), 0);
    std::fclose(f);
    std::ifstream(file, std::ios::binary).ignore(static_cast<std::streamsize>(contents.size()));
    if (CachedPages(file) == 0) GTEST_SKIP() << "this filesystem does not show its cache to mincore";
  }
  DropFromPageCache(version);
  EXPECT_EQ(CachedPages(version / "model.onnx"), 0u);
  EXPECT_EQ(CachedPages(version / "data" / "weights.bin"), 0u);
  DropFromPageCache(version / "no-such-directory");  // best effort: nothing to do, no error
}

}  // namespace
}  // namespace mf::server
