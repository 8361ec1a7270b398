"""Transport security, authentication and authorization of modelfleet-local's kube-apiserver.

The kubeconfig `up` writes trusts the cluster's own CA (certificate-authority-data) and
authenticates with an admin client certificate (group system:masters); kubectl and the Python
client verify the server with that CA, by address and by the name localhost, and clients without
it are refused. Authentication is really on (anonymous and unknown credentials get 401/403) and
RBAC is enforced: a ServiceAccount kubeconfig written by `modelfleet-local kubeconfig` (a token
from the TokenRequest API) can do what its Role grants and nothing else. The CA, the certificates
and the ServiceAccount signing key survive a restart; half a CA stops `up` with a clear error."""
import base64
import json
import shutil
import ssl
import stat
import subprocess
import urllib.error
import urllib.request

import pytest
import urllib3
import yaml
from kubernetes import client, config

from local_fixtures import KUBECTL, module_cluster, namespaced, wait_until  # noqa: F401  (fixtures)

pytestmark = pytest.mark.go_components


def kubeconfig_of(cluster):
    return yaml.safe_load(cluster.kubeconfig.read_text())


def request_as(cluster, path, *, token=None, cert=None, context=None, method="GET", body=None):
    """(status, parsed JSON body) of a request verified with the cluster's CA, with the given
    credentials only (none: anonymous)."""
    if context is None:
        context = ssl.create_default_context(cafile=str(cluster.ca_file))
        if cert:
            context.load_cert_chain(*cert)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if body is not None:
        headers["Content-Type"] = "application/json"
        body = json.dumps(body).encode()
    request = urllib.request.Request(cluster.url + path, headers=headers, method=method, data=body)
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_kubeconfig_names_https_and_carries_the_ca_and_an_admin_certificate(module_cluster):  # noqa: F811
    kubeconfig = kubeconfig_of(module_cluster)
    entry = kubeconfig["clusters"][0]["cluster"]
    assert entry["server"] == module_cluster.url and entry["server"].startswith("https://127.0.0.1:")
    ca = base64.b64decode(entry["certificate-authority-data"]).decode()
    assert ca == module_cluster.ca_file.read_text() and "BEGIN CERTIFICATE" in ca
    user = kubeconfig["users"][0]["user"]
    assert "token" not in user and "password" not in user
    certificate = base64.b64decode(user["client-certificate-data"]).decode()
    assert certificate == (module_cluster.data_dir / "pki" / "admin.crt").read_text()
    assert "PRIVATE KEY" in base64.b64decode(user["client-key-data"]).decode()
    for key in (module_cluster.data_dir / "pki").glob("*.key"):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600, key
    # The API server authenticates the certificate as the admin, in group system:masters.
    whoami = json.loads(module_cluster.kubectl("auth", "whoami", "-o", "json").stdout)["status"]["userInfo"]
    assert "system:masters" in whoami["groups"] and "system:authenticated" in whoami["groups"], whoami
    assert module_cluster.kubectl("auth", "can-i", "*", "*").stdout.strip() == "yes"
    # kubectl and the Python client verify the server with the CA.
    assert "namespace/default" in module_cluster.kubectl("get", "namespaces", "-o", "name").stdout
    api = client.CoreV1Api(config.new_client_from_config(config_file=str(module_cluster.kubeconfig)))
    assert "default" in [n.metadata.name for n in api.list_namespace().items]
    # The serving certificate names localhost as well as 127.0.0.1.
    by_name = module_cluster.kubectl("--server", f"https://localhost:{module_cluster.port}", "get", "ns", "default")
    assert "default" in by_name.stdout
    with urllib.request.urlopen(f"https://localhost:{module_cluster.port}/version", timeout=5,
                                context=ssl.create_default_context(cafile=str(module_cluster.ca_file))) as r:
        assert json.loads(r.read())["gitVersion"].startswith("v1.37.")


