// The anonymous mappings that hold model weights of 1 MiB or more (AllocateWeightBuffer,
// Tensor::AllocateForWeights), and an optional pool that keeps released ones mapped.
//
// Why the pool: every load of a version faults in its weights' pages afresh (the plain copy, the
// packed copy), and a fault on memory the kernel just took back costs far more than a copy into
// pages already resident: on a VM whose host reclaims freed guest memory (free page reporting),
// single faults were seen to hold the loading thread in the kernel for milliseconds, where the
// request threads sharing its core cannot preempt it. With retention on, a mapping released by
// an unload (or by a load's own transient copy) is kept, pages and all, and the next load of a
// weight the same size takes it instead of faulting in a new one. What is kept is counted in
// RSS until ReleaseRetained(), which the server calls once loads have gone quiet.
#pragma once

#include <cstddef>

namespace mf::runtime::weight_mappings {

// `bytes` of uninitialized memory in a mapping of its own (page-aligned plus one page; 64-byte
// aligned at least): a kept mapping when one of the right size holds resident pages, else a new
// one. Null when out of memory.
void* Map(size_t bytes);

// Releases what Map() returned: kept while retention is on and some of its pages are resident,
// else unmapped. Null is ignored. Any thread.
void Unmap(void* data);

// Turns keeping released mappings on or off (off unmaps what is kept). Off by default.
void SetRetention(bool on);

// Unmaps every kept mapping; returns the bytes unmapped. Retention stays as it was.
size_t ReleaseRetained();

// Bytes of mappings kept right now (their length, resident or not).
size_t RetainedBytes();

}  // namespace mf::runtime::weight_mappings
