#include "tools/local/kubelet/pod_ip_allocator.h"

#include <arpa/inet.h>

namespace mf::local {
namespace {

std::string Format(uint32_t ip) {
  return std::to_string(ip >> 24) + "." + std::to_string((ip >> 16) & 255) + "." + std::to_string((ip >> 8) & 255) +
         "." + std::to_string(ip & 255);
}

uint32_t Parse(const std::string& text) {
  in_addr addr{};
  return inet_pton(AF_INET, text.c_str(), &addr) == 1 ? ntohl(addr.s_addr) : 0;
}

}  // namespace

// The pool runs from `first` to the end of its /16 (10.244.1.1 .. 10.244.255.254).
PodIpAllocator::PodIpAllocator(const std::string& first)
    : first_(Parse(first)), last_(first_ == 0 ? 0 : (first_ | 0xFFFFu) - 1), last_handed_out_(last_) {}

std::optional<std::string> PodIpAllocator::Allocate(const std::string& key) {
  std::lock_guard lock(mu_);
  if (auto it = by_pod_.find(key); it != by_pod_.end()) return Format(it->second);
  if (first_ == 0) return std::nullopt;
  // From the address after the last one handed out, wrapping: a freed address is reused last.
  const uint32_t size = last_ - first_ + 1;
  for (uint32_t step = 1; step <= size; ++step) {
    const uint32_t ip = first_ + (last_handed_out_ - first_ + step) % size;
    const uint32_t last = ip & 255;
    if (last == 0 || last == 255) continue;  // skip network and broadcast-looking addresses
    if (used_.count(ip)) continue;
    used_.insert(ip);
    by_pod_[key] = ip;
    last_handed_out_ = ip;
    return Format(ip);
  }
  return std::nullopt;
}

bool PodIpAllocator::Claim(const std::string& key, const std::string& ip_text) {
  uint32_t ip = Parse(ip_text);
  if (ip == 0 || ip < first_ || ip > last_) return false;
  std::lock_guard lock(mu_);
  if (auto it = by_pod_.find(key); it != by_pod_.end()) return it->second == ip;
  if (used_.count(ip)) return false;
  used_.insert(ip);
  by_pod_[key] = ip;
  return true;
}

void PodIpAllocator::Release(const std::string& key) {
  std::lock_guard lock(mu_);
  if (auto it = by_pod_.find(key); it != by_pod_.end()) {
    used_.erase(it->second);
    by_pod_.erase(it);
  }
}

}  // namespace mf::local
