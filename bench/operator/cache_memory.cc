// Heap bytes the operator's informer caches hold per ModelDeployment, by kind, for the objects as
// the API server returns them (bench/operator/objects/: one ModelDeployment's objects from a real
// modelfleet-local run), as the caches held them before (managedFields and pod specs dropped) and
// as the compaction of cache_view.h leaves them parsed, and as the informer's Store holds that
// now (packed as CBOR, with its key and namespace index; k8s/store.h). Prints a table; no timing,
// so a busy machine does not change it.
//   build/bench/operator/operator_cache_memory [bench/operator/objects]
#include <malloc.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "k8s/store.h"
#include "modeldeployment/cache_view.h"

namespace {

using mf::op::Json;

// Heap bytes in use now (glibc).
size_t HeapInUse() { return mallinfo2().uordblks; }

// Bytes per copy of `object` after `transform`, averaged over many copies kept alive at once.
size_t BytesPerCopy(const Json& object, const std::function<void(Json*)>& transform) {
  constexpr int kCopies = 2000;
  std::vector<Json> kept;
  kept.reserve(kCopies);
  const size_t before = HeapInUse();
  for (int i = 0; i < kCopies; ++i) {
    Json copy = Json::parse(object.dump());  // a fresh parse, as the informer's decode makes
    transform(&copy);
    kept.push_back(std::move(copy));
  }
  return (HeapInUse() - before) / kCopies;
}

// Bytes per object of a Store holding many copies of `object` after `transform`, under keys as
// long as the operator's ("namespace/name" of a ModelDeployment's object).
size_t StoredBytesPerCopy(const Json& object, const std::function<void(Json*)>& transform) {
  constexpr int kCopies = 2000;
  mf::k8s::Store store;
  const size_t before = HeapInUse();
  for (int i = 0; i < kCopies; ++i) {
    Json copy = Json::parse(object.dump());
    transform(&copy);
    store.Upsert("bench-namespace/md-" + std::to_string(i) + "-v1-server", copy);
  }
  return (HeapInUse() - before) / kCopies;
}

void Unchanged(Json*) {}
// The caches before cache_view.h: managedFields dropped everywhere, and the spec of pods.
void Before(Json* o) { mf::op::CompactForCache(o); }
void BeforePod(Json* o) {
  mf::op::CompactForCache(o);
  o->erase("spec");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "bench/operator/objects";
  struct Kind {
    const char* file;
    int per_md;  // copies per ModelDeployment of two versions
    std::function<void(Json*)> before, now;
  };
  const std::vector<Kind> kinds = {
      {"md.json", 1, Before, mf::op::CompactForCache},
      {"deployment_server.json", 2, Before, mf::op::CompactOwnedForCache},
      {"deployment_router.json", 1, Before, mf::op::CompactOwnedForCache},
      {"pod_server.json", 2, BeforePod, mf::op::CompactPodForCache},
      {"service.json", 3, Before, mf::op::CompactOwnedForCache},
      {"configmap_router.json", 1, Before, mf::op::CompactOwnedForCache},
      {"serviceaccount.json", 1, Before, mf::op::CompactOwnedForCache},
      {"rolebinding.json", 1, Before, mf::op::CompactOwnedForCache},
  };
  std::printf(
      "| object | per ModelDeployment | JSON bytes | parsed, as served | cached before | compacted, parsed | stored "
      "now |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  size_t total_full = 0, total_before = 0, total_now = 0, total_stored = 0;
  for (const auto& k : kinds) {
    std::ifstream in(dir + "/" + k.file);
    if (!in) {
      std::fprintf(stderr, "cannot read %s/%s\n", dir.c_str(), k.file);
      return 1;
    }
    const Json object = Json::parse(std::string(std::istreambuf_iterator<char>(in), {}), nullptr, false);
    if (object.is_discarded()) {
      std::fprintf(stderr, "%s is not JSON\n", k.file);
      return 1;
    }
    const size_t full = BytesPerCopy(object, Unchanged);
    const size_t before = BytesPerCopy(object, k.before);
    const size_t now = BytesPerCopy(object, k.now);
    const size_t stored = StoredBytesPerCopy(object, k.now);
    std::printf("| %s | %d | %zu | %zu | %zu | %zu | %zu |\n", k.file, k.per_md, object.dump().size(), full, before,
                now, stored);
    total_full += full * static_cast<size_t>(k.per_md);
    total_before += before * static_cast<size_t>(k.per_md);
    total_now += now * static_cast<size_t>(k.per_md);
    total_stored += stored * static_cast<size_t>(k.per_md);
  }
  std::printf("| **one ModelDeployment** | | | %zu | %zu | %zu | %zu |\n", total_full, total_before, total_now,
              total_stored);
  std::printf("| **5,000 ModelDeployments** | | | %.0f MB | %.0f MB | %.0f MB | %.0f MB |\n", total_full * 5000 / 1e6,
              total_before * 5000 / 1e6, total_now * 5000 / 1e6, total_stored * 5000 / 1e6);
  return 0;
}
