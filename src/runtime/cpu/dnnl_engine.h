// The process-wide oneDNN CPU engine. Primitives built on it are immutable and run with a
// per-call stream and user-provided scratchpad, so concurrent Run() calls never share state.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include "common/status.h"
#include "runtime/cpu/activation.h"

namespace mf::runtime::cpu {

dnnl::engine& CpuEngine();

// Appends the oneDNN eltwise post-op computing `act` (nothing for Activation::kNone).
void AppendActivation(const ActivationParams& act, dnnl::post_ops& ops);

// Turns a oneDNN exception into a Status (INVALID_ARGUMENT: oneDNN rejects shapes it cannot run).
Status DnnlError(const dnnl::error& e, const std::string& what);

}  // namespace mf::runtime::cpu
