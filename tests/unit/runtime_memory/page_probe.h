// What the memory tests ask the kernel about pages: faults taken, and whether an address is
// still mapped.
#pragma once

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace mf::runtime::page_probe {

// Minor page faults the calling thread has taken so far.
inline long MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_minflt;
}

// True while the page holding `data` is mapped (resident or not).
inline bool Mapped(const void* data) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  unsigned char residency = 0;
  void* aligned = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(data) & ~(page - 1));
  return mincore(aligned, page, &residency) == 0 || errno != ENOMEM;
}

}  // namespace mf::runtime::page_probe
