// Scheduling priority for background work. Model loads parse, rewrite and reorder weights with
// every core (oneDNN's OpenMP team); on a small pod that competes head-on with the requests of
// the models already serving. A load thread with a higher nice value yields to them, and the
// OpenMP threads it creates inherit that value (Linux keeps nice per thread and copies it into
// threads at creation).
#pragma once

#include "common/status.h"

namespace mf::server {

// Adds `nice` (0..19) to the calling thread's nice value. INVALID_ARGUMENT outside 0..19;
// other failures are logged and ignored (priority is an optimisation, not a requirement).
Status LowerCurrentThreadPriority(int nice);

}  // namespace mf::server
