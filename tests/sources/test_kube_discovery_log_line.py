"""The line Kubernetes discovery logs when a resync finds runtimes added or removed, as a platform engineer reads
it: `1 runtimes added (...), 0 removed (none)` said an empty part and a wrong plural; each kind found is said,
counted as English counts it, and a kind not found is left out (`log_lists.added_and_removed`)."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.log_lists import NAMED, added_and_removed, few
from autoscaler.model import RuntimeKey
from tests.fakes.kube import FakeKubeApi
from tests.sources.test_kube_pods import NS, TRITON, discovery

MLSERVER = RuntimeKey(NS, "modelmesh-serving-mlserver")


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi() as server:
        yield server


@pytest.mark.parametrize(("runtimes", "said"), [
    ([TRITON], f"Kubernetes discovery: 1 runtime added ({TRITON})"),
    ([MLSERVER, TRITON], f"Kubernetes discovery: 2 runtimes added ({MLSERVER}, {TRITON})"),
], ids=["one", "two"])
async def test_the_first_resync_says_the_runtimes_it_found_and_nothing_of_none_removed(
        kube: FakeKubeApi, caplog: pytest.LogCaptureFixture, runtimes: list[RuntimeKey], said: str) -> None:
    for key in runtimes:
        kube.add_modelmesh_runtime(key.namespace, key.deployment, replicas=1)
    subject = discovery(kube, runtimes=[], discover=True, namespaces=[NS])
    with caplog.at_level(logging.INFO, logger="autoscaler.sources.kube_pods"):
        await subject.start()
        await subject.close()
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Kubernetes discovery: ")
             and " added " in r.getMessage()]
    assert lines == [said]




names = st.lists(st.from_regex(r"[a-z]{1,5}/[a-z]{1,5}", fullmatch=True), unique=True, max_size=2 * NAMED)


@given(added=names, removed=names)
def test_each_kind_found_is_counted_in_english_and_an_empty_one_left_out(added: list[str], removed: list[str]) -> None:
    said = added_and_removed("runtime", added, removed)
    assert "(none)" not in said and not re.search(r"(?<!\d)1 runtimes", said) and not said.startswith("0 ")
    assert (" added (" in said) == bool(added) and (" removed (" in said) == bool(removed)
    if added:
        assert said.startswith(f"{len(added)} runtime{'s' if len(added) > 1 else ''} added ({few(added)})")
    if removed:
        noun = "" if added else f" runtime{'s' if len(removed) > 1 else ''}"
        assert said.endswith(f"{len(removed)}{noun} removed ({few(removed)})")
