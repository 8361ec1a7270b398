#include "server/config/monitoring_config.h"

#include "server/config/text_proto.h"
#include "tensorflow_serving/config/monitoring_config.pb.h"

namespace mf::server {

StatusOr<MonitoringOptions> LoadMonitoringConfigFile(const std::string& path) {
  tensorflow::serving::MonitoringConfig proto;
  MF_RETURN_IF_ERROR(ParseTextProtoFile(path, &proto));
  MonitoringOptions options;
  options.prometheus_enabled = proto.prometheus_config().enable();
  if (!proto.prometheus_config().path().empty()) {
    options.prometheus_path = proto.prometheus_config().path();
  }
  if (options.prometheus_path.front() != '/') {
    return InvalidArgument(path + ": prometheus_config path must start with '/', got '" + options.prometheus_path +
                           "'");
  }
  if (options.prometheus_path.rfind("/v1/", 0) == 0 || options.prometheus_path.rfind("/v2", 0) == 0) {
    return InvalidArgument(path + ": prometheus_config path '" + options.prometheus_path +
                           "' collides with the model APIs under /v1/ and /v2");
  }
  return options;
}

}  // namespace mf::server
