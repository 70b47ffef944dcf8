"""GPU busy ratio and memory per GPU (docs/design.md), sampled from NVML in the background, served from memory.

A background loop (`run`) asks a `GpuSampler` (`exporter.gpu_sampler`) for one NVML pass a second;
`collect()` only formats the last pass, so a scrape never waits on the driver and scraping more often costs
NVML nothing. Busy is the mean of NVML's own utilization samples over the last `window_s` seconds
(`exporter.gpu_busy`).

No GPU is a state, not a crash. Without a library, with init failing, or with no GPU visible, there are no GPU
series and `collector_success{collector="gpu"}` is 0; a lost GPU drops its own series (the others stay) and also
counts as a failure, as does one no longer found after a driver reload. A MIG device has memory series but no busy
ratio (NVML measures no utilization per MIG device), and so has a whole GPU whose utilization NVML never measured
(NOT_SUPPORTED from its first read and for 5 minutes, `UNMEASURED_AFTER_S`, a failure until then: a GPU being reset
refuses too): beside a device with one that is logged once, not a failure (that busy stays fresh); with no busy
ratio at all the adapter has nothing to scale the pod on and the collector fails, so a dashboard and the alert show
why (read busy from DCGM). A GPU switched into or out of MIG mode is
enumerated again in the pass that meets it, so its MIG devices (or the whole GPU) are read without a restart; MIG
devices created or destroyed while MIG mode stays on are found within 10 s (`MIG_RECHECK_S`), a destroyed one at
once. Each failed try adds to `scrape_errors_total{reason="nvml"}` (`internal` for a bug) and the outage is logged
once (CollectorHealth), and again at once for an NVML error code its lines have not named. NVML is re-initialised
with backoff, 1 s up to 30 s between tries (the passes in between try nothing and count nothing), so a GPU that
comes back is found again. """

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar, cast

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from exporter import names, nvml, nvml_errors
from exporter.collectors.health import CollectorHealth
from exporter.gpu_readings import GpuReading, PassOutcome
from exporter.gpu_sampler import GpuSampler

log = logging.getLogger(__name__)

OVERRUN_INTERVALS = 5
OVERRUN_MIN_S = 5.0
"""A pass running longer than max(5 intervals, 5 s) has hung: nvmlInit without persistence mode can take a
few seconds legitimately, a GPU falling off the bus blocks for much longer."""
STOP_WAIT_S = 1.0
"""On a stop, how long a pass in flight may take to end (so NVML is shut down) before it is left behind."""

T = TypeVar("T")


