// Durable state of the local store: snapshot.json (all objects and the retained watch history at
// one resourceVersion) plus wal.jsonl (one JSON record per committed change since). A restart
// loads the snapshot and replays the log; a torn last line (a crash mid-write) is dropped.
// Records are written with one write(2) each before the change becomes visible, so a process
// crash loses nothing that a client saw acknowledged (power loss may: no fsync per record).
#pragma once

#include <filesystem>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace mf::local {

class Journal {
 public:
  struct Loaded {
    nlohmann::json snapshot;               // null when there was none
    std::vector<nlohmann::json> records;   // the log, in commit order
  };

  // Creates `dir` if needed and reads what is there.
  static StatusOr<std::unique_ptr<Journal>> Open(const std::filesystem::path& dir, Loaded* loaded);
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  Status Append(const nlohmann::json& record);
  // Atomically replaces the snapshot (write, fsync, rename) and empties the log.
  Status WriteSnapshot(const nlohmann::json& snapshot);
  size_t records_since_snapshot() const { return records_; }

 private:
  Journal(std::filesystem::path dir, int wal_fd, size_t records, size_t wal_bytes);
  std::filesystem::path dir_;
  int wal_fd_;
  size_t records_;
  size_t wal_bytes_;  // length of the complete records; a failed append is cut back to it
};

}  // namespace mf::local
