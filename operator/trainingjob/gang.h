// Gang admission without a gang scheduler: before a job's first pod is created, check that all of
// its pods fit on the cluster's nodes at once (allocatable minus what the pods already bound there
// request, for every resource the pods ask for: cpu, memory, nvidia.com/gpu, pods, ...), packing
// the largest pods first. A job that does not fit gets no pod at all and says why, instead of
// holding some nodes' GPUs while the rest of its pods wait forever. Another job admitted at the
// same moment can still take the room (there is no reservation); its pods then wait Pending, which
// the job reports.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "trainingjob/spec.h"

namespace mf::op::training {

using ResourceList = std::map<std::string, double>;  // name -> amount (cpu in cores, memory in bytes)

// "100m" -> 0.1, "2Gi" -> 2147483648, "1e3" -> 1000; nullopt when unreadable.
std::optional<double> ParseQuantity(const std::string& text);

// What a pod asks the scheduler for: the larger of its init containers' and the sum of its
// containers' requests (limits where no request is given), plus one "pods".
ResourceList PodRequests(const Json& pod_spec);

struct NodeRoom {
  std::string name;
  Json labels = Json::object();
  ResourceList free;
};

// The room left on each schedulable, Ready node, given every pod bound to a node and not finished.
std::vector<NodeRoom> FreeRoom(const std::vector<Json>& nodes, const std::vector<Json>& pods);

// "" when the pods (name, pod spec) all fit at once, else a sentence saying which does not and why.
std::string CheckGangFits(std::vector<NodeRoom> nodes, const std::vector<std::pair<std::string, Json>>& pods);

}  // namespace mf::op::training