class GpuCollector(Collector):
    """Samples NVML in a background loop and serves `modelmesh_pod_gpu_*` series from the last pass."""

    def __init__(
        self,
        health: CollectorHealth,
        window_s: float = 10.0,
        uuids: Sequence[str] | None = None,
        clock: Callable[[], float] = time.time,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        retry_initial_s: float = 1.0,
        retry_max_s: float = 30.0,
        open_nvml: Callable[[], nvml.NvmlSession] = nvml.NvmlSession.open,
    ) -> None:
        """Configure; touches no NVML until the first `sample_once`.

        window_s: seconds of NVML samples averaged into busy (`gpu_window`, docs/design.md): long enough to smooth
          a bursty inference load, short next to the adapter's 15 s refresh.
        uuids: `--gpu-uuids`; a GPU UUID selects its MIG devices too. None or empty: every visible GPU.
        clock: Unix time in seconds; must agree with NVML's sample timestamps (the wall clock). The GPU success
          time handed to `health` is read from it (when the samples were read), so it should be health's clock.
        monotonic: seconds on a clock no step of the wall clock moves (NTP, a resumed VM), timing the intervals:
          the re-initialisation backoff, the MIG re-listing, refused queries asked again. A test passes its own
          clock, stepped with `clock` or apart from it.
        retry_initial_s, retry_max_s: backoff between NVML re-initialisations while NVML or a GPU is
          missing; it doubles per failed try. 30 s bounds how long a returned GPU stays unreported.
        open_nvml: how to start an NVML session (tests may pass a stand-in).
        """
        if not window_s > 0:
            raise ValueError(f"window_s must be positive, not {window_s}")
        if not 0 < retry_initial_s <= retry_max_s:
            raise ValueError("need 0 < retry_initial_s <= retry_max_s")
        self._health = health
        self._sampler = GpuSampler(
            window_s=window_s,
            uuids=tuple(uuids or ()),
            clock=clock,
            monotonic=monotonic,
            retry_initial_s=retry_initial_s,
            retry_max_s=retry_max_s,
            open_nvml=open_nvml,
        )
        self._last_unexpected: str | None = None
        self._abandoned_pass = False
        """A stop found an NVML call that did not return: NVML is left to the process exit, not shut down."""
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
            "averaged over the window), 0..1. The whole GPU's: on a GPU shared by time-slicing or MPS, the same "
            "in every pod sharing it.",
            labels=list(names.GPU_LABELS),
        )
        used = GaugeMetricFamily(
            names.GPU_MEMORY_USED_BYTES, "GPU memory in use (total minus free), in bytes.",
            labels=list(names.GPU_LABELS),
        )
        total = GaugeMetricFamily(
            names.GPU_MEMORY_TOTAL_BYTES, "GPU memory size, in bytes.", labels=list(names.GPU_LABELS),
        )
        return busy, used, total

    @property
    def readings(self) -> tuple[GpuReading, ...]:
        """The last pass's readings, as served."""
        return self._readings

    # ---- sampling ----

    def sample_once(self) -> None:
        """One NVML pass (re-initialising first when due), then publish and report health."""
        outcome = self._sampler.measure()
        if outcome is not None:
            self._apply(outcome)

    async def run(self, interval_s: float = 1.0) -> None:
        """Sample every `interval_s` until cancelled; shut NVML down on the way out.

        The NVML pass runs in a thread of its own: it is microseconds when all is well, but nvmlInit on a node
        without persistence mode and calls to a GPU falling off the bus can block for seconds, which must
        not stall `/metrics` or the ModelMesh scrape. The hop costs ~100 µs a second. Health and the served
        readings are updated back on the event loop, so only this loop's thread ever touches them.
        """
        if not interval_s > 0:
            raise ValueError(f"interval_s must be positive, not {interval_s}")
        overrun_s = max(OVERRUN_INTERVALS * interval_s, OVERRUN_MIN_S)
        try:
            while True:
                outcome = await self._one_pass(overrun_s)
                if outcome is not None:
                    self._apply(outcome)
                await asyncio.sleep(interval_s)
        finally:
            if self._abandoned_pass:
                # close() would wait for the hung call's lock: stop serving, and leave NVML to the exit.
                self._readings = ()
                log.warning("stopping while an NVML call has not returned: NVML is not shut down")
            else:
                self.close()

    async def _one_pass(self, overrun_s: float) -> PassOutcome | None:
        """One NVML pass in a worker thread. A pass still running after `overrun_s` (a hung driver call)
        stops the GPU series at once and counts a timeout, so the GPU reads as missing, not as the last good
        value with a success timestamp that merely ages (docs/design.md, Missing data); the loop then waits
        for the pass (a thread cannot be cancelled) instead of piling more passes onto a stuck driver. A stop
        waits `STOP_WAIT_S` at most for the pass, so a hung driver never holds up the exporter's exit.

        The pass is only ever waited on through `asyncio.wait`, which a cancel leaves running: awaiting it directly
        after the overrun let the stop's cancel cancel the pass's future too, so the stop took a pass hung in the
        driver for one that had ended and shut NVML down behind it, waiting on the hung call's lock until the
        kubelet's SIGKILL."""
        task = _in_daemon_thread(self._sampler.measure)
        try:
            done, _ = await asyncio.wait({task}, timeout=overrun_s)
            if not done:
                self._readings = ()
                self._health.failed(
                    names.COLLECTOR_GPU, names.REASON_TIMEOUT, f"NVML pass still running after {overrun_s:.0f} s",
                    served="no GPU series until it returns",
                )
                await asyncio.wait({task})
            return task.result()
        except asyncio.CancelledError:
            done, _ = await asyncio.wait({task}, timeout=STOP_WAIT_S)
            if not done:
                task.cancel()
                self._abandoned_pass = True
            raise
        except Exception as error:  # a bug or a surprise from ctypes must not end GPU metrics
            return self._after_unexpected(error)

    def _after_unexpected(self, error: Exception) -> PassOutcome:
        """Log an unexpected error (with traceback, once per kind), drop NVML and retry it with backoff."""
        detail = f"unexpected {type(error).__name__}: {error}"
        if detail != self._last_unexpected:
            log.exception("GPU sampling failed: %s", detail)
            self._last_unexpected = detail
        self._sampler.restart_later()
        return PassOutcome((), (detail,), reason=names.REASON_INTERNAL)

    def close(self) -> None:
        """Shut NVML down and stop serving GPU series; waits for a pass in flight. Safe to call twice."""
        self._sampler.close()  # a later pass starts NVML again at once
        self._readings = ()

    def _apply(self, outcome: PassOutcome) -> None:
        self._readings = outcome.readings
        if outcome.duration_s is not None:
            self._health.observe_duration(names.COLLECTOR_GPU, outcome.duration_s)
        if outcome.problems:
            detail = "; ".join(outcome.problems)
            self._health.failed(names.COLLECTOR_GPU, outcome.reason, detail, served=_served(outcome.readings),
                                causes=nvml_errors.codes_said(detail))
        else:
            self._health.succeeded(names.COLLECTOR_GPU, as_of=outcome.as_of)


