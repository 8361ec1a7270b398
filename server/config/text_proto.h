// Reads a protobuf text-format file (ModelServerConfig, BatchingParameters, MonitoringConfig:
// the formats tensorflow_model_server's --*_file flags take), with errors that name the file,
// line and column.
#pragma once

#include <google/protobuf/message.h>

#include <string>

#include "common/status.h"

namespace mf::server {

// NOT_FOUND when the file cannot be read, INVALID_ARGUMENT "<path>:<line>:<col>: <what>" when
// it does not parse. `message` is cleared first and left cleared on error.
Status ParseTextProtoFile(const std::string& path, google::protobuf::Message* message);
Status ParseTextProto(const std::string& text, const std::string& source_name, google::protobuf::Message* message);

}  // namespace mf::server
