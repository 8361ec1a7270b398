#include "server/grpc/grpc_server.h"

#include <grpcpp/grpcpp.h>

#include <climits>

#include "server/grpc/grpc_services.h"

namespace mf::server {

GrpcServer::GrpcServer(std::shared_ptr<ModelManager> manager) : manager_(std::move(manager)) {}

GrpcServer::~GrpcServer() { Shutdown(std::chrono::milliseconds(0)); }

Status GrpcServer::Start(const std::string& address, int port) {
  services_.push_back(std::make_unique<PredictionServiceImpl>(manager_));
  services_.push_back(std::make_unique<ModelServiceImpl>(manager_));
  services_.push_back(std::make_unique<InferenceServiceImpl>(manager_, shutting_down_));
  services_.push_back(std::make_unique<HealthServiceImpl>(manager_, shutting_down_));
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address + ":" + std::to_string(port), grpc::InsecureServerCredentials(), &port_);
  // TF Serving accepts messages up to INT32_MAX bytes; large tensors are normal here.
  builder.SetMaxReceiveMessageSize(INT_MAX);
  builder.SetMaxSendMessageSize(INT_MAX);
  for (auto& service : services_) builder.RegisterService(service.get());
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) {
    server_.reset();
    return Unavailable("cannot listen on " + address + ":" + std::to_string(port) + " (address in use or invalid)");
  }
  return Status::Ok();
}

void GrpcServer::Shutdown(std::chrono::milliseconds deadline) {
  if (!server_) return;
  SetShuttingDown();
  server_->Shutdown(std::chrono::system_clock::now() + deadline);
  server_->Wait();
  server_.reset();
}

}  // namespace mf::server
