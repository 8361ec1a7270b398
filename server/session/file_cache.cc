#include "server/session/file_cache.h"

#include <fcntl.h>
#include <unistd.h>

namespace mf::server {

void DropFromPageCache(const std::filesystem::path& directory) {
  std::error_code error;
  // Bounded: a version directory holds a model and its data, not a tree to wander.
  constexpr int kMaxFiles = 1024;
  int files = 0;
  for (auto it = std::filesystem::recursive_directory_iterator(directory, error);
       !error && it != std::filesystem::recursive_directory_iterator() && files < kMaxFiles; it.increment(error)) {
    if (!it->is_regular_file(error)) continue;
    ++files;
    const int fd = open(it->path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
  }
}

}  // namespace mf::server
