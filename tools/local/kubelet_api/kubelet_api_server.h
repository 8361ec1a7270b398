// The kubelet's HTTPS API, the part kube-apiserver calls so that `kubectl logs`, `kubectl exec` and
// `kubectl port-forward` work through it unchanged (paths and behaviour as the real kubelet's
// pkg/kubelet/server/server.go and the CRI streaming server behind it):
//
//   GET  /healthz                                  "ok"
//   GET  /containerLogs/{ns}/{pod}/{container}     follow, previous, tailLines, limitBytes (container_log.h)
//   GET|POST /exec/{ns}/{pod}[/{uid}]/{container}  SPDY/3.1 upgrade, remotecommand v2-v5 (remote_command.h)
//   GET|POST /portForward/{ns}/{pod}[/{uid}]       SPDY/3.1 upgrade, portforward.k8s.io (port_forward.h)
//   /attach/...                                    501: our containers' stdio goes to their log file
//   anything else                                  404
//
// kube-apiserver speaks SPDY to the kubelet even for kubectl's WebSocket requests: it translates
// WebSocket exec (v5.channel.k8s.io) into a SPDY client (StreamTranslatorHandler) and tunnels
// WebSocket port-forward's SPDY frames (TunnelingHandler) unless the Node declares the
// ExtendWebSocketsToKubelet feature in status.declaredFeatures; so the node must not declare it.
//
//   mf::local::KubeletApiServer server({.port = 10250, .certificate_pem = cert, .private_key_pem = key,
//                                       .client_ca_pem = ca}, hooks);
//   MF_RETURN_IF_ERROR(server.Start());
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "tools/local/kubelet_api/kubelet_api_hooks.h"

namespace mf::local {

struct KubeletApiOptions {
  std::string address = "0.0.0.0";
  uint16_t port = 10250;        // 0: any free port (see port())
  std::string certificate_pem;  // the serving certificate chain, leaf first
  std::string private_key_pem;
  // When set, clients must present a certificate signed by this CA (kube-apiserver authenticates
  // with --kubelet-client-certificate); otherwise none is asked for.
  std::string client_ca_pem;
  int io_threads = 2;
  size_t max_connections = 1024;  // more are closed on accept
  // A SPDY (exec / port-forward) connection with no frame either way for this long is closed (the
  // kubelet's streamingConnectionIdleTimeout; kube-apiserver pings every 5 s).
  std::chrono::milliseconds stream_idle_timeout = std::chrono::hours(4);
  // How long the client may take to open an exec session's streams or a port-forward pair.
  std::chrono::milliseconds stream_creation_timeout = std::chrono::seconds(30);
  // After an exec has finished, how long to wait for the client to close the connection.
  std::chrono::milliseconds exec_finish_timeout = std::chrono::minutes(15);
  std::chrono::milliseconds log_poll_interval = std::chrono::milliseconds(100);  // followed logs
  std::chrono::milliseconds request_timeout = std::chrono::seconds(60);          // TLS handshake, one request head
};

class KubeletApiServer {
 public:
  KubeletApiServer(KubeletApiOptions options, KubeletApiHooks hooks);
  ~KubeletApiServer();  // Stop()s
  KubeletApiServer(const KubeletApiServer&) = delete;
  KubeletApiServer& operator=(const KubeletApiServer&) = delete;

  // Loads the certificates, binds and starts the io threads. InvalidArgument for a certificate,
  // key or CA that does not load; Unavailable when the address cannot be bound.
  Status Start();
  // Closes every connection (killing the commands of running execs) and joins the io threads. A
  // stopped server does not start again. Idempotent; never call it from a hook.
  void Stop();
  // The bound port (useful with port 0); 0 before Start().
  uint16_t port() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mf::local
