"""operations.md says what a runtime gets while pod discovery is out of date for its namespace, as the adapter does
and says it: every value unknown (503), the HPA holding its replicas (no scale-up, no scale-down), the 503 naming pod
discovery. It said the runtime's values "are held" (and a 503 "metric source down"), as if they were served and could
still rise, while a scale-up was blocked as much as a scale-down."""

from __future__ import annotations

from autoscaler.kube.backoff import UNANSWERED_MAX_S
from autoscaler.kube.watch_ends import DROPPED_GRACE_S
from autoscaler.policies.decision import DISCOVERY_DOWN
from autoscaler.sources.kube_watch import DROPPED
from tests.test_docs_repo_paths import REPO

OPERATIONS = (REPO / "docs" / "operations.md").read_text()
FLAT = " ".join(OPERATIONS.split())


def section(title: str) -> str:
    """The text of the section headed `title`, to the next heading of any level, on one line."""
    start = OPERATIONS.index(f"\n### {title}\n")
    end = OPERATIONS.find("\n#", start + 1)
    return " ".join(OPERATIONS[start:end].split())


def test_the_503_section_names_pod_discovery_in_the_adapters_words() -> None:
    text = section("A 503, and what it means")
    head = DISCOVERY_DOWN.split(" (")[0]
    assert f'**"{head}' in text, head


def test_debug_says_a_runtime_of_a_namespace_out_of_date_is_unknown_not_held() -> None:
    text = section("/debug/runtimes: why the adapter decided what it did")
    start = text.index("While pod discovery's pod watch or Deployment read")
    passage = text[start:start + 400]
    assert "values are held" not in passage, passage
    assert "unknown (503)" in passage and "no scale-up, no scale-down" in passage, passage


def test_a_namespace_bound_late_answers_in_the_adapters_words() -> None:
    assert "their values answer 503 \"metric source down\"" not in FLAT
    assert f"their values answer 503 \"{DISCOVERY_DOWN.split(' (')[0]}" in FLAT


def test_the_watches_section_says_how_soon_discovery_is_back_after_an_api_outage() -> None:
    """The pod watch and the Deployment resync wait at most `UNANSWERED_MAX_S` between tries the API server never
    answers; the section said they back off to about 30 s, which after an outage held every runtime at 503 up to
    half a minute longer."""
    text = section("The Kubernetes API: throttling, tokens, watches")
    start = text.index("**An API server outage.**")
    passage = text[start:start + 900]
    assert f"about {UNANSWERED_MAX_S:g} s" in passage, passage
    assert "503" in passage and "pod discovery" in passage, passage


def test_the_namespaced_upgrade_quotes_the_503_the_old_replicas_answer() -> None:
    start = FLAT.index("the old replicas, which read every namespace, are refused (403)")
    passage = FLAT[start:start + 300]
    assert "metric source down" not in passage and "pod discovery out of date" in passage, passage
    assert "no scale-up, no scale-down" in passage, passage


def test_the_watches_section_says_a_dropped_stream_resumed_at_once_keeps_the_runtimes_served() -> None:
    """A pod watch dropped mid-stream and resumed where it left off is no outage (each drop served every runtime of
    the scope 503 until the reopen landed): the section quotes the log line as the adapter says it, with the grace
    it ships."""
    text = section("The Kubernetes API: throttling, tokens, watches")
    start = text.index("A watch that only lost its stream")
    passage = text[start:start + 700]
    said = DROPPED.one.format(scope="namespace NS", detail="").removeprefix("Kubernetes discovery: ")
    assert said.split(", else")[0] in passage, (said, passage)
    assert f"still down {DROPPED_GRACE_S:g} s after the drop" in passage, passage
