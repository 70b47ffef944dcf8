"""The sidecar's memory limit holds the largest ModelMesh answer the exporter reads.

The exporter reads a ModelMesh answer of up to `MAX_BODY_BYTES`. Two shapes of it: a ModelMesh, or a proxy in
front of it, that ignores the `name[]` query sends all of its per-model histograms (some 25 KiB per model, mostly
bucket lines the exporter skips: some 1,300 models); one that honours it sends only the lines the exporter reads
(some 0.4 KiB per model: tens of thousands of models, each a series the exporter keeps). A read of either must
fit in the memory limit of the container spec the manifests give the sidecar: past it the kubelet OOM-kills the
sidecar, its counters are lost, and a crash-looping container makes the whole runtime pod NotReady (a restart
does not help: the first read is the same). Measured as the real process's peak resident memory (VmHWM), with
the reader as it is, whatever it becomes.
"""

from __future__ import annotations

import logging
import re
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import aiohttp
import pytest
import yaml
from prometheus_client import CollectorRegistry

from exporter import names
from exporter.collectors.health import CollectorHealth
from exporter.collectors.modelmesh import MAX_BODY_BYTES, ModelMeshCollector
from tests.exporter.modelmesh_wire import answering_in_a_thread
from tests.support.processes import free_port, http_get, poll, running

REPO = Path(__file__).resolve().parents[2]
SIDECAR_PATCH = REPO / "manifests" / "examples" / "exporter-sidecar-patch.yaml"

_HEAD = """\
# HELP modelmesh_instance_lru_age_seconds Last used age of least recently used model in pod (secs ago)
# TYPE modelmesh_instance_lru_age_seconds gauge
modelmesh_instance_lru_age_seconds 900.0
# HELP modelmesh_instance_capacity_bytes Effective model capacity of pod excluding unload buffer
# TYPE modelmesh_instance_capacity_bytes gauge
modelmesh_instance_capacity_bytes 1.7179869184e+10
# HELP modelmesh_instance_used_bytes Amount of capacity currently in use by loaded models
# TYPE modelmesh_instance_used_bytes gauge
modelmesh_instance_used_bytes 8.589934592e+09
# HELP modelmesh_instance_models_total Number of model copies loaded in pod
# TYPE modelmesh_instance_models_total gauge
modelmesh_instance_models_total 8.0
# HELP modelmesh_invoke_model_milliseconds Internal model server inference request time
# TYPE modelmesh_invoke_model_milliseconds histogram
"""
_BUCKETS = ("0.5", "1.0", "2.0", "4.0", "7.0", "10.0", "20.0", "35.0", "50.0", "75.0", "100.0", "150.0", "200.0",
            "300.0", "400.0", "500.0", "750.0", "1000.0", "2000.0", "+Inf")


def unfiltered_modelmesh_body(limit: int) -> bytes:
    """ModelMesh's invoke histogram with per-model series, buckets included (what a server that ignores
    `name[]` sends), for as many models as fit in `limit` bytes."""
    parts = [_HEAD]
    size = len(_HEAD)
    model = 0
    while True:
        labels = f'code="OK",method="ModelInfer",modelId="model-{model:06d}",vModelId=""'
        lines = [f"modelmesh_invoke_model_milliseconds_bucket{{{labels},le=\"{le}\"}} 12.0\n" for le in _BUCKETS]
        lines += [f"modelmesh_invoke_model_milliseconds_count{{{labels}}} 12.0\n",
                  f"modelmesh_invoke_model_milliseconds_sum{{{labels}}} 240.0\n"]
        chunk = "".join(lines)
        if size + len(chunk) > limit:
            return "".join(parts).encode()
        parts.append(chunk)
        size += len(chunk)
        model += 1


