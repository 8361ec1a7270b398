// Read helpers for the metadata of unstructured objects, tolerant of missing fields (a missing
// list reads as empty), plus the timestamp and name formats the API uses.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace mf::local {

const nlohmann::json& Labels(const nlohmann::json& object);
std::string Uid(const nlohmann::json& object);
std::string ResourceVersionOf(const nlohmann::json& object);
std::vector<std::string> Finalizers(const nlohmann::json& object);
// Each entry is an ownerReference object; entries that are not objects are skipped.
std::vector<nlohmann::json> OwnerReferences(const nlohmann::json& object);
bool IsBeingDeleted(const nlohmann::json& object);

// "2026-11-22T20:18:15Z" (RFC 3339, seconds, UTC), as metav1.Time marshals.
std::string FormatTime(std::chrono::system_clock::time_point t);
// A resourceVersion string as the store writes it; 0 for "" or anything not a decimal number.
uint64_t ParseVersion(const std::string& text);
// The metadata fields the store and garbage collector read have the types Kubernetes gives them:
// name/generateName/namespace strings, labels/annotations maps of strings, finalizers a list of
// strings, ownerReferences a list of objects with string apiVersion, kind, name and uid.
Status ValidateMetadataTypes(const nlohmann::json& metadata);
// A DNS-1123 subdomain: lowercase alphanumerics, '-' and '.', at most 253 characters.
Status ValidateObjectName(const std::string& name);

}  // namespace mf::local
