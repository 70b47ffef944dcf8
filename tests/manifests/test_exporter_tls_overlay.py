"""manifests/examples/exporter-tls: the exporters' CA and certificates, the adapter scraping over HTTPS with its
client certificate, the sidecar patch serving HTTPS to client certificates only, and the HTTPS alternative of
the Prometheus job. Each file setting lies in the Secret of the certificate it names; each command line parses
with the real programs once the Secret's files are there; and the real Prometheus, given the shipped HTTPS job,
scrapes a real exporter that asks for client certificates."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trustme
import yaml

from exporter.settings import ExporterSettings, parse_settings
from tests.manifests.series import pod_discovery_labels
from tests.manifests.support import (
    EXAMPLES,
    EXPORTER_TLS,
    KUBECTL,
    PROMETHEUS,
    Object,
    commented_yaml,
    container,
    find,
    kustomize,
    load_yaml,
)
from tests.manifests.test_manifests import (
    ADAPTER,
    DOWNWARD_API,
    mount_paths,
    serve_settings,
)
from tests.manifests.test_monitoring_live import ShippedConfigPrometheus
from tests.support.certificates import issue_cert
from tests.support.processes import free_port, running

SIDECAR = "autoscaler-exporter"
PATCH = EXPORTER_TLS / "exporter-tls-patch.yaml"


def secret_files(directory: Path, authority: trustme.CA, *names: str) -> Path:
    """A Secret volume as cert-manager's CA issuer fills it: `ca.crt`, `tls.crt`, `tls.key`."""
    directory.mkdir(parents=True, exist_ok=True)
    leaf = issue_cert(authority, *names)
    authority.cert_pem.write_to_path(str(directory / "ca.crt"))
    leaf.cert_chain_pems[0].write_to_path(str(directory / "tls.crt"))
    leaf.private_key_pem.write_to_path(str(directory / "tls.key"))
    return directory


def patched_runtime(tmp_path: Path) -> Object:
    """The example runtime with the sidecar patch and then the TLS patch, as the overlay's comment says to."""
    tmp_path.mkdir()
    (tmp_path / PATCH.name).write_text(PATCH.read_text())
    (tmp_path / "kustomization.yaml").write_text(
        f"resources:\n  - {os.path.relpath(EXAMPLES, tmp_path)}\npatches:\n  - path: {PATCH.name}\n"
        "    target: {group: serving.kserve.io, kind: ServingRuntime, name: triton}\n")
    built = subprocess.run([KUBECTL, "kustomize", str(tmp_path)], capture_output=True, text=True, check=True)
    return find(list(yaml.safe_load_all(built.stdout)), "ServingRuntime")


def sidecar_settings(sidecar: Object, moved: dict[str, Path]) -> ExporterSettings:
    """What the sidecar starts with, its mounted files moved to where this test wrote them."""
    environ = {}
    for item in sidecar["env"]:
        value = item["value"] if "value" in item else DOWNWARD_API[item["name"]][1]
        for mount, here in moved.items():
            value = value.replace(mount, str(here))
        environ[item["name"]] = value
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            return parse_settings([], environ)
    except SystemExit:
        pytest.fail(f"modelmesh-exporter refuses the patched sidecar's environment:\n{errors.getvalue()}")


def certificate(objects: list[Object], name: str) -> Object:
    return find(objects, "Certificate", name)


def test_the_sidecar_serves_the_exporter_certificate_to_client_certificates_of_its_ca(tmp_path: Path) -> None:
    overlay = kustomize(EXPORTER_TLS)
    runtime = patched_runtime(tmp_path / "build")
    sidecar = container(runtime["spec"], SIDECAR)
    assert sidecar["livenessProbe"]["httpGet"]["scheme"] == "HTTPS"
    mounts = mount_paths(runtime["spec"], sidecar)
    [mount] = [path for path, volume in mounts.items() if "secret" in volume]
    served = certificate(overlay, "modelmesh-exporter")
    assert mounts[mount]["secret"]["secretName"] == served["spec"]["secretName"]
    assert served["metadata"]["namespace"] == runtime["metadata"]["namespace"]

    files = secret_files(tmp_path / "exporter-tls", trustme.CA(), *served["spec"]["dnsNames"])
    settings = sidecar_settings(sidecar, {mount: files})
    assert settings.tls_cert_file == files / "tls.crt" and settings.tls_key_file == files / "tls.key"
    assert settings.tls_client_ca_file == files / "ca.crt"  # the CA that signs the adapter's and Prometheus's


