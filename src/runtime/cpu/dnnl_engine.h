// The process-wide oneDNN CPU engine. Primitives built on it are immutable and run with a
// per-call stream and user-provided scratchpad, so concurrent Run() calls never share state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <oneapi/dnnl/dnnl.hpp>
#include <utility>

#include "common/status.h"
#include "runtime/cpu/activation.h"
#include "runtime/tensor.h"

namespace mf::runtime::cpu {

dnnl::engine& CpuEngine();

// The calling thread's stream on CpuEngine(). A CPU stream only orders what runs on it; one
// made per call cost an allocation and its teardown.
dnnl::stream& ThreadStream();

// Runs `primitive` on the thread's stream with `args` (argument kind, memory), through the C
// API's argument array: the C++ API's std::unordered_map costs an allocation per argument, and a
// small convolution's call outside oneDNN is mostly such allocations. Throws dnnl::error.
void Execute(const dnnl::primitive& primitive, std::initializer_list<std::pair<int, const dnnl::memory*>> args);

// The calling thread's scratchpad for one primitive call that needs `bytes`: uninitialized
// (oneDNN writes it before reading), valid until the thread's next call. Kept per thread and
// grown as needed: a new buffer per call cost a malloc and a free, and freeing a large one made
// glibc consolidate its heap each time (about a third of a small convolution's time outside
// oneDNN). A thread keeps the largest scratchpad it has needed.
uint8_t* ThreadScratchpad(size_t bytes);

// A oneDNN memory of `md` over a buffer that `holder` takes (a Tensor, so that a run's
// temporaries in oneDNN's layouts are planned with its activations, runtime/memory_pattern.h;
// oneDNN's own allocations grew malloc's heap). Valid while `holder` holds it.
StatusOr<dnnl::memory> TemporaryMemory(const dnnl::memory::desc& md, Tensor* holder);

// Appends the oneDNN eltwise post-op computing `act` (nothing for Activation::kNone).
void AppendActivation(const ActivationParams& act, dnnl::post_ops& ops);

// Turns a oneDNN exception into a Status (INVALID_ARGUMENT: oneDNN rejects shapes it cannot run).
Status DnnlError(const dnnl::error& e, const std::string& what);

}  // namespace mf::runtime::cpu
