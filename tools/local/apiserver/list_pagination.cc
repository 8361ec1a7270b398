#include "tools/local/apiserver/list_pagination.h"

#include <array>
#include <charconv>

#include "tools/local/apiserver/api_errors.h"

namespace mf::local {
namespace {

using json = nlohmann::json;

constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
constexpr std::string_view kVersion = "meta.k8s.io/v1";

// Go's base64.RawURLEncoding, which kube-apiserver uses for continue tokens.
std::string EncodeRawUrlBase64(std::string_view in) {
  std::string out;
  out.reserve((in.size() * 4 + 2) / 3);
  size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    for (int shift : {18, 12, 6, 0}) out.push_back(kAlphabet[(v >> shift) & 63]);
  }
  size_t rest = in.size() - i;
  if (rest > 0) {
    uint32_t v = uint8_t(in[i]) << 16;
    if (rest == 2) v |= uint8_t(in[i + 1]) << 8;
    out.push_back(kAlphabet[(v >> 18) & 63]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    if (rest == 2) out.push_back(kAlphabet[(v >> 6) & 63]);
  }
  return out;
}

std::optional<std::string> DecodeRawUrlBase64(std::string_view in) {
  std::array<int, 256> value;
  value.fill(-1);
  for (size_t i = 0; i < kAlphabet.size(); ++i) value[uint8_t(kAlphabet[i])] = static_cast<int>(i);
  if (in.size() % 4 == 1) return std::nullopt;
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v = value[uint8_t(c)];
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  if (bits > 0 && (acc & ((1u << bits) - 1)) != 0) return std::nullopt;  // non-canonical tail
  return out;
}

Status Invalid(const std::string& why) { return FailedPrecondition("continue key is not valid: " + why); }

StatusOr<int64_t> ParseInt(const std::string& text, const std::string& what) {
  int64_t value = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size()) {
    return FailedPrecondition(what + ": strconv.ParseInt: parsing \"" + text + "\": invalid syntax");
  }
  return value;
}

std::string Param(const std::map<std::string, std::string>& query, const std::string& key) {
  auto it = query.find(key);
  return it == query.end() ? "" : it->second;
}

}  // namespace

std::string EncodeContinueToken(const ContinueToken& token) {
  std::string start = token.ns.empty() ? token.name : token.ns + "/" + token.name;
  start.push_back('\0');  // the smallest key after the last one returned, as etcd keys go
  json body = {{"v", kVersion}, {"rv", token.resource_version}, {"start", start}};
  return EncodeRawUrlBase64(body.dump());
}

StatusOr<ContinueToken> DecodeContinueToken(std::string_view text) {
  auto decoded = DecodeRawUrlBase64(text);
  if (!decoded) return Invalid("illegal base64 data");
  json body = json::parse(*decoded, nullptr, false);
  if (body.is_discarded() || !body.is_object()) return Invalid("not a continue token");
  if (!body.contains("v") || body["v"] != kVersion) {
    return Invalid("server does not recognize this encoded version");
  }
  if (!body.contains("rv") || !body["rv"].is_number_integer() || body["rv"].get<int64_t>() == 0 ||
      body["rv"].get<int64_t>() < -1) {
    return Invalid("incorrect encoded start resourceVersion (version meta.k8s.io/v1)");
  }
  if (!body.contains("start") || !body["start"].is_string()) return Invalid("encoded start key empty");
  std::string start = body["start"].get<std::string>();
  if (start.empty() || start.back() != '\0') return Invalid("encoded start key is not a key we issued");
  start.pop_back();
  ContinueToken token;
  token.resource_version = body["rv"].get<int64_t>();
  size_t slash = start.find('/');
  if (slash == std::string::npos) {
    token.name = start;
  } else {
    token.ns = start.substr(0, slash);
    token.name = start.substr(slash + 1);
  }
  if (token.name.empty() || token.name.find('/') != std::string::npos || token.name.find('\0') != std::string::npos ||
      (slash != std::string::npos && token.ns.empty())) {
    return Invalid("encoded start key is not a key we issued");
  }
  return token;
}

StatusOr<ListPaging> ParseListPaging(const std::map<std::string, std::string>& query) {
  ListPaging paging;
  if (std::string limit = Param(query, "limit"); !limit.empty()) {
    MF_ASSIGN_OR_RETURN(int64_t n, ParseInt(limit, "limit"));
    paging.limit = n > 0 ? static_cast<size_t>(n) : 0;  // kube-apiserver: <= 0 means no limit
  }
  const std::string rv = Param(query, "resourceVersion");
  const std::string match = Param(query, "resourceVersionMatch");
  if (std::string cont = Param(query, "continue"); !cont.empty()) {
    if (!rv.empty() && rv != "0") {
      return FailedPrecondition("specifying resource version is not allowed when using continue");
    }
    MF_ASSIGN_OR_RETURN(paging.continue_from, DecodeContinueToken(cont));
  }
  if (!match.empty() && match != "Exact" && match != "NotOlderThan") {
    return FailedPrecondition("resourceVersionMatch: Unsupported value: \"" + match +
                              "\": supported values: \"Exact\", \"NotOlderThan\"");
  }
  if (!match.empty() && rv.empty()) {
    return FailedPrecondition("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided");
  }
  if (match == "Exact") {
    if (rv == "0") return FailedPrecondition("resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"");
    MF_ASSIGN_OR_RETURN(int64_t exact, ParseInt(rv, "resourceVersion"));
    if (exact <= 0) return FailedPrecondition("resourceVersion: Invalid value: \"" + rv + "\": must be a positive integer");
    paging.exact_resource_version = static_cast<uint64_t>(exact);
  }
  if (match != "Exact" && !rv.empty() && rv != "0" && !paging.continue_from) {
    MF_ASSIGN_OR_RETURN(int64_t at_least, ParseInt(rv, "resourceVersion"));
    if (at_least < 0) return FailedPrecondition("resourceVersion: Invalid value: \"" + rv + "\": must be a non-negative integer");
    paging.min_resource_version = static_cast<uint64_t>(at_least);
  }
  return paging;
}

json ResourceVersionTooLargeStatus(uint64_t requested, uint64_t current) {
  json status = StatusObject({504, "Timeout", "Too large resource version: " + std::to_string(requested) +
                                                  ", current: " + std::to_string(current)});
  status["details"] = {{"causes", {{{"reason", "ResourceVersionTooLarge"}, {"message", "Too large resource version"}}}},
                       {"retryAfterSeconds", 1}};
  return status;
}

json ExpiredContinueStatus(const ContinueToken& token) {
  ApiError error{410, "Expired",
                 "The provided continue parameter is too old to display a consistent list result. You can start a "
                 "new list without the continue parameter, or use the continue token in this response to retrieve "
                 "the remainder of the results. Continuing with the provided token results in an inconsistent list "
                 "- objects that were created, modified, or deleted between the time the first chunk was returned "
                 "and now may show up in the list."};
  json status = StatusObject(error);
  ContinueToken inconsistent = token;
  inconsistent.resource_version = -1;
  status["metadata"]["continue"] = EncodeContinueToken(inconsistent);
  return status;
}

}  // namespace mf::local
