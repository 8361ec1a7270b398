// How modelfleet-server's heap gives memory back to the OS across model swaps (glibc malloc).
//
// A swap frees a whole model (tens to hundreds of MiB, in blocks of every size) while requests
// keep allocating. glibc keeps freed blocks inside its arenas unless they sit at an arena's top,
// and after the first large free it raises its mmap threshold to 32 MiB, so later weight buffers
// come from the heap too: RSS after 20 swaps stayed 2.1-2.4x the start (docs/benchmarks.md).
// malloc_trim(0) hands every free page of every arena back (madvise), so the server calls it
// (mf::ReturnFreedHeapToOs) after each load attempt and each finished unload, on the manager's thread. A fixed mmap
// threshold (optional) additionally puts every large block in its own mapping, unmapped on free.
#pragma once

#include <cstddef>

#include "common/status.h"

namespace mf::server {

struct HeapPolicy {
  // Blocks at least this large get their own mmap (0: glibc's adaptive default). Costs a
  // mapping and page faults per allocation that size, so leave it 0 for models whose runs
  // allocate large activations.
  size_t mmap_threshold_bytes = 0;
};

// Applies `policy` process-wide; call before any thread starts. INVALID_ARGUMENT when glibc
// refuses the value (e.g. above its 32 MiB mmap threshold maximum on 64-bit).
Status ApplyHeapPolicy(const HeapPolicy& policy);

}  // namespace mf::server
