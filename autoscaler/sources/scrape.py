"""The default source: scrape every pod's exporter directly, no Prometheus needed.

All pods of all runtimes are scraped concurrently, bounded by `concurrency` so a 10,000-pod fleet does not
open 10,000 sockets at once, and each scrape has its own timeout so one hung pod cannot delay a refresh.
A pod whose scrape fails keeps its last good sample: the policies see it growing stale, never idle.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace

import aiohttp

from autoscaler.model import PodSample, RuntimeKey, RuntimeSnapshot
from autoscaler.sources.base import PodDiscovery, PodTarget, RuntimeInventory
from autoscaler.sources.exposition import ExpositionError, parse_exporter_text

log = logging.getLogger(__name__)


class ScrapeSource:
    name = "scrape"

    def __init__(
        self,
        discovery: PodDiscovery,
        *,
        timeout_s: float = 5.0,
        concurrency: int = 64,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._discovery = discovery
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._limit = asyncio.Semaphore(concurrency)
        self._concurrency = concurrency
        self._clock = clock
        self._session: aiohttp.ClientSession | None = None
        self._last_good: dict[tuple[RuntimeKey, str], PodSample] = {}
        self._failing: set[tuple[RuntimeKey, str]] = set()
        self.errors: Counter[str] = Counter()

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._concurrency, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout)
        return self._session

    async def collect(self, now: float) -> list[RuntimeSnapshot]:
        inventory = self._discovery.inventory()
        source_ok = self._discovery.healthy
        jobs = [
            self._pod_sample(runtime.key, pod) for runtime in inventory.values() for pod in runtime.pods
        ]
        samples = await asyncio.gather(*jobs)
        by_runtime: dict[RuntimeKey, list[PodSample]] = {key: [] for key in inventory}
        for key_and_sample in samples:
            key, sample = key_and_sample
            by_runtime[key].append(sample)
        self._forget_vanished(inventory)
        return [
            RuntimeSnapshot(
                key=key,
                pods=tuple(by_runtime[key]),
                taken_at=now,
                source_ok=source_ok,
                replicas=runtime.replicas,
                annotations=runtime.annotations,
            )
            for key, runtime in inventory.items()
        ]

    async def _pod_sample(self, key: RuntimeKey, pod: PodTarget) -> tuple[RuntimeKey, PodSample]:
        remembered = self._last_good.get((key, pod.name))
        if remembered is None:
            fallback = PodSample(name=pod.name, ready=pod.ready, created_at=pod.created_at)
        else:
            fallback = _with_readiness(remembered, pod)
        if pod.url is None or not pod.ready:
            return key, fallback
        async with self._limit:
            try:
                sample = await self._scrape(pod, key)
            except _PodScrapeError as error:
                self.errors[error.reason] += 1
                if (key, pod.name) not in self._failing:
                    self._failing.add((key, pod.name))
                    log.warning("scrape of %s/%s failed (%s): %s; holding its last good sample",
                                key, pod.name, error.reason, error)
                return key, fallback
        if (key, pod.name) in self._failing:
            self._failing.discard((key, pod.name))
            log.info("scrape of %s/%s recovered", key, pod.name)
        if sample.sampled_at is None and remembered is not None:
            return key, fallback
        self._last_good[(key, pod.name)] = sample
        return key, sample

    async def _scrape(self, pod: PodTarget, key: RuntimeKey) -> PodSample:
        assert pod.url is not None
        try:
            async with self._client().get(pod.url) as response:
                if response.status != 200:
                    raise _PodScrapeError("http", f"HTTP {response.status} from {pod.url}")
                text = await response.text()
        except TimeoutError as error:
            raise _PodScrapeError("timeout", f"no answer from {pod.url} in {self._timeout.total} s") from error
        except aiohttp.ClientPayloadError as error:
            raise _PodScrapeError("parse", f"incomplete body from {pod.url}: {error}") from error
        except aiohttp.ClientError as error:
            raise _PodScrapeError("connect", f"{pod.url}: {error}") from error
        except UnicodeDecodeError as error:
            raise _PodScrapeError("parse", f"{pod.url}: {error}") from error
        try:
            sample = parse_exporter_text(text, pod.name, pod.ready, self._clock())
        except ExpositionError as error:
            raise _PodScrapeError("parse", f"{pod.url}: {error}") from error
        return replace(sample, created_at=pod.created_at)

    def _forget_vanished(self, inventory: dict[RuntimeKey, RuntimeInventory]) -> None:
        known = {(key, pod.name) for key, runtime in inventory.items() for pod in runtime.pods}
        for entry in [entry for entry in self._last_good if entry not in known]:
            del self._last_good[entry]
        self._failing &= known

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


class _PodScrapeError(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


def _with_readiness(sample: PodSample, pod: PodTarget) -> PodSample:
    return sample if sample.ready == pod.ready else replace(sample, ready=pod.ready)
