// List pagination as kube-apiserver does it: `limit` caps a page, `continue` carries an opaque
// token (base64url JSON {"v":"meta.k8s.io/v1","rv":N,"start":"<namespace>/<name>\u0000"}) naming
// the list's resourceVersion and where the next page starts. Every page of one list shows the
// state at that version; a version that left the retained history answers 410 Expired with an
// "inconsistent" token (rv -1) that continues from the latest state instead.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace mf::local {

struct ContinueToken {
  int64_t resource_version = 0;  // -1: continue from the latest state (after a 410)
  std::string ns;                // the last object returned; the next page starts after it
  std::string name;
};

std::string EncodeContinueToken(const ContinueToken& token);
// FAILED_PRECONDITION ("continue key is not valid: ...", a 400) for anything we did not issue.
StatusOr<ContinueToken> DecodeContinueToken(std::string_view text);

struct ListPaging {
  size_t limit = 0;  // 0: no limit
  std::optional<ContinueToken> continue_from;
  uint64_t exact_resource_version = 0;  // resourceVersionMatch=Exact: list as of this version
  // resourceVersion without Exact (NotOlderThan): the latest state must be at least this new.
  uint64_t min_resource_version = 0;
};

// Reads limit, continue, resourceVersion and resourceVersionMatch from a list request's query.
// Errors are FAILED_PRECONDITION (400) with kube-apiserver's wording.
StatusOr<ListPaging> ParseListPaging(const std::map<std::string, std::string>& query);

// kube-apiserver's 504 for a list whose NotOlderThan resourceVersion the store has not reached
// (it waits a few seconds for its cache first; our store is the source, so it answers at once).
nlohmann::json ResourceVersionTooLargeStatus(uint64_t requested, uint64_t current);

// kube-apiserver's 410 for a continue token whose version was compacted away: the Status carries
// a token that continues the same list from the latest state.
nlohmann::json ExpiredContinueStatus(const ContinueToken& token);

}  // namespace mf::local
