// Drops a loaded version's files from the page cache (TF Serving's --flush_filesystem_caches).
// Once a version is loaded its weights live in the process; the kernel's cached copy of
// model.onnx (and of external data files) is a second copy that counts against the pod's memory
// cgroup until reclaimed.
#pragma once

#include <filesystem>

namespace mf::server {

// posix_fadvise(DONTNEED) on every regular file directly in `directory` and in its
// subdirectories (external data may sit in one). Best effort: errors are ignored.
void DropFromPageCache(const std::filesystem::path& directory);

}  // namespace mf::server
