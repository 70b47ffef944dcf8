"""The exporter app in-process (real HTTP, real background loop) and its settings.

`promtool check metrics` must be clean on what the exporter serves in every state a pod goes through:
before any data, healthy, and with ModelMesh gone (last values kept). GPU states are the GPU collector's
tests; here the exporter runs with `--no-gpu`.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from autoscaler.api.certs import CertificateFiles, generate_self_signed, server_context
from autoscaler.demo.fake_modelmesh import serve
from autoscaler.demo.fake_modelmesh_metrics import FakeModelMesh, ModelMeshLoad
from autoscaler.sources.exposition import read_exporter_text
from exporter import names
from exporter.app import REGISTRY_KEY, build_app
from exporter.flag_values import seconds
from exporter.pod_identity import PodIdentity
from exporter.settings import ExporterSettings, build_parser, parse_settings
from tests.fakes.prometheus import PROMTOOL_BIN
from tests.support.exporter_texts import parse_exporter_text

AiohttpClient = Callable[[web.Application], Awaitable[TestClient[web.Request, web.Application]]]


def promtool_findings(text: str) -> tuple[int, str]:
    """(exit status, findings) of `promtool check metrics` on exposition text."""
    done = subprocess.run([PROMTOOL_BIN, "check", "metrics"], input=text, capture_output=True, text=True,
                          timeout=30, check=False)
    return done.returncode, (done.stdout + done.stderr).strip()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text) for s in family.samples
    }


@pytest.fixture(scope="module")
def modelmesh_cert(tmp_path_factory: pytest.TempPathFactory) -> CertificateFiles:
    return generate_self_signed(tmp_path_factory.mktemp("mm-tls"), "fake-modelmesh", ["127.0.0.1", "localhost"])


@dataclass
class Served:
    fake: FakeModelMesh
    runner: web.AppRunner
    url: str


@pytest.fixture
async def modelmesh(modelmesh_cert: CertificateFiles) -> AsyncIterator[Served]:
    # A high rate, so the fake's whole-number counts read as the exact rate even over 50 ms.
    fake = FakeModelMesh(ModelMeshLoad(requests_per_second=1000.0))
    runner = await serve(fake, "127.0.0.1", 0, ssl_context=server_context(modelmesh_cert.cert_file,
                                                                          modelmesh_cert.key_file))
    served = Served(fake, runner, f"https://127.0.0.1:{runner.addresses[0][1]}/metrics")
    yield served
    await served.runner.cleanup()


def exporter_settings(url: str, ca_file: Path, **changes: Any) -> ExporterSettings:
    return ExporterSettings(
        listen_host="127.0.0.1", listen_port=0, modelmesh_url=url, modelmesh_ca_file=ca_file,
        modelmesh_interval_s=0.05, load_window_s=0.5, gpu_enabled=False, **changes,
    )


async def poll_metrics(client: TestClient[web.Request, web.Application], predicate: Callable[[str], bool],
                       timeout_s: float = 5.0) -> str:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        response = await client.get("/metrics")
        assert response.status == 200
        text = await response.text()
        if predicate(text):
            return text
        if loop.time() > deadline:
            raise AssertionError(f"condition not met in {timeout_s} s; last /metrics:\n{text}")
        await asyncio.sleep(0.05)


def rate_near(text: str, expected: float, tolerance: float = 0.1) -> bool:
    rate = samples(text).get((names.REQUESTS_PER_SECOND, ()))
    return rate is not None and abs(rate - expected) <= tolerance * expected


def success_is(value: float) -> Callable[[str], bool]:
    key = (names.COLLECTOR_SUCCESS, (("collector", names.COLLECTOR_MODELMESH),))
    return lambda text: samples(text).get(key) == value


async def test_healthz_answers_ok(aiohttp_client: AiohttpClient, modelmesh: Served,
                                  modelmesh_cert: CertificateFiles) -> None:
    client = await aiohttp_client(build_app(exporter_settings(modelmesh.url, modelmesh_cert.cert_file)))
    response = await client.get("/healthz")
    assert response.status == 200
    assert await response.text() == "ok\n"


async def test_promtool_is_clean_in_every_modelmesh_state(
    aiohttp_client: AiohttpClient, modelmesh: Served, modelmesh_cert: CertificateFiles,
) -> None:
    app = build_app(exporter_settings(modelmesh.url, modelmesh_cert.cert_file))
    before_any_scrape = generate_latest(app[REGISTRY_KEY]).decode()
    assert promtool_findings(before_any_scrape) == (0, "")
    assert names.REQUESTS_TOTAL not in before_any_scrape  # no data is no series, never a zero

    client = await aiohttp_client(app)
    # The rate settles once the 0.5 s window holds several scrapes (the stepped-clock tests check it exactly).
    healthy = await poll_metrics(client, lambda t: success_is(1.0)(t) and rate_near(t, 1000.0))
    assert promtool_findings(healthy) == (0, "")

    await modelmesh.runner.cleanup()  # ModelMesh goes away
    down = await poll_metrics(client, success_is(0.0))
    assert promtool_findings(down) == (0, "")
    down_samples = samples(down)
    assert down_samples[(names.SCRAPE_ERRORS_TOTAL, (("collector", "modelmesh"), ("reason", "connect")))] >= 1
    assert (names.REQUESTS_PER_SECOND, ()) in down_samples  # the last good value is still served


async def test_the_exporter_says_when_it_started_and_what_it_holds(
    aiohttp_client: AiohttpClient, modelmesh: Served, modelmesh_cert: CertificateFiles,
) -> None:
    """`process_*`, so that a sidecar restarting (OOM-killed at its limit, crash-looping) and its memory and open
    files are in Prometheus: its registry had none, and a restart showed only as counters back at zero. The
    adapter still reads the page, the pod's family last as its fast reader wants it."""
    settings = exporter_settings(modelmesh.url, modelmesh_cert.cert_file,
                                 identity=PodIdentity(namespace="ml", name="p-0"))
    client = await aiohttp_client(build_app(settings))
    text = await poll_metrics(client, success_is(1.0))
    page = samples(text)
    assert 0 < page[("process_start_time_seconds", ())] <= time.time()
    assert page[("process_resident_memory_bytes", ())] > 0 and page[("process_open_fds", ())] > 0
    assert text.rstrip().splitlines()[-1].startswith(names.POD_INFO), text[-400:]
    assert read_exporter_text(text, "p-0", True, time.time()).pod is not None


