// Publishing a model version atomically. A fetch writes into a staging directory beside the
// destination (<parent>/.<name>.tmp-<pid>); Publish() makes it durable, adds the marker file
// and puts it in place of the destination with renames, so the server's directory watch sees
// the old version directory or the complete new one, never a half-written one. The dot prefix
// keeps the watch (which wants numeric version names) from looking at staging directories.
//
// Invariant: every directory created here is renamed onto the destination or removed, also on
// failure; what a killed sync left behind (its pid gone) is removed by the next Staging::Create.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "common/status.h"

namespace mf::sync {

// What a fetch wrote, as the marker records it.
struct Content {
  uint64_t bytes = 0;
  // A single file's SHA-256 (what `sha256sum` prints); for a directory, the SHA-256 of its
  // sorted entry list with each file's digest (see local_source.h).
  std::string sha256;
  std::string file_name;  // the single file's name; empty for a directory
};

// Same digest and same layout (one file of the same name, or a directory tree).
bool SameContent(const Content& a, const Content& b);

// Every published directory holds this file: the source and its digest, so that a restarted
// sidecar finds the destination already up to date and skips the copy.
inline constexpr char kMarkerName[] = ".modelfleet-sync";

struct Marker {
  std::string source;  // the URI
  Content content;
};

// nullopt when `dir` has no marker or an unreadable one (the directory is then replaced).
std::optional<Marker> ReadMarker(const std::filesystem::path& dir);

class Staging {
 public:
  // Creates the destination's parent if needed, removes stale staging and set-aside siblings of
  // syncs that are gone, and makes a fresh, empty <parent>/.<name>.tmp-<pid>.
  static StatusOr<Staging> Create(const std::filesystem::path& dest);
  Staging(Staging&& other) noexcept;
  Staging& operator=(Staging&&) = delete;
  Staging(const Staging&) = delete;
  ~Staging();  // removes the staging directory unless it was published

  const std::filesystem::path& path() const { return path_; }
  // Writes the marker, fsyncs the tree and replaces the destination with it.
  Status Publish(const Marker& marker);

 private:
  Staging(std::filesystem::path path, std::filesystem::path dest);
  std::filesystem::path path_;  // empty once published or moved from
  std::filesystem::path dest_;
};

// Puts the directory `staged` in place of `dest` (absent, a directory or a file) and removes the
// old content. Where the filesystem supports renameat2(RENAME_EXCHANGE) the swap is one step;
// otherwise (or with allow_exchange = false) the old is renamed aside to <parent>/.<name>.old-<pid>,
// the new renamed in, and the old renamed back if that fails.
Status ReplaceDirectory(const std::filesystem::path& staged, const std::filesystem::path& dest,
                        bool allow_exchange = true);

}  // namespace mf::sync
