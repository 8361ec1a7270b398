"""modelfleet-local serves HTTPS with a CA of its own: the kubeconfig it writes trusts that CA
(certificate-authority-data), kubectl and the Python client verify the server against it, other
clients are refused, the CA survives restarts, and --tls=false keeps plain HTTP for debugging."""
import base64
import shutil
import ssl
import stat
import subprocess
import urllib.error
import urllib.request

import pytest
import yaml
from kubernetes import client, config

from local_fixtures import LocalCluster, local_cluster  # noqa: F401  (fixture)


def kubeconfig_cluster(cluster):
    return yaml.safe_load(cluster.kubeconfig.read_text())["clusters"][0]["cluster"]


def test_kubeconfig_names_https_and_carries_the_ca(local_cluster):
    entry = kubeconfig_cluster(local_cluster)
    assert entry["server"] == local_cluster.url and entry["server"].startswith("https://127.0.0.1:")
    ca = base64.b64decode(entry["certificate-authority-data"]).decode()
    # kubectl prompts for a password over https when the user has no credentials at all.
    user = yaml.safe_load(local_cluster.kubeconfig.read_text())["users"][0]["user"]
    assert user["token"]
    assert ca == local_cluster.ca_file.read_text() and "BEGIN CERTIFICATE" in ca
    pki = local_cluster.data_dir / "pki"
    for key in ("ca.key", "apiserver.key"):
        assert stat.S_IMODE((pki / key).stat().st_mode) == 0o600
    # kubectl and the Python client verify the server with it.
    assert "default" in local_cluster.kubectl("get", "namespaces", "-o", "name").stdout
    api = client.CoreV1Api(config.new_client_from_config(config_file=str(local_cluster.kubeconfig)))
    assert "default" in [n.metadata.name for n in api.list_namespace().items]
    # The certificate names localhost as well as 127.0.0.1.
    by_name = local_cluster.kubectl("--server", f"https://localhost:{local_cluster.port}", "get", "ns", "default")
    assert "default" in by_name.stdout


def test_clients_without_the_ca_are_refused(local_cluster):
    with pytest.raises(urllib.error.URLError) as refused:
        urllib.request.urlopen(local_cluster.url + "/version", timeout=5,
                               context=ssl.create_default_context())
    assert isinstance(refused.value.reason, ssl.SSLCertVerificationError)
    with local_cluster.urlopen("/version") as r:
        assert r.status == 200
    # kubectl pointed at the server without the kubeconfig's CA does not trust it either.
    bare = subprocess.run(["/usr/bin/kubectl", "--server", local_cluster.url, "--kubeconfig", "/dev/null",
                           "--token", "x", "get", "ns"], capture_output=True, text=True, timeout=60)
    assert bare.returncode != 0 and "certificate" in bare.stderr
    # Plain HTTP to the TLS port gets kube-apiserver's (Go's) answer, and the server keeps serving.
    with pytest.raises(urllib.error.HTTPError) as plain:
        urllib.request.urlopen(f"http://127.0.0.1:{local_cluster.port}/version", timeout=5)
    assert plain.value.code == 400
    assert plain.value.read() == b"Client sent an HTTP request to an HTTPS server.\n"
    assert local_cluster.kubectl("get", "ns", "default").returncode == 0


def test_the_ca_and_certificate_survive_a_restart(local_cluster):
    before_ca = local_cluster.ca_file.read_text()
    before_cert = (local_cluster.data_dir / "pki" / "apiserver.crt").read_text()
    saved = local_cluster.kubeconfig.with_name("kubeconfig.before")
    shutil.copy(local_cluster.kubeconfig, saved)
    local_cluster.restart()
    assert local_cluster.ca_file.read_text() == before_ca
    assert (local_cluster.data_dir / "pki" / "apiserver.crt").read_text() == before_cert
    # A kubeconfig handed out before the restart still works (same port, same CA).
    again = local_cluster.kubectl("--kubeconfig", str(saved), "get", "ns", "default")
    assert "default" in again.stdout


def test_half_a_ca_stops_the_start_with_a_clear_error(tmp_path):
    cluster = LocalCluster(tmp_path)
    cluster.start()
    cluster.stop()
    (cluster.data_dir / "pki" / "ca.key").unlink()
    result = subprocess.run([str(cluster.binary), "up", "--data-dir", str(cluster.data_dir), "--port", "0",
                             "--kubeconfig", str(cluster.kubeconfig), "--workloads=false"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 1 and "only one of ca.crt and ca.key" in result.stderr


def test_tls_false_serves_plain_http(tmp_path):
    cluster = LocalCluster(tmp_path, tls=False)
    cluster.start()
    try:
        entry = kubeconfig_cluster(cluster)
        assert entry["server"].startswith("http://") and "certificate-authority-data" not in entry
        with urllib.request.urlopen(cluster.url + "/version", timeout=5) as r:
            assert r.status == 200
        assert "default" in cluster.kubectl("get", "ns", "-o", "name").stdout
    finally:
        cluster.stop()