async def test_each_scrape_reports_the_exporters_clock_at_that_scrape(
    aiohttp_client: AiohttpClient, modelmesh: Served, modelmesh_cert: CertificateFiles,
) -> None:
    """The adapter reads the success timestamps on the node's clock by this series (a node clock that is off
    must not make a pod look stale for good): it is read when the scrape is answered, not when collected."""
    client = await aiohttp_client(build_app(exporter_settings(modelmesh.url, modelmesh_cert.cert_file)))
    clocks = []
    for _ in range(2):
        before = time.time()
        text = await (await client.get("/metrics")).text()
        clocks.append(samples(text)[(names.EXPORTER_TIME, ())])
        assert before <= clocks[-1] <= time.time()
        await asyncio.sleep(0.2)
    assert clocks[1] - clocks[0] >= 0.2


async def test_promtool_is_clean_when_modelmesh_was_never_reachable(aiohttp_client: AiohttpClient,
                                                                    modelmesh_cert: CertificateFiles) -> None:
    client = await aiohttp_client(build_app(exporter_settings("https://127.0.0.1:1/metrics",
                                                              modelmesh_cert.cert_file)))
    never = await poll_metrics(client, lambda t: 'reason="connect"' in t)
    assert promtool_findings(never) == (0, "")
    assert names.REQUESTS_TOTAL not in never
    assert success_is(0.0)(never)


async def test_metrics_are_gzipped_when_the_scraper_asks(aiohttp_client: AiohttpClient, modelmesh: Served,
                                                         modelmesh_cert: CertificateFiles) -> None:
    client = await aiohttp_client(build_app(exporter_settings(modelmesh.url, modelmesh_cert.cert_file)))
    response = await client.get("/metrics", headers={"Accept-Encoding": "gzip"})
    assert response.headers.get("Content-Encoding") == "gzip"
    assert names.COLLECTOR_SUCCESS in await response.text()