def filtered_modelmesh_body(limit: int) -> bytes:
    """What a ModelMesh with per-model metrics on answers the exporter's `name[]` query with: the instance
    gauges, and per model its invoke `_count`, queue `_count` and `_sum` and cache-miss `_count` (simpleclient's
    shapes: a comma after every label), for as many models as fit in `limit` bytes (an outside review's
    realistic body: some 80,000 models at the 32 MiB cap)."""
    head = _HEAD.replace("# TYPE modelmesh_invoke_model_milliseconds histogram\n", "")
    model_labels = 'modelId="predictor-{model:08d}",vModelId="",'
    request_labels = 'method="inference.GRPCInferenceService/ModelInfer",code="OK",' + model_labels
    families = {
        "modelmesh_invoke_model_milliseconds": [("_count", request_labels, "12.0")],
        "modelmesh_req_queue_delay_milliseconds": [("_count", model_labels, "12.0"), ("_sum", model_labels, "240.0")],
        "modelmesh_cache_miss_milliseconds": [("_count", model_labels, "1.0")],
    }

    def lines(family: str, model: int) -> list[str]:
        return [f"{family}{suffix}{{{labels.format(model=model)}}} {value}\n"
                for suffix, labels, value in families[family]]

    types = [f"# TYPE {family} histogram\n" for family in families]
    per_model = sum(len(line) for family in families for line in lines(family, 0))
    models = (limit - len(head) - len("".join(types))) // per_model
    parts = [head]
    for family, type_line in zip(families, types, strict=True):
        parts.append(type_line)
        parts += [line for model in range(models) for line in lines(family, model)]
    return "".join(parts).encode()


def served_again(body: bytes) -> Callable[[str], bytes]:
    """Answers `body` first, then the same with every count one higher: every model served again since. The
    exporter publishes a model once it sees its count rise (what ModelMesh counted before its first read has an
    unknown time, `exporter.model_recency`), so from the second read it publishes every model, as a pod at the
    cap does whose models are all in use."""
    again = body.replace(b"} 12.0\n", b"} 13.0\n")
    assert len(again) == len(body) and again != body
    asked = [0]

    def answer(path: str) -> bytes:
        asked[0] += 1
        return body if asked[0] == 1 else again

    return answer


@pytest.fixture
def unfiltered_modelmesh() -> Iterator[str]:
    """A plain-http ModelMesh stand-in that answers every read with a body just under `MAX_BODY_BYTES`."""
    body = unfiltered_modelmesh_body(MAX_BODY_BYTES)

    with answering_in_a_thread(served_again(body), "text/plain; version=0.0.4; charset=utf-8") as url:
        yield url


def sidecar_memory_limit_bytes() -> int:
    """The sidecar container's `resources.limits.memory`, from the manifest users apply."""
    patch = yaml.safe_load(SIDECAR_PATCH.read_text())
    text = str(patch[0]["value"]["resources"]["limits"]["memory"])
    match = re.fullmatch(r"(\d+)(Mi|Gi)", text)
    assert match, f"unexpected memory quantity {text!r}"
    return int(match[1]) << (20 if match[2] == "Mi" else 30)


def peak_resident_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc status")


def peak_resident_reading(url: str, tmp_path: Path, models: int) -> int:
    """The exporter's peak resident memory (bytes) over two good reads of `url` and a `/metrics` after each.
    Two reads: the second holds the first one's reading while it parses the next, and publishes every model
    (`served_again`)."""
    port = free_port()
    args = ["exporter.cli", "--listen", f"127.0.0.1:{port}", "--no-gpu", "--modelmesh-url", url,
            "--modelmesh-timeout", "30", "--modelmesh-interval", "1", "--load-window", "30"]
    success = f'{names.LAST_SUCCESS_TIMESTAMP}{{collector="modelmesh"}}'
    # A fresh interpreter (fork=False): one forked from the tests' warm one starts with its imports resident
    with running(args, f"http://127.0.0.1:{port}/healthz", tmp_path / "exporter.log", fork=False) as exporter:
        first = poll(lambda: [line for line in http_get(f"http://127.0.0.1:{port}/metrics", timeout=30)[1]
                              .splitlines() if line.startswith(success)], timeout=120)
        poll(lambda: [line for line in http_get(f"http://127.0.0.1:{port}/metrics", timeout=30)[1].splitlines()
                      if line.startswith(success) and [line] != first], timeout=120)
        published = http_get(f"http://127.0.0.1:{port}/metrics", timeout=30)[1].count(
            f"\n{names.MODEL_LAST_SERVED_TIMESTAMP}{{")
        assert published == models, f"{published} of {models} models published"
        return peak_resident_bytes(exporter.pid)


