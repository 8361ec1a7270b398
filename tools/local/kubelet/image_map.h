// Maps container images to local programs, from a YAML file such as
//   images:
//     modelfleet/server: /work/main/build/server/modelfleet-server
//     "python:3.11": /usr/bin/python3
// A key without a tag matches every tag and digest of that repository ("modelfleet/server"
// matches "modelfleet/server:0.1.0"); a key with a tag matches only that tag. The program is the
// image's entrypoint: a container's `command` replaces it and `args` follow it, as in Kubernetes.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace mf::local {

class ImageMap {
 public:
  ImageMap() = default;
  static StatusOr<ImageMap> Parse(std::string_view yaml_text, std::string_view source);
  static StatusOr<ImageMap> Load(const std::string& path);

  void Add(std::string image, std::string program) { programs_[std::move(image)] = std::move(program); }
  // The program for `image`, by exact match first, then by repository without tag or digest.
  std::optional<std::string> Resolve(std::string_view image) const;

 private:
  std::map<std::string, std::string, std::less<>> programs_;
};

// "repo/name:tag" -> "repo/name"; "repo/name@sha256:..." -> "repo/name"; a registry port
// ("host:5000/name") is not mistaken for a tag.
std::string ImageRepository(std::string_view image);

}  // namespace mf::local
