"""Moving runtimes to the TLS sidecar one by one keeps every runtime scraped, by the adapter and by Prometheus: the
TLS patch declares the exporter's port under an `https-` name, the plain patch under `exporter`, and both
scrapers read each pod's scheme from that name (the adapter's default `--exporter-scheme auto`, the shipped
Prometheus job's relabelling), so the exporter-tls overlay applied before the runtimes are patched scrapes the
pods not yet patched over http. The real Prometheus scrapes one exporter of each kind in one job."""

from __future__ import annotations

import os
import urllib.parse
from pathlib import Path
from typing import Any

import trustme

from autoscaler.model import RuntimeKey
from autoscaler.sources.kube_objects import RuntimeRecord, build_inventory, names_https, parse_pod
from tests.manifests.series import pod_discovery_labels
from tests.manifests.support import (
    EXAMPLES,
    EXPORTER_TLS,
    PROMETHEUS,
    Object,
    commented_yaml,
    container,
    find,
    kustomize,
    load_yaml,
    plain_exporter_endpoint,
)
from tests.manifests.test_exporter_tls_overlay import SIDECAR, certificate, patched_runtime, secret_files
from tests.manifests.test_manifests import ADAPTER, mount_paths, serve_settings
from tests.manifests.test_monitoring_live import ShippedConfigPrometheus
from tests.support.processes import free_port, running

NS = "modelmesh-serving"
POD_LABELS = {"modelmesh-service": "modelmesh-serving", "name": "modelmesh-serving-triton"}


def exporter_port(runtime: Object) -> dict[str, Any]:
    (port,) = container(runtime["spec"], SIDECAR)["ports"]
    return dict(port)


def sidecars(tmp_path: Path) -> dict[str, dict[str, Any]]:
    """The exporter port each sidecar patch declares: the plain one's, and with the TLS patch after it."""
    return {"plain": exporter_port(find(kustomize(EXAMPLES), "ServingRuntime")),
            "tls": exporter_port(patched_runtime(tmp_path / "build"))}


def test_the_tls_patch_names_the_exporters_port_for_https_and_its_probe_follows(tmp_path: Path) -> None:
    ports = sidecars(tmp_path)
    assert ports["plain"]["name"] == "exporter"  # existing installs: scraped over http, as before
    assert names_https(ports["tls"]["name"]) and len(ports["tls"]["name"]) <= 15, ports  # IANA_SVC_NAME
    assert ports["tls"]["containerPort"] == ports["plain"]["containerPort"]
    sidecar = container(patched_runtime(tmp_path / "again")["spec"], SIDECAR)
    assert sidecar["livenessProbe"]["httpGet"]["port"] in (ports["tls"]["name"], ports["tls"]["containerPort"])


def test_the_overlays_adapter_scrapes_each_pod_over_its_sidecars_scheme(tmp_path: Path) -> None:
    """The adapter of exporter-tls/, given a pod of each sidecar patch (one runtime half rolled)."""
    deployment = find(kustomize(EXPORTER_TLS), "Deployment", "modelmesh-autoscaler")
    adapter = container(deployment["spec"]["template"]["spec"], ADAPTER)
    for number, (mount, volume) in enumerate(mount_paths(deployment["spec"]["template"]["spec"], adapter).items()):
        if "secret" in volume:  # its files, here
            files = secret_files(tmp_path / f"secret-{number}", trustme.CA(), "modelmesh-autoscaler")
            adapter["args"] = [arg.replace(mount, str(files)) for arg in adapter["args"]]
    settings = serve_settings(deployment)
    key = RuntimeKey(NS, POD_LABELS["name"])
    pods = []
    for number, (sidecar, port) in enumerate(sidecars(tmp_path).items()):
        pod = parse_pod({"metadata": {"name": sidecar, "namespace": NS, "labels": POD_LABELS},
                         "spec": {"containers": [{"name": SIDECAR, "ports": [port]}]},
                         "status": {"podIP": f"10.0.0.{number + 1}",
                                    "conditions": [{"type": "Ready", "status": "True"}]}})
        assert pod is not None
        pods.append(pod)
    inventory = build_inventory({key: RuntimeRecord(key, POD_LABELS)}, pods, settings.exporter_port,
                                settings.exporter_scheme)
    schemes = {pod.name: urllib.parse.urlsplit(pod.url or "").scheme for pod in inventory[key].pods}
    assert schemes == {"plain": "http", "tls": "https"}, settings.exporter_scheme


