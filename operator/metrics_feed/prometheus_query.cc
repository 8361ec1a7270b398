#include "metrics_feed/prometheus_query.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

namespace mf::op {
namespace {

using Json = nlohmann::json;

void ReplaceAll(std::string* text, std::string_view from, std::string_view to) {
  for (size_t at = text->find(from); at != std::string::npos; at = text->find(from, at + to.size())) {
    text->replace(at, from.size(), to);
  }
}

// A sample's value: Prometheus writes it as a string ("12.5", "NaN", "+Inf").
StatusOr<double> SampleValue(const Json& sample) {
  if (!sample.is_array() || sample.size() != 2 || !sample[1].is_string()) {
    return InvalidArgument("a sample is not [time, \"value\"]: " + sample.dump());
  }
  const std::string text = sample[1].get<std::string>();
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !std::isfinite(value) || value < 0) {
    return InvalidArgument("the query's value is " + text + ", not a rate (a finite number >= 0)");
  }
  return value;
}

}  // namespace

std::string ExpandPrometheusQuery(std::string_view query, std::string_view ns, std::string_view name,
                                  std::string_view version) {
  std::string out(query);
  ReplaceAll(&out, "$modeldeployment", name);
  ReplaceAll(&out, "$namespace", ns);
  ReplaceAll(&out, "$version", version);
  return out;
}

std::string PrometheusQueryUrl(std::string_view base_url, std::string_view query) {
  std::string url(base_url);
  while (!url.empty() && url.back() == '/') url.pop_back();
  url += "/api/v1/query?query=";
  for (unsigned char c : query) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      url += static_cast<char>(c);
    } else {
      char escaped[4];
      std::snprintf(escaped, sizeof(escaped), "%%%02X", c);
      url += escaped;
    }
  }
  return url;
}

StatusOr<double> ParsePrometheusValue(std::string_view body) {
  const Json answer = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!answer.is_object()) return InvalidArgument("Prometheus' answer is not a JSON object");
  if (answer.value("status", "") != "success") {
    const Json& type = answer.contains("errorType") ? answer["errorType"] : Json("error");
    const Json& error = answer.contains("error") ? answer["error"] : Json("no error message");
    return InvalidArgument("Prometheus answered " + (type.is_string() ? type.get<std::string>() : type.dump()) + ": " +
                           (error.is_string() ? error.get<std::string>() : error.dump()));
  }
  const Json data = answer.value("data", Json::object());
  const std::string type = data.is_object() ? data.value("resultType", "") : "";
  if (!data.is_object() || !data.contains("result")) return InvalidArgument("Prometheus' answer has no data.result");
  const Json& result = data["result"];
  if (type == "scalar") return SampleValue(result);
  if (type != "vector" || !result.is_array()) {
    return InvalidArgument("the query gives a " + (type.empty() ? std::string("result of no type") : type) +
                           "; it must give a scalar or an instant vector");
  }
  double sum = 0;
  for (const Json& series : result) {
    if (!series.is_object() || !series.contains("value")) return InvalidArgument("a series has no value");
    MF_ASSIGN_OR_RETURN(double value, SampleValue(series["value"]));
    sum += value;
  }
  return sum;
}

StatusOr<double> ParsePrometheusAnswer(int http_status, std::string_view body) {
  StatusOr<double> value = ParsePrometheusValue(body);
  if (http_status == 200) return value;
  const bool prometheus_error = !value.ok() && value.status().message().starts_with("Prometheus answered");
  if (prometheus_error) return value;
  return Unavailable("HTTP " + std::to_string(http_status) + ": " + std::string(body.substr(0, 200)));
}

}  // namespace mf::op
