// `kubectl port-forward` on the kubelet side: the portforward.k8s.io protocol over SPDY, as the CRI
// streaming server implements it (k8s.io/cri-streaming portforward/httpstream.go).
//
// Each forwarded connection is a pair of client streams sharing a `requestID` header (older clients
// without one are paired by stream id) and a `port` header: a "data" stream spliced to a TCP
// connection to the pod's IP and that port, and an "error" stream that carries a message when the
// forwarding fails. When the pod side ends (EOF) the data stream and then the error stream are
// ended; when the client ends the data stream, the pod connection is shut down for writing and the
// pod's remaining reply still flows back. Failures (no such pod, refused connection, a pair whose
// second stream never comes) are written to the error stream, as "error forwarding port P to pod
// NS/NAME[, uid U]: ...", and the data stream is reset; client-go then ends the whole forward.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "tools/local/kubelet_api/kubelet_api_hooks.h"
#include "tools/local/kubelet_api/spdy_connection.h"

namespace mf::local {

inline constexpr char kPortForwardProtocol[] = "portforward.k8s.io";

// The handler of one port-forward connection for pod `ns`/`pod` (`uid` only appears in messages).
std::shared_ptr<SpdyConnection::Handler> StartPortForwardSession(std::shared_ptr<SpdyConnection> connection,
                                                                 std::string ns, std::string pod, std::string uid,
                                                                 KubeletApiHooks hooks,
                                                                 std::chrono::milliseconds stream_creation_timeout);

}  // namespace mf::local
