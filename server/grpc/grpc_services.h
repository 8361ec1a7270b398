// The handlers GrpcServer calls (one class per proto service), transport-neutral: each method
// takes the call's context, request and response and returns an mf::Status (canonical gRPC
// codes). The model-running ones (Predict, ModelInfer) start the run with DispatchRun and answer
// through `finish`, which runs on a RunPool thread for a plain servable and on a batching thread
// for a batched one, so an io thread never waits on a model.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "grpc/health/v1/health.pb.h"
#include "inference/grpc_predict_v2.pb.h"
#include "inference/model_config.pb.h"
#include "server/codec/tensor_proto.h"
#include "server/grpc/call_context.h"
#include "server/repository/model_manager.h"
#include "server/repository/run_pool.h"
#include "tensorflow_serving/apis/classification.pb.h"
#include "tensorflow_serving/apis/get_model_metadata.pb.h"
#include "tensorflow_serving/apis/get_model_status.pb.h"
#include "tensorflow_serving/apis/inference.pb.h"
#include "tensorflow_serving/apis/model_management.pb.h"
#include "tensorflow_serving/apis/predict.pb.h"
#include "tensorflow_serving/apis/regression.pb.h"

namespace mf::server {

class PredictionServiceImpl final {
 public:
  // `outputs`: how Predict writes its output tensors. TF Serving's default fills the typed *_val
  // fields (float_val...), which clients reading them directly depend on; tensor_content is the
  // compact alternative (tf.make_ndarray reads either).
  PredictionServiceImpl(std::shared_ptr<ModelManager> manager, std::shared_ptr<RunPool> runs,
                        codec::TensorProtoEncoding outputs = codec::TensorProtoEncoding::kTypedValues)
      : manager_(std::move(manager)), runs_(std::move(runs)), outputs_(outputs) {}
  void Predict(const CallContext& context, const tensorflow::serving::PredictRequest* request,
               tensorflow::serving::PredictResponse* response, RpcFinish finish);
  Status GetModelMetadata(const CallContext& context, const tensorflow::serving::GetModelMetadataRequest* request,
                          tensorflow::serving::GetModelMetadataResponse* response);
  Status Classify(const CallContext&, const tensorflow::serving::ClassificationRequest*,
                  tensorflow::serving::ClassificationResponse*);
  Status Regress(const CallContext&, const tensorflow::serving::RegressionRequest*,
                 tensorflow::serving::RegressionResponse*);
  Status MultiInference(const CallContext&, const tensorflow::serving::MultiInferenceRequest*,
                        tensorflow::serving::MultiInferenceResponse*);

 private:
  std::shared_ptr<ModelManager> manager_;
  std::shared_ptr<RunPool> runs_;
  codec::TensorProtoEncoding outputs_;
};

class ModelServiceImpl final {
 public:
  explicit ModelServiceImpl(std::shared_ptr<ModelManager> manager) : manager_(std::move(manager)) {}
  ~ModelServiceImpl();  // ends and joins the reload waits still running
  Status GetModelStatus(const CallContext& context, const tensorflow::serving::GetModelStatusRequest* request,
                        tensorflow::serving::GetModelStatusResponse* response);
  // Replaces the served models (TF Serving's reload); an invalid config changes nothing. As in
  // TF Serving, answers once every model of the new config has an AVAILABLE version, or with
  // the error of one that cannot get one (its load failed, its base path cannot be read); the
  // wait runs on a thread of its own (reloads are rare), bounded by the call's deadline.
  void HandleReloadConfigRequest(const CallContext& context, const tensorflow::serving::ReloadConfigRequest* request,
                                 tensorflow::serving::ReloadConfigResponse* response, RpcFinish finish);

 private:
  std::shared_ptr<ModelManager> manager_;
  struct Wait {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;  // set as the thread ends: joined by the next reload
  };
  std::mutex waits_mu_;
  std::vector<Wait> waits_;
  std::atomic<bool> stopping_{false};
};

class InferenceServiceImpl final {
 public:
  InferenceServiceImpl(std::shared_ptr<ModelManager> manager, std::shared_ptr<std::atomic<bool>> shutting_down,
                       std::shared_ptr<RunPool> runs)
      : manager_(std::move(manager)), shutting_down_(std::move(shutting_down)), runs_(std::move(runs)) {}
  Status ServerLive(const CallContext&, const inference::ServerLiveRequest*, inference::ServerLiveResponse* response);
  Status ServerReady(const CallContext&, const inference::ServerReadyRequest*,
                     inference::ServerReadyResponse* response);
  Status ModelReady(const CallContext&, const inference::ModelReadyRequest* request,
                    inference::ModelReadyResponse* response);
  Status ServerMetadata(const CallContext&, const inference::ServerMetadataRequest*,
                        inference::ServerMetadataResponse* response);
  Status ModelMetadata(const CallContext&, const inference::ModelMetadataRequest* request,
                       inference::ModelMetadataResponse* response);
  // Triton's ModelConfig (an extension of the v2 protocol; server/config/triton_model_config.h).
  Status ModelConfig(const CallContext&, const inference::ModelConfigRequest* request,
                     inference::ModelConfigResponse* response);
  void ModelInfer(const CallContext& context, const inference::ModelInferRequest* request,
                  inference::ModelInferResponse* response, RpcFinish finish);

 private:
  std::shared_ptr<ModelManager> manager_;
  std::shared_ptr<std::atomic<bool>> shutting_down_;
  std::shared_ptr<RunPool> runs_;
};

class HealthServiceImpl final {
 public:
  HealthServiceImpl(std::shared_ptr<ModelManager> manager, std::shared_ptr<std::atomic<bool>> shutting_down)
      : manager_(std::move(manager)), shutting_down_(std::move(shutting_down)) {}
  // Service "" is the whole server (every model available); a model name is that model.
  Status Check(const CallContext&, const grpc::health::v1::HealthCheckRequest* request,
               grpc::health::v1::HealthCheckResponse* response);
  // What Check answers for `service`; SERVICE_UNKNOWN for a name that is no model (Watch
  // reports that instead of failing, as the health protocol asks).
  grpc::health::v1::HealthCheckResponse::ServingStatus Evaluate(const std::string& service) const;

 private:
  std::shared_ptr<ModelManager> manager_;
  std::shared_ptr<std::atomic<bool>> shutting_down_;
};

}  // namespace mf::server
