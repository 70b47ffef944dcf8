"""docs/operations.md's Troubleshooting, followed as an operator follows it in an incident, against real processes
(fake ModelMesh -> `modelmesh-exporter` -> `modelmesh-autoscaler serve`, read with the real `kubectl get --raw`):
what the doc says the operator will see (a 503's words and its `why:` line, the /debug fields and the values of
`winner`) must be what they see. Each check quotes the doc, so that the two cannot drift apart silently."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import (
    DEPLOYMENT,
    DataPath,
    cluster_adapter_running,
    data_path_running,
    external_metric_once_refreshed,
)
from tests.e2e.test_hung_refresh import refresh_stopped
from tests.e2e.test_missing_signal_e2e import fake_gpus
from tests.fakes.nvml import GPU_IS_LOST
from tests.support.api_peek import kubectl_reads
from tests.support.processes import http_get
from tests.support.quantities import quantity_value

pytestmark = pytest.mark.slow

OPERATIONS = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
DEBUG = f"/debug/runtimes/default/{DEPLOYMENT}"
WHY = f"why: {DEBUG} on an adapter pod"


def section(heading: str) -> str:
    """The doc's text from `heading` (a `###` title) to the next heading."""
    start = OPERATIONS.index(f"### {heading}\n")
    match = re.compile(r"\n##+ ").search(OPERATIONS, start + 4)  # a heading, not a shell comment in a block
    return OPERATIONS[start:match.start() if match else None]


def bullet(text: str, lead: str) -> str:
    """The `- **lead...` bullet of `text`, up to the next bullet or paragraph, its lines joined."""
    start = text.index(f"- **{lead}")
    ends = [i for i in (text.find("\n- **", start + 1), text.find("\n\n", start)) if i > 0]
    return " ".join(text[start:min(ends) if ends else None].split())


def documented_503s() -> dict[str, str]:
    """The 503 section's bullets by the quoted words they open with, those words as a pattern (N, M, X: numbers)."""
    bullets = {}
    text = section("A 503, and what it means")
    for lead in re.findall(r'^- \*\*"([^"]+)"\*\*', text, flags=re.M):
        pattern = re.sub(r"\b[NMX]\b", r"\\d+", re.escape(lead))
        bullets[pattern] = bullet(text, f'"{lead}"')
    assert bullets, "docs/operations.md's 503 section quotes no message any more: update this test"
    return bullets


def the_bullet_for(message: str) -> str:
    """The 503 section's bullet whose quoted words the message carries: the one the operator is sent to."""
    found = [text for pattern, text in documented_503s().items() if re.search(pattern, message)]
    assert found, f"the 503 the operator sees is not among docs/operations.md's 503s: {message}"
    return found[0]


def keys_of(document: Any) -> set[str]:
    """Every key at any depth of a JSON document."""
    if isinstance(document, dict):
        return set(document) | {key for value in document.values() for key in keys_of(value)}
    if isinstance(document, list):
        return {key for value in document for key in keys_of(value)}
    return set()


def debug_document(path: DataPath, ready: Any = lambda document: document.get("winner")) -> Any:
    """The /debug document kubectl reads, once `ready` holds of it (awaited without kubectl: `kubectl_reads`)."""
    return kubectl_reads(path.kubeconfig, DEBUG, lambda code, document: code == 0 and ready(document), timeout=60)[1]


def load_served(path: DataPath) -> None:
    """Wait until kubectl reads a request load above 0 (the fake ModelMesh's pods serve some)."""
    kubectl_reads(path.kubeconfig, path.metric_path("modelmesh_request_load"),
                  lambda code, body: code == 0 and quantity_value(body["items"][0]["value"]) > 0, timeout=60)


def refused_message(path: DataPath, metric: str, timeout: float) -> str:
    """kubectl's error for `metric`, once it answers one."""
    return str(kubectl_reads(path.kubeconfig, path.metric_path(metric), lambda code, _: code != 0, timeout)[1])


