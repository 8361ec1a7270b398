"""The official Python client against modelfleet-local's real kube-apiserver: list with label and
field selectors, watch, a watch resumed from a resourceVersion across a restart of `up` (objects
and history persist in etcd), 409 on a stale update, Status errors for malformed bodies (and
nothing stored), list pages (limit / _continue) that show one state, lists at an exact or a
future version, and, on a cluster whose kube-apiserver compacts etcd every few seconds, 410 Gone
for a compacted resourceVersion (list and watch) and for an expired continue token, with the
inconsistent continue token the server hands out.

The module's tests share one cluster, each in a namespace of its own; the restart and compaction
tests start their own."""
import json
import threading
import urllib.error
import urllib.request

import pytest
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from local_fixtures import LocalCluster, module_cluster, namespace_for, wait_until  # noqa: F401  (fixture)

pytestmark = pytest.mark.go_components


def core_api(cluster):
    return client.CoreV1Api(config.new_client_from_config(config_file=str(cluster.kubeconfig)))


def configmap(name, labels=None, data=None):
    return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name, labels=labels or {}), data=data or {})


def names(configmap_list):
    return [i.metadata.name for i in configmap_list.items]


def new_namespace(api, test_name):
    """A fresh namespace holding only its kube-root-ca.crt (the root-ca-cert-publisher's), so the
    tests know every configmap in it."""
    name = namespace_for(test_name)
    api.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    wait_until(lambda: names(api.list_namespaced_config_map(name)) == ["kube-root-ca.crt"], 30,
               f"kube-root-ca.crt in {name}")
    return name


@pytest.fixture
def api(module_cluster):  # noqa: F811
    return core_api(module_cluster)


@pytest.fixture
def ns(api, request):
    name = new_namespace(api, request.node.name)
    yield name
    api.delete_namespace(name)


def test_list_with_label_and_field_selectors(api, ns):
    api.create_namespaced_config_map(ns, configmap("a", {"app": "web"}))
    api.create_namespaced_config_map(ns, configmap("b", {"app": "db"}))
    api.create_namespaced_config_map(ns, configmap("c"))
    assert names(api.list_namespaced_config_map(ns, label_selector="app=web")) == ["a"]
    assert names(api.list_namespaced_config_map(ns, label_selector="app in (web,db)")) == ["a", "b"]
    assert names(api.list_namespaced_config_map(ns, label_selector="!app")) == ["c", "kube-root-ca.crt"]
    assert names(api.list_namespaced_config_map(ns, label_selector="app,app!=web")) == ["b"]
    everywhere = api.list_config_map_for_all_namespaces(field_selector=f"metadata.name=b,metadata.namespace={ns}")
    assert [(i.metadata.namespace, i.metadata.name) for i in everywhere.items] == [(ns, "b")]
    with pytest.raises(ApiException) as bad:
        api.list_namespaced_config_map(ns, label_selector="app in (")
    assert bad.value.status == 400 and "unable to parse requirement" in bad.value.body
    with pytest.raises(ApiException) as unsupported:
        api.list_namespaced_config_map(ns, field_selector="data.k=v")
    assert unsupported.value.status == 400
    assert json.loads(unsupported.value.body)["message"].startswith('"data.k" is not a known field selector')


def test_watch_streams_changes_in_order(api, ns):
    rv = api.list_namespaced_config_map(ns).metadata.resource_version
    events = []

    def consume():
        w = watch.Watch()
        for event in w.stream(api.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=20):
            events.append((event["type"], event["object"].metadata.name, event["object"].data))
            if len(events) == 3:
                w.stop()

    consumer = threading.Thread(target=consume)
    consumer.start()
    api.create_namespaced_config_map(ns, configmap("w", data={"v": "1"}))
    api.patch_namespaced_config_map("w", ns, {"data": {"v": "2"}})
    api.delete_namespaced_config_map("w", ns)
    consumer.join(timeout=30)
    assert not consumer.is_alive()
    assert events == [("ADDED", "w", {"v": "1"}), ("MODIFIED", "w", {"v": "2"}), ("DELETED", "w", {"v": "2"})]


