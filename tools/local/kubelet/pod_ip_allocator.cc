#include "tools/local/kubelet/pod_ip_allocator.h"

#include <arpa/inet.h>

namespace mf::local {
namespace {

constexpr uint32_t kFirst = (127u << 24) | (0u << 16) | (1u << 8) | 1u;  // 127.0.1.1
constexpr uint32_t kLast = (127u << 24) | (255u << 16) | (255u << 8) | 254u;

std::string Format(uint32_t ip) {
  return std::to_string(ip >> 24) + "." + std::to_string((ip >> 16) & 255) + "." +
         std::to_string((ip >> 8) & 255) + "." + std::to_string(ip & 255);
}

}  // namespace

std::optional<std::string> PodIpAllocator::Allocate(const std::string& key) {
  std::lock_guard lock(mu_);
  if (auto it = by_pod_.find(key); it != by_pod_.end()) return Format(it->second);
  for (uint32_t ip = kFirst; ip <= kLast; ++ip) {
    uint32_t last = ip & 255;
    if (last == 0 || last == 255) continue;  // skip network and broadcast-looking addresses
    if (used_.count(ip)) continue;
    used_.insert(ip);
    by_pod_[key] = ip;
    return Format(ip);
  }
  return std::nullopt;
}

bool PodIpAllocator::Claim(const std::string& key, const std::string& ip_text) {
  in_addr addr{};
  if (inet_pton(AF_INET, ip_text.c_str(), &addr) != 1) return false;
  uint32_t ip = ntohl(addr.s_addr);
  if (ip < kFirst || ip > kLast) return false;
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
