// A valid ModelDeployment object to start each test case from.
#pragma once

#include <nlohmann/json.hpp>

namespace mf::op::testing {

inline nlohmann::json SampleModelDeployment() {
  return nlohmann::json::parse(R"({
    "apiVersion": "modelfleet.io/v1alpha1", "kind": "ModelDeployment",
    "metadata": {"name": "mnist", "namespace": "ml", "uid": "uid-1", "generation": 3},
    "spec": {
      "modelName": "my_mnist",
      "replicas": 2,
      "versions": [
        {"name": "v1", "storageUri": "pvc://model-store/mnist/1"},
        {"name": "v2", "storageUri": "https://models.example/mnist/2/model.onnx", "replicas": 1}
      ],
      "traffic": {"v1": 90, "v2": 10}
    }
  })");
}

}  // namespace mf::op::testing
