#include "tools/local/store/store.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <unordered_map>

#include "common/logging.h"
#include "tools/local/store/journal.h"
#include "tools/local/store/object_meta.h"
#include "tools/local/store/selector.h"

namespace mf::local {
namespace {

constexpr std::string_view kForegroundFinalizer = "foregroundDeletion";
const GroupVersionResource kNamespaces{"", "v1", "namespaces"};

using NamespacedName = std::pair<std::string, std::string>;  // (namespace, name)

json GvrToJson(const GroupVersionResource& gvr) {
  return {{"group", gvr.group}, {"version", gvr.version}, {"resource", gvr.resource}};
}

StatusOr<GroupVersionResource> GvrFromJson(const json& j) {
  if (!j.is_object() || !j.contains("group") || !j.contains("version") || !j.contains("resource")) {
    return DataLoss("a stored record has no valid gvr");
  }
  return GroupVersionResource{j["group"].get<std::string>(), j["version"].get<std::string>(),
                              j["resource"].get<std::string>()};
}

const char* kTooOldPrefix = "too old resource version: ";

// One committed change, kept for watches that resume from an older resourceVersion.
struct Change {
  uint64_t rv;
  WatchEventType type;  // ADDED, MODIFIED or DELETED
  GroupVersionResource gvr;
  std::string ns;
  json object;  // after the change (DELETED: the last state, at the deletion's version)
  json old;     // before the change (MODIFIED and DELETED), else null
};

json ChangeToJson(const Change& c, bool with_old) {
  json j = {{"rv", c.rv}, {"type", WatchEventTypeName(c.type)}, {"gvr", GvrToJson(c.gvr)},
            {"ns", c.ns}, {"object", c.object}};
  if (with_old && !c.old.is_null()) j["old"] = c.old;
  return j;
}

StatusOr<Change> ChangeFromJson(const json& j) {
  if (!j.is_object() || !j.contains("rv") || !j.contains("type") || !j.contains("object")) {
    return DataLoss("a stored change record is malformed");
  }
  Change c;
  c.rv = j["rv"].get<uint64_t>();
  std::string type = j["type"].get<std::string>();
  if (type == "ADDED") c.type = WatchEventType::kAdded;
  else if (type == "MODIFIED") c.type = WatchEventType::kModified;
  else if (type == "DELETED") c.type = WatchEventType::kDeleted;
  else return DataLoss("a stored change record has type " + type);
  MF_ASSIGN_OR_RETURN(c.gvr, GvrFromJson(j["gvr"]));
  c.ns = j.value("ns", "");
  c.object = j["object"];
  if (j.contains("old")) c.old = j["old"];
  return c;
}

// A registered watch with its selectors parsed once.
struct Subscription {
  std::weak_ptr<Watcher> watcher;
  GroupVersionResource gvr;
  std::string ns;
  LabelSelector labels;
  FieldSelector fields;

  bool Matches(const json& object) const {
    return labels.Matches(Labels(object)) && fields.Matches(object);
  }
};

// What a subscriber sees of a change, given its selectors (an object leaving the selection is
// DELETED for it, one entering is ADDED), or nullopt.
std::optional<WatchEvent> EventFor(const Subscription& sub, const Change& c) {
  if (c.gvr != sub.gvr || (!sub.ns.empty() && sub.ns != c.ns)) return std::nullopt;
  bool now = c.type != WatchEventType::kDeleted && sub.Matches(c.object);
  bool before = c.type != WatchEventType::kAdded && sub.Matches(c.type == WatchEventType::kDeleted ? c.object : c.old);
  WatchEventType type;
  if (c.type == WatchEventType::kDeleted) {
    if (!before) return std::nullopt;
    type = WatchEventType::kDeleted;
  } else if (now && before) {
    type = WatchEventType::kModified;
  } else if (now) {
    type = WatchEventType::kAdded;
  } else if (before) {
    type = WatchEventType::kDeleted;
  } else {
    return std::nullopt;
  }
  return WatchEvent{type, c.object, c.rv};
}

// The part of an object whose change bumps metadata.generation.
json GenerationRelevant(const json& object, bool has_status_subresource) {
  json copy = object;
  copy.erase("metadata");
  copy.erase("apiVersion");
  copy.erase("kind");
  if (has_status_subresource) copy.erase("status");
  return copy;
}

}  // namespace

std::string GroupVersionResource::ToString() const {
  return group.empty() ? resource : resource + "." + version + "." + group;
}

bool IsResourceVersionTooOld(const Status& status) {
  return status.code() == StatusCode::kOutOfRange && status.message().starts_with(kTooOldPrefix);
}

class Store::Impl {
 public:
  explicit Impl(StoreOptions options) : options_(std::move(options)), rng_(std::random_device{}()) {}

