// Loader: turns one version's model file into a Servable, ready for traffic (warm-up done).
// The manager calls it from its own thread; an implementation may take seconds.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "server/repository/servable.h"

namespace mf::server {

class Loader {
 public:
  virtual ~Loader() = default;
  virtual StatusOr<std::shared_ptr<const Servable>> Load(const std::string& model_name, int64_t version,
                                                         const std::string& model_path) = 0;
};

}  // namespace mf::server