@pytest.mark.parametrize(("accept_encoding", "encoding"), [
    ("gzip;q=0, identity", None),
    ("GZIP; Q=0", None),
    ("deflate, gzip;q=0.000", None),
    ("identity", None),
    ("gzip;q=0.5, identity;q=0.1", "gzip"),
    ("deflate, gzip;q=1.0", "gzip"),
])
async def test_metrics_are_not_gzipped_for_a_scraper_that_refuses_gzip(
    aiohttp_client: AiohttpClient, modelmesh_cert: CertificateFiles, accept_encoding: str, encoding: str | None,
) -> None:
    """A qvalue of 0 says "not acceptable" (RFC 9110, 12.5.3): `gzip;q=0` got a gzipped body all the same, which
    a client that cannot read gzip (and says so) gets as bytes it cannot read."""
    client = await aiohttp_client(build_app(exporter_settings("https://127.0.0.1:1/metrics",
                                                              modelmesh_cert.cert_file)))
    response = await client.get("/metrics", headers={"Accept-Encoding": accept_encoding}, auto_decompress=False)
    assert response.headers.get("Content-Encoding") == encoding
    body = await response.read()
    assert (gzip.decompress(body) if encoding else body).decode().count(names.COLLECTOR_SUCCESS) > 0


async def test_the_name_filter_finds_the_modelmesh_and_health_families(
    aiohttp_client: AiohttpClient, modelmesh: Served, modelmesh_cert: CertificateFiles,
) -> None:
    """`/metrics?name[]=...` (prometheus_client's filter) must find every collector's families, not only the GPU's:
    the registry knows a collector's names only from its `describe()`."""
    client = await aiohttp_client(build_app(exporter_settings(modelmesh.url, modelmesh_cert.cert_file)))
    await poll_metrics(client, lambda t: rate_near(t, 1000.0))
    wanted = [names.REQUESTS_TOTAL, names.REQUESTS_PER_SECOND, names.COLLECTOR_SUCCESS, names.EXPORTER_TIME]
    response = await client.get("/metrics", params=[("name[]", name) for name in wanted])
    assert response.status == 200
    assert {name for name, _labels in samples(await response.text())} == set(wanted)


def served_models(text: str) -> dict[str, float]:
    return {dict(labels)[names.MODEL_ID_LABEL]: value for (name, labels), value in samples(text).items()
            if name == names.MODEL_LAST_SERVED_TIMESTAMP}


async def test_the_models_the_stand_in_serves_are_published_with_their_last_served_time(
    aiohttp_client: AiohttpClient, modelmesh: Served, modelmesh_cert: CertificateFiles,
) -> None:
    """The demo's ModelMesh stand-in labels its histograms by model, as ModelMesh with per_model_metrics=true:
    every model it serves shows up, stamped on the clock of the collector's last-success time."""
    client = await aiohttp_client(build_app(exporter_settings(modelmesh.url, modelmesh_cert.cert_file)))
    text = await poll_metrics(client, lambda t: len(served_models(t)) == len(modelmesh.fake.model_ids))
    assert promtool_findings(text) == (0, "")
    assert set(served_models(text)) == set(modelmesh.fake.model_ids)
    last_success = samples(text)[(names.LAST_SUCCESS_TIMESTAMP, (("collector", names.COLLECTOR_MODELMESH),))]
    assert all(last_success - 5.0 < stamp <= last_success for stamp in served_models(text).values())


async def test_a_pod_that_served_nothing_within_the_horizon_says_so_rather_than_nothing(
    aiohttp_client: AiohttpClient, modelmesh: Served, modelmesh_cert: CertificateFiles,
) -> None:
    """With per-model metrics on, a pod idle for a horizon publishes the family without samples, which the
    adapter reads as "served nothing recently" ({}). Before, the family went with its last sample, and the
    pod read as one whose ModelMesh has no per-model metrics (None), as docs/design.md says it must not."""
    client = await aiohttp_client(build_app(exporter_settings(modelmesh.url, modelmesh_cert.cert_file,
                                                              model_recency_horizon_s=0.3)))
    await poll_metrics(client, lambda t: len(served_models(t)) == len(modelmesh.fake.model_ids))
    modelmesh.fake.update(requests_per_second=0.0)
    text = await poll_metrics(client, lambda t: not served_models(t) and rate_near(t, 0.0 + 1e-9, 1.0))
    assert f"# TYPE {names.MODEL_LAST_SERVED_TIMESTAMP} gauge" in text
    assert promtool_findings(text) == (0, "")
    assert parse_exporter_text(text, "pod", True, time.time()).recent_models == {}


async def test_model_recency_horizon_zero_publishes_no_per_model_series(
    aiohttp_client: AiohttpClient, modelmesh: Served, modelmesh_cert: CertificateFiles,
) -> None:
    client = await aiohttp_client(build_app(exporter_settings(modelmesh.url, modelmesh_cert.cert_file,
                                                              model_recency_horizon_s=0.0)))
    text = await poll_metrics(client, lambda t: rate_near(t, 1000.0))
    assert names.MODEL_LAST_SERVED_TIMESTAMP not in text