  Status Load() {
    if (options_.data_dir.empty()) return Status::Ok();
    Journal::Loaded loaded;
    MF_ASSIGN_OR_RETURN(journal_, Journal::Open(options_.data_dir, &loaded));
    if (!loaded.snapshot.is_null()) {
      const json& snap = loaded.snapshot;
      rv_ = snap.value("resourceVersion", uint64_t{0});
      history_floor_ = snap.value("historyFloor", rv_);
      for (const auto& entry : snap.value("objects", json::array())) {
        MF_ASSIGN_OR_RETURN(auto gvr, GvrFromJson(entry["gvr"]));
        Put(gvr, entry["object"]);
      }
      for (const auto& entry : snap.value("history", json::array())) {
        MF_ASSIGN_OR_RETURN(auto change, ChangeFromJson(entry));
        history_.push_back(std::move(change));
      }
    }
    for (const auto& record : loaded.records) {
      MF_ASSIGN_OR_RETURN(auto change, ChangeFromJson(record));
      if (change.rv <= rv_) continue;  // already in the snapshot
      // The log does not repeat the previous state; it is the object as replayed so far. Watches
      // with selectors and lists at a past version need it.
      if (change.type != WatchEventType::kAdded && change.object.contains("metadata") &&
          change.object["metadata"].is_object()) {
        if (const json* before = Find(change.gvr, change.ns, change.object["metadata"].value("name", ""))) {
          change.old = *before;
        }
      }
      Apply(change);
      rv_ = change.rv;
      history_.push_back(std::move(change));
    }
    TrimHistory();
    log::Info("local store loaded", {{"dir", options_.data_dir.string()},
                                     {"resourceVersion", std::to_string(rv_)},
                                     {"objects", std::to_string(uid_index_.size())}});
    return Status::Ok();
  }

  void StopAllWatchers() {
    std::vector<std::shared_ptr<Watcher>> live;
    {
      std::lock_guard lock(mu_);
      for (auto& sub : subscriptions_) {
        if (auto w = sub.watcher.lock()) live.push_back(std::move(w));
      }
      subscriptions_.clear();
    }
    for (auto& w : live) w->Stop();
  }

  void RegisterType(ResourceType type) {
    std::lock_guard lock(mu_);
    types_[type.gvr] = std::move(type);
  }

  Status UnregisterType(const GroupVersionResource& gvr) {
    Batch batch(this);
    if (!types_.contains(gvr)) return NotFound("no resource type " + gvr.ToString());
    if (auto it = objects_.find(gvr); it != objects_.end()) {
      std::vector<NamespacedName> names;
      for (const auto& [key, _] : it->second) names.push_back(key);
      for (const auto& [ns, name] : names) {
        const json* current = Find(gvr, ns, name);
        if (current) MF_RETURN_IF_ERROR(Remove(gvr, ns, name, *current, batch));
      }
    }
    types_.erase(gvr);
    return Status::Ok();
  }

  std::optional<ResourceType> FindType(const GroupVersionResource& gvr) const {
    std::lock_guard lock(mu_);
    auto it = types_.find(gvr);
    if (it == types_.end()) return std::nullopt;
    return it->second;
  }

  std::vector<ResourceType> Types() const {
    std::lock_guard lock(mu_);
    std::vector<ResourceType> out;
    for (const auto& [_, t] : types_) out.push_back(t);
    return out;
  }

  StatusOr<json> Create(const GroupVersionResource& gvr, std::string_view ns_view, json object, const WriteOptions& write) {
    Batch batch(this, write.dry_run);
    MF_ASSIGN_OR_RETURN(const ResourceType* type, TypeOf(gvr));
    std::string ns(ns_view);
    if (!object.is_object()) return InvalidArgument("the object must be a JSON object");
    json& meta = object["metadata"];
    if (meta.is_null()) meta = json::object();
    if (!meta.is_object()) return InvalidArgument("metadata must be an object");
    MF_RETURN_IF_ERROR(ValidateMetadataTypes(meta));
    MF_RETURN_IF_ERROR(CheckNamespace(*type, meta, &ns));
    if (type->namespaced) {
      const json* namespace_object = Find(kNamespaces, "", ns);
      if (!namespace_object) return NotFound("namespaces \"" + ns + "\" not found");
      if (IsBeingDeleted(*namespace_object)) {
        return PermissionDenied(type->gvr.resource + " \"" + meta.value("name", "") +
                                "\" is forbidden: unable to create new content in namespace " + ns +
                                " because it is being terminated");
      }
    }
    std::string name = meta.value("name", "");
    if (name.empty()) {
      std::string prefix = meta.value("generateName", "");
      if (prefix.empty()) return InvalidArgument("metadata.name or metadata.generateName is required");
      do {
        name = prefix + RandomSuffix();
      } while (Find(gvr, ns, name));
      meta["name"] = name;
    }
    MF_RETURN_IF_ERROR(ValidateObjectName(name));
    if (Find(gvr, ns, name)) {
      return AlreadyExists(QualifiedResource(gvr) + " \"" + name + "\" already exists");
    }
    object["apiVersion"] = gvr.ApiVersion();
    object["kind"] = type->kind;
    meta["uid"] = NewUid();
    meta["creationTimestamp"] = FormatTime(options_.now());
    meta["generation"] = 1;
    meta.erase("deletionTimestamp");
    meta.erase("deletionGracePeriodSeconds");
    meta.erase("resourceVersion");
    if (type->has_status_subresource) object.erase("status");
    if (type->admit) MF_RETURN_IF_ERROR(type->admit(object, nullptr));
    Change change{0, WatchEventType::kAdded, gvr, ns, std::move(object), nullptr};
    MF_RETURN_IF_ERROR(Commit(change, batch));
    return change.object;
  }

