// The process-wide Prometheus registry and its text exposition. Every binary serves
// RenderText() on its metrics path; names follow Prometheus conventions (`_total` counters,
// `_seconds` histograms, base units).
#pragma once

#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>
#include <vector>

namespace mf::metrics {

// The registry every component of this process registers its families in.
std::shared_ptr<prometheus::Registry> DefaultRegistry();

// Prometheus text format (version 0.0.4) of everything in `registry`.
std::string RenderText(const prometheus::Registry& registry);
inline constexpr const char* kTextContentType = "text/plain; version=0.0.4; charset=utf-8";

// Buckets for request latencies in seconds: 100 µs .. ~52 s, doubling.
prometheus::Histogram::BucketBoundaries LatencySecondsBuckets();
// `count` buckets from `start`, each `factor` times the previous.
prometheus::Histogram::BucketBoundaries ExponentialBuckets(double start, double factor, int count);

}  // namespace mf::metrics
