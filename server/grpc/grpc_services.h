// The service implementations GrpcServer registers (one class per proto service).
#pragma once

#include <atomic>
#include <memory>

#include "grpc/health/v1/health.grpc.pb.h"
#include "inference/grpc_predict_v2.grpc.pb.h"
#include "server/repository/model_manager.h"
#include "tensorflow_serving/apis/model_service.grpc.pb.h"
#include "tensorflow_serving/apis/prediction_service.grpc.pb.h"

namespace mf::server {

class PredictionServiceImpl final : public tensorflow::serving::PredictionService::Service {
 public:
  explicit PredictionServiceImpl(std::shared_ptr<ModelManager> manager) : manager_(std::move(manager)) {}
  grpc::Status Predict(grpc::ServerContext* context, const tensorflow::serving::PredictRequest* request,
                       tensorflow::serving::PredictResponse* response) override;
  grpc::Status GetModelMetadata(grpc::ServerContext* context,
                                const tensorflow::serving::GetModelMetadataRequest* request,
                                tensorflow::serving::GetModelMetadataResponse* response) override;
  grpc::Status Classify(grpc::ServerContext*, const tensorflow::serving::ClassificationRequest*,
                        tensorflow::serving::ClassificationResponse*) override;
  grpc::Status Regress(grpc::ServerContext*, const tensorflow::serving::RegressionRequest*,
                       tensorflow::serving::RegressionResponse*) override;
  grpc::Status MultiInference(grpc::ServerContext*, const tensorflow::serving::MultiInferenceRequest*,
                              tensorflow::serving::MultiInferenceResponse*) override;

 private:
  std::shared_ptr<ModelManager> manager_;
};

class ModelServiceImpl final : public tensorflow::serving::ModelService::Service {
 public:
  explicit ModelServiceImpl(std::shared_ptr<ModelManager> manager) : manager_(std::move(manager)) {}
  grpc::Status GetModelStatus(grpc::ServerContext* context, const tensorflow::serving::GetModelStatusRequest* request,
                              tensorflow::serving::GetModelStatusResponse* response) override;
  // Replaces the served models (TF Serving's reload); an invalid config changes nothing.
  grpc::Status HandleReloadConfigRequest(grpc::ServerContext* context,
                                         const tensorflow::serving::ReloadConfigRequest* request,
                                         tensorflow::serving::ReloadConfigResponse* response) override;

 private:
  std::shared_ptr<ModelManager> manager_;
};

class InferenceServiceImpl final : public inference::GRPCInferenceService::Service {
 public:
  InferenceServiceImpl(std::shared_ptr<ModelManager> manager, std::shared_ptr<std::atomic<bool>> shutting_down)
      : manager_(std::move(manager)), shutting_down_(std::move(shutting_down)) {}
  grpc::Status ServerLive(grpc::ServerContext*, const inference::ServerLiveRequest*,
                          inference::ServerLiveResponse* response) override;
  grpc::Status ServerReady(grpc::ServerContext*, const inference::ServerReadyRequest*,
                           inference::ServerReadyResponse* response) override;
  grpc::Status ModelReady(grpc::ServerContext*, const inference::ModelReadyRequest* request,
                          inference::ModelReadyResponse* response) override;
  grpc::Status ServerMetadata(grpc::ServerContext*, const inference::ServerMetadataRequest*,
                              inference::ServerMetadataResponse* response) override;
  grpc::Status ModelMetadata(grpc::ServerContext*, const inference::ModelMetadataRequest* request,
                             inference::ModelMetadataResponse* response) override;
  grpc::Status ModelInfer(grpc::ServerContext*, const inference::ModelInferRequest* request,
                          inference::ModelInferResponse* response) override;

 private:
  std::shared_ptr<ModelManager> manager_;
  std::shared_ptr<std::atomic<bool>> shutting_down_;
};

class HealthServiceImpl final : public grpc::health::v1::Health::Service {
 public:
  HealthServiceImpl(std::shared_ptr<ModelManager> manager, std::shared_ptr<std::atomic<bool>> shutting_down)
      : manager_(std::move(manager)), shutting_down_(std::move(shutting_down)) {}
  // Service "" is the whole server (every model available); a model name is that model.
  grpc::Status Check(grpc::ServerContext*, const grpc::health::v1::HealthCheckRequest* request,
                     grpc::health::v1::HealthCheckResponse* response) override;

 private:
  std::shared_ptr<ModelManager> manager_;
  std::shared_ptr<std::atomic<bool>> shutting_down_;
};

}  // namespace mf::server