def test_a_hung_refresh_503_is_one_the_doc_explains_and_its_why_line_is_as_the_doc_says(tmp_path: Path) -> None:
    """Every runtime answers 503 while the refresh hangs: the operator looks the message up in the 503 section."""
    with data_path_running(tmp_path, adapter_args=["--workers", "1"]) as path:
        load_served(path)
        with refresh_stopped(path.adapter_url):
            message = refused_message(path, "modelmesh_desired_replicas", timeout=40)
    assert "ServiceUnavailable" in message, message
    explained = the_bullet_for(message)
    if not message.strip().endswith(WHY):
        # The doc may not promise the `why:` line for a 503 that has none.
        assert "no `why:`" in explained, (
            f"the 503 section's bullet for {message!r} does not say it has no `why:` line")
        assert "Every 503 the HPA gets ends with" not in OPERATIONS, (
            f"docs/operations.md says every 503 ends with `why: ...`; this one does not: {message}")


@pytest.fixture(scope="module")
def two_pods_no_gpu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DataPath]:
    """Two pods without a GPU or `target_rps_per_pod`: no capacity signal, so the Ready pods are the floor."""
    with data_path_running(tmp_path_factory.mktemp("no-capacity"), pods=2) as path:
        yield path


def test_every_proposal_and_winner_the_debug_shows_is_one_the_doc_names(two_pods_no_gpu: DataPath) -> None:
    document = debug_document(two_pods_no_gpu)
    text = section("/debug/runtimes: why the adapter decided what it did")
    for term in [*document["proposals"], document["winner"]]:
        assert f"`{term}`" in text, f"/debug shows the term {term!r}, which docs/operations.md's /debug part omits"


def test_the_does_not_scale_down_finding_names_what_debug_shows_for_no_capacity_signal(
        two_pods_no_gpu: DataPath) -> None:
    document = debug_document(two_pods_no_gpu)
    finding = bullet(section("/debug/runtimes: why the adapter decided what it did"), "It does not scale down")
    assert any("no capacity signal" in warning for warning in document["warnings"]), document["warnings"]
    assert "`warnings`" in finding, f"the finding does not send the operator to `warnings`: {finding}"
    assert f'`winner` is `{document["winner"]}`' in finding, f"/debug's winner {document['winner']!r}: {finding}"


def test_every_field_the_doc_names_is_in_the_debug_document(two_pods_no_gpu: DataPath) -> None:
    """The fields of the /debug paragraph exist, in a served runtime's document and a failing source's."""
    served = debug_document(two_pods_no_gpu)
    text = section("/debug/runtimes: why the adapter decided what it did").split("\n\n")[1]
    text = re.sub(r"each with a `reason` \(.*?\), `detail`", "each with a `reason`, `detail`", text, flags=re.S)
    named = set(re.findall(r"`([a-z_]+)`", text))
    two_pods_no_gpu.kill_exporter(0)
    failing = debug_document(two_pods_no_gpu, lambda document: document["source"]["problems"])
    present = keys_of(served) | keys_of(failing) | set(served["proposals"])
    assert named - present == set(), f"docs/operations.md names /debug fields it does not have: {named - present}"


def test_a_stale_pod_reads_as_the_does_not_scale_down_finding_says(two_pods_no_gpu: DataPath) -> None:
    """One of two exporters gone: `reason` carries the doc's quoted words and the pod reads `fresh: false`."""
    finding = bullet(section("/debug/runtimes: why the adapter decided what it did"), "It does not scale down")
    quoted = re.search(r'\("([^"]+)"\)', finding)
    assert quoted is not None, f"the finding quotes no reason any more: update this test: {finding}"
    assert "`fresh: false`" in finding, finding
    two_pods_no_gpu.kill_exporter(0)
    document = debug_document(two_pods_no_gpu, lambda document: quoted[1] in document["reason"])
    assert [pod["name"] for pod in document["pods"] if pod["fresh"] is False] == ["pod-0"], document["pods"]


def signal_states(document: Any, state: str, *, fresh_only: bool = False) -> dict[str, list[str]]:
    """By signal, the Ready pods /debug shows in `state` (`fresh_only`: those whose own data is fresh)."""
    found: dict[str, list[str]] = {}
    for pod in document["pods"]:
        if pod["ready"] and (pod["fresh"] or not fresh_only):
            for signal, said in pod["signals"].items():
                if said == state:
                    found.setdefault(signal, []).append(pod["name"])
    return found


