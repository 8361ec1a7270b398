// Reading a file:// or pvc:// source: one regular file, or a directory tree of regular files,
// directories and symlinks that resolve inside it (recreated as relative links; any other
// symlink is refused, as are devices, sockets and fifos).
//
// A directory's digest is the SHA-256 of its entries sorted by relative path, each as
// "<kind><path>\0<payload>\0" with kind 'd' (no payload), 'f' (payload "<bytes> <sha256>") or
// 'l' (payload the link target), so two trees digest alike only with the same names and bytes.
#pragma once

#include <filesystem>

#include "common/status.h"
#include "server/sync/cancellation.h"
#include "server/sync/publish.h"
#include "server/sync/source_uri.h"

namespace mf::sync {

// Copies `source` (Kind::kLocal) into the empty directory `staging`, fsyncing every file, and
// returns what was copied. With `staging` null it only reads and digests the source.
// A source that does not exist yet, is an empty directory, or changes while it is read is
// kNotFound / kUnavailable (worth a retry); one that leaves its root is kInvalidArgument.
StatusOr<Content> ReadLocalSource(const Source& source, const std::filesystem::path* staging,
                                  const Cancellation& cancellation);

}  // namespace mf::sync
