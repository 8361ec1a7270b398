// Servable: one loaded model version as request handlers see it. The manager hands out
// shared_ptrs to servables, so a request that holds one keeps that version alive through an
// unload; the version's memory is freed when the last request using it finishes.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "runtime/session.h"
#include "runtime/tensor.h"

namespace mf::server {

class Servable {
 public:
  using Outputs = std::vector<runtime::Tensor>;
  using Done = std::function<void(Status, Outputs)>;
  // Whether the caller still wants the answer of a run expected to end at `expected_end`: OK, or
  // why not (DEADLINE_EXCEEDED when the deadline falls before then, CANCELLED). Asked just before a
  // run that waited (in a batch queue, in the run pool) starts, so work whose answer nobody would
  // get in time is skipped and `done` gets that status instead. Empty: always wanted. Called, if
  // at all, before `done` and while the request's `done` is alive.
  using StillWanted = std::function<Status(std::chrono::steady_clock::time_point expected_end)>;
  // The deadline part of a StillWanted check, shared by the front ends: DEADLINE_EXCEEDED when
  // `deadline` has passed or falls at or before `expected_end`, else OK.
  static Status MeetsDeadline(std::chrono::steady_clock::time_point deadline,
                              std::chrono::steady_clock::time_point expected_end);

  virtual ~Servable() = default;

  virtual const runtime::Signature& signature() const = 0;
  // Inputs in signature().inputs order. Thread-safe.
  virtual Status Run(const std::vector<const runtime::Tensor*>& inputs, Outputs* outputs) const = 0;
  // Asynchronous form for event-loop callers: `done` runs exactly once, possibly on another
  // thread (a batching thread), possibly before RunAsync returns. The default runs inline (after
  // asking `still_wanted`).
  virtual void RunAsync(std::vector<runtime::Tensor> inputs, Done done, StillWanted still_wanted) const;
  // True when RunAsync only queues the work and returns at once (so an event loop may call it
  // directly); false when it computes on the caller's thread.
  virtual bool async_is_nonblocking() const { return false; }
  // True when a run is known to be so short (a small model on the CPU) that handing it to another
  // thread would cost more than it: an io thread may then run it itself (DispatchRun).
  virtual bool cheap_enough_to_run_inline() const { return false; }
  // Bytes held while loaded (weights and planned activations), for memory accounting.
  virtual size_t memory_bytes() const = 0;
  // Where it runs: "cpu" or "cuda" (memory_bytes() then counts device memory).
  virtual std::string_view device() const { return "cpu"; }
  // An uninitialized host tensor to assemble an input in (a batch), in the memory this servable
  // reads fastest (page-locked for a GPU session). The default is plain memory.
  virtual StatusOr<runtime::Tensor> AllocateInput(runtime::DataType dtype, runtime::Shape shape) const;

  // The server-side batching requests to this servable go through, as the model configuration
  // reports it (Triton's max_batch_size and dynamic_batching).
  struct Batching {
    int64_t max_batch_size = 0;
    std::chrono::microseconds max_queue_delay{0};
    std::vector<int64_t> allowed_batch_sizes;  // increasing; empty: any size up to the maximum
  };
  // None: each request runs on its own (the default).
  virtual std::optional<Batching> batching() const { return std::nullopt; }
};

}  // namespace mf::server