  StatusOr<json> Get(const ObjectRef& ref) const {
    std::lock_guard lock(mu_);
    MF_RETURN_IF_ERROR(TypeOf(ref.gvr).status());
    const json* object = Find(ref.gvr, ref.ns, ref.name);
    if (!object) return NotFoundError(ref);
    return *object;
  }

  StatusOr<ObjectList> List(const GroupVersionResource& gvr, std::string_view ns, const ListOptions& options) const {
    MF_ASSIGN_OR_RETURN(auto labels, LabelSelector::Parse(options.label_selector));
    MF_ASSIGN_OR_RETURN(auto fields, FieldSelector::Parse(options.field_selector));
    std::lock_guard lock(mu_);
    MF_RETURN_IF_ERROR(TypeOf(gvr).status());
    ObjectList list;
    list.resource_version = rv_;
    static const std::map<NamespacedName, json> kNone;
    auto it = objects_.find(gvr);
    const std::map<NamespacedName, json>& latest = it == objects_.end() ? kNone : it->second;
    std::map<NamespacedName, const json*> past;  // the objects as of at_resource_version
    const bool at_past = options.at_resource_version != 0 && options.at_resource_version != rv_;
    if (at_past) {
      MF_ASSIGN_OR_RETURN(past, StateAt(gvr, ns, latest, options.at_resource_version));
      list.resource_version = options.at_resource_version;
    }
    auto visit = [&](const NamespacedName& key, const json& object) {
      if (!ns.empty() && key.first != ns) return;
      if (options.start_after && key <= *options.start_after) return;
      if (!labels.Matches(Labels(object)) || !fields.Matches(object)) return;
      if (options.limit != 0 && list.items.size() == options.limit) {
        list.more = true;
        ++list.remaining;
        return;
      }
      list.items.push_back(object);
    };
    if (at_past) {
      for (const auto& [key, object] : past) visit(key, *object);
    } else {
      auto from = options.start_after ? latest.upper_bound(*options.start_after) : latest.begin();
      for (auto i = from; i != latest.end(); ++i) visit(i->first, i->second);
    }
    return list;
  }

  // The objects of `gvr` (in `ns`, or all) as they were at resourceVersion `at`: the current ones
  // with every later change undone, newest first. Points into objects_ and history_ (lock held).
  StatusOr<std::map<NamespacedName, const json*>> StateAt(const GroupVersionResource& gvr, std::string_view ns,
                                                          const std::map<NamespacedName, json>& latest,
                                                          uint64_t at) const {
    if (at > rv_) {
      return FailedPrecondition("resourceVersion " + std::to_string(at) + " is newer than the store's " +
                                std::to_string(rv_));
    }
    auto too_old = [&] {
      return OutOfRange(std::string(kTooOldPrefix) + std::to_string(at) + " (oldest available: " +
                        std::to_string(history_floor_) + ")");
    };
    if (at < history_floor_) return too_old();
    std::map<NamespacedName, const json*> state;
    for (const auto& [key, object] : latest) {
      if (ns.empty() || key.first == ns) state.emplace(key, &object);
    }
    for (auto c = history_.rbegin(); c != history_.rend() && c->rv > at; ++c) {
      if (c->gvr != gvr || (!ns.empty() && c->ns != ns)) continue;
      NamespacedName key{c->ns, c->object["metadata"].value("name", "")};
      if (c->type == WatchEventType::kAdded) {
        state.erase(key);
        continue;
      }
      if (c->old.is_null()) return too_old();  // cannot be undone (never happens for stored history)
      state[key] = &c->old;
    }
    return state;
  }

  StatusOr<json> GuaranteedUpdate(const ObjectRef& ref, Subresource sub, const MutateFn& mutate, const WriteOptions& write) {
    Batch batch(this, write.dry_run);
    MF_ASSIGN_OR_RETURN(const ResourceType* type, TypeOf(ref.gvr));
    const json* current = Find(ref.gvr, ref.ns, ref.name);
    if (!current) return NotFoundError(ref);
    MF_ASSIGN_OR_RETURN(json desired, mutate(*current));
    return UpdateLocked(*type, ref, *current, std::move(desired), sub, batch);
  }

