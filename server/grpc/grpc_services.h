// The handlers GrpcServer's async services call (one class per proto service). Each method takes
// the call's context, request and response; the model-running ones (Predict, ModelInfer) answer
// through `finish`, which runs on this thread for a plain servable and on a batching thread for
// a batched one, so a completion-queue thread never waits on a batch.
#pragma once

#include <atomic>
#include <functional>
#include <memory>

#include "grpc/health/v1/health.grpc.pb.h"
#include "inference/grpc_predict_v2.grpc.pb.h"
#include "server/repository/model_manager.h"
#include "tensorflow_serving/apis/model_service.grpc.pb.h"
#include "tensorflow_serving/apis/prediction_service.grpc.pb.h"

namespace mf::server {

using GrpcFinish = std::function<void(const grpc::Status&)>;

class PredictionServiceImpl final {
 public:
  explicit PredictionServiceImpl(std::shared_ptr<ModelManager> manager) : manager_(std::move(manager)) {}
  void Predict(grpc::ServerContext* context, const tensorflow::serving::PredictRequest* request,
               tensorflow::serving::PredictResponse* response, GrpcFinish finish);
  grpc::Status GetModelMetadata(grpc::ServerContext* context,
                                const tensorflow::serving::GetModelMetadataRequest* request,
                                tensorflow::serving::GetModelMetadataResponse* response);
  grpc::Status Classify(grpc::ServerContext*, const tensorflow::serving::ClassificationRequest*,
                        tensorflow::serving::ClassificationResponse*);
  grpc::Status Regress(grpc::ServerContext*, const tensorflow::serving::RegressionRequest*,
                       tensorflow::serving::RegressionResponse*);
  grpc::Status MultiInference(grpc::ServerContext*, const tensorflow::serving::MultiInferenceRequest*,
                              tensorflow::serving::MultiInferenceResponse*);

 private:
  std::shared_ptr<ModelManager> manager_;
};

class ModelServiceImpl final {
 public:
  explicit ModelServiceImpl(std::shared_ptr<ModelManager> manager) : manager_(std::move(manager)) {}
  grpc::Status GetModelStatus(grpc::ServerContext* context, const tensorflow::serving::GetModelStatusRequest* request,
                              tensorflow::serving::GetModelStatusResponse* response);
  // Replaces the served models (TF Serving's reload); an invalid config changes nothing.
  grpc::Status HandleReloadConfigRequest(grpc::ServerContext* context,
                                         const tensorflow::serving::ReloadConfigRequest* request,
                                         tensorflow::serving::ReloadConfigResponse* response);

 private:
  std::shared_ptr<ModelManager> manager_;
};

class InferenceServiceImpl final {
 public:
  InferenceServiceImpl(std::shared_ptr<ModelManager> manager, std::shared_ptr<std::atomic<bool>> shutting_down)
      : manager_(std::move(manager)), shutting_down_(std::move(shutting_down)) {}
  grpc::Status ServerLive(grpc::ServerContext*, const inference::ServerLiveRequest*,
                          inference::ServerLiveResponse* response);
  grpc::Status ServerReady(grpc::ServerContext*, const inference::ServerReadyRequest*,
                           inference::ServerReadyResponse* response);
  grpc::Status ModelReady(grpc::ServerContext*, const inference::ModelReadyRequest* request,
                          inference::ModelReadyResponse* response);
  grpc::Status ServerMetadata(grpc::ServerContext*, const inference::ServerMetadataRequest*,
                              inference::ServerMetadataResponse* response);
  grpc::Status ModelMetadata(grpc::ServerContext*, const inference::ModelMetadataRequest* request,
                             inference::ModelMetadataResponse* response);
  void ModelInfer(grpc::ServerContext* context, const inference::ModelInferRequest* request,
                  inference::ModelInferResponse* response, GrpcFinish finish);

 private:
  std::shared_ptr<ModelManager> manager_;
  std::shared_ptr<std::atomic<bool>> shutting_down_;
};

class HealthServiceImpl final {
 public:
  HealthServiceImpl(std::shared_ptr<ModelManager> manager, std::shared_ptr<std::atomic<bool>> shutting_down)
      : manager_(std::move(manager)), shutting_down_(std::move(shutting_down)) {}
  // Service "" is the whole server (every model available); a model name is that model.
  grpc::Status Check(grpc::ServerContext*, const grpc::health::v1::HealthCheckRequest* request,
                     grpc::health::v1::HealthCheckResponse* response);

 private:
  std::shared_ptr<ModelManager> manager_;
  std::shared_ptr<std::atomic<bool>> shutting_down_;
};

}  // namespace mf::server
