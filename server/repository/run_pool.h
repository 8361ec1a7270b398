// RunPool: the threads the REST and gRPC front ends hand model runs to, so an io thread never
// blocks on inference (src/http's and src/http2's contract: answer slow work from another
// thread; a model run on an io thread would stall every connection pinned to it). Servables
// whose RunAsync only enqueues (batching) are called directly; the rest run here (DispatchRun).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "server/repository/servable.h"

namespace mf::server {

class RunPool {
 public:
  explicit RunPool(int threads);  // threads <= 0: one per hardware thread
  ~RunPool();                     // runs what is queued, then joins
  RunPool(const RunPool&) = delete;
  RunPool& operator=(const RunPool&) = delete;

  void Post(std::function<void()> work);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// Starts `servable` on `inputs` without blocking the caller for long: a servable that only
// enqueues (batching) or whose runs are cheaper than a thread handoff (cheap_enough_to_run_inline)
// is called on the caller's thread; the others run on `pool`, where `still_wanted` is asked again
// when the run's turn comes (a request that waited past its deadline is not run). `done` runs on
// whichever thread finished the run.
void DispatchRun(RunPool& pool, std::shared_ptr<const Servable> servable, std::vector<runtime::Tensor> inputs,
                 Servable::Done done, Servable::StillWanted still_wanted);

}  // namespace mf::server