  StatusOr<json> Update(const ObjectRef& ref, json object, Subresource sub, const WriteOptions& write) {
    Batch batch(this, write.dry_run);
    MF_ASSIGN_OR_RETURN(const ResourceType* type, TypeOf(ref.gvr));
    const json* current = Find(ref.gvr, ref.ns, ref.name);
    if (!current) return NotFoundError(ref);
    if (!object.is_object()) return InvalidArgument("the object must be a JSON object");
    std::string requested_rv = ResourceVersionOf(object);
    if (!requested_rv.empty() && requested_rv != ResourceVersionOf(*current)) {
      return ConflictError(ref);
    }
    return UpdateLocked(*type, ref, *current, std::move(object), sub, batch);
  }

  StatusOr<json> Delete(const ObjectRef& ref, const DeleteOptions& options) {
    Batch batch(this);
    MF_RETURN_IF_ERROR(TypeOf(ref.gvr).status());
    const json* current = Find(ref.gvr, ref.ns, ref.name);
    if (!current) return NotFoundError(ref);
    if (options.precondition_uid && *options.precondition_uid != Uid(*current)) {
      return Aborted("Precondition failed: UID in precondition: " + *options.precondition_uid +
                     ", UID in object meta: " + Uid(*current));
    }
    if (options.precondition_resource_version &&
        *options.precondition_resource_version != ResourceVersionOf(*current)) {
      return Aborted("Precondition failed: ResourceVersion in precondition: " +
                     *options.precondition_resource_version +
                     ", ResourceVersion in object meta: " + ResourceVersionOf(*current));
    }
    if (options.dry_run) return DeletePreview(*current, ref, options.propagation);
    MF_ASSIGN_OR_RETURN(json result, DeleteLocked(ref, options.propagation, batch));
    return result;
  }

  StatusOr<std::shared_ptr<Watcher>> Watch(const GroupVersionResource& gvr, std::string_view ns,
                                           const WatchOptions& options) {
    MF_ASSIGN_OR_RETURN(auto labels, LabelSelector::Parse(options.selectors.label_selector));
    MF_ASSIGN_OR_RETURN(auto fields, FieldSelector::Parse(options.selectors.field_selector));
    std::shared_ptr<Watcher> watcher;
    {
      std::lock_guard lock(mu_);
      MF_ASSIGN_OR_RETURN(const ResourceType* type, TypeOf(gvr));
      if (options.resource_version != 0 && options.resource_version < history_floor_) {
        return OutOfRange(std::string(kTooOldPrefix) + std::to_string(options.resource_version) +
                          " (oldest available: " + std::to_string(history_floor_) + ")");
      }
      watcher = std::make_shared<Watcher>(gvr, type->kind, options.allow_bookmarks,
                                          options_.max_queued_events_per_watcher);
      Subscription sub{watcher, gvr, std::string(ns), std::move(labels), std::move(fields)};
      if (options.resource_version == 0) {
        if (options.send_initial_events) {
          if (auto it = objects_.find(gvr); it != objects_.end()) {
            for (const auto& [key, object] : it->second) {
              if (!sub.ns.empty() && key.first != sub.ns) continue;
              if (!sub.Matches(object)) continue;
              watcher->Enqueue(WatchEvent{WatchEventType::kAdded, object, ParseVersion(ResourceVersionOf(object))});
            }
          }
        }
      } else {
        for (const auto& change : history_) {
          if (change.rv <= options.resource_version) continue;
          if (auto event = EventFor(sub, change)) watcher->Enqueue(std::move(*event));
        }
      }
      watcher->NoteVersion(rv_);
      subscriptions_.push_back(std::move(sub));
    }
    watcher->NotifyOutsideLock();
    return watcher;
  }

  uint64_t CurrentResourceVersion() const {
    std::lock_guard lock(mu_);
    return rv_;
  }

 private:
  // Holds the store lock for one API call and wakes the watchers it queued events for once the
  // lock is released (their notify callbacks may take other locks).
  class Batch {
   public:
    explicit Batch(Impl* impl, bool dry_run = false) : lock_(impl->mu_), dry_run_(dry_run) {}
    ~Batch() {
      lock_.unlock();
      for (auto& w : touched_) w->NotifyOutsideLock();
    }
    bool dry_run() const { return dry_run_; }
    void Touch(std::shared_ptr<Watcher> w) {
      if (std::find(touched_.begin(), touched_.end(), w) == touched_.end()) touched_.push_back(std::move(w));
    }

   private:
    std::unique_lock<std::mutex> lock_;
    const bool dry_run_;
    std::vector<std::shared_ptr<Watcher>> touched_;
  };