# ---- settings: every flag has an EXPORTER_* twin ----

# One value per flag, as a flag argument and as its variable's value, and what it must set.
FLAG_CASES: list[tuple[str, str, str, Any]] = [
    ("--listen", "127.0.0.1:9999", "listen_port", 9999),
    ("--max-connections", "8", "max_connections", 8),
    ("--modelmesh-url", "http://10.0.0.1:2112/metrics", "modelmesh_url", "http://10.0.0.1:2112/metrics"),
    ("--modelmesh-insecure", "true", "modelmesh_insecure", True),
    ("--modelmesh-timeout", "0.5", "modelmesh_timeout_s", 0.5),
    ("--modelmesh-interval", "2", "modelmesh_interval_s", 2.0),
    ("--load-window", "60", "load_window_s", 60.0),
    ("--model-recency-horizon", "600", "model_recency_horizon_s", 600.0),
    ("--no-gpu", "true", "gpu_enabled", False),
    ("--gpu-uuids", "GPU-a, GPU-b", "gpu_uuids", ("GPU-a", "GPU-b")),
    ("--gpu-pod-resources-wait", "90", "pod_resources_wait_s", 90.0),
    ("--gpu-pod-name", "triton-0", "pod_name", "triton-0"),
    ("--gpu-pod-namespace", "ml", "pod_namespace", "ml"),
    ("--gpu-window", "20", "gpu_window_s", 20.0),
    ("--gpu-interval", "0.5", "gpu_interval_s", 0.5),
    ("--pod-name", "triton-0", "identity", PodIdentity(name="triton-0")),
    ("--pod-namespace", "ml", "identity", PodIdentity(namespace="ml")),
    ("--pod-uid", "0B3C2A4E-5F61-4C1D-9E7A-2F0D6B8C9A11", "identity",
     PodIdentity(uid="0b3c2a4e-5f61-4c1d-9e7a-2f0d6b8c9a11")),
    ("--log-level", "debug", "log_level", "DEBUG"),
]


def env_name(flag: str) -> str:
    return "EXPORTER_" + flag.removeprefix("--").replace("-", "_").upper()


def test_every_flag_is_covered_here_and_documents_its_variable() -> None:
    parser = build_parser()
    # --help and --version set nothing, so have no variable
    flags = {action.option_strings[0] for action in parser._actions} - {"-h", "--version"}  # not an off form
    # The TLS files are read at start: test_exporter_serving_tls.py and test_exporter_client_certificates.py
    # give each through its variable to the real exporter.
    assert flags == {case[0] for case in FLAG_CASES} | {"--modelmesh-ca-file", "--gpu-pod-resources-socket",
                                                        "--tls-cert-file", "--tls-key-file", "--tls-client-ca-file"}
    help_text = parser.format_help()
    for flag in flags:
        assert env_name(flag) in help_text


@pytest.mark.parametrize(("flag", "value", "field", "expected"), FLAG_CASES, ids=[c[0] for c in FLAG_CASES])
def test_each_flag_and_its_variable_set_the_same_field(flag: str, value: str, field: str, expected: Any) -> None:
    switch = flag in ("--modelmesh-insecure", "--no-gpu")
    from_flag = parse_settings([flag] if switch else [flag, value], environ={})
    from_env = parse_settings([], environ={env_name(flag): value})
    assert getattr(from_flag, field) == expected
    assert getattr(from_env, field) == expected
    assert getattr(parse_settings([], environ={}), field) != expected  # the case changes a default


def test_ca_file_from_its_variable(modelmesh_cert: CertificateFiles) -> None:
    settings = parse_settings([], environ={"EXPORTER_MODELMESH_CA_FILE": str(modelmesh_cert.cert_file)})
    assert settings.modelmesh_ca_file == modelmesh_cert.cert_file


def test_a_flag_wins_over_its_variable() -> None:
    settings = parse_settings(["--modelmesh-timeout", "1.5"], environ={"EXPORTER_MODELMESH_TIMEOUT": "9"})
    assert settings.modelmesh_timeout_s == 1.5


def test_defaults_are_the_documented_ones() -> None:
    assert parse_settings([], environ={}) == ExporterSettings()


