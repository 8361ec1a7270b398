#include "tools/local/kubelet/image_map.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

namespace mf::local {

std::string ImageRepository(std::string_view image) {
  std::string_view repo = image.substr(0, image.find('@'));
  size_t colon = repo.rfind(':');
  if (colon != std::string_view::npos && repo.find('/', colon) == std::string_view::npos) {
    repo = repo.substr(0, colon);
  }
  return std::string(repo);
}

std::optional<std::string> ImageMap::Resolve(std::string_view image) const {
  if (auto it = programs_.find(image); it != programs_.end()) return it->second;
  if (auto it = programs_.find(ImageRepository(image)); it != programs_.end()) return it->second;
  return std::nullopt;
}

StatusOr<ImageMap> ImageMap::Parse(std::string_view yaml_text, std::string_view source) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::string(source) + ": not valid YAML: " + e.what());
  }
  ImageMap map;
  if (root.IsNull()) return map;
  if (!root.IsMap() || !root["images"]) {
    return InvalidArgument(std::string(source) + ": expected a mapping with key 'images' (image -> program path)");
  }
  const YAML::Node images = root["images"];
  if (images.IsNull()) return map;
  if (!images.IsMap()) {
    return InvalidArgument(std::string(source) + ": 'images' must map image names to program paths");
  }
  for (const auto& entry : images) {
    if (!entry.first.IsScalar() || !entry.second.IsScalar() || entry.first.Scalar().empty() ||
        entry.second.Scalar().empty()) {
      return InvalidArgument(std::string(source) + ": every 'images' entry must be a non-empty image: program pair");
    }
    map.Add(entry.first.Scalar(), entry.second.Scalar());
  }
  return map;
}

StatusOr<ImageMap> ImageMap::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("image map " + path + " cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  return Parse(text.str(), path);
}

}  // namespace mf::local