  StatusOr<const ResourceType*> TypeOf(const GroupVersionResource& gvr) const {
    auto it = types_.find(gvr);
    if (it == types_.end()) {
      return NotFound("the server could not find the requested resource (" + gvr.ToString() + ")");
    }
    return &it->second;
  }

  static std::string QualifiedResource(const GroupVersionResource& gvr) {
    return gvr.group.empty() ? gvr.resource : gvr.resource + "." + gvr.group;
  }

  static Status NotFoundError(const ObjectRef& ref) {
    return NotFound(QualifiedResource(ref.gvr) + " \"" + ref.name + "\" not found");
  }

  static Status ConflictError(const ObjectRef& ref) {
    return Aborted("Operation cannot be fulfilled on " + QualifiedResource(ref.gvr) + " \"" + ref.name +
                   "\": the object has been modified; please apply your changes to the latest "
                   "version and try again");
  }

  static Status CheckNamespace(const ResourceType& type, json& meta, std::string* ns) {
    std::string in_object = meta.value("namespace", "");
    if (!type.namespaced) {
      meta.erase("namespace");
      ns->clear();
      return Status::Ok();
    }
    if (ns->empty()) *ns = in_object;
    if (ns->empty()) return InvalidArgument("a namespace is required for " + type.gvr.resource);
    if (!in_object.empty() && in_object != *ns) {
      return InvalidArgument("the namespace of the provided object (" + in_object +
                             ") does not match the namespace sent on the request (" + *ns + ")");
    }
    meta["namespace"] = *ns;
    return Status::Ok();
  }

  std::string NewUid() {
    std::uniform_int_distribution<int> hex(0, 15);
    std::string uid = "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx";
    for (char& c : uid) {
      if (c == 'x') c = "0123456789abcdef"[hex(rng_)];
      else if (c == 'y') c = "89ab"[hex(rng_) & 3];
    }
    return uid;
  }

  std::string RandomSuffix() {
    static constexpr std::string_view kAlphabet = "bcdfghjklmnpqrstvwxz2456789";  // as k8s: no vowels
    std::uniform_int_distribution<size_t> pick(0, kAlphabet.size() - 1);
    std::string s;
    for (int i = 0; i < 5; ++i) s.push_back(kAlphabet[pick(rng_)]);
    return s;
  }

  const json* Find(const GroupVersionResource& gvr, const std::string& ns, const std::string& name) const {
    auto it = objects_.find(gvr);
    if (it == objects_.end()) return nullptr;
    auto obj = it->second.find({ns, name});
    return obj == it->second.end() ? nullptr : &obj->second;
  }

  // Inserts or replaces without journaling (loading and Apply).
  void Put(const GroupVersionResource& gvr, const json& object) {
    const json& meta = object["metadata"];
    NamespacedName key{meta.value("namespace", ""), meta.value("name", "")};
    uid_index_[meta.value("uid", "")] = {gvr, key.first, key.second};
    objects_[gvr][key] = object;
  }

  void Apply(const Change& c) {
    if (c.type == WatchEventType::kDeleted) {
      const json& meta = c.object["metadata"];
      uid_index_.erase(meta.value("uid", ""));
      auto it = objects_.find(c.gvr);
      if (it != objects_.end()) it->second.erase({c.ns, meta.value("name", "")});
    } else {
      Put(c.gvr, c.object);
    }
  }

  // Journals, applies and publishes one change; assigns its resourceVersion.
  Status Commit(Change& change, Batch& batch) {
    if (batch.dry_run()) return Status::Ok();  // the caller returns change.object as it would be
    change.rv = rv_ + 1;
    change.object["metadata"]["resourceVersion"] = std::to_string(change.rv);
    if (journal_) {
      MF_RETURN_IF_ERROR(journal_->Append(ChangeToJson(change, /*with_old=*/false)));
    }
    rv_ = change.rv;
    Apply(change);
    Publish(change, batch);
    history_.push_back(change);
    TrimHistory();
    if (journal_ && journal_->records_since_snapshot() >= options_.compact_after_records) {
      Status s = journal_->WriteSnapshot(Snapshot());
      // The change is durable in the log already; a failed compaction only means a longer replay.
      if (!s.ok()) log::Warning("local store compaction failed", {{"error", s.ToString()}});
    }
    return Status::Ok();
  }

  void Publish(const Change& change, Batch& batch) {
    auto it = subscriptions_.begin();
    while (it != subscriptions_.end()) {
      auto watcher = it->watcher.lock();
      if (!watcher || watcher->done()) {
        it = subscriptions_.erase(it);
        continue;
      }
      if (auto event = EventFor(*it, change)) {
        watcher->Enqueue(std::move(*event));
        batch.Touch(watcher);
      } else {
        watcher->NoteVersion(change.rv);
      }
      ++it;
    }
  }

  void TrimHistory() {
    while (history_.size() > options_.history_limit) {
      history_floor_ = history_.front().rv;
      history_.pop_front();
    }
  }

