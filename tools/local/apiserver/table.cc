#include "tools/local/apiserver/table.h"

#include <ctime>

#include "tools/local/apiserver/schema.h"

namespace mf::local {
namespace {

using json = nlohmann::json;

std::optional<std::chrono::system_clock::time_point> ParseTime(const std::string& text) {
  std::tm tm{};
  if (strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm) == nullptr) return std::nullopt;
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

// The built-in columns kube-apiserver computes in Go rather than by JSONPath.
json ComputedCell(const ResourceInfo& r, const std::string& column, const json& o) {
  const json status = o.value("status", json::object());
  if (r.type.kind == "Pod" && column == "Ready") {
    size_t total = o.contains("spec") ? o["spec"].value("containers", json::array()).size() : 0;
    size_t ready = 0;
    for (const auto& cs : status.value("containerStatuses", json::array())) ready += cs.value("ready", false) ? 1 : 0;
    return std::to_string(ready) + "/" + std::to_string(total);
  }
  if (r.type.kind == "Pod" && column == "Restarts") {
    int64_t restarts = 0;
    for (const auto& cs : status.value("containerStatuses", json::array())) restarts += cs.value("restartCount", int64_t{0});
    return std::to_string(restarts);
  }
  if (r.type.kind == "Deployment" && column == "Ready") {
    int64_t want = o.contains("spec") ? o["spec"].value("replicas", int64_t{1}) : 1;
    return std::to_string(status.value("readyReplicas", int64_t{0})) + "/" + std::to_string(want);
  }
  return nullptr;
}

json Cell(const ResourceInfo& r, const PrinterColumn& c, const json& o, std::chrono::system_clock::time_point now) {
  if (c.json_path.empty()) return ComputedCell(r, c.name, o);
  json v = EvaluateJsonPath(o, c.json_path);
  if (c.type == "date" && v.is_string()) {
    auto t = ParseTime(v.get<std::string>());
    if (!t) return v;
    return HumanDuration(std::chrono::duration_cast<std::chrono::seconds>(now - *t));
  }
  if (v.is_null()) {
    // kubectl prints <none> for a missing cell; integer columns of missing counters too.
    return json();
  }
  if (v.is_structured()) return v.dump();
  return v;
}

}  // namespace

std::string HumanDuration(std::chrono::seconds d) {
  int64_t s = d.count();
  if (s < 0) s = 0;
  if (s < 120) return std::to_string(s) + "s";
  int64_t m = s / 60;
  if (m < 10) return std::to_string(m) + "m" + (s % 60 ? std::to_string(s % 60) + "s" : "");
  if (m < 180) return std::to_string(m) + "m";
  int64_t h = m / 60;
  if (h < 8) return std::to_string(h) + "h" + (m % 60 ? std::to_string(m % 60) + "m" : "");
  if (h < 48) return std::to_string(h) + "h";
  int64_t days = h / 24;
  if (days < 8) return std::to_string(days) + "d" + (h % 24 ? std::to_string(h % 24) + "h" : "");
  if (days < 365 * 2) return std::to_string(days) + "d";
  return std::to_string(days / 365) + "y";
}

json ToTable(const ResourceInfo& resource, const std::vector<json>& objects, const std::string& resource_version,
             const std::string& include_object, std::chrono::system_clock::time_point now) {
  json columns = json::array();
  columns.push_back({{"name", "Name"}, {"type", "string"}, {"format", "name"},
                     {"description", "Name must be unique within a namespace."}, {"priority", 0}});
  for (const auto& c : resource.columns) {
    columns.push_back({{"name", c.name}, {"type", c.type}, {"format", c.format}, {"description", c.description}, {"priority", c.priority}});
  }
  json rows = json::array();
  for (const auto& o : objects) {
    json cells = json::array();
    cells.push_back(o["metadata"].value("name", ""));
    for (const auto& c : resource.columns) cells.push_back(Cell(resource, c, o, now));
    json row = {{"cells", std::move(cells)}};
    if (include_object == "Object") {
      row["object"] = o;
    } else if (include_object != "None") {
      row["object"] = {{"kind", "PartialObjectMetadata"}, {"apiVersion", "meta.k8s.io/v1"}, {"metadata", o["metadata"]}};
    }
    rows.push_back(std::move(row));
  }
  return {{"kind", "Table"}, {"apiVersion", "meta.k8s.io/v1"}, {"metadata", {{"resourceVersion", resource_version}}},
          {"columnDefinitions", std::move(columns)}, {"rows", std::move(rows)}};
}

}  // namespace mf::local