def test_stale_update_is_a_409_conflict_and_changes_nothing(api, ns):
    created = api.create_namespaced_config_map(ns, configmap("c", data={"k": "v1"}))
    fresh = api.read_namespaced_config_map("c", ns)
    fresh.data = {"k": "v2"}
    api.replace_namespaced_config_map("c", ns, fresh)
    created.data = {"k": "stale"}
    with pytest.raises(ApiException) as conflict:
        api.replace_namespaced_config_map("c", ns, created)
    assert conflict.value.status == 409
    status = json.loads(conflict.value.body)
    assert status["reason"] == "Conflict" and "the object has been modified" in status["message"]
    assert api.read_namespaced_config_map("c", ns).data == {"k": "v2"}


def test_missing_and_duplicate_objects_get_kubernetes_status_errors(api, ns):
    with pytest.raises(ApiException) as missing:
        api.read_namespaced_config_map("nope", ns)
    assert missing.value.status == 404
    assert json.loads(missing.value.body)["reason"] == "NotFound"
    api.create_namespaced_config_map(ns, configmap("dup"))
    with pytest.raises(ApiException) as dup:
        api.create_namespaced_config_map(ns, configmap("dup"))
    assert dup.value.status == 409 and json.loads(dup.value.body)["reason"] == "AlreadyExists"


def test_delete_collection_honours_the_label_selector(api, ns):
    for name, tier in [("a", "x"), ("b", "x"), ("c", "y")]:
        api.create_namespaced_config_map(ns, configmap(name, {"tier": tier}))
    api.delete_collection_namespaced_config_map(ns, label_selector="tier=x")
    assert names(api.list_namespaced_config_map(ns)) == ["c", "kube-root-ca.crt"]


def test_malformed_bodies_get_status_errors_and_change_nothing(module_cluster, api, ns):  # noqa: F811
    def post(path, body, content_type="application/json"):
        req = urllib.request.Request(module_cluster.url + path, data=body.encode(), method="POST",
                                     headers={"Content-Type": content_type})
        try:
            with module_cluster.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    before = {(i.metadata.name, i.metadata.resource_version) for i in api.list_namespaced_config_map(ns).items}
    cases = [
        (f"/api/v1/namespaces/{ns}/configmaps", '{"metadata": {"name": 5}}', 400,
         "cannot unmarshal number into Go struct field ObjectMeta.metadata.name of type string"),
        (f"/api/v1/namespaces/{ns}/configmaps", '{"metadata": ', 400, "unexpected end of JSON input"),
        (f"/api/v1/namespaces/{ns}/configmaps", '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Bad_Name"}}',
         422, 'metadata.name: Invalid value: "Bad_Name"'),
        (f"/apis/apps/v1/namespaces/{ns}/deployments", '{"metadata": {"name": "d"}, "spec": {"template": "x"}}', 400,
         "cannot unmarshal string into Go struct field DeploymentSpec.spec.template"),
        (f"/apis/apps/v1/namespaces/{ns}/deployments",
         '{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {}}', 422,
         "spec.selector: Required value"),
        (f"/api/v1/namespaces/{ns}/pods", '{"metadata": {"name": "p"}, "spec": []}', 400,
         "cannot unmarshal array into Go struct field Pod.spec"),
        ("/api/v1/namespaces", "k8s\x00garbage", 400, "the object provided is unrecognized"),
    ]
    for path, body, code, text in cases:
        content_type = "application/vnd.kubernetes.protobuf" if body.startswith("k8s") else "application/json"
        status, answer = post(path, body, content_type)
        assert (status, answer["kind"], answer["status"], answer["code"]) == (code, "Status", "Failure", code), \
            (path, body, answer)
        assert text in answer["message"], (path, body, answer)
    after = {(i.metadata.name, i.metadata.resource_version) for i in api.list_namespaced_config_map(ns).items}
    assert after == before
    apps = client.AppsV1Api(api.api_client)
    assert apps.list_namespaced_deployment(ns).items == []
    assert client.CoreV1Api(api.api_client).list_namespaced_pod(ns).items == []


