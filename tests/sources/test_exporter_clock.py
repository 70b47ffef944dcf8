"""An exporter on a node whose clock is off: its timestamps are read on its own clock.

The exporter reports when its collectors last succeeded on the node's clock, and since this change also that
clock at the scrape (`modelmesh_exporter_time_seconds`). Without it, a node a minute behind made every sample
look a minute old (`max_staleness_s` is 45 s): the pod stale for good, and its runtime held, never scaled
down. The examples below are worked by hand on a scrape at t = 2,000,000,000 on the adapter's clock.
"""

from __future__ import annotations

import pytest

from autoscaler.policies.aggregation import aggregate
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.sources.exposition import read_exporter_text
from exporter import names

SCRAPED_AT = 2_000_000_000.0


def exporter_text(modelmesh_ok_at: float, gpu_ok_at: float, clock: float | None) -> str:
    lines = [
        f'{names.GPU_BUSY_RATIO}{{gpu="0",uuid="GPU-0"}} 0.5',
        f"{names.REQUESTS_PER_SECOND} 20.0",
        f"{names.QUEUE_DELAY_SECONDS} 0.0",
        f"{names.CACHE_USED_RATIO} 0.5",
        f'{names.COLLECTOR_SUCCESS}{{collector="modelmesh"}} 1.0',
        f'{names.LAST_SUCCESS_TIMESTAMP}{{collector="gpu"}} {gpu_ok_at!r}',
        f'{names.LAST_SUCCESS_TIMESTAMP}{{collector="modelmesh"}} {modelmesh_ok_at!r}',
    ]
    if clock is not None:
        lines.append(f"{names.EXPORTER_TIME} {clock!r}")
    return "\n".join(lines) + "\n"


def test_a_node_two_minutes_behind_reads_as_fresh_as_it_is() -> None:
    # The node's clock reads 1,999,999,880 at the scrape; its collectors succeeded 2 s and 5 s before that.
    text = exporter_text(modelmesh_ok_at=1_999_999_878.0, gpu_ok_at=1_999_999_875.0, clock=1_999_999_880.0)

    sample, offset, *_ = read_exporter_text(text, "pod-a", True, SCRAPED_AT)

    assert offset == -120.0
    assert sample.sampled_at == 1_999_999_998.0  # 2 s old, not 122 s
    assert sample.gpu_sampled_at == 1_999_999_995.0
    assert aggregate([sample], RuntimePolicy(), SCRAPED_AT).n == 1  # the pod counts: fresh


def test_a_node_ahead_with_a_hung_collector_reads_as_stale_as_it_is() -> None:
    # The node's clock runs 300 s ahead; its ModelMesh collector last succeeded 100 s before the scrape.
    text = exporter_text(modelmesh_ok_at=2_000_000_200.0, gpu_ok_at=2_000_000_299.0, clock=2_000_000_300.0)

    sample, offset, *_ = read_exporter_text(text, "pod-a", True, SCRAPED_AT)

    assert offset == 300.0
    assert sample.sampled_at == 1_999_999_900.0  # 100 s old: stale, where the cap at the scrape time said fresh
    assert aggregate([sample], RuntimePolicy(), SCRAPED_AT).n == 0


@pytest.mark.parametrize("clock", [None, 2_000_000_000.6, 1_999_999_999.4], ids=["not reported", "0.6 s ahead",
                                                                                  "0.6 s behind"])
def test_a_clock_within_a_second_or_not_reported_leaves_the_times_as_reported(clock: float | None) -> None:
    text = exporter_text(modelmesh_ok_at=1_999_999_990.0, gpu_ok_at=1_999_999_991.0, clock=clock)

    sample, offset, *_ = read_exporter_text(text, "pod-a", True, SCRAPED_AT)

    assert offset == 0.0
    assert (sample.sampled_at, sample.gpu_sampled_at) == (1_999_999_990.0, 1_999_999_991.0)


def test_a_garbled_clock_is_ignored_rather_than_trusted() -> None:
    text = exporter_text(modelmesh_ok_at=1_999_999_990.0, gpu_ok_at=1_999_999_991.0, clock=float("nan"))

    sample, offset, *_ = read_exporter_text(text, "pod-a", True, SCRAPED_AT)

    assert offset == 0.0
    assert sample.sampled_at == 1_999_999_990.0


def test_a_slow_scrape_is_not_a_clock_that_is_off() -> None:
    # Sent 3 s before it was read; the exporter, on a right clock, answered 1.5 s before the read.
    text = exporter_text(modelmesh_ok_at=1_999_999_990.0, gpu_ok_at=1_999_999_991.0, clock=1_999_999_998.5)

    sample, offset, *_ = read_exporter_text(text, "pod-a", True, SCRAPED_AT, requested_at=1_999_999_997.0)

    assert offset == 0.0
    assert sample.sampled_at == 1_999_999_990.0


def test_an_offset_found_over_a_slow_scrape_errs_towards_older_data() -> None:
    # The same 3 s scrape from a node 120 s behind: it answered at 1,999,999,998.5 by the adapter's clock,
    # 1,999,999,878.5 by its own, its collection 2 s before that (1,999,999,996.5 by the adapter's clock).
    # Measured from the send the offset is -118.5 s, so the collection reads 1.5 s older than it was, never
    # fresher.
    text = exporter_text(modelmesh_ok_at=1_999_999_876.5, gpu_ok_at=1_999_999_876.5, clock=1_999_999_878.5)

    sample, offset, *_ = read_exporter_text(text, "pod-a", True, SCRAPED_AT, requested_at=1_999_999_997.0)

    assert offset == -118.5
    assert sample.sampled_at == 1_999_999_995.0