def _served(readings: Sequence[GpuReading]) -> str:
    """What a failed pass leaves served, for the log: exactly which GPUs have a busy ratio and which their memory
    alone, or none. A reading whose values are all None has none (`collect` leaves it out): a GPU refusing every
    query was said to be served, and so was one with its memory but no busy ratio (a GPU NVML does not measure)."""
    busy = [f"GPU {reading.label}" for reading in readings if reading.busy_ratio is not None]
    memory = [f"GPU {reading.label}" for reading in readings if reading.busy_ratio is None and _has_series(reading)]
    if not busy and not memory:
        return "no GPU series until NVML answers again"
    if not memory:
        return "serving only " + ", ".join(busy)
    if not busy:
        return "serving no busy ratio, only the memory of " + ", ".join(memory)
    return f"serving only {', '.join(busy)}, and the memory without a busy ratio of {', '.join(memory)}"


def _has_series(reading: GpuReading) -> bool:
    """Whether `collect` serves any series for the reading."""
    values = (reading.busy_ratio, reading.memory_used_bytes, reading.memory_total_bytes)
    return any(value is not None for value in values)


def _in_daemon_thread(function: Callable[[], T]) -> asyncio.Future[T]:
    """`function()` in a new daemon thread, its result on a future of the running loop.

    Not `asyncio.to_thread`: the loop's default executor is joined when the app stops and its threads again
    at interpreter exit, so an NVML call that never returns kept a stopped exporter alive until the kubelet
    killed it (the pod's whole grace period). A daemon thread stuck in the driver is left behind instead.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def finish(result: T | None, error: Exception | None) -> None:
        if future.done():  # cancelled: the stop went on without this pass
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(cast(T, result))

    def work() -> None:
        result: T | None = None
        error: Exception | None = None
        try:
            result = function()
        except Exception as caught:  # handed to the awaiting coroutine, which reports it
            error = caught
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits for this pass any more
            loop.call_soon_threadsafe(finish, result, error)

    threading.Thread(target=work, name="nvml-pass", daemon=True).start()
    return future
