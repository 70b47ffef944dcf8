"""The adapter as a cluster would run it: TLS, the aggregator's front-proxy certificate, client certificates,
bearer tokens and SubjectAccessReviews, all real processes (fake ModelMesh, exporter, fake Kubernetes API,
adapter) and the real kubectl with kubeconfigs holding trustme certificates.

kubectl cannot send `X-Remote-User` (its `--as` sends `Impersonate-User`, which this server, like every
delegated-auth extension server, does not honour), so the front-proxy cases use a Python client with the
proxy's certificate, as the aggregator does.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trustme
import yaml

from tests.support.certificates import issue_cert
from tests.support.kubectl import KUBECTL, get_raw, write_kubeconfig
from tests.support.processes import free_port, poll, running

pytestmark = pytest.mark.slow

NAMESPACE, DEPLOYMENT = "default", "modelmesh-serving-demo"
METRIC = (f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{NAMESPACE}/modelmesh_request_load"
          f"?labelSelector=deployment%3D{DEPLOYMENT}")
HPA_USER = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
PROMETHEUS_USER = "system:serviceaccount:monitoring:prometheus"
PROMETHEUS_TOKEN = "prometheus-token"
"""Prometheus's service account token, granted `get` on the non-resource URL `/metrics` (as the shipped
`manifests/examples/prometheus/rbac-adapter-metrics.yaml` grants it) and nothing else."""
TENANT = "tenant-a"
REPO = Path(__file__).resolve().parents[2]


@dataclass
class Cluster:
    url: str
    workdir: Path
    server_ca: trustme.CA
    proxy: trustme.LeafCert
    rogue_proxy: trustme.LeafCert
    alice: trustme.LeafCert
    bob: trustme.LeafCert
    stranger: trustme.LeafCert
    dora: trustme.LeafCert
    """A tenant: may read the external metrics of her namespace, `tenant-a`, and nothing else."""

    def open_get(self, path: str) -> tuple[int, str]:
        """A client with no credentials at all (any pod that reaches the Service)."""
        context = ssl.create_default_context()
        self.server_ca.configure_trust(context)
        try:
            with urllib.request.urlopen(self.url + path, timeout=30, context=context) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            with error:
                return error.code, error.read().decode()

    def kubeconfig(self, name: str, leaf: trustme.LeafCert | None = None, token: str | None = None) -> Path:
        return write_kubeconfig(
            self.workdir / f"kubeconfig-{name}", self.url, token=token, ca_pem=self.server_ca.cert_pem.bytes(),
            client_cert_pem=leaf.cert_chain_pems[0].bytes() if leaf else None,
            client_key_pem=leaf.private_key_pem.bytes() if leaf else None)

    def https_get(self, path: str, leaf: trustme.LeafCert | None, headers: dict[str, str]) -> tuple[int, Any]:
        """A client like the aggregator: TLS with a client certificate and identity headers."""
        context = ssl.create_default_context()
        self.server_ca.configure_trust(context)
        if leaf is not None:
            leaf.configure_cert(context)
        request = urllib.request.Request(self.url + path, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30, context=context) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())


def kubectl_raw(kubeconfig: Path, path: str, *args: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as cache:
        return subprocess.run([KUBECTL, "--kubeconfig", str(kubeconfig), "--cache-dir", cache, *args,
                               "get", "--raw", path], capture_output=True, text=True, timeout=20)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp("secured")
    server_ca, proxy_ca, client_ca, other_ca = trustme.CA(), trustme.CA(), trustme.CA(), trustme.CA()
    issue_cert(server_ca, "127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(
        str(workdir / "tls.pem"))
    proxy_ca.cert_pem.write_to_path(str(workdir / "front-proxy-ca.crt"))
    client_ca.cert_pem.write_to_path(str(workdir / "client-ca.crt"))
    (workdir / "state.yaml").write_text(yaml.safe_dump({
        "tokens": {"carol-token": {"user": "carol", "groups": ["devs"]},
                   PROMETHEUS_TOKEN: {"user": PROMETHEUS_USER, "groups": ["system:serviceaccounts"]}},
        "allow": [{"user": "alice"}, {"user": "carol"},
                  {"user": PROMETHEUS_USER, "verb": "get", "path": "/metrics"},
                  {"user": HPA_USER, "verb": "list", "group": "external.metrics.k8s.io"},
                  {"user": "dora", "verb": "list", "group": "external.metrics.k8s.io", "namespace": TENANT}],
    }))
    kube_port, mm_port, exporter_port, adapter_port = free_port(), free_port(), free_port(), free_port()
    mm_url, exporter_url = f"https://127.0.0.1:{mm_port}/metrics", f"http://127.0.0.1:{exporter_port}/metrics"
    (workdir / "targets.yaml").write_text(yaml.safe_dump({"runtimes": [{
        "namespace": NAMESPACE, "deployment": DEPLOYMENT, "pods": [{"name": "pod-0", "url": exporter_url}]}]}))
    env = {"PYTHONPATH": str(REPO)}
    with running(["tests.fakes.kube", "--port", str(kube_port), "--state", str(workdir / "state.yaml"),
                  "--kubeconfig", str(workdir / "kube.yaml")],
                 f"http://127.0.0.1:{kube_port}/healthz", workdir / "kube.log", env), \
         running(["autoscaler.demo.fake_modelmesh", "--listen", f"127.0.0.1:{mm_port}", "--rps", "40",
                  "--cert-dir", str(workdir / "mm-tls")], mm_url, workdir / "modelmesh.log"), \
         running(["exporter.cli", "--listen", f"127.0.0.1:{exporter_port}", "--modelmesh-url", mm_url,
                  "--modelmesh-ca-file", str(workdir / "mm-tls" / "tls.crt"), "--no-gpu",
                  "--modelmesh-interval", "0.5", "--load-window", "3"], exporter_url, workdir / "exporter.log"), \
         running(["autoscaler.cli", "serve", "--listen", f"127.0.0.1:{adapter_port}",
                  "--targets", str(workdir / "targets.yaml"), "--kubeconfig", str(workdir / "kube.yaml"),
                  "--tls-cert-file", str(workdir / "tls.pem"), "--tls-private-key-file", str(workdir / "tls.pem"),
                  "--requestheader-client-ca-file", str(workdir / "front-proxy-ca.crt"),
                  "--requestheader-allowed-names", "front-proxy-client",
                  "--client-ca-file", str(workdir / "client-ca.crt"),
                  "--refresh-interval", "1", "--window", "3"],
                 f"https://127.0.0.1:{adapter_port}/healthz", workdir / "adapter.log"):
        yield Cluster(
            f"https://127.0.0.1:{adapter_port}", workdir, server_ca,
            proxy=issue_cert(proxy_ca, common_name="front-proxy-client"),
            rogue_proxy=issue_cert(proxy_ca, common_name="someone-else"),
            alice=issue_cert(client_ca, common_name="alice", organization_name="analysts"),
            bob=issue_cert(client_ca, common_name="bob"),
            stranger=issue_cert(other_ca, common_name="alice"),
            dora=issue_cert(client_ca, common_name="dora"),
        )


def first_success(attempt: Callable[[], tuple[int, Any]], success: int) -> Any:
    """Retry `attempt` until its status is `success` (the first refresh takes a moment); the body."""
    answers: list[Any] = []

    def check() -> bool:
        status, body = attempt()
        answers.append(body)
        return status == success

    poll(check, timeout=30)
    return answers[-1]


def test_an_allowed_client_certificate_user_reads_the_metric_with_kubectl(cluster: Cluster) -> None:
    kubeconfig = cluster.kubeconfig("alice", cluster.alice)
    body = first_success(lambda: get_raw(kubeconfig, METRIC), 0)
    assert body["kind"] == "ExternalMetricValueList"
    assert body["items"][0]["value"].endswith("m")
    assert get_raw(kubeconfig, "/apis/external.metrics.k8s.io/v1beta1")[0] == 0


def test_a_denied_user_gets_403_from_kubectl(cluster: Cluster) -> None:
    result = kubectl_raw(cluster.kubeconfig("bob", cluster.bob), METRIC)
    assert result.returncode != 0
    assert "Forbidden" in result.stderr or "forbidden" in result.stderr, result.stderr


def test_impersonation_headers_from_kubectl_are_not_an_identity(cluster: Cluster) -> None:
    result = kubectl_raw(cluster.kubeconfig("bob", cluster.bob), METRIC, "--as", "alice")
    assert result.returncode != 0
    assert 'User "bob"' in result.stderr or "forbidden" in result.stderr.lower(), result.stderr


def test_no_certificate_and_an_unknown_token_is_401(cluster: Cluster) -> None:
    result = kubectl_raw(cluster.kubeconfig("nobody", token="not-a-token"), METRIC)
    assert result.returncode != 0
    assert "Unauthorized" in result.stderr, result.stderr


def test_a_reviewed_bearer_token_is_accepted(cluster: Cluster) -> None:
    assert poll(lambda: get_raw(cluster.kubeconfig("carol", token="carol-token"), METRIC)[0] == 0, timeout=30)


def test_a_certificate_from_another_ca_is_rejected_in_the_handshake(cluster: Cluster) -> None:
    result = kubectl_raw(cluster.kubeconfig("stranger", cluster.stranger), METRIC)
    assert result.returncode != 0
    # TLS 1.3: the server refuses the certificate after the client thinks the handshake is done; Go reports
    # the alert, a closed connection ("EOF") or a reset, depending on timing. Never an HTTP answer.
    assert "Unable to connect to the server" in result.stderr, result.stderr
    assert "Unauthorized" not in result.stderr and "Forbidden" not in result.stderr


def test_the_front_proxy_certificate_alone_names_no_user(cluster: Cluster) -> None:
    result = kubectl_raw(cluster.kubeconfig("proxy", cluster.proxy), METRIC)
    assert result.returncode != 0
    assert "Unauthorized" in result.stderr, result.stderr


def test_the_aggregator_passes_the_hpa_identity(cluster: Cluster) -> None:
    headers = {"X-Remote-User": HPA_USER, "X-Remote-Group": "system:serviceaccounts"}
    body = first_success(lambda: cluster.https_get(METRIC, cluster.proxy, headers), 200)
    assert body["items"][0]["metricName"] == "modelmesh_request_load"
    status, body = cluster.https_get(METRIC, cluster.proxy, {"X-Remote-User": "mallory"})
    assert (status, body["kind"], body["reason"]) == (403, "Status", "Forbidden")


def test_a_proxy_certificate_with_a_cn_not_allowed_is_401(cluster: Cluster) -> None:
    status, body = cluster.https_get(METRIC, cluster.rogue_proxy, {"X-Remote-User": HPA_USER})
    assert (status, body["reason"]) == (401, "Unauthorized")


def test_identity_headers_from_a_client_certificate_user_are_not_trusted(cluster: Cluster) -> None:
    status, body = cluster.https_get(METRIC, cluster.bob, {"X-Remote-User": "alice", "X-Remote-Group": "admins"})
    assert (status, body["reason"]) == (403, "Forbidden")
    assert 'User "bob"' in body["message"]
    status, body = cluster.https_get(METRIC, None, {"X-Remote-User": "alice"})
    assert (status, body["reason"]) == (401, "Unauthorized")


def test_health_needs_no_credentials(cluster: Cluster) -> None:
    for path in ("/healthz", "/livez", "/readyz"):
        context = ssl.create_default_context()
        cluster.server_ca.configure_trust(context)
        with urllib.request.urlopen(cluster.url + path, timeout=30, context=context) as response:
            assert response.status == 200


def test_kubectl_asking_to_watch_a_metric_is_told_watch_is_not_supported(cluster: Cluster) -> None:
    """A watch on the external metrics API is refused as kube-apiserver refuses it for a resource without one,
    not answered with a list that kubectl would read as the start of a stream."""
    result = kubectl_raw(cluster.kubeconfig("alice", cluster.alice), METRIC + "&watch=true")
    assert result.returncode != 0
    assert "MethodNotAllowed" in result.stderr and "watch is not supported" in result.stderr, result.stderr


def test_a_client_that_takes_only_protobuf_is_told_what_is_served(cluster: Cluster) -> None:
    status, body = cluster.https_get(METRIC, cluster.alice, {"Accept": "application/vnd.kubernetes.protobuf"})
    assert (status, body["reason"], body["message"]) == (
        406, "NotAcceptable", "only the following media types are accepted: application/json")


def curl(url: str, *args: str) -> tuple[int, str]:
    """`curl -k URL`: what anyone who reaches the Service's port sees (status, body)."""
    result = subprocess.run(["curl", "-k", "-sS", "--max-time", "10", "-w", "\n%{http_code}", *args, url],
                            capture_output=True, text=True, timeout=20, check=True)
    body, _, status = result.stdout.rpartition("\n")
    return int(status), body