def test_clients_without_the_ca_are_refused(module_cluster, tmp_path):  # noqa: F811
    with pytest.raises(urllib.error.URLError) as refused:
        urllib.request.urlopen(module_cluster.url + "/version", timeout=5, context=ssl.create_default_context())
    assert isinstance(refused.value.reason, ssl.SSLCertVerificationError)
    # kubectl pointed at the server without the kubeconfig's CA does not trust it.
    bare = subprocess.run([KUBECTL, "--server", module_cluster.url, "--kubeconfig", "/dev/null", "--token", "x",
                           "get", "ns"],
                          capture_output=True, text=True, timeout=60)
    assert bare.returncode != 0 and "x509: certificate signed by unknown authority" in bare.stderr, bare.stderr
    # Nor does the Python client given the admin's credentials but not the CA.
    without_ca = kubeconfig_of(module_cluster)
    del without_ca["clusters"][0]["cluster"]["certificate-authority-data"]
    path = tmp_path / "kubeconfig-without-ca"
    path.write_text(yaml.safe_dump(without_ca))
    api_client = config.new_client_from_config(config_file=str(path))
    api_client.configuration.retries = 0
    with pytest.raises(urllib3.exceptions.MaxRetryError) as untrusted:
        client.CoreV1Api(api_client).list_namespace()
    assert isinstance(untrusted.value.reason, urllib3.exceptions.SSLError), untrusted.value.reason
    # Plain HTTP to the TLS port gets Go's answer, and the server keeps serving.
    with pytest.raises(urllib.error.HTTPError) as plain:
        urllib.request.urlopen(f"http://127.0.0.1:{module_cluster.port}/version", timeout=5)
    assert plain.value.code == 400
    assert plain.value.read() == b"Client sent an HTTP request to an HTTPS server.\n"
    assert module_cluster.kubectl("get", "ns", "default").returncode == 0


def test_authentication_is_on(module_cluster, tmp_path):  # noqa: F811
    # Anonymous requests are authenticated as system:anonymous, which may read nothing but the
    # public information (/version, health).
    status, answer = request_as(module_cluster, "/api")
    assert status in (401, 403), answer
    if status == 403:
        assert answer["reason"] == "Forbidden" and 'User "system:anonymous"' in answer["message"], answer
    status, answer = request_as(module_cluster, "/api/v1/namespaces/default/secrets")
    assert status in (401, 403), answer
    assert request_as(module_cluster, "/version")[0] == 200
    # A token the cluster did not issue is refused outright.
    status, answer = request_as(module_cluster, "/api", token="not-a-token")
    assert (status, answer["reason"]) == (401, "Unauthorized"), answer
    # So is a client certificate from another CA, whatever group it claims.
    key, cert = tmp_path / "intruder.key", tmp_path / "intruder.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/O=system:masters/CN=intruder"],
                   check=True, capture_output=True, timeout=30)
    status, answer = request_as(module_cluster, "/api", cert=(str(cert), str(key)))
    assert (status, answer["reason"]) == (401, "Unauthorized"), answer
    # The cluster's own admin certificate is accepted.
    pki = module_cluster.data_dir / "pki"
    status, answer = request_as(module_cluster, "/api", cert=(str(pki / "admin.crt"), str(pki / "admin.key")))
    assert status == 200 and answer["versions"] == ["v1"], answer