  json Snapshot() const {
    json objects = json::array();
    for (const auto& [gvr, by_name] : objects_) {
      for (const auto& [_, object] : by_name) objects.push_back({{"gvr", GvrToJson(gvr)}, {"object", object}});
    }
    json history = json::array();
    for (const auto& change : history_) history.push_back(ChangeToJson(change, /*with_old=*/true));
    return {{"resourceVersion", rv_}, {"historyFloor", history_floor_}, {"objects", std::move(objects)},
            {"history", std::move(history)}};
  }

  StatusOr<json> UpdateLocked(const ResourceType& type, const ObjectRef& ref, const json& current_ref,
                              json desired, Subresource sub, Batch& batch) {
    const json current = current_ref;  // Commit() replaces the stored object
    if (!desired.is_object()) return InvalidArgument("the object must be a JSON object");
    if (!desired["metadata"].is_object()) desired["metadata"] = json::object();
    json& dmeta = desired["metadata"];
    if (dmeta.contains("name") && dmeta["name"] != ref.name) {
      return InvalidArgument("the name of the object (" + dmeta["name"].dump() +
                             ") does not match the name on the URL (" + ref.name + ")");
    }
    if (type.namespaced && dmeta.contains("namespace") && dmeta["namespace"] != ref.ns) {
      return InvalidArgument("the namespace of the object (" + dmeta["namespace"].dump() +
                             ") does not match the namespace on the URL (" + ref.ns + ")");
    }
    json result;
    if (sub == Subresource::kStatus) {
      result = current;
      if (desired.contains("status")) result["status"] = desired["status"];
      else result.erase("status");
    } else {
      result = std::move(desired);
      if (type.has_status_subresource) {
        if (current.contains("status")) result["status"] = current["status"];
        else result.erase("status");
      }
      // Fields the server owns.
      json& meta = result["metadata"];
      for (const char* field : {"uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"}) {
        if (current["metadata"].contains(field)) meta[field] = current["metadata"][field];
        else meta.erase(field);
      }
      if (IsBeingDeleted(current)) {
        // Like kube-apiserver: once deletion started, finalizers may only be removed.
        for (const auto& f : Finalizers(result)) {
          const auto before = Finalizers(current);
          if (std::find(before.begin(), before.end(), f) == before.end()) {
            return PermissionDenied("no new finalizers can be added if the object is being deleted, found new finalizers [\"" + f + "\"]");
          }
        }
      }
    }
    json& meta = result["metadata"];
    MF_RETURN_IF_ERROR(ValidateMetadataTypes(meta));
    meta["name"] = ref.name;
    if (type.namespaced) meta["namespace"] = ref.ns;
    else meta.erase("namespace");
    meta["resourceVersion"] = current["metadata"]["resourceVersion"];
    result["apiVersion"] = ref.gvr.ApiVersion();
    result["kind"] = type.kind;
    if (type.admit) MF_RETURN_IF_ERROR(type.admit(result, &current));
    if (GenerationRelevant(result, type.has_status_subresource) !=
        GenerationRelevant(current, type.has_status_subresource)) {
      meta["generation"] = current["metadata"].value("generation", int64_t{1}) + 1;
    } else if (current["metadata"].contains("generation")) {
      meta["generation"] = current["metadata"]["generation"];
    }
    if (result == current) return result;  // a no-op write does not bump resourceVersion
    if (IsBeingDeleted(result) && Finalizers(result).empty()) {
      MF_RETURN_IF_ERROR(Remove(ref.gvr, ref.ns, ref.name, result, batch));
      return result;
    }
    Change change{0, WatchEventType::kModified, ref.gvr, ref.ns, std::move(result), current};
    MF_RETURN_IF_ERROR(Commit(change, batch));
    return change.object;
  }

  // Objects whose ownerReferences name `uid`.
  std::vector<ObjectRef> DependentsOf(const std::string& uid) const {
    std::vector<ObjectRef> out;
    for (const auto& [gvr, by_name] : objects_) {
      for (const auto& [key, object] : by_name) {
        for (const auto& owner : OwnerReferences(object)) {
          if (owner.value("uid", "") == uid) {
            out.push_back({gvr, key.first, key.second});
            break;
          }
        }
      }
    }
    return out;
  }

  // What Delete would return, without doing it (dry run).
  json DeletePreview(const json& current, const ObjectRef& ref, PropagationPolicy policy) const {
    bool held = !Finalizers(current).empty() || ref.gvr == kNamespaces ||
                (policy == PropagationPolicy::kForeground && !DependentsOf(Uid(current)).empty());
    json preview = current;
    if (held && !IsBeingDeleted(preview)) {
      preview["metadata"]["deletionTimestamp"] = FormatTime(options_.now());
      preview["metadata"]["deletionGracePeriodSeconds"] = 0;
    }
    return preview;
  }

