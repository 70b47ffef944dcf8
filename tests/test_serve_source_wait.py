"""What the line of a refresh late on its metrics source names, as `serve` builds it from its settings: the
source, where it is (no password), and the setting that bounds a wait, as the user gave it
(`autoscaler.running_clock`: a Prometheus that never answers made every refresh late, said as a starved CPU)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Literal

from hypothesis import given
from hypothesis import strategies as st

from autoscaler import cli
from autoscaler.serve_args import settings_from_args
from autoscaler.server import RefreshStack, source_wait
from autoscaler.settings import ServeSettings
from tests.policies.builders import PROPERTIES


def settings(*flags: str, environ: Mapping[str, str] | None = None) -> ServeSettings:
    return settings_from_args(cli.build_parser().parse_args(["serve", *flags]), environ or {})


def test_a_wait_on_prometheus_names_its_url_without_password_and_its_timeout() -> None:
    wait = source_wait(settings("--source", "prometheus", "--prometheus-url", "http://adapter:s3cret@127.0.0.1:22597",
                                "--prometheus-timeout", "50"))
    assert wait.named() == ("Prometheus at http://adapter:***@127.0.0.1:22597 (--prometheus-timeout 50 s; a read is "
                            "given up after 101 s at most)")
    assert wait.deadline_s == 101.0


def test_a_timeout_set_by_its_variable_is_named_by_it() -> None:
    wait = source_wait(settings("--source", "prometheus", "--prometheus-url", "http://127.0.0.1:22597",
                                environ={"AUTOSCALER_PROMETHEUS_TIMEOUT": "50"}))
    assert "(AUTOSCALER_PROMETHEUS_TIMEOUT 50 s;" in wait.named()


def test_a_wait_on_the_scrape_is_bounded_by_the_refresh_interval() -> None:
    wait = source_wait(settings("--refresh-interval", "2"))
    assert wait.deadline_s == 2.0
    assert wait.named().startswith("the scrape of the exporters (its deadline, --refresh-interval 2 s;")


def test_the_refresh_stack_names_its_source_so(tmp_path: Path) -> None:
    targets = tmp_path / "targets.yaml"
    targets.write_text("runtimes: []\n")
    stack = RefreshStack(settings("--targets", str(targets), "--source", "prometheus", "--prometheus-url",
                                  "http://127.0.0.1:22597", "--prometheus-timeout", "50"))
    assert stack.refresher.source_wait.named().startswith("Prometheus at http://127.0.0.1:22597 (--prometheus-timeout")


@PROPERTIES
@given(interval_s=st.floats(0.1, 3600.0), timeout_s=st.floats(0.1, 3600.0),
       source=st.sampled_from(["prometheus", "scrape"]))
def test_the_stall_limit_outlasts_a_refresh_that_waits_its_source_to_the_deadline(
        interval_s: float, timeout_s: float, source: Literal["scrape", "prometheus"]) -> None:
    """A source that answers slowly or not at all must not get the adapter restarted: its values are replaced
    at the latest an interval (the sleep after a quick refresh) plus the source's deadline after the last, and
    /livez fails only past the stall limit. At --refresh-interval 0.2 the limit was 10.6 s while a refresh whose
    Prometheus trickled its answers was given up at 11 s, publishing 11.2 s after the last."""
    served = replace(ServeSettings(), source=source, refresh_interval_s=interval_s, prometheus_timeout_s=timeout_s,
                     prometheus_url="http://127.0.0.1:22597")
    assert served.stalled_after_s > interval_s + source_wait(served).deadline_s


def test_a_trickling_prometheus_at_a_short_interval_is_not_a_stall() -> None:
    served = settings("--source", "prometheus", "--prometheus-url", "http://127.0.0.1:22597",
                      "--refresh-interval", "0.2")
    assert served.stalled_after_s > 0.2 + 11.0  # the default 5 s timeout: a round given up after 11 s
