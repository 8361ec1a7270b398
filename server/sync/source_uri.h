// What `--source` and `--dest` of modelfleet-sync name, parsed without touching the filesystem,
// so a hostile or mistyped URI is refused before anything is read or written.
//
//   file:///abs/path          a local file or directory
//   pvc://CLAIM/sub/path      <pvc-root>/CLAIM/sub/path (the claim is mounted read-only there)
//   http://... https://...    one file, named by the URL path's last segment
//
// Invariant: a local Source's `path` is absolute, lexically normal and lexically inside `root`;
// '.' and '..' segments (percent-encoded or not), control characters, '?' and '#' are refused.
// Symlinks are the fetcher's business: it checks `path` still lies inside `root` once resolved.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "common/status.h"

namespace mf::sync {

// For error messages: the forms ParseSource accepts.
inline constexpr std::string_view kSupportedSources =
    "file:///abs/path, pvc://CLAIM/sub/path, http://host/.../file or https://host/.../file";

struct Source {
  enum class Kind { kLocal, kHttp };
  Kind kind = Kind::kLocal;
  std::string uri;             // as given, for messages and the publish marker
  std::filesystem::path path;  // kLocal: what to read
  std::filesystem::path root;  // kLocal: `path` must stay inside it after symlinks ("/" for file://)
  std::string url;             // kHttp: what to GET
  std::string file_name;       // kHttp: the URL path's last segment, percent-decoded
};

// `pvc_root` is where claims are mounted (--pvc-root); it must be absolute.
StatusOr<Source> ParseSource(std::string_view uri, std::string_view pvc_root);

// --dest: an absolute directory path, neither "/" nor with '.' or '..' segments; returned
// lexically normal without a trailing '/'.
StatusOr<std::filesystem::path> ParseDestination(std::string_view dest);

}  // namespace mf::sync
