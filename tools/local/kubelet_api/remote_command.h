// `kubectl exec` on the kubelet side: the remotecommand stream protocols over SPDY, as the CRI
// streaming server that real kubelets use implements them (k8s.io/cri-streaming remotecommand),
// with the command run as a local child process.
//
// The client opens one stream per channel, each with a `streamType` header: "error" always, then
// "stdin", "stdout", "stderr" as asked (no stderr with a tty), and "resize" for a tty from v3 on.
// Once all have arrived the command starts; its output goes to stdout/stderr, stdin to its input,
// resize events (JSON {"Width":w,"Height":h}, one per line) to the terminal. When it has exited and
// its output has been sent, the error stream carries the outcome (v4/v5: a metav1.Status JSON, with
// reason NonZeroExitCode and an ExitCode cause for a non-zero exit; v2/v3: text, only on failure),
// every output stream is ended, and the connection waits for the client to close it.
//
// v5.channel.k8s.io is accepted as well: over SPDY it is v4 (client-go's v5 handler is v4's; its
// CLOSE signal exists only on WebSockets), so a client offering v5 first gets it.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "tools/local/kubelet_api/kubelet_api_hooks.h"
#include "tools/local/kubelet_api/request_target.h"
#include "tools/local/kubelet_api/spdy_connection.h"

namespace mf::local {

struct ExecOptions {
  std::vector<std::string> command;
  bool want_stdin = false;
  bool want_stdout = false;
  bool want_stderr = false;  // always false with tty, as the kubelet does
  bool tty = false;
};

// kube-apiserver sends input=1, output=1, error=1, tty=1 and repeated `command`; stdin/stdout/
// stderr are accepted too, and "true" as well as "1". InvalidArgument without a command or without
// any of stdin, stdout and stderr.
StatusOr<ExecOptions> ParseExecOptions(const QueryParams& query);

// The X-Stream-Protocol-Version values exec speaks, newest first.
const std::vector<std::string>& RemoteCommandProtocols();

// The first protocol the client offers (in its order; each header value may be a comma-separated
// list) that `supported` has, as httpstream.Handshake picks it; "" when there is none.
std::string NegotiateProtocol(const std::vector<std::string>& offered_header_values,
                              const std::vector<std::string>& supported);

// The handler of one exec session on an upgraded connection; `protocol` is the negotiated one.
// Streams not all opened within `stream_creation_timeout` end the connection.
std::shared_ptr<SpdyConnection::Handler> StartExecSession(std::shared_ptr<SpdyConnection> connection,
                                                          const std::string& protocol, ExecOptions options,
                                                          ExecTarget target,
                                                          std::chrono::milliseconds stream_creation_timeout);

}  // namespace mf::local
