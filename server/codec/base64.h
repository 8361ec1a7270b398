// Standard base64 (RFC 4648 section 4, with padding), as TF Serving's {"b64": ...} values use.
#pragma once

#include <string>
#include <string_view>

namespace mf::codec {

void Base64Encode(std::string_view bytes, std::string* out);  // appends
// Appends the decoded bytes; false (out unchanged) on characters outside the alphabet, bad
// padding or a length that is not a multiple of 4. Unpadded input is accepted when its length
// mod 4 is 2 or 3, as absl::Base64Unescape (TF Serving's decoder) accepts it.
bool Base64Decode(std::string_view text, std::string* out);

}  // namespace mf::codec