def test_list_pages_with_limit_and_continue_show_one_consistent_state(api, ns):
    for i in range(7):
        api.create_namespaced_config_map(ns, configmap(f"p{i}", data={"v": "first"}))
    first = api.list_namespaced_config_map(ns, limit=3)
    assert names(first) == ["kube-root-ca.crt", "p0", "p1"]
    assert first.metadata._continue and first.metadata.remaining_item_count == 5
    # Changes after the first page do not show in the later pages of the same list...
    api.patch_namespaced_config_map("p3", ns, {"data": {"v": "second"}})
    api.delete_namespaced_config_map("p4", ns)
    api.create_namespaced_config_map(ns, configmap("p9"))
    second = api.list_namespaced_config_map(ns, limit=3, _continue=first.metadata._continue)
    assert [(i.metadata.name, i.data["v"]) for i in second.items] == [("p2", "first"), ("p3", "first"), ("p4", "first")]
    assert second.metadata.resource_version == first.metadata.resource_version
    assert second.metadata.remaining_item_count == 2
    third = api.list_namespaced_config_map(ns, limit=3, _continue=second.metadata._continue)
    assert names(third) == ["p5", "p6"]
    assert third.metadata._continue is None and third.metadata.remaining_item_count is None
    # ...while a new list sees them.
    fresh = api.list_namespaced_config_map(ns, limit=100)
    assert names(fresh) == ["kube-root-ca.crt", "p0", "p1", "p2", "p3", "p5", "p6", "p9"]
    assert fresh.metadata._continue is None
    # Selectors filter before the limit counts; remainingItemCount is left out with a selector.
    api.patch_namespaced_config_map("p6", ns, {"metadata": {"labels": {"pick": "yes"}}})
    api.patch_namespaced_config_map("p9", ns, {"metadata": {"labels": {"pick": "yes"}}})
    picked = api.list_namespaced_config_map(ns, limit=1, label_selector="pick=yes")
    assert names(picked) == ["p6"] and picked.metadata.remaining_item_count is None
    rest = api.list_namespaced_config_map(ns, limit=1, label_selector="pick=yes", _continue=picked.metadata._continue)
    assert names(rest) == ["p9"] and rest.metadata._continue is None


def test_continue_tokens_that_are_not_the_servers_are_a_400(api, ns):
    with pytest.raises(ApiException) as bad:
        api.list_namespaced_config_map(ns, limit=1, _continue="not-a-token")
    assert bad.value.status == 400 and "continue key is not valid" in bad.value.body
    first = api.list_namespaced_config_map(ns, limit=1)
    assert names(first) == ["kube-root-ca.crt"] and first.metadata._continue is None  # one page


def test_list_at_an_exact_or_a_future_version(api, ns):
    api.create_namespaced_config_map(ns, configmap("x", data={"v": "1"}))
    rv = api.list_namespaced_config_map(ns).metadata.resource_version
    api.patch_namespaced_config_map("x", ns, {"data": {"v": "2"}})
    exact = api.list_namespaced_config_map(ns, resource_version=rv, resource_version_match="Exact",
                                           field_selector="metadata.name=x")
    assert [(i.metadata.name, i.data["v"]) for i in exact.items] == [("x", "1")]
    assert exact.metadata.resource_version == rv
    not_older = api.list_namespaced_config_map(ns, resource_version=rv, field_selector="metadata.name=x")
    assert not_older.items[0].data["v"] == "2"
    with pytest.raises(ApiException) as too_large:
        api.list_namespaced_config_map(ns, resource_version=str(int(rv) + 100000))
    assert too_large.value.status == 504 and "Too large resource version" in too_large.value.body


def test_services_get_an_immutable_cluster_ip_from_the_service_range(api, ns):
    svc = client.V1Service(metadata=client.V1ObjectMeta(name="web"),
                           spec=client.V1ServiceSpec(selector={"app": "web"}, ports=[client.V1ServicePort(port=80)]))
    created = api.create_namespaced_service(ns, svc)
    ip = created.spec.cluster_ip
    assert ip.startswith("10.96."), ip  # --service-cluster-ip-range=10.96.0.0/16
    # (The client's attribute is cluster_i_ps in older releases, cluster_ips in newer: read the JSON.)
    assert api.api_client.sanitize_for_serialization(created)["spec"]["clusterIPs"] == [ip]
    # Kept when an update leaves it out, refused when an update changes it.
    again = api.patch_namespaced_service("web", ns, {"metadata": {"labels": {"tier": "front"}}})
    assert again.spec.cluster_ip == ip
    other = "10.96.0.99" if ip != "10.96.0.99" else "10.96.0.98"
    with pytest.raises(ApiException) as changed:
        api.patch_namespaced_service("web", ns, {"spec": {"clusterIP": other}})
    assert changed.value.status == 422 and "may not change once set" in changed.value.body
    assert api.read_namespaced_service("web", ns).spec.cluster_ip == ip