def test_a_dead_exporter_and_a_failing_gpu_collector_read_as_the_does_not_scale_down_finding_says(
        tmp_path: Path) -> None:
    """Three GPU pods; pod-0's GPU collector fails (its exporter answers, without a GPU reading), pod-2's exporter
    is gone. /debug showed both pods' GPU `stale`, but `reason` said `gpu missing on 2 of 3 ready pods` and
    `held` `gpu missing on 2 ready pods`: for the dead exporter, words the doc reads as a GPU collector failing,
    which sent the on-call to the GPU rather than to the exporter that does not answer. Each word now counts the
    pods /debug shows in that state, and the doc's finding quotes the words the on-call reads."""
    gpus = fake_gpus(tmp_path, [40, 70, 90])
    finding = bullet(section("/debug/runtimes: why the adapter decided what it did"), "It does not scale down")
    with data_path_running(tmp_path, pods=3, gpus=gpus) as path:
        debug_document(path)
        gpus[0].set_gpu(0, error=GPU_IS_LOST)
        path.kill_exporter(2)
        document = debug_document(path, lambda document: signal_states(document, "stale").get("gpu") == [
            "pod-0", "pod-2"] and "ready pods stale" in document["reason"])
    reason, held = document["reason"], " ".join(document["held"].values())
    assert [pod["name"] for pod in document["pods"] if not pod["fresh"]] == ["pod-2"], document["pods"]
    assert signal_states(document, "missing") == {}, document["pods"]
    assert "missing on" not in reason and "missing on" not in held, (reason, held)
    assert "1 of 3 ready pods stale" in reason, reason
    assert "gpu stale on 1 of 3 ready pods" in reason, reason  # pod-0: pod-2 is in the count of stale pods
    for words in ("ready pods stale", "gpu stale on N of M ready pods", "`fresh: false`", "`signals.gpu`"):
        assert words in finding, f"the finding does not say {words!r}: {finding}"


def test_a_refused_exporter_detail_says_what_to_change(two_pods_no_gpu: DataPath) -> None:
    """The doc: `detail` (the backend's words and what to change). The commonest cause is no sidecar listening
    at --exporter-port, or a NetworkPolicy."""
    two_pods_no_gpu.kill_exporter(0)
    failing = debug_document(two_pods_no_gpu, lambda document: document["source"]["problems"])
    problem = next(p for p in failing["source"]["problems"] if p["pod"] == "pod-0")
    assert problem["reason"] == "connect", problem
    assert "ssl:" not in problem["detail"], f"an http:// scrape reads as a TLS one: {problem['detail']}"
    assert "--exporter-port" in problem["detail"], f"nothing to change in: {problem['detail']}"


def test_winner_at_the_upper_bound_is_the_word_the_doc_gives(tmp_path: Path) -> None:
    """Two Ready pods (the floor) against a bound of one: the operator is told what `winner` reads."""
    with data_path_running(tmp_path, pods=2, policy={"max_replicas": 1}) as path:
        document = debug_document(path)
    finding = bullet(section("/debug/runtimes: why the adapter decided what it did"), "It asks for more than")
    assert document["proposals"]["ready_pods"] == 2 and document["winner"] != "ready_pods", document["proposals"]
    assert f'`winner` is `{document["winner"]}`' in finding, f"/debug's winner {document['winner']!r}: {finding}"


def table_rows() -> list[list[str]]:
    """The FailedGetExternalMetric table's rows, as cells (answer, meaning, what to do)."""
    text = section("FailedGetExternalMetric on the HPA")
    rows = [[cell.strip() for cell in line.strip().strip("|").split(" | ")]
            for line in text.splitlines() if line.startswith("| ") and not line.startswith("| answer")]
    assert rows, "docs/operations.md's FailedGetExternalMetric table is gone: update this test"
    return rows


def the_row_for(message: str) -> list[str]:
    """The table row whose answer (a status, and the quoted words where it has them) is the one kubectl shows."""
    for row in table_rows():
        status = re.search(r"`(\w+)`", row[0])
        quoted = re.search(r'"([^"]+)"', row[0])
        pattern = (re.escape(quoted[1]).replace(r"\.\.\.", ".*").replace("NS/DEPLOYMENT", r"\S+/\S+")
                   if quoted else "")
        if status and f"({status[1]})" in message and re.search(pattern, message):
            return row
    raise AssertionError(f"no row of docs/operations.md's FailedGetExternalMetric table answers: {message}")


