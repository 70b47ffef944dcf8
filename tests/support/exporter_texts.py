"""An exporter's `/metrics` text as the sidecar writes it, for tests that feed the adapter's reader (per-model use
present, absent, or garbled), and that reader's sample of one pod (`parse_exporter_text`)."""

from __future__ import annotations

from autoscaler.model import PodSample
from autoscaler.sources.exposition import read_exporter_text
from exporter import names


def load_lines(now: float, rps: float = 10.0) -> list[str]:
    """The load series of an exporter that read ModelMesh at `now`: `rps` requests a second, no queue, 3 models
    loaded at cache use 0.5, and its clock."""
    return [
        f"{names.REQUESTS_PER_SECOND} {rps!r}",
        f"{names.QUEUE_DELAY_SECONDS} 0.0",
        f"{names.CACHE_USED_RATIO} 0.5",
        f"{names.MODELS_LOADED} 3.0",
        f'{names.COLLECTOR_SUCCESS}{{collector="modelmesh"}} 1.0',
        f'{names.LAST_SUCCESS_TIMESTAMP}{{collector="modelmesh"}} {now!r}',
        f"{names.EXPORTER_TIME} {now!r}",
    ]


def exporter_text(pod: int, now: float, model_times: str | None, declared: bool = False) -> str:
    """One exporter's `/metrics` at `now` (no GPU collector): `load_lines`, and ten models of its own last served
    at `model_times` (a number, or garbage as an exporter writes it; a second ago when "recent"); no model series
    when None (declared, without samples, when `declared`)."""
    lines = load_lines(now)
    if declared:
        lines.append(f"# TYPE {names.MODEL_LAST_SERVED_TIMESTAMP} gauge")
    if model_times is not None:
        at = repr(now - 1.0) if model_times == "recent" else model_times
        lines += [f'{names.MODEL_LAST_SERVED_TIMESTAMP}{{{names.MODEL_ID_LABEL}="m-{pod}-{model}"}} {at}'
                  for model in range(10)]
    return "\n".join(lines) + "\n"


def parse_exporter_text(text: str, pod: str, ready: bool, scraped_at: float,
                        created_at: float | None = None) -> PodSample:
    """The signals of one pod (`read_exporter_text`, without the clock offset)."""
    return read_exporter_text(text, pod, ready, scraped_at, created_at).sample


def served_models_count(text: str) -> int:
    """How many models an exporter's answer publishes as recently served (one last-served series each)."""
    return sum(line.startswith(names.MODEL_LAST_SERVED_TIMESTAMP + "{") for line in text.splitlines())
