"""The official Python client against modelfleet-local: list, watch (the client sends
watch=True), a watch resumed from a resourceVersion across a restart, 409 on a stale update,
410 for a resourceVersion that is too old."""
import threading

import pytest
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from local_fixtures import LocalCluster, local_cluster  # noqa: F401  (fixture)


def core_api(cluster):
    return client.CoreV1Api(config.new_client_from_config(config_file=str(cluster.kubeconfig)))


def configmap(name, labels=None, data=None):
    return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name, labels=labels or {}), data=data or {})


def test_list_with_label_and_field_selectors(local_cluster):
    api = core_api(local_cluster)
    api.create_namespaced_config_map("default", configmap("a", {"app": "web"}))
    api.create_namespaced_config_map("default", configmap("b", {"app": "db"}))
    names = lambda lst: sorted(i.metadata.name for i in lst.items)  # noqa: E731
    assert names(api.list_namespaced_config_map("default", label_selector="app=web")) == ["a"]
    assert names(api.list_namespaced_config_map("default", label_selector="app in (web,db)")) == ["a", "b"]
    assert names(api.list_config_map_for_all_namespaces(field_selector="metadata.name=b")) == ["b"]
    with pytest.raises(ApiException) as bad:
        api.list_namespaced_config_map("default", label_selector="app in (")
    assert bad.value.status == 400


def test_watch_streams_changes_in_order(local_cluster):
    api = core_api(local_cluster)
    rv = api.list_namespaced_config_map("default").metadata.resource_version
    events = []

    def consume():
        w = watch.Watch()
        for event in w.stream(api.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=20):
            events.append((event["type"], event["object"].metadata.name, event["object"].data))
            if len(events) == 3:
                w.stop()

    consumer = threading.Thread(target=consume)
    consumer.start()
    api.create_namespaced_config_map("default", configmap("w", data={"v": "1"}))
    api.patch_namespaced_config_map("w", "default", {"data": {"v": "2"}})
    api.delete_namespaced_config_map("w", "default")
    consumer.join(timeout=30)
    assert not consumer.is_alive()
    assert events == [("ADDED", "w", {"v": "1"}), ("MODIFIED", "w", {"v": "2"}), ("DELETED", "w", {"v": "2"})]


def test_watch_resumes_after_a_restart(local_cluster):
    api = core_api(local_cluster)
    rv = api.list_namespaced_config_map("default").metadata.resource_version
    api.create_namespaced_config_map("default", configmap("before-restart"))
    local_cluster.restart()
    api = core_api(local_cluster)
    api.create_namespaced_config_map("default", configmap("after-restart"))
    seen = []
    w = watch.Watch()
    for event in w.stream(api.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=10):
        seen.append((event["type"], event["object"].metadata.name))
        if len(seen) == 2:
            w.stop()
    assert seen == [("ADDED", "before-restart"), ("ADDED", "after-restart")]
    assert api.read_namespaced_config_map("before-restart", "default").metadata.name == "before-restart"


def test_stale_update_is_a_409_conflict_and_changes_nothing(local_cluster):
    api = core_api(local_cluster)
    created = api.create_namespaced_config_map("default", configmap("c", data={"k": "v1"}))
    fresh = api.read_namespaced_config_map("c", "default")
    fresh.data = {"k": "v2"}
    api.replace_namespaced_config_map("c", "default", fresh)
    created.data = {"k": "stale"}
    with pytest.raises(ApiException) as conflict:
        api.replace_namespaced_config_map("c", "default", created)
    assert conflict.value.status == 409
    assert "the object has been modified" in conflict.value.body
    assert api.read_namespaced_config_map("c", "default").data == {"k": "v2"}


def test_missing_and_duplicate_objects_get_kubernetes_status_errors(local_cluster):
    api = core_api(local_cluster)
    with pytest.raises(ApiException) as missing:
        api.read_namespaced_config_map("nope", "default")
    assert missing.value.status == 404 and '"reason":"NotFound"' in missing.value.body
    api.create_namespaced_config_map("default", configmap("dup"))
    with pytest.raises(ApiException) as dup:
        api.create_namespaced_config_map("default", configmap("dup"))
    assert dup.value.status == 409 and '"reason":"AlreadyExists"' in dup.value.body


def test_watch_from_a_compacted_version_is_410_gone(tmp_path):
    cluster = LocalCluster(tmp_path, extra_args=["--watch-history", "3"])
    cluster.start()
    try:
        api = core_api(cluster)
        rv = api.list_namespaced_config_map("default").metadata.resource_version
        for i in range(6):
            api.create_namespaced_config_map("default", configmap(f"c{i}"))
        with pytest.raises(ApiException) as gone:
            for _ in watch.Watch().stream(api.list_namespaced_config_map, "default", resource_version=rv,
                                          timeout_seconds=5):
                pass
        assert gone.value.status == 410
        # A fresh list and watch from its version works, as a reflector's relist does.
        rv = api.list_namespaced_config_map("default").metadata.resource_version
        api.create_namespaced_config_map("default", configmap("after"))
        w = watch.Watch()
        events = []
        for event in w.stream(api.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=5,
                              allow_watch_bookmarks=True):
            events.append((event["type"], event["object"].metadata.name))
            w.stop()
        assert events == [("ADDED", "after")]
    finally:
        cluster.stop()


def test_delete_collection_honours_the_label_selector(local_cluster):
    api = core_api(local_cluster)
    for name, tier in [("a", "x"), ("b", "x"), ("c", "y")]:
        api.create_namespaced_config_map("default", configmap(name, {"tier": tier}))
    api.delete_collection_namespaced_config_map("default", label_selector="tier=x")
    assert [i.metadata.name for i in api.list_namespaced_config_map("default").items] == ["c"]


def test_malformed_bodies_get_clear_errors_and_change_nothing(local_cluster):
    import json
    import urllib.error
    import urllib.request

    def post(path, body, content_type="application/json"):
        req = urllib.request.Request(local_cluster.url + path, data=body.encode(), method="POST",
                                     headers={"Content-Type": content_type})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    rv = core_api(local_cluster).list_namespaced_config_map("default").metadata.resource_version
    cases = [
        ("/api/v1/namespaces/default/configmaps", '{"metadata": {"name": 5}}', 422),
        ("/api/v1/namespaces/default/configmaps", '{"metadata": ', 400),
        ("/apis/apps/v1/namespaces/default/deployments", '{"metadata": {"name": "d"}, "spec": {"template": "x"}}', 422),
        ("/api/v1/namespaces/default/pods", '{"metadata": {"name": "p"}, "spec": []}', 400),
        ("/api/v1/namespaces", "k8s\x00garbage", 400),
    ]
    for path, body, code in cases:
        content_type = "application/vnd.kubernetes.protobuf" if body.startswith("k8s") else "application/json"
        status, answer = post(path, body, content_type)
        assert (status, answer["kind"], answer["code"]) == (code, "Status", code), (path, body, answer)
        assert answer["message"]
    assert core_api(local_cluster).list_namespaced_config_map("default").metadata.resource_version == rv