SCALED = "modelmesh-serving-triton"


@pytest.fixture
async def cluster_adapter(tmp_path: Path) -> AsyncIterator[tuple[Path, Path]]:
    """An adapter on the fake Kubernetes API with one runtime, scaled to zero: (kubectl's kubeconfig, its log)."""
    async with cluster_adapter_running(tmp_path, SCALED, ("team-a",)) as kubeconfig:
        yield kubeconfig, tmp_path / "adapter.log"


async def kubectl(kubeconfig: Path, metric: str, selector: str | None = f"deployment%3D{SCALED}") -> str:
    """kubectl's error for the HPA's query, once the adapter has refreshed (else the first-refresh 503)."""
    code, body = await external_metric_once_refreshed(kubeconfig, "team-a", metric, selector)
    assert code != 0, f"served a value for a runtime scaled to zero: {body}"
    return str(body)


async def test_a_runtime_scaled_to_zero_answers_as_the_doc_says(cluster_adapter: tuple[Path, Path]) -> None:
    kubeconfig, log = cluster_adapter
    message = await kubectl(kubeconfig, "modelmesh_desired_replicas")
    assert "(ServiceUnavailable)" in message and "503" in the_row_for(message)[0], message
    explained = the_bullet_for(message)
    assert explained.startswith('- **"scaled to zero"**'), explained
    assert message.strip().endswith(f"why: /debug/runtimes/team-a/{SCALED} on an adapter pod"), message
    lines = [line for line in log.read_text().splitlines() if f"runtime team-a/{SCALED}: " in line]
    assert "logs one INFO line" in explained and [" INFO " in line for line in lines] == [True], lines


async def test_the_table_rows_for_a_wrong_name_a_case_and_a_selector(cluster_adapter: tuple[Path, Path]) -> None:
    kubeconfig, _ = cluster_adapter
    wrong = await kubectl(kubeconfig, "modelmesh_desired_replica")
    assert "one of the four names" in the_row_for(wrong)[2], wrong
    # "case does not matter": the name in capitals is the same metric (here its 503), not a 404.
    assert "case does not matter" in the_row_for(wrong)[2]
    shouted = await kubectl(kubeconfig, "MODELMESH_DESIRED_REPLICAS")
    assert "(ServiceUnavailable)" in shouted and "scaled to zero" in shouted, shouted
    unknown = await kubectl(kubeconfig, "modelmesh_desired_replicas", "deployment%3Dmodelmesh-serving-nothing")
    assert "`modelmesh-serving-<runtime>`" in the_row_for(unknown)[2], unknown
    for selector in (None, "deployment%20in%20(a,b)", f"deployment%3D{SCALED},servingruntime%3Dother"):
        refused = await kubectl(kubeconfig, "modelmesh_desired_replicas", selector)
        assert "exactly one of" in the_row_for(refused)[2], refused


def test_the_self_metrics_the_503_section_names_say_what_it_says(tmp_path: Path) -> None:
    """An exporter gone: the runtime's 503 is the coverage one, `runtime_values_known` reads 0 while it lasts and
    `source_errors_total` counts the failures by their reason, as the 503 section tells the operator to look."""
    text = section("A 503, and what it means")
    said = "`modelmesh_autoscaler_runtime_values_known` is 0 for a runtime while all its values are answered with 503"
    assert said in " ".join(text.split()), "the 503 section no longer says what values_known reads: update this test"
    assert "`modelmesh_autoscaler_source_errors_total` counts failures by reason" in " ".join(text.split())
    with data_path_running(tmp_path, pods=1) as path:
        load_served(path)
        path.kill_exporter(0)
        message = refused_message(path, "modelmesh_request_load", timeout=30)
        exposition = http_get(path.adapter_url + "/metrics")[1]
    assert the_bullet_for(message).startswith('- **"only N of M ready pods fresh'), message
    series = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
              for line in exposition.splitlines() if line and not line.startswith("#")}
    labels = f'{{deployment="{DEPLOYMENT}",namespace="default"}}'
    assert series[f"modelmesh_autoscaler_runtime_values_known{labels}"] == 0, exposition
    assert series['modelmesh_autoscaler_source_errors_total{reason="connect",source="scrape"}'] >= 1, exposition