  StatusOr<json> DeleteLocked(const ObjectRef& ref, PropagationPolicy policy, Batch& batch) {
    const json* current_ptr = Find(ref.gvr, ref.ns, ref.name);
    if (!current_ptr) return NotFoundError(ref);
    json current = *current_ptr;
    const std::string uid = Uid(current);

    if (policy == PropagationPolicy::kOrphan) {
      for (const auto& dep : DependentsOf(uid)) {
        const json* dep_object = Find(dep.gvr, dep.ns, dep.name);
        json updated = *dep_object;
        json kept = json::array();
        for (const auto& owner : OwnerReferences(updated)) {
          if (owner.value("uid", "") != uid) kept.push_back(owner);
        }
        if (kept.empty()) updated["metadata"].erase("ownerReferences");
        else updated["metadata"]["ownerReferences"] = kept;
        Change change{0, WatchEventType::kModified, dep.gvr, dep.ns, std::move(updated), *dep_object};
        MF_RETURN_IF_ERROR(Commit(change, batch));
      }
    }

    bool is_namespace = ref.gvr == kNamespaces;
    bool foreground = policy == PropagationPolicy::kForeground && !DependentsOf(uid).empty();
    std::vector<std::string> finalizers = Finalizers(current);
    if (foreground && std::find(finalizers.begin(), finalizers.end(), kForegroundFinalizer) == finalizers.end()) {
      current["metadata"]["finalizers"].push_back(std::string(kForegroundFinalizer));
      finalizers.emplace_back(kForegroundFinalizer);
    }
    if (!finalizers.empty() || is_namespace) {
      if (!IsBeingDeleted(current) || foreground) {
        json before = *current_ptr;
        if (!IsBeingDeleted(current)) {
          current["metadata"]["deletionTimestamp"] = FormatTime(options_.now());
          current["metadata"]["deletionGracePeriodSeconds"] = 0;
        }
        if (is_namespace) current["status"]["phase"] = "Terminating";
        if (current != before) {
          Change change{0, WatchEventType::kModified, ref.gvr, ref.ns, current, std::move(before)};
          MF_RETURN_IF_ERROR(Commit(change, batch));
          current = change.object;
        }
      }
      if (foreground) {
        for (const auto& dep : DependentsOf(uid)) {
          // Already being deleted: either in progress or an ownerReference cycle back to us.
          const json* dep_object = Find(dep.gvr, dep.ns, dep.name);
          if (dep_object && !IsBeingDeleted(*dep_object)) {
            MF_RETURN_IF_ERROR(DeleteLocked(dep, PropagationPolicy::kForeground, batch).status());
          }
        }
      }
      if (is_namespace) {
        // The namespace controller's job: delete the contents, then the namespace when empty.
        for (const auto& [gvr, by_name] : objects_) {
          std::vector<NamespacedName> inside;
          for (const auto& [key, _] : by_name) {
            if (key.first == ref.name) inside.push_back(key);
          }
          for (const auto& [ns, name] : inside) {
            const json* obj = Find(gvr, ns, name);
            if (obj && !IsBeingDeleted(*obj)) {
              MF_RETURN_IF_ERROR(DeleteLocked({gvr, ns, name}, PropagationPolicy::kBackground, batch).status());
            }
          }
        }
        MF_RETURN_IF_ERROR(MaybeFinishNamespace(ref.name, batch));
      }
      MF_RETURN_IF_ERROR(MaybeFinishForeground(uid, batch));
      const json* after = Find(ref.gvr, ref.ns, ref.name);
      return after ? *after : current;
    }
    MF_RETURN_IF_ERROR(Remove(ref.gvr, ref.ns, ref.name, current, batch));
    return current;
  }

  // Removes the object for good, then does what the garbage collector and namespace controller
  // would: delete dependents that have no other live owner, finish foreground owners and
  // terminating namespaces that were waiting on it.
  Status Remove(const GroupVersionResource& gvr, const std::string& ns, const std::string& name,
                const json& last_state, Batch& batch) {
    const json* stored = Find(gvr, ns, name);
    if (!stored) return Status::Ok();
    json before = *stored;
    json object = last_state;
    Change change{0, WatchEventType::kDeleted, gvr, ns, std::move(object), std::move(before)};
    MF_RETURN_IF_ERROR(Commit(change, batch));
    if (batch.dry_run()) return Status::Ok();
    const std::string uid = Uid(change.object);

    for (const auto& dep : DependentsOf(uid)) {
      const json* dep_object = Find(dep.gvr, dep.ns, dep.name);
      if (!dep_object || IsBeingDeleted(*dep_object)) continue;
      bool other_owner_alive = false;
      for (const auto& owner : OwnerReferences(*dep_object)) {
        std::string owner_uid = owner.value("uid", "");
        if (owner_uid != uid && uid_index_.contains(owner_uid)) other_owner_alive = true;
      }
      if (!other_owner_alive) {
        MF_RETURN_IF_ERROR(DeleteLocked(dep, PropagationPolicy::kBackground, batch).status());
      }
    }
    for (const auto& owner : OwnerReferences(change.object)) {
      MF_RETURN_IF_ERROR(MaybeFinishForeground(owner.value("uid", ""), batch));
    }
    if (!ns.empty()) MF_RETURN_IF_ERROR(MaybeFinishNamespace(ns, batch));
    return Status::Ok();
  }

