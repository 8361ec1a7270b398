// Whether a mirrored version answered like the primary: the same status, and for JSON answers
// the same `predictions` (TF Serving REST) or `outputs` (TF Serving columnar / KServe v2) up to a
// numeric tolerance, since two builds of one model rarely agree to the last bit. Other bodies
// must match byte for byte. Pure; the mirror's body is untrusted input (never throws).
#pragma once

#include <string_view>

namespace mf::router {

inline constexpr double kMirrorTolerance = 1e-4;

// |a - b| <= tolerance * max(1, |a|, |b|); equal infinities agree, NaN agrees only with NaN.
bool NumbersAgree(double a, double b, double tolerance);

// Numbers in the bodies agree as NumbersAgree says.
bool ResponsesAgree(int primary_status, std::string_view primary_body, int mirror_status, std::string_view mirror_body,
                    double tolerance = kMirrorTolerance);

}  // namespace mf::router
