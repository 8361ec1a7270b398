// Inflates request and response bodies sent with Content-Encoding gzip or deflate, with a hard
// cap on the inflated size so a small "zip bomb" cannot exhaust memory.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace mf::http {

enum class InflateResult { kOk, kTooLarge, kCorrupt };

// Inflates `compressed` (gzip or zlib framing, detected from the header) into `out`, failing with
// kTooLarge as soon as the output would exceed `max_output_bytes`. `out` is cleared first.
InflateResult Inflate(std::string_view compressed, size_t max_output_bytes, std::string* out);

// Gzip-compresses `data` (used by tests and by clients that compress uploads).
std::string GzipCompress(std::string_view data);

}  // namespace mf::http