def test_a_client_without_credentials_learns_no_runtime_from_the_self_metrics(cluster: Cluster) -> None:
    """What the gate refuses on the API (which runtimes exist, what they serve) must not be open elsewhere:
    `modelmesh_autoscaler_served_value{namespace,deployment,metric}` is every runtime's name and values.
    By default `/metrics` is authorized like metrics-server's: `curl -k` alone gets kube's 401 Status."""
    poll(lambda: cluster.https_get(METRIC, cluster.alice, {})[0] == 200, timeout=30)  # values are served
    status, text = curl(cluster.url + "/metrics")
    assert DEPLOYMENT not in text, f"{status}: {DEPLOYMENT} is named by an unauthenticated /metrics"
    body = json.loads(text)
    assert (status, body["kind"], body["reason"], body["code"]) == (401, "Status", "Unauthorized", 401), text


def test_prometheus_token_granted_the_metrics_url_scrapes_the_self_metrics(cluster: Cluster) -> None:
    """Prometheus's service account, granted `get` on nonResourceURL `/metrics` and nothing else, scrapes the
    page (the runtime's served value included) and is still refused the metrics API itself."""
    served = f'deployment="{DEPLOYMENT}"'
    answers: list[tuple[int, str]] = []

    def scraped() -> bool:
        answers.append(curl(cluster.url + "/metrics", "-H", f"Authorization: Bearer {PROMETHEUS_TOKEN}"))
        return answers[-1][0] == 200 and served in answers[-1][1]

    try:
        poll(scraped, timeout=30)
    except AssertionError:
        status, text = answers[-1]
        raise AssertionError(f"the scrape never served the runtime: {status} {text[:400]!r}") from None
    assert "modelmesh_autoscaler_served_value{" in answers[-1][1]
    status, text = curl(cluster.url + METRIC, "-H", f"Authorization: Bearer {PROMETHEUS_TOKEN}")
    body = json.loads(text)
    assert (status, body["reason"]) == (403, "Forbidden"), text
    assert f'User "{PROMETHEUS_USER}" cannot list resource "modelmesh_request_load"' in body["message"], text


def test_a_token_without_the_metrics_url_grant_is_forbidden_the_self_metrics(cluster: Cluster) -> None:
    """Dora may read her namespace's metrics: that grant is no grant of `/metrics` (kube's 403 names the URL)."""
    status, body = cluster.https_get("/metrics", cluster.dora, {})
    assert (status, body["reason"]) == (403, "Forbidden"), body
    assert 'User "dora" cannot get path "/metrics"' in body["message"], body


def test_a_not_found_names_no_namespace_the_user_may_not_read(cluster: Cluster) -> None:
    """Dora may read her namespace only: a 404 there must not tell her which other namespaces run a runtime of
    that name (kube-apiserver's 404 never does), or a tenant maps every other tenant's runtimes by guessing
    names (`modelmesh-serving-triton`, `-mlserver`, ...)."""
    poll(lambda: cluster.https_get(METRIC, cluster.alice, {})[0] == 200, timeout=30)  # the runtime is known
    path = METRIC.replace(f"/namespaces/{NAMESPACE}/", f"/namespaces/{TENANT}/")
    status, body = cluster.https_get(path, cluster.dora, {})
    assert (status, body["reason"]) == (404, "NotFound")
    assert f"namespace {NAMESPACE}" not in body["message"], body["message"]