  // An owner in foreground deletion goes once no dependent remains.
  Status MaybeFinishForeground(const std::string& owner_uid, Batch& batch) {
    auto it = uid_index_.find(owner_uid);
    if (it == uid_index_.end()) return Status::Ok();
    ObjectRef owner = it->second;
    const json* object = Find(owner.gvr, owner.ns, owner.name);
    if (!object || !IsBeingDeleted(*object)) return Status::Ok();
    auto finalizers = Finalizers(*object);
    if (std::find(finalizers.begin(), finalizers.end(), kForegroundFinalizer) == finalizers.end()) return Status::Ok();
    if (!DependentsOf(owner_uid).empty()) return Status::Ok();
    json updated = *object;
    json kept = json::array();
    for (const auto& f : finalizers) {
      if (f != kForegroundFinalizer) kept.push_back(f);
    }
    updated["metadata"]["finalizers"] = kept;
    if (kept.empty()) {
      updated["metadata"].erase("finalizers");
      return Remove(owner.gvr, owner.ns, owner.name, updated, batch);
    }
    Change change{0, WatchEventType::kModified, owner.gvr, owner.ns, std::move(updated), *object};
    return Commit(change, batch);
  }

  Status MaybeFinishNamespace(const std::string& ns, Batch& batch) {
    const json* namespace_object = Find(kNamespaces, "", ns);
    if (!namespace_object || !IsBeingDeleted(*namespace_object)) return Status::Ok();
    if (!Finalizers(*namespace_object).empty()) return Status::Ok();
    for (const auto& [gvr, by_name] : objects_) {
      for (const auto& [key, _] : by_name) {
        if (key.first == ns) return Status::Ok();
      }
    }
    json last = *namespace_object;
    return Remove(kNamespaces, "", ns, last, batch);
  }

  StoreOptions options_;
  std::mt19937_64 rng_;
  mutable std::mutex mu_;
  std::map<GroupVersionResource, ResourceType> types_;
  std::map<GroupVersionResource, std::map<NamespacedName, json>> objects_;
  std::unordered_map<std::string, ObjectRef> uid_index_;
  uint64_t rv_ = 0;
  uint64_t history_floor_ = 0;  // watches may resume from any version >= this
  std::deque<Change> history_;
  std::vector<Subscription> subscriptions_;
  std::unique_ptr<Journal> journal_;
};

StatusOr<std::unique_ptr<Store>> Store::Open(StoreOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  MF_RETURN_IF_ERROR(impl->Load());
  return std::unique_ptr<Store>(new Store(std::move(impl)));
}

Store::Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Store::~Store() { impl_->StopAllWatchers(); }

void Store::RegisterType(ResourceType type) { impl_->RegisterType(std::move(type)); }
Status Store::UnregisterType(const GroupVersionResource& gvr) { return impl_->UnregisterType(gvr); }
std::optional<ResourceType> Store::FindType(const GroupVersionResource& gvr) const { return impl_->FindType(gvr); }
std::vector<ResourceType> Store::Types() const { return impl_->Types(); }
StatusOr<json> Store::Create(const GroupVersionResource& gvr, std::string_view ns, json object, const WriteOptions& write) {
  return impl_->Create(gvr, ns, std::move(object), write);
}
StatusOr<json> Store::Get(const ObjectRef& ref) const { return impl_->Get(ref); }
StatusOr<ObjectList> Store::List(const GroupVersionResource& gvr, std::string_view ns, const ListOptions& options) const {
  return impl_->List(gvr, ns, options);
}
StatusOr<json> Store::Update(const ObjectRef& ref, json object, Subresource sub, const WriteOptions& write) {
  return impl_->Update(ref, std::move(object), sub, write);
}
StatusOr<json> Store::GuaranteedUpdate(const ObjectRef& ref, Subresource sub, const MutateFn& mutate,
                                       const WriteOptions& write) {
  return impl_->GuaranteedUpdate(ref, sub, mutate, write);
}
StatusOr<json> Store::Delete(const ObjectRef& ref, const DeleteOptions& options) { return impl_->Delete(ref, options); }
StatusOr<std::shared_ptr<Watcher>> Store::Watch(const GroupVersionResource& gvr, std::string_view ns,
                                                const WatchOptions& options) {
  return impl_->Watch(gvr, ns, options);
}
uint64_t Store::CurrentResourceVersion() const { return impl_->CurrentResourceVersion(); }

}  // namespace mf::local