def test_the_adapter_scrapes_https_verifying_the_name_the_exporter_certificate_carries(tmp_path: Path) -> None:
    overlay = kustomize(EXPORTER_TLS)
    deployment = find(overlay, "Deployment", "modelmesh-autoscaler")
    pod_spec = deployment["spec"]["template"]["spec"]
    mounts = mount_paths(pod_spec, container(pod_spec, ADAPTER))
    client = certificate(overlay, "modelmesh-autoscaler-exporter-client")
    assert client["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    [mount] = [path for path, volume in mounts.items()
               if volume.get("secret", {}).get("secretName") == client["spec"]["secretName"]]
    files = secret_files(tmp_path / "exporter-client", trustme.CA(), "modelmesh-autoscaler")
    adapter = container(pod_spec, ADAPTER)
    adapter["args"] = [arg.replace(mount, str(files)) for arg in adapter["args"]]  # the Secret's files, here

    settings = serve_settings(deployment)
    assert settings.exporter_scheme == "auto"  # https for the pods the patch names the port of, http for the rest
    assert settings.exporter_server_name in certificate(overlay, "modelmesh-exporter")["spec"]["dnsNames"]
    assert (settings.exporter_ca_file, settings.exporter_client_cert_file, settings.exporter_client_key_file) == (
        files / "ca.crt", files / "tls.crt", files / "tls.key")


def test_every_certificate_chains_to_the_one_ca_and_is_used_as_issued() -> None:
    overlay = kustomize(EXPORTER_TLS)
    ca = certificate(overlay, "modelmesh-exporter-ca")
    issuer = find(overlay, "ClusterIssuer", "modelmesh-exporter-ca")
    assert ca["spec"]["isCA"] is True and issuer["spec"]["ca"]["secretName"] == ca["spec"]["secretName"]
    assert ca["metadata"]["namespace"] == "cert-manager"  # where a ClusterIssuer reads its CA's Secret
    usages = {"modelmesh-exporter": ["server auth"], "modelmesh-autoscaler-exporter-client": ["client auth"],
              "prometheus-modelmesh-exporter-client": ["client auth"]}
    for name, usage in usages.items():
        issued = certificate(overlay, name)
        assert issued["spec"]["issuerRef"] == {"kind": "ClusterIssuer", "name": "modelmesh-exporter-ca"}, name
        assert issued["spec"]["usages"] == usage, name


async def test_prometheus_with_the_https_alternative_scrapes_an_exporter_asking_client_certificates(
        tmp_path: Path) -> None:
    authority = trustme.CA()
    overlay = kustomize(EXPORTER_TLS)
    alternative: dict[str, Any] = commented_yaml(PROMETHEUS / "scrape-config.yaml", "HTTPS alternative")
    served_names = certificate(overlay, "modelmesh-exporter")["spec"]["dnsNames"]
    assert alternative["tls_config"]["server_name"] in served_names
    exporter_files = secret_files(tmp_path / "exporter", authority, *served_names)
    prometheus_files = secret_files(tmp_path / "prometheus", authority, "prometheus")
    mounted = Path(alternative["tls_config"]["cert_file"]).parent
    assert certificate(overlay, "prometheus-modelmesh-exporter-client")["spec"]["secretName"] == mounted.name
    for key in ("ca_file", "cert_file", "key_file"):
        alternative["tls_config"][key] = str(prometheus_files / Path(alternative["tls_config"][key]).name)

    config: dict[str, Any] = load_yaml(PROMETHEUS / "scrape-config.yaml")
    [job] = [job for job in config["scrape_configs"] if job["job_name"] == "modelmesh-exporter"]
    port = free_port()
    del job["kubernetes_sd_configs"]
    job.update(alternative, scrape_interval="1s", scrape_timeout="1s")
    (sidecar_port,) = container(patched_runtime(tmp_path / "build")["spec"], SIDECAR)["ports"]
    labels = pod_discovery_labels("modelmesh-serving", "triton-0", {"modelmesh-service": "modelmesh-serving",
                                                                   "name": "modelmesh-serving-triton"},
                                  sidecar_port["name"], sidecar_port["containerPort"], "127.0.0.1")
    labels.pop("__address__")
    job["static_configs"] = [{"targets": [f"127.0.0.1:{port}"], "labels": labels}]
    config["scrape_configs"] = [job]
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}

    env = {k: v for k, v in os.environ.items() if not k.startswith("EXPORTER_")}
    env.update(EXPORTER_LISTEN=f"127.0.0.1:{port}", EXPORTER_MODELMESH_URL="http://127.0.0.1:1/metrics",
               EXPORTER_NO_GPU="true", EXPORTER_TLS_CERT_FILE=str(exporter_files / "tls.crt"),
               EXPORTER_TLS_KEY_FILE=str(exporter_files / "tls.key"),
               EXPORTER_TLS_CLIENT_CA_FILE=str(exporter_files / "ca.crt"))
    with running(["exporter.cli"], f"https://127.0.0.1:{port}/healthz", tmp_path / "exporter.log", env=env):
        async with ShippedConfigPrometheus(config, tmp_path / "prometheus-run") as prometheus:
            await prometheus.wait_for('up{job="modelmesh-exporter",pod="triton-0"} == 1', timeout=30)
            await prometheus.wait_for("modelmesh_exporter_collector_success", timeout=30)
