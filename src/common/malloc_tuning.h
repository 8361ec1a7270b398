// glibc malloc settings for our two kinds of long-running process. Each is called from main()
// before any thread starts (arenas are picked as threads first allocate). No-ops off glibc.
#pragma once

#include <chrono>
#include <thread>

namespace mf {

// The operator: many small objects (cached API objects, parsed JSON) allocated and freed by
// dozens of worker and watch threads. With glibc's defaults each thread soon has its own arena
// (up to 8 per core) and freed memory stays in whichever arena freed it: at 5,000
// ModelDeployments about 190 MiB of RSS for well under 100 MB of live heap. Caps the arenas at
// `arenas` and fixes the mmap threshold at 256 KiB (glibc otherwise raises it after each large
// free, so multi-megabyte list responses would stay in the heap after use).
void TuneMallocForManySmallObjects(int arenas);

// Returns every free heap page of every arena to the kernel now (malloc_trim), e.g. after a model
// load freed the plain copies of weights it packed. Takes each arena's lock in turn: call it off
// the request path.
void ReturnFreedHeapToOs();

// Returns free heap pages to the kernel every `period` (malloc_trim) until the thread is stopped.
std::jthread StartHeapTrimmer(std::chrono::seconds period);

// The runtime: every run allocates and frees the same activation buffers, many above glibc's
// 128 KiB mmap threshold, so each run maps them afresh and page-faults on every page (1,800
// faults per run of the BERT-style encoder at batch 8). Serves blocks up to 32 MiB from the heap
// and keeps up to 256 MiB of freed memory for the next run, as ONNX Runtime's arena and TF
// Serving's tcmalloc do. (Runs with a memory pattern take their large buffers from its slab
// instead: runtime/memory_pattern.h.)
void TuneMallocForReusedBuffers();

}  // namespace mf