def assert_fits(peak: int, shape: str) -> None:
    limit = sidecar_memory_limit_bytes()
    assert peak < 0.8 * limit, (
        f"reading a {MAX_BODY_BYTES / (1 << 20):.0f} MiB ModelMesh answer ({shape}) took the exporter to "
        f"{peak / (1 << 20):.0f} MiB resident; the sidecar's memory limit is {limit / (1 << 20):.0f} MiB "
        f"({SIDECAR_PATCH.name})"
    )


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc for peak memory")
def test_the_largest_body_read_fits_the_sidecars_memory_limit(unfiltered_modelmesh: str, tmp_path: Path) -> None:
    models = unfiltered_modelmesh_body(MAX_BODY_BYTES).count(b"invoke_model_milliseconds_count{")
    assert_fits(peak_resident_reading(unfiltered_modelmesh, tmp_path, models), "every histogram, buckets included")


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc for peak memory")
def test_the_most_models_a_body_holds_fit_the_sidecars_memory_limit(tmp_path: Path) -> None:
    """An outside review: a body of only the lines the exporter asks for, 80,000 models at the cap, took it to
    514 MiB (OOM-killed at 256Mi from some 35,000 models, at every read: a crash loop)."""
    body = filtered_modelmesh_body(MAX_BODY_BYTES)
    with answering_in_a_thread(served_again(body), "text/plain; version=0.0.4; charset=utf-8") as url:
        assert_fits(peak_resident_reading(url, tmp_path, body.count(b"invoke_model_milliseconds_count{")),
                    "the lines asked for, a series per model")


async def test_a_large_answer_is_held_once_while_it_is_read(unfiltered_modelmesh: str) -> None:
    """An outside review: a ModelMesh answer was read whole into bytes and then decoded, so it was held twice (64 MiB
    at the 32 MiB cap) beside the last reading. Decoded as it comes (`exporter.body_pieces`), the exporter holds its
    text once: the most Python holds over one read of the largest answer, parse included (few series: a server
    that ignores `name[]` sends mostly bucket lines, skipped), is well under twice the answer."""
    size = len(unfiltered_modelmesh_body(MAX_BODY_BYTES))
    collector = ModelMeshCollector(CollectorHealth(), unfiltered_modelmesh, timeout_s=60)
    async with aiohttp.ClientSession() as session:
        tracemalloc.start()
        try:
            read = await collector.scrape_once(session)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert read
    assert peak < 1.5 * size, f"{peak / (1 << 20):.1f} MiB held reading an answer of {size / (1 << 20):.1f} MiB"


async def test_a_body_of_more_series_than_kept_is_refused_and_the_last_values_stay(
        caplog: pytest.LogCaptureFixture) -> None:
    """A body of shorter lines holds more series in the same bytes than the memory limit is sized on
    (`MAX_SERIES_READ`): refused as `parse`, said in a WARNING that names the bound, the last good values served."""
    bodies = [filtered_modelmesh_body(3_000), filtered_modelmesh_body(6_000)]
    models = [body.count(b"invoke_model_milliseconds_count{") for body in bodies]
    assert 4 * models[0] <= 40 < 4 * models[1]  # four series a model: the first is read, the second is over 40
    health = CollectorHealth()
    registry = CollectorRegistry(auto_describe=False)
    with answering_in_a_thread(lambda path: bodies[0], "text/plain; version=0.0.4; charset=utf-8") as url:
        collector = ModelMeshCollector(health, url, max_series=40)
        registry.register(collector)
        registry.register(health)
        async with aiohttp.ClientSession() as session:
            assert await collector.scrape_once(session)
            served = registry.get_sample_value(names.MODELS_LOADED)
            bodies[0] = bodies[1]
            with caplog.at_level(logging.WARNING, logger="exporter"):
                assert not await collector.scrape_once(session)
    errors = registry.get_sample_value(names.SCRAPE_ERRORS_TOTAL,
                                       {"collector": names.COLLECTOR_MODELMESH, "reason": names.REASON_PARSE})
    assert errors == 1.0
    assert registry.get_sample_value(names.MODELS_LOADED) == served == 8.0
    [line] = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert "more than 40 series" in line and "last good values kept" in line, line
