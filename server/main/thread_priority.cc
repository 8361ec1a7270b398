#include "server/main/thread_priority.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "common/logging.h"

namespace mf::server {

Status LowerCurrentThreadPriority(int nice) {
  if (nice < 0 || nice > 19) return InvalidArgument("--load_thread_nice must be in 0..19, got " + std::to_string(nice));
  if (nice == 0) return Status::Ok();
  // On Linux PRIO_PROCESS with a thread id addresses that one thread.
  const auto tid = static_cast<id_t>(syscall(SYS_gettid));
  errno = 0;
  const int current = getpriority(PRIO_PROCESS, tid);
  if (errno != 0 || setpriority(PRIO_PROCESS, tid, std::min(19, current + nice)) != 0) {
    log::Warning("cannot lower the model load thread's priority", {{"error", std::strerror(errno)}});
  }
  return Status::Ok();
}

}  // namespace mf::server
