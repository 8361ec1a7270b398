// modelfleet-sync: the model sync sidecar. Fetches one model version (file://, pvc://, http(s)://)
// into the pod's shared model volume and publishes it atomically, so the model server's directory
// watch picks it up. docs/sync.md describes the flags and the status contract the operator reads:
//
//   failure: one line "modelfleet-sync: <reason>" on stderr and in --termination-message-path, exit 1
//   success: "synced <uri> -> <dir> (<bytes> bytes, sha256 <hex>)" on stdout and in that file;
//            exit 0 at once with --once, otherwise on SIGTERM/SIGINT (the container stays up
//            beside the server, so the pod does not restart it)
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>
#include <thread>

#include "common/flags.h"
#include "common/logging.h"
#include "server/sync/cancellation.h"
#include "server/sync/http_source.h"
#include "server/sync/sha256.h"
#include "server/sync/source_uri.h"
#include "server/sync/sync.h"

namespace mf::sync {
namespace {

constexpr size_t kMaxTerminationMessageBytes = 4000;  // Kubernetes keeps the first 4096 bytes

std::string SignalName(int signal) {
  if (signal == SIGTERM) return "SIGTERM";
  if (signal == SIGINT) return "SIGINT";
  return "signal " + std::to_string(signal);
}

// Kubernetes shows this file as the container's termination message; outside a pod the default
// path may not be writable, which is fine.
void WriteTerminationMessage(const std::string& path, const std::string& line) {
  if (path.empty()) return;
  std::ofstream out(path, std::ios::trunc);
  out << line.substr(0, kMaxTerminationMessageBytes) << "\n";
}

// Turns SIGTERM/SIGINT into cancellation on a thread of its own. Runs before any other thread
// starts, so that every thread inherits the blocked mask and only sigwait() sees the signals.
void CancelOnTerminationSignals(Cancellation* cancellation) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::thread([signals, cancellation] {
    int signal = 0;
    while (sigwait(&signals, &signal) != 0) {
    }
    cancellation->Cancel(signal);
  }).detach();
}

// FlagSet assigns nothing when any flag is bad, yet the operator still needs the reason in the
// file it named: find --termination-message-path by hand, as "--flag=value" or "--flag value".
std::string TerminationPathFromArgs(int argc, char** argv, std::string fallback) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    for (std::string_view name : {"--termination-message-path", "--termination_message_path"}) {
      if (!arg.starts_with(name)) continue;
      std::string_view rest = arg.substr(name.size());
      if (rest.starts_with('=')) fallback = rest.substr(1);
      if (rest.empty() && i + 1 < argc) fallback = argv[i + 1];
    }
  }
  return fallback;
}

