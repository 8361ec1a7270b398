#include "server/repository/run_pool.h"

#include <algorithm>
#include <utility>

namespace mf::server {

RunPool::RunPool(int threads) {
  int n = threads > 0 ? threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  for (int i = 0; i < n; ++i) {
    threads_.emplace_back([this] {
      std::unique_lock lock(mu_);
      while (true) {
        cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping and drained
        std::function<void()> work = std::move(queue_.front());
        queue_.pop_front();
        lock.unlock();
        work();
        lock.lock();
      }
    });
  }
}

RunPool::~RunPool() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void RunPool::Post(std::function<void()> work) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(work));
  }
  cv_.notify_one();
}

void DispatchRun(RunPool& pool, std::shared_ptr<const Servable> servable, std::vector<runtime::Tensor> inputs,
                 Servable::Done done, Servable::StillWanted still_wanted) {
  if (servable->async_is_nonblocking() || servable->cheap_enough_to_run_inline()) {
    return servable->RunAsync(std::move(inputs), std::move(done), std::move(still_wanted));
  }
  struct Job {
    std::shared_ptr<const Servable> servable;
    std::vector<runtime::Tensor> inputs;
    Servable::Done done;
    Servable::StillWanted still_wanted;
  };
  auto job =
      std::make_shared<Job>(Job{std::move(servable), std::move(inputs), std::move(done), std::move(still_wanted)});
  pool.Post(
      [job] { job->servable->RunAsync(std::move(job->inputs), std::move(job->done), std::move(job->still_wanted)); });
}

}  // namespace mf::server
