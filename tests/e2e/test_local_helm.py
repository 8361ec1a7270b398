"""The real helm (built from helm.sh/helm/v3 by scripts/build-go-tools.sh) against modelfleet-local:
lint and template offline, then install, upgrade, rollback and uninstall a chart whose Deployment the
real controllers and our node agent run."""
import json
import os
import subprocess

import pytest

from conftest import go_binary
from local_fixtures import DATA, LocalCluster, wait_until

pytestmark = pytest.mark.go_components

CHART = DATA / "echo-chart"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = LocalCluster(tmp_path_factory.mktemp("helm"))
    c.start()
    try:
        yield c
    finally:
        c.stop()


def helm(cluster, *args, check=True, timeout=120):
    binary = go_binary("helm")
    # helm's own state stays out of the developer's home.
    env = dict(cluster.env() if cluster else os.environ, HELM_CACHE_HOME="/tmp/modelfleet-helm/cache",
               HELM_CONFIG_HOME="/tmp/modelfleet-helm/config", HELM_DATA_HOME="/tmp/modelfleet-helm/data")
    result = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=timeout, env=env)
    if check and result.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def test_version_lint_and_template_offline():
    assert 'Version:"v3.' in helm(None, "version").stdout
    assert "0 chart(s) failed" in helm(None, "lint", str(CHART)).stdout
    rendered = helm(None, "template", "demo", str(CHART), "--set", "replicas=3").stdout
    assert "kind: Deployment" in rendered and "replicas: 3" in rendered


def test_install_upgrade_rollback_uninstall(cluster):
    helm(cluster, "install", "demo", str(CHART), "--wait", "--timeout", "90s")
    assert json.loads(helm(cluster, "status", "demo", "-o", "json").stdout)["info"]["status"] == "deployed"
    pod = json.loads(cluster.kubectl("get", "pods", "-l", "app.kubernetes.io/instance=demo", "-o", "json").stdout)
    assert len(pod["items"]) == 1
    # helm keeps its release in a Secret of the real API server.
    secrets = json.loads(cluster.kubectl("get", "secrets", "-l", "owner=helm,name=demo", "-o", "json").stdout)
    assert len(secrets["items"]) == 1

    helm(cluster, "upgrade", "demo", str(CHART), "--set", "replicas=2", "--set", "message=bye", "--wait",
         "--timeout", "90s")
    assert cluster.kubectl("get", "configmap", "demo-config", "-o", "jsonpath={.data.message}").stdout == "bye"
    wait_until(lambda: cluster.kubectl("get", "deployment", "demo", "-o", "jsonpath={.status.readyReplicas}")
             .stdout == "2", what="2 ready replicas")
    history = json.loads(helm(cluster, "history", "demo", "-o", "json").stdout)
    assert [r["revision"] for r in history] == [1, 2]

    helm(cluster, "rollback", "demo", "1", "--wait", "--timeout", "90s")
    assert cluster.kubectl("get", "configmap", "demo-config", "-o", "jsonpath={.data.message}").stdout == "hello"
    assert cluster.kubectl("get", "deployment", "demo", "-o", "jsonpath={.spec.replicas}").stdout == "1"

    helm(cluster, "uninstall", "demo", "--wait", "--timeout", "90s")
    assert cluster.kubectl("get", "configmap", "demo-config", check=False).returncode != 0
    wait_until(lambda: not json.loads(cluster.kubectl("get", "pods", "-l", "app.kubernetes.io/instance=demo", "-o",
                                                    "json").stdout)["items"], what="the pods to go")
    assert helm(cluster, "list", "-q").stdout.strip() == ""
