// Hands out a distinct loopback address per pod from 127.0.1.1 upward (127.0.0.0/24 stays the
// host's). Linux routes all of 127.0.0.0/8 to the loopback device, so a process can bind its pod
// IP without any network setup. Addresses already in pods' status are claimed again on restart.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

namespace mf::local {

class PodIpAllocator {
 public:
  // The address for pod `key` ("ns/name"): its previous one if any, else the lowest free one.
  // nullopt when all 65,000-odd addresses are in use.
  std::optional<std::string> Allocate(const std::string& key);
  // Records an address a pod already has (after a kubelet restart). False if another pod holds it.
  bool Claim(const std::string& key, const std::string& ip);
  void Release(const std::string& key);

 private:
  std::mutex mu_;
  std::map<std::string, uint32_t> by_pod_;
  std::set<uint32_t> used_;
};

}  // namespace mf::local
