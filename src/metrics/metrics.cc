#include "metrics/metrics.h"

#include <prometheus/text_serializer.h>

namespace mf::metrics {

std::shared_ptr<prometheus::Registry> DefaultRegistry() {
  static auto* registry = new std::shared_ptr<prometheus::Registry>(std::make_shared<prometheus::Registry>());
  return *registry;
}

std::string RenderText(const prometheus::Registry& registry) {
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

prometheus::Histogram::BucketBoundaries ExponentialBuckets(double start, double factor, int count) {
  prometheus::Histogram::BucketBoundaries out;
  out.reserve(count);
  for (double v = start; static_cast<int>(out.size()) < count; v *= factor) out.push_back(v);
  return out;
}

prometheus::Histogram::BucketBoundaries LatencySecondsBuckets() { return ExponentialBuckets(1e-4, 2.0, 20); }

}  // namespace mf::metrics
