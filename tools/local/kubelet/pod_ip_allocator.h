// Hands out a distinct address per pod from the cluster's pod range (network.h: every address of
// it is local inside the cluster's network namespace, so a process binds its pod IP without any
// interface setup). Addresses already in pods' status are claimed again on restart.
//
// Like the host-local IPAM plugin, it hands addresses out in turn from the last one given, so a
// freed address is reused only after the rest of the range: a new pod never takes the address of
// one that just went away, which routers and clients may still hold as an endpoint.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

namespace mf::local {

class PodIpAllocator {
 public:
  // Addresses from `first` (e.g. "10.244.1.1") to the end of its /16.
  explicit PodIpAllocator(const std::string& first);
  // The address for pod `key` ("ns/name"): its previous one if any, else the next free one after
  // the last address handed out.
  // nullopt when all 65,000-odd addresses are in use.
  std::optional<std::string> Allocate(const std::string& key);
  // Records an address a pod already has (after a kubelet restart). False if another pod holds it.
  bool Claim(const std::string& key, const std::string& ip);
  void Release(const std::string& key);

 private:
  const uint32_t first_, last_;
  uint32_t last_handed_out_;  // the range's end at first, so the first address is first_
  std::mutex mu_;
  std::map<std::string, uint32_t> by_pod_;
  std::set<uint32_t> used_;
};

}  // namespace mf::local