@pytest.mark.parametrize(
    ("argv", "environ", "says"),
    [
        (["--modelmesh-timeout", "0"], {}, "--modelmesh-timeout"),
        (["--modelmesh-interval", "nan"], {}, "--modelmesh-interval"),
        (["--listen", "9187"], {}, "HOST:PORT"),
        (["--modelmesh-url", "127.0.0.1:2112/metrics"], {}, "http:// or https://"),
        (["--modelmesh-url", "https://127.0.0.1:2112metrics"], {}, "--modelmesh-url"),  # a slash forgotten
        (["--modelmesh-url", "http://127.0.0.1:99999/metrics"], {}, "--modelmesh-url"),
        ([], {"EXPORTER_MODELMESH_URL": "http://[::1/metrics"}, "EXPORTER_MODELMESH_URL"),
        (["--modelmesh-ca-file", "/does/not/exist"], {}, "CA bundle"),
        (["--log-level", "loud"], {}, "--log-level"),
        (["--bogus"], {}, "unrecognized arguments"),
        ([], {"EXPORTER_MODELMESH_TIMEOUT": "soon"}, "EXPORTER_MODELMESH_TIMEOUT"),
        ([], {"EXPORTER_NO_GPU": "maybe"}, "EXPORTER_NO_GPU"),
        (["--load-window", "1"], {}, "--load-window"),
        (["--model-recency-horizon", "-1"], {}, "--model-recency-horizon"),
        (["--model-recency-horizon", "inf"], {}, "--model-recency-horizon"),
        ([], {"EXPORTER_MODEL_RECENCY_HORIZON": "an hour"}, "EXPORTER_MODEL_RECENCY_HORIZON"),
        (["--model-recency-horizon", "2"], {}, "at least --modelmesh-interval"),
    ],
)
def test_bad_settings_are_usage_errors_that_say_which(
    argv: list[str], environ: dict[str, str], says: str, capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse_settings(argv, environ=environ)
    assert exit_.value.code == 2
    assert says in capsys.readouterr().err


@pytest.mark.parametrize(
    ("environ", "names_"),
    [
        pytest.param({"EXPORTER_LOAD_WINDOW": "1"}, ("--load-window", "EXPORTER_LOAD_WINDOW", "--modelmesh-interval",
                                                      "EXPORTER_MODELMESH_INTERVAL"), id="window"),
        pytest.param({"EXPORTER_MODEL_RECENCY_HORIZON": "2"},
                     ("--model-recency-horizon", "EXPORTER_MODEL_RECENCY_HORIZON", "EXPORTER_MODELMESH_INTERVAL"),
                     id="horizon"),
        pytest.param({"EXPORTER_GPU_POD_RESOURCES_SOCKET": "/k.sock"},
                     ("EXPORTER_POD_NAME", "EXPORTER_POD_NAMESPACE", "--pod-name"), id="pod-unnamed"),
        pytest.param({"EXPORTER_GPU_POD_RESOURCES_SOCKET": "/k.sock", "EXPORTER_GPU_POD_NAME": "p",
                      "EXPORTER_GPU_POD_NAMESPACE": "n", "EXPORTER_GPU_UUIDS": "GPU-1"},
                     ("EXPORTER_GPU_POD_RESOURCES_SOCKET", "EXPORTER_GPU_UUIDS", "--gpu-uuids"), id="two-choices"),
        pytest.param({"EXPORTER_MODELMESH_INSECURE": "true", "EXPORTER_MODELMESH_CA_FILE": "CERT"},
                     ("EXPORTER_MODELMESH_INSECURE", "EXPORTER_MODELMESH_CA_FILE", "--modelmesh-ca-file"),
                     id="insecure-and-ca"),
    ],
)
def test_an_error_in_settings_a_manifest_sets_names_each_variable_and_its_flag(
    environ: dict[str, str], names_: tuple[str, ...], modelmesh_cert: CertificateFiles,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A sidecar is configured by EXPORTER_* variables in its pod spec. These errors named only the flags (or
    "their EXPORTER_ variables"), which the manifest an operator reads does not contain."""
    environ = {k: str(modelmesh_cert.cert_file) if v == "CERT" else v for k, v in environ.items()}
    with pytest.raises(SystemExit) as exit_:
        parse_settings([], environ=environ)
    assert exit_.value.code == 2
    said = capsys.readouterr().err
    assert all(name in said for name in names_), said


@pytest.mark.parametrize(("value", "says"), [
    ("all", "EXPORTER_GPU_UUIDS: GPU UUIDs, not NVIDIA_VISIBLE_DEVICES's 'all': leave it unset to report every GPU "
            "this container sees"),
    ("none", "EXPORTER_GPU_UUIDS: GPU UUIDs, not NVIDIA_VISIBLE_DEVICES's 'none': --no-gpu (EXPORTER_NO_GPU=true) "
             "turns the GPU collector off"),
    ("0,1", "EXPORTER_GPU_UUIDS: GPU UUIDs, not indexes ('0'), which change with the order the node finds its GPUs: "
            "give the UUIDs nvidia-smi -L prints (GPU-..., MIG-...)"),
    ("GPU-a,3b:00.0", "EXPORTER_GPU_UUIDS: '3b:00.0' is not a GPU UUID: give the UUIDs nvidia-smi -L prints (GPU-..., "
                      "MIG-...)"),
])
def test_gpu_uuids_that_are_not_uuids_are_refused_at_start_not_reported_missing_for_ever(
    value: str, says: str, capsys: pytest.CaptureFixture[str],
) -> None:
    """`EXPORTER_GPU_UUIDS=all` (as NVIDIA_VISIBLE_DEVICES is written), `none` or GPU indexes were taken as UUIDs
    that match no GPU: the GPU collector failed for good, "configured GPU all is not visible", an outage that no
    wait ends."""
    with pytest.raises(SystemExit) as exit_:
        parse_settings([], environ={"EXPORTER_GPU_UUIDS": value})
    assert exit_.value.code == 2
    assert says in capsys.readouterr().err


def test_gpu_uuids_and_gke_device_names_are_taken() -> None:
    given = "GPU-5b3d6e2a-8f1c-4c55-9e8a-0b7c2d4e6f81, MIG-1a2b3c4d-0000-5555-aaaa-bbbbccccdddd, nvidia0, mig-GPU-x/1/0"
    assert parse_settings(["--gpu-uuids", given], environ={}).gpu_uuids == (
        "GPU-5b3d6e2a-8f1c-4c55-9e8a-0b7c2d4e6f81", "MIG-1a2b3c4d-0000-5555-aaaa-bbbbccccdddd", "nvidia0",
        "mig-GPU-x/1/0")


def test_insecure_and_a_ca_file_contradict_even_across_flag_and_variable(
    modelmesh_cert: CertificateFiles, capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse_settings(["--modelmesh-insecure"], environ={"EXPORTER_MODELMESH_CA_FILE": str(modelmesh_cert.cert_file)})
    assert exit_.value.code == 2
    assert "contradict" in capsys.readouterr().err


def test_a_model_recency_horizon_of_zero_turns_the_per_model_series_off() -> None:
    assert parse_settings(["--model-recency-horizon", "0"], environ={}).model_recency_horizon_s == 0.0
    assert parse_settings([], environ={"EXPORTER_MODEL_RECENCY_HORIZON": "0"}).model_recency_horizon_s == 0.0


def test_seconds_are_finite_and_positive() -> None:
    for text in ("inf", "-1", "0", "nan", "1 sec", "0s"):
        with pytest.raises(argparse.ArgumentTypeError):
            seconds(text)
    assert seconds("0.25") == 0.25


def test_pod_resources_socket_needs_the_pods_name_and_excludes_gpu_uuids(capsys: pytest.CaptureFixture[str]) -> None:
    socket = ["--gpu-pod-resources-socket", "/var/lib/kubelet/pod-resources/kubelet.sock"]
    settings = parse_settings([*socket, "--gpu-pod-name", "p", "--gpu-pod-namespace", "ns"], environ={})
    assert str(settings.pod_resources_socket).endswith("kubelet.sock")

    with pytest.raises(SystemExit) as missing:
        parse_settings(socket, environ={})
    assert missing.value.code == 2 and "needs --pod-name" in capsys.readouterr().err
    settings = parse_settings([*socket, "--pod-name", "p", "--pod-namespace", "ns"], environ={})
    assert (settings.pod_name, settings.pod_namespace) == ("p", "ns")  # the kubelet is asked about the pod named
    with pytest.raises(SystemExit):
        parse_settings([*socket, "--gpu-pod-name", "p", "--gpu-pod-namespace", "ns", "--gpu-uuids", "GPU-a"],
                       environ={})
    assert "use one" in capsys.readouterr().err
