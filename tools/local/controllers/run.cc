#include "tools/local/controllers/run.h"

#include "tools/local/controllers/builtin_controllers.h"

namespace mf::local {

LocalWorkloads::LocalWorkloads(std::unique_ptr<BuiltinControllers> controllers, std::unique_ptr<Kubelet> kubelet)
    : controllers_(std::move(controllers)), kubelet_(std::move(kubelet)) {}

LocalWorkloads::~LocalWorkloads() { Stop(); }

void LocalWorkloads::Stop() {
  if (controllers_) controllers_->Stop();  // first, so no new pods appear while the kubelet stops
  if (kubelet_) kubelet_->Stop();
}

StatusOr<std::unique_ptr<LocalWorkloads>> StartLocalWorkloads(Store& store, const LocalWorkloadsOptions& options) {
  KubeletOptions kubelet_options;
  kubelet_options.data_dir = options.data_dir;
  kubelet_options.node_name = options.node_name;
  kubelet_options.extra_env = options.extra_env;
  if (!options.image_map_path.empty()) {
    MF_ASSIGN_OR_RETURN(kubelet_options.images, ImageMap::Load(options.image_map_path));
  }
  auto controllers = std::make_unique<BuiltinControllers>(&store);
  MF_RETURN_IF_ERROR(controllers->Start());
  auto kubelet = std::make_unique<Kubelet>(&store, std::move(kubelet_options));
  if (Status s = kubelet->Start(); !s.ok()) {
    controllers->Stop();
    return s;
  }
  return std::make_unique<LocalWorkloads>(std::move(controllers), std::move(kubelet));
}

}  // namespace mf::local
