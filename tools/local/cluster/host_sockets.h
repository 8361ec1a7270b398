// Listening sockets on the host's loopback for processes that live in the cluster's network
// namespace (network.h). A socket keeps the namespace it was created in, so a small broker
// process forked before `up` leaves the host namespace creates them on request and hands them
// over a Unix socket (SCM_RIGHTS): `up` uses it for the API server's forward, the node agent for
// LoadBalancer Services, and this works as root and inside an unprivileged user namespace alike.
// The broker only binds 127.0.0.0/8 addresses, so the cluster is never exposed beyond this
// machine, and it exits when the process that started it does.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "common/status.h"

namespace mf::local {

// Forks the broker, listening on the Unix socket `path` (replaced if it exists). Call while the
// process is still single-threaded and in the host's network namespace. Returns its pid.
StatusOr<pid_t> StartHostSocketBroker(const std::filesystem::path& path);

// A listening TCP socket bound to `ip`:`port` in the host's namespace (port 0: any free port),
// from the broker at `broker`. The caller owns the descriptor. INVALID_ARGUMENT for an address
// outside 127.0.0.0/8; the bind error (e.g. "Address already in use") otherwise.
StatusOr<int> OpenHostListener(const std::filesystem::path& broker, const std::string& ip, uint16_t port);

}  // namespace mf::local
