// What the operator's informer caches keep of each kind it watches, and how the reconcile knows
// an owned object needs no apply without keeping its content. At thousands of ModelDeployments
// the caches are most of the operator's memory: a parsed Deployment is tens of kilobytes, the
// fields the reconcile reads are a few hundred bytes (bench/operator/cache_memory.cc).
//
// Every object the operator applies carries kAppliedHashAnnotation, the hash of the configuration
// applied. The cache keeps, instead of the object's content (everything but metadata and status),
// its digest (LiveDigest). An apply is skipped when the cached object's applied hash equals the
// desired one and its digest is the one our last apply left (someone's edit of the content
// changes the digest, and the next reconcile applies again); after a restart, with no apply of
// its own yet, the operator trusts the applied hash.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace mf::op {

using Json = nlohmann::json;

inline constexpr const char* kAppliedHashAnnotation = "modelfleet.io/applied-hash";
// Where a compacted owned object keeps its digest (a top-level key no API object has).
inline constexpr const char* kCachedDigestKey = "modelfleet.io/digest";

// A ModelDeployment: drops metadata.managedFields (never read; often half of an object).
void CompactForCache(Json* object);

// An owned object (Deployment, Service, ConfigMap, ServiceAccount, RoleBinding): its identity
// (name, namespace, uid, resourceVersion, generation, deletion), our labels and annotations, its
// controller reference, the digest of its content, and of a Deployment spec.replicas and the
// status counters the status builder reads.
void CompactOwnedForCache(Json* object);

// A serving pod: its identity and labels, and of its status only what DiagnosePod and
// ServerNotReadySeconds read: the scheduling condition and each container's readiness, running
// start and last non-zero termination.
void CompactPodForCache(Json* pod);

// Hex hash of `object` as it will be applied (kAppliedHashAnnotation itself excluded).
std::string AppliedHash(const Json& object);

// `object` with kAppliedHashAnnotation set to AppliedHash(object).
void StampAppliedHash(Json* object);

// Hex hash of an object's content: everything but metadata and status. The same for the object
// an apply returns and for its compacted cache entry.
std::string LiveDigest(const Json& object);

// The digest a compacted object carries ("" for one that is not compacted).
std::string CachedDigest(const Json& object);

}  // namespace mf::op