int Main(int argc, char** argv) {
  // Lives as long as the process: the detached signal thread may use it until exit.
  auto* cancellation = new Cancellation();
  CancelOnTerminationSignals(cancellation);

  std::string source_uri;
  std::string dest;
  std::string sha256;
  std::string pvc_root = "/mnt/pvc";
  int attempts = 5;
  int64_t backoff_initial_ms = 500;
  int64_t backoff_max_ms = 30'000;
  std::string termination_message_path = "/dev/termination-log";
  bool once = false;
  std::string log_level = "info";
  FlagSet flags("modelfleet-sync",
                "Fetches one model version into the model volume atomically, then stays up until SIGTERM.");
  flags.Add("source", &source_uri, "file:///abs/path, pvc://CLAIM/sub/path, http(s)://host/.../file");
  flags.Add("dest", &dest, "the model version directory to publish, e.g. /models/resnet/3");
  flags.Add("sha256", &sha256, "expected SHA-256 (hex) of a single-file source, checked before publishing");
  flags.Add("pvc-root", &pvc_root, "where pvc://CLAIM is mounted: <pvc-root>/CLAIM");
  flags.Add("attempts", &attempts, "attempts before giving up (a bad flag, URI or symlink fails at once)");
  flags.Add("backoff-initial-ms", &backoff_initial_ms, "wait before the first retry, doubled per retry");
  flags.Add("backoff-max-ms", &backoff_max_ms, "longest wait between attempts");
  flags.Add("termination-message-path", &termination_message_path, "file for the one-line result the operator reads");
  flags.Add("once", &once, "exit after syncing instead of waiting for SIGTERM");
  flags.Add("log-level", &log_level, "debug, info, warning or error");

  auto fail = [&](const Status& status) {
    std::string line = "modelfleet-sync: " + status.message();
    std::replace_if(
        line.begin(), line.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
    std::cerr << line << std::endl;
    WriteTerminationMessage(termination_message_path, line);
    return 1;
  };
  if (Status s = flags.Parse(argc, argv); !s.ok()) {
    termination_message_path = TerminationPathFromArgs(argc, argv, termination_message_path);
    return fail(s);
  }
  if (flags.help_requested()) {
    std::cout << flags.Usage();
    return 0;
  }
  if (!flags.positional().empty()) {
    return fail(InvalidArgument("unexpected argument '" + flags.positional().front() +
                                "'; every setting is a --flag=value (see --help)"));
  }
  log::Level level;
  if (!log::ParseLevel(log_level, &level)) {
    return fail(InvalidArgument("--log-level must be debug, info, warning or error, got '" + log_level + "'"));
  }
  log::SetLevel(level);
  if (attempts < 1) return fail(InvalidArgument("--attempts must be at least 1"));
  if (backoff_initial_ms < 0 || backoff_max_ms < backoff_initial_ms) {
    return fail(InvalidArgument("--backoff-initial-ms must be >= 0 and --backoff-max-ms >= --backoff-initial-ms"));
  }

  SyncRequest request;
  auto source = ParseSource(source_uri, pvc_root);
  if (!source.ok()) return fail(source.status());
  request.source = std::move(*source);
  auto dest_path = ParseDestination(dest);
  if (!dest_path.ok()) return fail(dest_path.status());
  request.dest = std::move(*dest_path);
  if (!sha256.empty()) {
    auto parsed = ParseSha256Hex(sha256);
    if (!parsed.ok()) return fail(parsed.status());
    request.expected_sha256 = std::move(*parsed);
  }
  RetryPolicy policy;
  policy.attempts = attempts;
  policy.initial_backoff = std::chrono::milliseconds(backoff_initial_ms);
  policy.max_backoff = std::chrono::milliseconds(backoff_max_ms);

  http::Client client(DownloadClientOptions());
  SyncResult result;
  Status status = RetryWithBackoff(policy, *cancellation, [&](int attempt) -> Status {
    log::Debug("sync attempt", {{"attempt", std::to_string(attempt)}, {"source", request.source.uri}});
    auto synced = SyncOnce(request, client, *cancellation);
    if (!synced.ok()) return synced.status();
    result = std::move(*synced);
    return Status::Ok();
  });
  if (!status.ok()) {
    if (cancellation->cancelled()) {
      return fail(Cancelled("stopped by " + SignalName(cancellation->signal()) + " before " + request.source.uri +
                            " was synced to " + request.dest.string()));
    }
    return fail(status);
  }
  if (result.already_present) log::Info("destination already holds this content; nothing copied");
  std::string line = "synced " + request.source.uri + " -> " + request.dest.string() + " (" +
                     std::to_string(result.content.bytes) + " bytes, sha256 " + result.content.sha256 + ")";
  std::cout << line << std::endl;
  WriteTerminationMessage(termination_message_path, line);
  if (once) return 0;
  cancellation->Wait();
  log::Info("stopping", {{"signal", SignalName(cancellation->signal())}});
  return 0;
}

}  // namespace
}  // namespace mf::sync

int main(int argc, char** argv) { return mf::sync::Main(argc, argv); }
