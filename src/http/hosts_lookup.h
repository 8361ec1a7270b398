// Names resolved from an /etc/hosts-style file before DNS. The local cluster's kubelet writes one
// per namespace (Service names -> pod or Service addresses) and points MODELFLEET_HOSTS_FILE at
// it for the processes it starts; the HTTP client consults it so that our C++ binaries resolve
// "svc", "svc.ns", "svc.ns.svc" and "svc.ns.svc.cluster.local" as pods in a real cluster do.
#pragma once

#include <sys/types.h>

#include <ctime>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace mf::http {

// "<address> <name> [<alias>...]" lines; '#' starts a comment. Names are lower-cased without a
// trailing dot; the first line naming a host wins, as in /etc/hosts.
std::map<std::string, std::string> ParseHostsFile(std::string_view text);

// $MODELFLEET_HOSTS_FILE, or "" when unset.
std::string HostsFileFromEnvironment();

class HostsFile {
 public:
  explicit HostsFile(std::string path) : path_(std::move(path)) {}

  // The address the file gives `host` (case-insensitive, trailing dot ignored), nullopt when it
  // names no such host or cannot be read. Costs one stat(2); the file is re-read only when its
  // inode, size or modification time changed (the kubelet replaces it by rename).
  std::optional<std::string> Lookup(std::string_view host);

  const std::string& path() const { return path_; }

 private:
  struct Stamp {
    ino_t inode = 0;
    off_t size = -1;
    timespec mtime{};
    bool operator==(const Stamp& o) const {
      return inode == o.inode && size == o.size && mtime.tv_sec == o.mtime.tv_sec && mtime.tv_nsec == o.mtime.tv_nsec;
    }
  };

  const std::string path_;
  std::mutex mu_;
  std::optional<Stamp> loaded_;  // of the file `hosts_` was read from
  std::map<std::string, std::string> hosts_;
};

}  // namespace mf::http
