// What the operator's informer caches keep of each kind it watches, and how it knows a cached
// Deployment needs no apply without keeping its pod template. At thousands of ModelDeployments
// the caches are most of the operator's memory: a parsed Deployment with its template is tens of
// kilobytes, the fields the reconcile reads are a few hundred bytes.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace mf::op {

using Json = nlohmann::json;

// Set on every applied Deployment: a hash of the applied configuration without this annotation.
inline constexpr const char* kAppliedHashAnnotation = "modelfleet.io/applied-hash";

// Every kind: drops metadata.managedFields (never read; often half of an object).
void CompactForCache(Json* object);

// A serving pod: its metadata (name, labels, deletion), and of its status only what
// DiagnosePod and ServerNotReadySeconds read: the scheduling condition and each container's
// readiness, running start and last non-zero termination.
void CompactPodForCache(Json* pod);

// A Deployment: metadata, spec.replicas and the status counters. Its template is left out; the
// applied-hash annotation stands for it (AppliedHash).
void CompactDeploymentForCache(Json* deployment);

// Hex hash of `object` as it will be applied (the annotation itself excluded).
std::string AppliedHash(const Json& object);

// `object` with kAppliedHashAnnotation set to AppliedHash(object).
void StampAppliedHash(Json* object);

}  // namespace mf::op
