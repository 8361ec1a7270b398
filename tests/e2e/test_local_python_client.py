"""The official Python client against modelfleet-local: list, watch (the client sends
watch=True), a watch resumed from a resourceVersion across a restart, 409 on a stale update,
410 for a resourceVersion that is too old, list pages (limit / _continue) that show one state, and
410 with an inconsistent continue token once a page's version leaves the history."""
import json
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
    import urllib.error
    import urllib.request

    def post(path, body, content_type="application/json"):
        req = urllib.request.Request(local_cluster.url + path, data=body.encode(), method="POST",
                                     headers={"Content-Type": content_type})
        try:
            with local_cluster.urlopen(req, timeout=10) as r:
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


def test_list_pages_with_limit_and_continue_show_one_consistent_state(local_cluster):
    api = core_api(local_cluster)
    for i in range(7):
        api.create_namespaced_config_map("default", configmap(f"p{i}", data={"v": "first"}))
    first = api.list_namespaced_config_map("default", limit=3)
    assert [i.metadata.name for i in first.items] == ["p0", "p1", "p2"]
    assert first.metadata._continue and first.metadata.remaining_item_count == 4
    # Changes after the first page do not show in the later pages of the same list...
    api.patch_namespaced_config_map("p4", "default", {"data": {"v": "second"}})
    api.delete_namespaced_config_map("p5", "default")
    api.create_namespaced_config_map("default", configmap("p9"))
    second = api.list_namespaced_config_map("default", limit=3, _continue=first.metadata._continue)
    assert [(i.metadata.name, i.data["v"]) for i in second.items] == [("p3", "first"), ("p4", "first"), ("p5", "first")]
    assert second.metadata.resource_version == first.metadata.resource_version
    third = api.list_namespaced_config_map("default", limit=3, _continue=second.metadata._continue)
    assert [i.metadata.name for i in third.items] == ["p6"]
    assert third.metadata._continue is None and third.metadata.remaining_item_count is None
    # ...while a new list sees them.
    fresh = api.list_namespaced_config_map("default", limit=100)
    assert [i.metadata.name for i in fresh.items] == ["p0", "p1", "p2", "p3", "p4", "p6", "p9"]
    assert fresh.metadata._continue is None
    # Selectors filter before the limit counts; remainingItemCount is left out with a selector.
    api.patch_namespaced_config_map("p6", "default", {"metadata": {"labels": {"pick": "yes"}}})
    api.patch_namespaced_config_map("p9", "default", {"metadata": {"labels": {"pick": "yes"}}})
    picked = api.list_namespaced_config_map("default", limit=1, label_selector="pick=yes")
    assert [i.metadata.name for i in picked.items] == ["p6"] and picked.metadata.remaining_item_count is None
    rest = api.list_namespaced_config_map("default", limit=1, label_selector="pick=yes", _continue=picked.metadata._continue)
    assert [i.metadata.name for i in rest.items] == ["p9"] and rest.metadata._continue is None


def test_continue_tokens_that_are_not_ours_are_a_400(local_cluster):
    api = core_api(local_cluster)
    with pytest.raises(ApiException) as bad:
        api.list_namespaced_config_map("default", limit=1, _continue="not-a-token")
    assert bad.value.status == 400 and "continue key is not valid" in bad.value.body
    first = api.list_namespaced_config_map("default", limit=1)
    assert first.metadata._continue is None  # nothing in default yet: one page


def test_an_expired_continue_token_is_410_with_a_token_to_go_on(tmp_path):
    cluster = LocalCluster(tmp_path, extra_args=["--watch-history", "5"])
    cluster.start()
    try:
        api = core_api(cluster)
        for i in range(4):
            api.create_namespaced_config_map("default", configmap(f"e{i}"))
        first = api.list_namespaced_config_map("default", limit=2)
        for i in range(6):  # more changes than the history keeps: the first page's version is gone
            api.create_namespaced_config_map("default", configmap(f"later{i}"))
        with pytest.raises(ApiException) as gone:
            api.list_namespaced_config_map("default", limit=2, _continue=first.metadata._continue)
        assert gone.value.status == 410
        status = json.loads(gone.value.body)
        assert status["reason"] == "Expired" and "too old to display a consistent list" in status["message"]
        # The token in the 410 continues the list from the latest state (an inconsistent list).
        rest = api.list_namespaced_config_map("default", limit=100, _continue=status["metadata"]["continue"])
        assert [i.metadata.name for i in rest.items] == ["e2", "e3"] + [f"later{i}" for i in range(6)]
    finally:
        cluster.stop()


def test_list_at_an_exact_or_a_future_version(local_cluster):
    api = core_api(local_cluster)
    api.create_namespaced_config_map("default", configmap("x", data={"v": "1"}))
    rv = api.list_namespaced_config_map("default").metadata.resource_version
    api.patch_namespaced_config_map("x", "default", {"data": {"v": "2"}})
    exact = api.list_namespaced_config_map("default", resource_version=rv, resource_version_match="Exact")
    assert [(i.metadata.name, i.data["v"]) for i in exact.items] == [("x", "1")]
    assert exact.metadata.resource_version == rv
    assert api.list_namespaced_config_map("default", resource_version=rv).items[0].data["v"] == "2"
    with pytest.raises(ApiException) as too_large:
        api.list_namespaced_config_map("default", resource_version=str(int(rv) + 1000))
    assert too_large.value.status == 504 and "Too large resource version" in too_large.value.body


def test_services_get_an_immutable_loopback_cluster_ip(local_cluster):
    api = core_api(local_cluster)
    svc = client.V1Service(metadata=client.V1ObjectMeta(name="web"),
                           spec=client.V1ServiceSpec(selector={"app": "web"},
                                                     ports=[client.V1ServicePort(port=80)]))
    created = api.create_namespaced_service("default", svc)
    ip = created.spec.cluster_ip
    assert ip.startswith("127.") and 128 <= int(ip.split(".")[1]) < 192, ip
    assert created.spec.cluster_i_ps == [ip]
    # Kept when an update leaves it out, refused when an update changes it.
    again = api.patch_namespaced_service("web", "default", {"metadata": {"labels": {"tier": "front"}}})
    assert again.spec.cluster_ip == ip
    other = "127.128.0.9" if ip != "127.128.0.9" else "127.128.0.10"
    with pytest.raises(ApiException) as changed:
        api.patch_namespaced_service("web", "default", {"spec": {"clusterIP": other}})
    assert changed.value.status == 422 and "field is immutable" in changed.value.body
    assert api.read_namespaced_service("web", "default").spec.cluster_ip == ip