def test_watch_resumes_after_a_restart(tmp_path):
    """kube-apiserver's watch cache starts afresh at the current revision and answers 410 for an
    older one (a reflector then relists); served from etcd, whose history `up` keeps across
    restarts, the watch resumes where it was."""
    cluster = LocalCluster(tmp_path, extra_args=["--apiserver-flags", "--watch-cache=false"])
    cluster.start()
    try:
        api = core_api(cluster)
        ns = new_namespace(api, "watch-resumes")
        rv = api.list_namespaced_config_map(ns).metadata.resource_version
        api.create_namespaced_config_map(ns, configmap("before-restart", data={"v": "1"}))
        cluster.restart()
        api = core_api(cluster)
        assert api.read_namespaced_config_map("before-restart", ns).data == {"v": "1"}
        api.create_namespaced_config_map(ns, configmap("after-restart"))
        seen = []
        w = watch.Watch()
        for event in w.stream(api.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=10):
            seen.append((event["type"], event["object"].metadata.name))
            if len(seen) == 2:
                w.stop()
        assert seen == [("ADDED", "before-restart"), ("ADDED", "after-restart")]
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def compacted(tmp_path_factory):
    """A cluster whose kube-apiserver compacts etcd every 5 s and serves lists and watches from
    etcd, with a namespace's first page of 2 (of 4 configmaps) and that page's resourceVersion,
    returned once etcd's history no longer holds that version nor the next: a watch from a
    version starts at the next revision, so a compaction to exactly version + 1 would still
    serve it (seen once in a cold CI run)."""
    cluster = LocalCluster(tmp_path_factory.mktemp("compacting-cluster"),
                           extra_args=["--apiserver-flags", "--etcd-compaction-interval=5s --watch-cache=false"])
    cluster.start()
    try:
        api = core_api(cluster)
        ns = new_namespace(api, "compacted")
        for i in range(4):
            api.create_namespaced_config_map(ns, configmap(f"e{i}"))
        first = api.list_namespaced_config_map(ns, limit=2)
        assert names(first) == ["e0", "e1"]
        later = iter(range(1000))

        def compacted_past_first_page():
            api.create_namespaced_config_map(ns, configmap(f"later{next(later)}"))
            try:
                api.list_namespaced_config_map(ns, resource_version=str(int(first.metadata.resource_version) + 1),
                                               resource_version_match="Exact")
                return False
            except ApiException as e:
                if e.status != 410:
                    raise
                return True
        wait_until(compacted_past_first_page, 60, "a compaction past the first page's resourceVersion")
        yield cluster, api, ns, first
    finally:
        cluster.stop()


def test_lists_and_watches_from_a_compacted_version_are_410_gone(compacted):
    cluster, api, ns, first = compacted
    rv = first.metadata.resource_version
    with pytest.raises(ApiException) as exact:
        api.list_namespaced_config_map(ns, resource_version=rv, resource_version_match="Exact")
    assert exact.value.status == 410
    status = json.loads(exact.value.body)
    assert (status["reason"], status["message"]) == ("Expired", "The resourceVersion for the provided list is too old.")
    with pytest.raises(ApiException) as gone:
        for _ in watch.Watch().stream(api.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=5):
            pass
    assert gone.value.status == 410 and "too old" in gone.value.reason, gone.value.reason
    # A fresh list and a watch from its version work, as a reflector's relist does.
    rv = api.list_namespaced_config_map(ns).metadata.resource_version
    api.create_namespaced_config_map(ns, configmap("after"))
    w = watch.Watch()
    events = []
    for event in w.stream(api.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=10):
        events.append((event["type"], event["object"].metadata.name))
        w.stop()
    assert events == [("ADDED", "after")]


def test_an_expired_continue_token_is_410_with_a_token_to_go_on(compacted):
    cluster, api, ns, first = compacted
    with pytest.raises(ApiException) as gone:
        api.list_namespaced_config_map(ns, limit=2, _continue=first.metadata._continue)
    assert gone.value.status == 410
    status = json.loads(gone.value.body)
    assert status["reason"] == "Expired"
    assert "The provided continue parameter is too old to display a consistent list result" in status["message"]
    # The token in the 410 continues the list from the latest state (an inconsistent list).
    rest = api.list_namespaced_config_map(ns, limit=1000, _continue=status["metadata"]["continue"])
    current = names(api.list_namespaced_config_map(ns))
    assert names(rest) == current[current.index("e2"):]
    assert names(rest)[:3] == ["e2", "e3", "kube-root-ca.crt"] and "later0" in names(rest)
