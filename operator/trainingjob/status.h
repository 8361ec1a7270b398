// A TrainingJob's status fields: Kubeflow's conditions (Created, Running, Restarting, Succeeded,
// Failed, Suspended, each with a reason and message; Running and Restarting replace each other,
// and a finished job's conditions no longer change), replicaStatuses, and the summary the printer
// columns show (state: the condition that matters most among those True).
#pragma once

#include <string>
#include <vector>

#include "trainingjob/spec.h"

namespace mf::op::training {

// The condition of `type` in `status`, or null.
Json FindCondition(const Json& status, const std::string& type);
bool IsConditionTrue(const Json& status, const std::string& type);

// Sets (or adds) a condition; lastTransitionTime moves only when the status ("True"/"False")
// changes, lastUpdateTime whenever anything does. Returns whether anything changed.
bool SetCondition(Json* status, const std::string& type, bool value, const std::string& reason,
                  const std::string& message, const std::string& now);

// Failed or Succeeded is True.
bool IsFinished(const Json& status);

// "Failed", "Succeeded", "Suspended", "Restarting", "Running" or "Created" (the first True in
// that order), or "" before any.
std::string StateOf(const Json& status);

// status.replicaStatuses: {Type: {active, succeeded, failed}} for each type in the spec, from
// the job's pods (those being deleted are not counted).
Json ReplicaStatuses(const TrainingJobSpec& spec, const std::vector<Json>& pods);

// RFC 3339 (UTC, seconds) of a time in seconds since the epoch, and back (-1 when unreadable).
std::string FormatTime(int64_t seconds);
int64_t ParseTime(const std::string& text);

}  // namespace mf::op::training