def test_rbac_limits_a_service_account_to_its_role(namespaced, tmp_path):  # noqa: F811
    cluster, ns = namespaced, namespaced.namespace
    cluster.kubectl("create", "serviceaccount", "reader")
    cluster.kubectl("create", "role", "pod-reader", "--verb=get", "--resource=pods")
    cluster.kubectl("create", "rolebinding", "reader-reads-pods", "--role=pod-reader", f"--serviceaccount={ns}:reader")
    # Pods need the namespace's default ServiceAccount, which the serviceaccounts controller makes.
    wait_until(lambda: cluster.kubectl("get", "serviceaccount", "default", check=False).returncode == 0, 30,
               "the default ServiceAccount")
    cluster.kubectl("create", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"]}]}}))
    cluster.kubectl("create", "secret", "generic", "s", "--from-literal=k=v")

    kubeconfig = tmp_path / "reader.kubeconfig"
    made = subprocess.run([str(cluster.binary), "kubeconfig", "--data-dir", str(cluster.data_dir),
                           "--service-account", f"{ns}/reader", "--output", str(kubeconfig)],
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    written = yaml.safe_load(kubeconfig.read_text())
    assert written["clusters"][0]["cluster"]["server"] == cluster.url
    assert written["clusters"][0]["cluster"]["certificate-authority-data"] == \
        kubeconfig_of(cluster)["clusters"][0]["cluster"]["certificate-authority-data"]
    assert written["users"][0]["user"]["token"] and "client-certificate-data" not in written["users"][0]["user"]
    assert written["contexts"][0]["context"]["namespace"] == ns

    def as_reader(*args):
        return subprocess.run([KUBECTL, "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True,
                              timeout=60)

    whoami = json.loads(as_reader("auth", "whoami", "-o", "json").stdout)["status"]["userInfo"]
    assert whoami["username"] == f"system:serviceaccount:{ns}:reader", whoami
    allowed = as_reader("get", "pod", "p", "-o", "name")
    assert allowed.returncode == 0 and allowed.stdout.strip() == "pod/p", allowed.stderr
    user = f'User "system:serviceaccount:{ns}:reader"'
    for args, refusal in [
            (("get", "secrets"), f'{user} cannot list resource "secrets" in API group "" in the namespace "{ns}"'),
            (("get", "secret", "s"), f'{user} cannot get resource "secrets" in API group "" in the namespace "{ns}"'),
            (("get", "pods"), f'{user} cannot list resource "pods" in API group "" in the namespace "{ns}"'),
            (("get", "pod", "p", "-n", "default"), f'{user} cannot get resource "pods" in API group "" in the namespace "default"'),
            (("delete", "pod", "p", "--wait=false"), f'{user} cannot delete resource "pods" in API group "" in the namespace "{ns}"')]:
        refused = as_reader(*args)
        assert refused.returncode != 0, (args, refused.stdout)
        assert "Error from server (Forbidden)" in refused.stderr and refusal in refused.stderr, (args, refused.stderr)
    assert cluster.kubectl("get", "pod", "p", "-o", "name").stdout.strip() == "pod/p"  # still there

    # Granting the verb lets it through (the authorizer's informers see the Role change).
    cluster.kubectl("patch", "role", "pod-reader", "--type", "json",
                    "-p", '[{"op": "add", "path": "/rules/0/verbs/-", "value": "delete"}]')
    wait_until(lambda: as_reader("auth", "can-i", "delete", "pods").stdout.strip() == "yes", 30, "the new grant")
    deleted = as_reader("delete", "pod", "p", "--wait=false")
    assert deleted.returncode == 0, deleted.stderr
    assert as_reader("get", "secrets").returncode != 0  # the rest stays refused


def test_half_a_ca_stops_the_start_with_a_clear_error(module_cluster, tmp_path):  # noqa: F811
    data = tmp_path / "data"
    (data / "pki").mkdir(parents=True)
    shutil.copy(module_cluster.ca_file, data / "pki" / "ca.crt")  # without ca.key
    result = subprocess.run([str(module_cluster.binary), "up", "--data-dir", str(data), "--port", "0",
                             "--kubeconfig", str(tmp_path / "kubeconfig")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "holds only one of ca.crt and ca.key; restore it or remove both" in result.stderr, result.stderr
    assert not (tmp_path / "kubeconfig").exists()


def test_the_ca_certificates_and_signing_key_survive_a_restart(module_cluster):  # noqa: F811
    """Last in the module: it restarts the module's cluster."""
    cluster = module_cluster
    pki = cluster.data_dir / "pki"
    before = {path.name: path.read_bytes() for path in pki.iterdir()}
    saved = cluster.kubeconfig.with_name("kubeconfig.before-restart")
    shutil.copy(cluster.kubeconfig, saved)
    token = cluster.kubectl("create", "token", "default", "-n", "default", "--duration=1h").stdout.strip()
    status, answer = request_as(cluster, "/api/v1/namespaces/default/secrets", token=token)
    assert status == 403 and 'User "system:serviceaccount:default:default"' in answer["message"], answer

    cluster.restart()
    assert {path.name: path.read_bytes() for path in pki.iterdir()} == before
    # A kubeconfig handed out before the restart still works (same port, same CA, same admin).
    again = cluster.kubectl("--kubeconfig", str(saved), "get", "ns", "default", "-o", "name")
    assert again.stdout.strip() == "namespace/default"
    # So does a ServiceAccount token signed before it: authenticated (403, not 401), as before.
    status, answer = request_as(cluster, "/api/v1/namespaces/default/secrets", token=token)
    assert status == 403 and 'User "system:serviceaccount:default:default"' in answer["message"], answer