def test_the_pod_monitor_scrapes_each_sidecars_port_over_its_scheme_and_alike_otherwise(tmp_path: Path) -> None:
    """The operator selects ports by name: one endpoint per sidecar patch, the same job and labels, so that a runtime
    rolling to TLS stays in the rules and the dashboard (the plain one is held to the scrape config elsewhere)."""
    monitor = find(kustomize(PROMETHEUS), "PodMonitor", "modelmesh-exporter")
    endpoints = {endpoint["port"]: endpoint for endpoint in monitor["spec"]["podMetricsEndpoints"]}
    for port in sidecars(tmp_path).values():
        assert port["name"] in endpoints, f"no endpoint of the PodMonitor scrapes port {port['name']}"
        assert endpoints[port["name"]]["scheme"] == ("https" if names_https(port["name"]) else "http")
    plain = plain_exporter_endpoint(monitor)
    for endpoint in endpoints.values():
        assert {k: v for k, v in endpoint.items() if k not in ("port", "scheme")} == {
            k: v for k, v in plain.items() if k not in ("port", "scheme")}, endpoint


async def test_one_prometheus_job_scrapes_an_http_and_an_https_exporter_of_one_runtime(tmp_path: Path) -> None:
    """The shipped job with the TLS settings its comment gives, over a pod of each sidecar patch."""
    authority = trustme.CA()
    served_names = certificate(kustomize(EXPORTER_TLS), "modelmesh-exporter")["spec"]["dnsNames"]
    exporter_files = secret_files(tmp_path / "exporter", authority, *served_names)
    prometheus_files = secret_files(tmp_path / "prometheus", authority, "prometheus")
    tls: dict[str, Any] = commented_yaml(PROMETHEUS / "scrape-config.yaml", "HTTPS alternative")
    for key in ("ca_file", "cert_file", "key_file"):
        tls["tls_config"][key] = str(prometheus_files / Path(tls["tls_config"][key]).name)

    config: dict[str, Any] = load_yaml(PROMETHEUS / "scrape-config.yaml")
    [job] = [job for job in config["scrape_configs"] if job["job_name"] == "modelmesh-exporter"]
    del job["kubernetes_sd_configs"]
    job.update(tls, scrape_interval="1s", scrape_timeout="1s")
    addresses = {sidecar: f"127.0.0.1:{free_port()}" for sidecar in ("plain", "tls")}
    job["static_configs"] = []
    for sidecar, port in sidecars(tmp_path).items():
        labels = pod_discovery_labels(NS, f"triton-{sidecar}", POD_LABELS, port["name"], port["containerPort"],
                                      "127.0.0.1")
        labels.pop("__address__")
        job["static_configs"].append({"targets": [addresses[sidecar]], "labels": labels})
    config["scrape_configs"] = [job]
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}

    env = {k: v for k, v in os.environ.items() if not k.startswith("EXPORTER_")}
    env.update(EXPORTER_MODELMESH_URL="http://127.0.0.1:1/metrics", EXPORTER_NO_GPU="true")
    tls_env = dict(EXPORTER_TLS_CERT_FILE=str(exporter_files / "tls.crt"),
                   EXPORTER_TLS_KEY_FILE=str(exporter_files / "tls.key"),
                   EXPORTER_TLS_CLIENT_CA_FILE=str(exporter_files / "ca.crt"))
    plain, secured = addresses["plain"], addresses["tls"]
    with running(["exporter.cli"], f"http://{plain}/healthz", tmp_path / "plain.log",
                 env={**env, "EXPORTER_LISTEN": plain}), \
            running(["exporter.cli"], f"https://{secured}/healthz", tmp_path / "tls.log",
                    env={**env, **tls_env, "EXPORTER_LISTEN": secured}):
        async with ShippedConfigPrometheus(config, tmp_path / "prometheus-run") as prometheus:
            for sidecar in ("plain", "tls"):
                await prometheus.wait_for(f'up{{job="modelmesh-exporter",pod="triton-{sidecar}"}} == 1', timeout=30)
