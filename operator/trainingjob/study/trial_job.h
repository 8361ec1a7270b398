// A trial's child TrainingJob, as a pure function of the study's job and the trial's record: the
// study's spec without spec.hyperparameters, the trial's `--name=value` arguments appended to the
// first container of every replica (all tasks of a distributed trial train the same model), and
// the metric task's container set up so that MODELFLEET_METRICS_FILE is its terminationMessagePath:
// whatever the trainer writes there reaches the operator in the pod's status (the kubelet copies
// the file's last 4 KiB into state.terminated.message), with no volume, sidecar or exec.
//
// The child is owned by the study (controller: true), so deleting the study deletes its trials.
// Its completed pods are kept until the study reads the metric (cleanPodPolicy All becomes Running,
// no ttlSecondsAfterFinished), its model goes to <modelUri>/<trial name>, and it deploys nothing.
#pragma once

#include <optional>
#include <string>

#include "trainingjob/study/planner.h"

namespace mf::op::study {

inline constexpr const char* kStudyLabel = "modelfleet.io/study";
inline constexpr const char* kDefaultMetricsFile = "/dev/termination-log";

// The replica type whose task 0 reports the metric: Chief, else Master, else Worker ("" when the
// spec has none of them).
std::string MetricReplicaType(const Json& job_spec);

// The name of the container that reports the metric: the first of the metric replica's template
// ("" when there is none). Read from the job, since the operator's pod cache keeps no pod specs.
std::string MetricContainerName(const Json& job_spec);

// The path MODELFLEET_METRICS_FILE names in the metric container: the container's own
// MODELFLEET_METRICS_FILE if it sets one, else its terminationMessagePath, else the default.
std::string MetricsFilePath(const Json& container);

Json BuildTrialJob(const Json& study_job, const StudySpec& study, const Trial& trial);

// The metric container's termination message in a pod: nullopt while it has not terminated.
std::optional<std::string> TerminationMessage(const Json& pod, const std::string& container);

}  // namespace mf::op::study
