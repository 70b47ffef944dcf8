"""GPU busy ratio and memory per GPU (DESIGN §3), sampled from NVML in the background, served from memory.

A background loop (`run`) calls NVML once a second; `collect()` only formats the last pass, so a scrape never
waits on the driver and scraping more often costs NVML nothing. Busy is the mean of NVML's own utilization
samples (`nvmlDeviceGetSamples`, one every 1/6 s to 1 s depending on the GPU) whose timestamps fall in the
last `window_s` seconds: every sample the driver took counts once, whatever our loop's timing. Where a
device has no samples we fall back to `nvmlDeviceGetUtilizationRates`, read once per pass.

No GPU is a state, not a crash. Without a library, with init failing, or with no GPU visible, there are no
GPU series and `collector_success{collector="gpu"}` is 0; a lost GPU drops its own series (the others stay)
and also counts as a failure. A MIG device has memory series but no busy ratio (NVML measures no
utilization per MIG device), which is reported as a failure too, so a dashboard shows why busy is missing.
Each failed try adds to `scrape_errors_total{reason="nvml"}` (`internal` for a bug) and the outage is logged
once (CollectorHealth). NVML is re-initialised, which re-enumerates the GPUs, after 1 s, then 2, 4, ... up
to 30 s between tries (while NVML is down, the passes in between try nothing and count nothing), so a GPU
that comes back (driver reload, device plugin) is found again without spending CPU on a node that has none.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from exporter import names, nvml
from exporter.collectors.health import CollectorHealth

log = logging.getLogger(__name__)

_MAX_CLOCK_SKEW_S: Final = 60.0
"""NVML stamps samples with the host's wall clock; beyond this difference from ours we cannot window
them and use utilization rates instead."""
_MAX_SAMPLES: Final = 10_000
"""Bound on a GPU's kept samples whatever NVML's rate (60 at 6 Hz over the default 10 s window)."""


@dataclass(frozen=True)
class GpuReading:
    """What one pass learnt about one GPU or MIG device; None where NVML could not say."""

    label: str
    uuid: str
    busy_ratio: float | None
    memory_used_bytes: int | None
    memory_total_bytes: int | None


@dataclass
class _History:
    """Recent utilization of one device, by UUID, kept across passes (and across re-initialisation)."""

    samples: deque[tuple[int, float]] = field(default_factory=lambda: deque(maxlen=_MAX_SAMPLES))
    """(timestamp µs, percent) in the order received."""
    last_seen_us: int = 0
    """Newest NVML sample timestamp received; nvmlDeviceGetSamples returns only newer ones."""
    use_rates: bool = False
    """The device has no usable samples: read nvmlDeviceGetUtilizationRates each pass instead."""


@dataclass(frozen=True)
class _Outcome:
    """One pass's result, applied on the caller's thread: readings to serve and what went wrong."""

    readings: tuple[GpuReading, ...]
    problems: tuple[str, ...]
    duration_s: float | None = None
    """How long the NVML work took (health's collector_duration_seconds)."""
    reason: str = names.REASON_NVML


class GpuCollector(Collector):
    """Samples NVML in a background loop and serves `modelmesh_pod_gpu_*` series from the last pass."""

    def __init__(
        self,
        health: CollectorHealth,
        window_s: float = 10.0,
        uuids: Sequence[str] | None = None,
        clock: Callable[[], float] = time.time,
        *,
        retry_initial_s: float = 1.0,
        retry_max_s: float = 30.0,
        open_nvml: Callable[[], nvml.NvmlSession] = nvml.NvmlSession.open,
    ) -> None:
        """Configure; touches no NVML until the first `sample_once`.

        window_s: seconds of NVML samples averaged into busy (DESIGN `gpu_window`): long enough to smooth
          a bursty inference load, short next to the adapter's 15 s refresh.
        uuids: `--gpu-uuids`; a GPU UUID selects its MIG devices too. None or empty: every visible GPU.
        clock: Unix time in seconds; must agree with NVML's sample timestamps (the wall clock).
        retry_initial_s, retry_max_s: backoff between NVML re-initialisations while NVML or a GPU is
          missing; it doubles per failed try. 30 s bounds how long a returned GPU stays unreported.
        open_nvml: how to start an NVML session (tests may pass a stand-in).
        """
        if not window_s > 0:
            raise ValueError(f"window_s must be positive, not {window_s}")
        if not 0 < retry_initial_s <= retry_max_s:
            raise ValueError("need 0 < retry_initial_s <= retry_max_s")
        self._health = health
        self._window_s = window_s
        self._uuids = tuple(uuids or ())
        self._clock = clock
        self._retry_initial_s = retry_initial_s
        self._retry_max_s = retry_max_s
        self._open_nvml = open_nvml
        # NVML state: used only under _lock, by one pass at a time.
        self._lock = threading.Lock()
        self._session: nvml.NvmlSession | None = None
        self._devices: tuple[nvml.Device, ...] = ()
        self._histories: dict[str, _History] = {}
        self._standing_problems: tuple[str, ...] = ()
        self._reconnect_at = -math.inf
        self._retry_delay_s = retry_initial_s
        self._last_unexpected: str | None = None
        # What collect() serves: replaced whole, never mutated, so a scrape needs no lock.
        self._readings: tuple[GpuReading, ...] = ()
        health.register(names.COLLECTOR_GPU)

    # ---- serving ----

    def describe(self) -> Iterable[Metric]:
        """The families this collector may yield, so a registry knows its names before any GPU is seen."""
        return self._families()

    def collect(self) -> Iterable[Metric]:
        """Fresh families from the last pass; never calls NVML. A family with no series is left out."""
        busy, used, total = self._families()
        for reading in self._readings:
            labels = [reading.label, reading.uuid]
            if reading.busy_ratio is not None:
                busy.add_metric(labels, reading.busy_ratio)
            if reading.memory_used_bytes is not None:
                used.add_metric(labels, float(reading.memory_used_bytes))
            if reading.memory_total_bytes is not None:
                total.add_metric(labels, float(reading.memory_total_bytes))
        for family in (busy, used, total):
            if family.samples:
                yield family

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily]:
        busy = GaugeMetricFamily(
            names.GPU_BUSY_RATIO,
            "Fraction of the sample window in which a kernel ran on the GPU (NVML utilization samples "
            "averaged over the window), 0..1.",
            labels=["gpu", "uuid"],
        )
        used = GaugeMetricFamily(
            names.GPU_MEMORY_USED_BYTES, "GPU memory in use (total minus free), in bytes.",
            labels=["gpu", "uuid"],
        )
        total = GaugeMetricFamily(
            names.GPU_MEMORY_TOTAL_BYTES, "GPU memory size, in bytes.", labels=["gpu", "uuid"],
        )
        return busy, used, total

    @property
    def readings(self) -> tuple[GpuReading, ...]:
        """The last pass's readings, as served."""
        return self._readings

    # ---- sampling ----

    def sample_once(self) -> None:
        """One NVML pass (re-initialising first when due), then publish and report health."""
        outcome = self._measure()
        if outcome is not None:
            self._apply(outcome)

    async def run(self, interval_s: float = 1.0) -> None:
        """Sample every `interval_s` until cancelled; shut NVML down on the way out.

        The NVML pass runs in a worker thread: it is microseconds when all is well, but nvmlInit on a node
        without persistence mode and calls to a GPU falling off the bus can block for seconds, which must
        not stall `/metrics` or the ModelMesh scrape. The hop costs ~100 µs a second. Health and the served
        readings are updated back on the event loop, so only this loop's thread ever touches them.
        """
        if not interval_s > 0:
            raise ValueError(f"interval_s must be positive, not {interval_s}")
        try:
            while True:
                try:
                    outcome = await asyncio.to_thread(self._measure)
                except Exception as error:  # a bug or a surprise from ctypes must not end GPU metrics
                    outcome = self._after_unexpected(error)
                if outcome is not None:
                    self._apply(outcome)
                await asyncio.sleep(interval_s)
        finally:
            self.close()

    def _after_unexpected(self, error: Exception) -> _Outcome:
        """Log an unexpected error (with traceback, once per kind), drop NVML and retry it with backoff."""
        detail = f"unexpected {type(error).__name__}: {error}"
        if detail != self._last_unexpected:
            log.exception("GPU sampling failed: %s", detail)
            self._last_unexpected = detail
        with self._lock:
            self._disconnect()
            self._schedule_reconnect(self._clock())
        return _Outcome((), (detail,), reason=names.REASON_INTERNAL)

    def close(self) -> None:
        """Shut NVML down and stop serving GPU series; waits for a pass in flight. Safe to call twice."""
        with self._lock:
            self._disconnect()
            self._devices = ()
            self._reconnect_at = -math.inf  # a later pass starts NVML again at once
        self._readings = ()

    def _apply(self, outcome: _Outcome) -> None:
        self._readings = outcome.readings
        if outcome.duration_s is not None:
            self._health.observe_duration(names.COLLECTOR_GPU, outcome.duration_s)
        if outcome.problems:
            self._health.failed(names.COLLECTOR_GPU, outcome.reason, "; ".join(outcome.problems))
        else:
            self._health.succeeded(names.COLLECTOR_GPU)

    def _measure(self) -> _Outcome | None:
        """One pass; None when NVML is down and its next try is not due (nothing was attempted)."""
        with self._lock:
            now = self._clock()
            if self._session is None and now < self._reconnect_at:
                return None
            started = time.perf_counter()
            outcome = self._connect_and_read(now)
            return replace(outcome, duration_s=time.perf_counter() - started)

    def _connect_and_read(self, now: float) -> _Outcome:
        if self._session is None or now >= self._reconnect_at:
            failure = self._connect()
            if failure is not None:
                self._schedule_reconnect(now)
                return _Outcome((), (failure,))
        return self._read_devices(now)

    def _connect(self) -> str | None:
        """(Re-)initialise NVML and choose the devices; returns why it failed, or None."""
        self._disconnect()
        try:
            session = self._open_nvml()
        except nvml.NvmlError as error:
            return str(error)
        try:
            inventory = session.inventory()
            driver = session.driver_version()
        except nvml.NvmlError as error:
            session.close()
            return str(error)
        selection = nvml.select_devices(inventory.devices, self._uuids)
        problems = [f"configured GPU {uuid} is not visible" for uuid in selection.missing]
        if not self._uuids or selection.missing:
            problems.extend(str(failure) for failure in inventory.failures)
        if not selection.devices and not problems:
            problems.append("NVML sees no GPU")
        self._session = session
        self._devices = selection.devices
        self._standing_problems = tuple(problems)
        self._reconnect_at = math.inf
        wanted = {device.uuid for device in selection.devices}
        self._histories = {uuid: h for uuid, h in self._histories.items() if uuid in wanted}
        log.info(
            "NVML initialised (driver %s): sampling %s", driver,
            ", ".join(f"GPU {d.label} {d.uuid} ({d.name})" for d in selection.devices) or "no GPU",
        )
        return None

    def _disconnect(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    def _schedule_reconnect(self, now: float) -> None:
        self._reconnect_at = now + self._retry_delay_s
        self._retry_delay_s = min(self._retry_delay_s * 2, self._retry_max_s)

    def _read_devices(self, now: float) -> _Outcome:
        """Read every chosen device; a lost one is dropped until the next re-initialisation."""
        assert self._session is not None
        readings: list[GpuReading] = []
        problems = list(self._standing_problems)
        lost: list[str] = []
        for device in self._devices:
            try:
                reading, unsupported = self._read_device(self._session, device, now)
            except nvml.NvmlUnavailable as error:
                # NVML itself is gone (driver unloaded, uninitialised under us): start over.
                self._disconnect()
                self._schedule_reconnect(now)
                return _Outcome((), (str(error),))
            except nvml.NvmlError as error:
                lost.append(device.uuid)
                problems.append(str(error))
                continue
            readings.append(reading)
            problems.extend(unsupported)
        if lost:
            self._devices = tuple(d for d in self._devices if d.uuid not in lost)
            self._standing_problems += tuple(f"GPU {uuid} dropped until NVML re-initialises" for uuid in lost)
        if self._standing_problems:
            if self._reconnect_at == math.inf:
                self._schedule_reconnect(now)
        else:
            self._retry_delay_s = self._retry_initial_s  # NVML and every chosen GPU answer again
        return _Outcome(tuple(readings), tuple(problems))

    def _read_device(
        self, session: nvml.NvmlSession, device: nvml.Device, now: float,
    ) -> tuple[GpuReading, list[str]]:
        """Busy and memory of one device; an unsupported value is None plus a problem, other errors raise."""
        unsupported: list[str] = []
        try:
            busy = self._busy_ratio(session, device, now)
        except nvml.NotSupported as error:
            busy = None
            unsupported.append(f"no utilization for GPU {device.label} {device.uuid}: {error}")
        try:
            memory: nvml.MemoryInfo | None = session.memory(device)
        except nvml.NotSupported as error:
            memory = None
            unsupported.append(f"no memory info for GPU {device.label} {device.uuid}: {error}")
        reading = GpuReading(
            label=device.label,
            uuid=device.uuid,
            busy_ratio=busy,
            memory_used_bytes=None if memory is None else memory.used_bytes,
            memory_total_bytes=None if memory is None else memory.total_bytes,
        )
        return reading, unsupported

    def _busy_ratio(self, session: nvml.NvmlSession, device: nvml.Device, now: float) -> float:
        """Mean utilization over the window, 0..1; raises NotSupported when neither NVML query works."""
        history = self._histories.setdefault(device.uuid, _History())
        now_us = round(now * 1_000_000)
        cutoff_us = now_us - round(self._window_s * 1_000_000)
        if not history.use_rates:
            try:
                samples = session.utilization_samples(device, history.last_seen_us)
            except nvml.NotSupported:
                log.info("GPU %s %s has no utilization samples; reading utilization rates", device.label,
                         device.uuid)
                history.use_rates = True
                samples = []
            if samples:
                newest = samples[-1].timestamp_us
                if abs(newest - now_us) > _MAX_CLOCK_SKEW_S * 1_000_000:
                    log.warning(
                        "GPU %s: NVML sample time %.0f s from ours; reading utilization rates instead",
                        device.label, (newest - now_us) / 1_000_000,
                    )
                    history.use_rates = True
                    history.samples.clear()
                else:
                    history.last_seen_us = max(history.last_seen_us, newest)
                    history.samples.extend((s.timestamp_us, s.percent) for s in samples)
        in_window = [(t, p) for t, p in history.samples if t > cutoff_us]
        if history.use_rates or not in_window:
            # Rates mode, or samples stopped coming: the driver's latest reading stands in for the window.
            reading = (now_us, session.utilization_rate(device))
            in_window.append(reading)
        history.samples.clear()
        history.samples.extend(in_window)
        mean = sum(p for _t, p in in_window) / len(in_window)
        return min(1.0, max(0.0, mean / 100.0))
