"""`GpuSampler`: one NVML pass at a time over the chosen GPUs, with NVML's lifecycle and re-init backoff.

This is the worker-thread side of the GPU collector: everything here may block on the driver, and is
guarded by one lock so that one pass runs at a time. A pass returns a `PassOutcome` (the readings to serve
and what went wrong) for the collector to publish on the event loop.

NVML is initialised on the first pass, which chooses the devices (`--gpu-uuids`, or every visible GPU). Without a
library, with init failing, or with no GPU visible a pass returns the problem and no readings; a lost GPU is dropped
(the others stay), reported as a problem. Reporting every visible GPU, a GPU sampled before that a re-initialisation
no longer finds (gone at a driver reload) is a lost GPU too, until it is back. A MIG device has no busy ratio, nor
has a whole GPU NVML never measured (NOT_SUPPORTED from its first read and for `UNMEASURED_AFTER_S`; before that
a problem, as a GPU being reset is): a problem only when no chosen device has one (else it is logged once: how the
node is, not a failure). NVML is re-initialised, which re-enumerates the GPUs,
after 1 s, then 2, 4, ... up to 30 s between tries (while NVML is down the passes in between try nothing:
`measure()` returns None), so a GPU that comes back (driver reload, device plugin) is found again without spending
CPU on a node that has none. A GPU switched into or out of MIG mode while the exporter runs is enumerated again in
the pass that meets it, so its MIG devices (or the whole GPU) are read from then on; so is a GPU one of whose MIG
devices is destroyed while it stays in MIG mode, and a GPU given a new MIG device is found within `MIG_RECHECK_S`.
Those intervals (the backoff, the MIG re-listing, refused queries asked again) are timed on a monotonic clock: on
the wall clock an NTP step back of an hour put each off by the hour, and a step forward brought each on at once. The
wall clock times only what is published as Unix time.

Logs go to the GPU collector's logger (`exporter.collectors.gpu`), the one operators filter on, here and in the
parts it reads through: `gpu_problems` (how each problem is said), `gpu_mig_watch` (the MIG devices created,
destroyed or gone), `gpu_unmeasured` (GPUs NVML gives no busy ratio), `gpu_memory_reads` (memory, where reported);
`gpu_readings` holds what a pass hands the collector.
"""
from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from exporter import nvml, nvml_devices, nvml_errors
from exporter.gpu_busy import Busy, BusyWindow
from exporter.gpu_memory_reads import GpuMemoryReads
from exporter.gpu_mig_watch import MIG_RECHECK_S, MigWatched, gpu_of, mig_changes, mig_watched, why_mig_device_failed
from exporter.gpu_problems import (
    NOT_VISIBLE_CODES,
    NOT_VISIBLE_HINT,
    dropped,
    nothing_to_sample,
    said,
    selection_problems,
)
from exporter.gpu_readings import GpuReading, PassOutcome
from exporter.gpu_unmeasured import UnmeasuredGpus

log = logging.getLogger("exporter.collectors.gpu")


class GpuSampler:
    """NVML session, device choice and re-initialisation backoff; `measure()` is one pass, thread-safe."""

    def __init__(
        self,
        *,
        window_s: float,
        uuids: Sequence[str],
        clock: Callable[[], float],
        monotonic: Callable[[], float],
        retry_initial_s: float,
        retry_max_s: float,
        open_nvml: Callable[[], nvml.NvmlSession],
    ) -> None:
        """Configure; touches no NVML until the first `measure()`. The settings are `GpuCollector`'s."""
        self._uuids = tuple(uuids)
        self._clock = clock
        self._monotonic = monotonic
        self._retry_initial_s = retry_initial_s
        self._retry_max_s = retry_max_s
        self._open_nvml = open_nvml
        # NVML state: used only under _lock, by one pass at a time.
        self._lock = threading.Lock()
        self._session: nvml.NvmlSession | None = None
        self._devices: tuple[nvml_devices.Device, ...] = ()
        self._busy = BusyWindow(window_s, monotonic)
        self._standing_problems: tuple[str, ...] = ()
        self._announced: tuple[str, str] | None = None
        self._memory = GpuMemoryReads(monotonic)
        self._unmeasured = UnmeasuredGpus()
        self._sampled: dict[str, str] = {}
        """Whole GPUs (UUID: label) this exporter has sampled, reporting every visible GPU: one no longer enumerated
        (gone at a driver reload, fallen off the bus) is a lost GPU, not a node that always had one fewer."""
        self._reconnect_at = -math.inf
        self._retry_delay_s = retry_initial_s
        self._mig_watched: MigWatched = {}
        """GPUs in MIG mode this exporter samples (or waits on for MIG devices), by UUID: a device on it to list its
        MIG devices by, and the MIG devices (UUID: label) enumerated on it."""
        self._mig_recheck_at = math.inf

    def measure(self) -> PassOutcome | None:
        """One pass; None when NVML is down and its next try is not due (nothing was attempted)."""
        with self._lock:
            now = self._monotonic()  # times the backoff and the MIG re-listing: no wall-clock step moves them
            if self._session is None and now < self._reconnect_at:
                return None
            started = time.perf_counter()
            outcome = self._connect_and_read(now)
            return replace(outcome, duration_s=time.perf_counter() - started)

    def restart_later(self) -> None:
        """Drop NVML after an unexpected error, and try it again after the backoff."""
        with self._lock:
            self._disconnect()
            self._schedule_reconnect(self._monotonic())

    def close(self) -> None:
        """Shut NVML down; waits for a pass in flight. A later pass starts NVML again at once."""
        with self._lock:
            self._disconnect()
            self._devices = ()
            self._reconnect_at = -math.inf

    def _connect_and_read(self, now: float) -> PassOutcome:
        if self._session is None or now >= self._reconnect_at:
            failure = self._connect()
            if failure is not None:
                self._schedule_reconnect(now)
                return PassOutcome((), (failure,))
        return self._read_devices(now)

    def _connect(self) -> str | None:
        """(Re-)initialise NVML and choose the devices; returns why it failed, or None."""
        self._disconnect()
        try:
            session = self._open_nvml()
        except nvml_errors.NvmlError as error:
            if isinstance(error, nvml_errors.NvmlUnavailable) and error.code in NOT_VISIBLE_CODES:
                return f"{error} ({NOT_VISIBLE_HINT})"
            return said(error)
        try:
            inventory = session.inventory()
            driver = session.driver_version()
        except nvml_errors.NvmlError as error:
            session.close()
            return said(error)
        selection = nvml_devices.select_devices(inventory.devices, self._uuids)
        # GPUs in MIG mode with no MIG device yet: not missing, not lost, not sampled; said as what they are.
        mig_empty = nvml_devices.select_devices(inventory.mig_without_devices, self._uuids).devices
        problems = selection_problems(inventory, selection, mig_empty, self._uuids)
        if not self._uuids and not inventory.failures:  # with failures, those are the problem said
            problems.extend(self._gone((*selection.devices, *mig_empty)))
        if not selection.devices and not problems:
            problems.append(nothing_to_sample(inventory.not_permitted))
        self._session = session
        self._devices = selection.devices
        self._mig_watched = mig_watched(inventory.devices, selection.devices, mig_empty)
        self._mig_recheck_at = self._monotonic() + MIG_RECHECK_S
        self._standing_problems = tuple(problems)
        self._reconnect_at = math.inf
        self._busy.keep_only(device.uuid for device in selection.devices)
        self._memory.keep_only(device.uuid for device in selection.devices)
        self._unmeasured.keep_only(device.uuid for device in selection.devices)
        sampling = ", ".join(f"GPU {d.label} {d.uuid} ({d.name})" for d in selection.devices) or "no GPU"
        if inventory.not_permitted:
            sampling += "; left out: " + ", ".join(f"GPU {label}" for label in inventory.not_permitted) + (
                " (MIG devices on which NVML gives this container no permission: another container's)")
        # Said when it is news: a retry that finds what the last one found (a configured GPU still missing) is not.
        announced = (driver, sampling)
        log.log(logging.INFO if announced != self._announced else logging.DEBUG,
                "NVML initialised (driver %s): sampling %s", driver, sampling)
        self._announced = announced
        return None

    def _gone(self, devices: Sequence[nvml_devices.Device]) -> list[str]:
        """Problems for the GPUs sampled before and not enumerated now; remembers the ones enumerated now."""
        now = {uuid: label for label, uuid in map(gpu_of, devices)}
        gone = [f"GPU {uuid} (GPU {label} when last seen) is no longer visible to NVML: lost, or gone at a driver "
                "reload; it counts as lost until it is back or the exporter restarts"
                for uuid, label in self._sampled.items() if uuid not in now]
        self._sampled.update(now)
        return gone

    def _disconnect(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    def _schedule_reconnect(self, now: float) -> None:
        self._reconnect_at = now + self._retry_delay_s
        self._retry_delay_s = min(self._retry_delay_s * 2, self._retry_max_s)

    def _read_devices(self, now: float, *, enumerated: bool = False) -> PassOutcome:
        """Read every chosen device; a lost one is dropped until the next re-initialisation.

        A GPU whose MIG mode was switched since the devices were enumerated is read as it is now: NVML enumerates
        again within this pass (`enumerated`: it just did). Otherwise a GPU switched into MIG mode failed every
        pass (a whole GPU's utilization turns NOT_SUPPORTED, and no retry was due) and its MIG devices were never
        seen until the exporter restarted; one switched out read as lost until the next re-initialisation."""
        assert self._session is not None
        readings: list[GpuReading] = []
        problems = list(self._standing_problems)
        lost: dict[str, str] = {}  # UUID: why it is dropped, said the same at every pass until it is back
        # devices NVML gives no busy ratio, for good
        unmeasured: list[tuple[nvml_devices.Device, nvml_errors.NotSupported]] = []
        switched: dict[tuple[str, str], str] = {}  # (GPU label, GPU UUID): why its devices are enumerated again
        if not enumerated and now >= self._mig_recheck_at:
            self._mig_recheck_at = now + MIG_RECHECK_S
            switched.update(mig_changes(self._session, self._mig_watched))
            if switched:
                return self._enumerate_again(now, switched)
        for device in self._devices:
            try:
                reading, refusal = self._read_device(self._session, device)
                if (not enumerated and not device.is_mig and reading.busy_ratio is None
                        and self._session.mig_enabled(device)):
                    switched[gpu_of(device)] = ("is now in MIG mode, where NVML measures no utilization of the "
                                                 "whole GPU")
                    continue
            except nvml_errors.NvmlUnavailable as error:
                # NVML itself is gone (driver unloaded, uninitialised under us): start over.
                self._disconnect()
                self._schedule_reconnect(now)
                return PassOutcome((), (said(error),))
            except nvml_errors.NvmlError as error:
                why = None if enumerated or not device.is_mig else why_mig_device_failed(
                    self._session, device, switched, self._mig_watched)
                if why is not None:
                    switched[gpu_of(device)] = why
                    continue
                lost[device.uuid] = dropped(device, error)
                problems.append(lost[device.uuid])
                continue
            readings.append(reading)
            if refusal is None:
                self._unmeasured.measured(device.uuid)
            elif device.is_mig or self._unmeasured.never_measured(device, refusal, now):
                unmeasured.append((device, refusal))
            else:
                problems.append(self._unmeasured.refused_utilization(device, refusal))
        if switched:
            return self._enumerate_again(now, switched)
        problems.extend(self._unmeasured.problems(unmeasured, readings))
        as_of = min((reading.as_of for reading in readings if reading.as_of is not None), default=None)
        if lost:
            self._devices = tuple(d for d in self._devices if d.uuid not in lost)
            self._standing_problems += tuple(lost.values())
        if self._standing_problems:
            if self._reconnect_at == math.inf:
                self._schedule_reconnect(now)
        else:
            self._retry_delay_s = self._retry_initial_s  # NVML and every chosen GPU answer again
        return PassOutcome(tuple(readings), tuple(problems), as_of=as_of)

    def _enumerate_again(self, now: float, switched: Mapping[tuple[str, str], str]) -> PassOutcome:
        """Re-initialise NVML, which enumerates the GPUs as they are now, and read them in this same pass."""
        for (label, uuid), why in switched.items():
            log.info("GPU %s %s %s: enumerating the GPUs again", label, uuid, why)
        failure = self._connect()
        if failure is not None:
            self._schedule_reconnect(now)
            return PassOutcome((), (failure,))
        return self._read_devices(now, enumerated=True)

    def _read_device(
        self, session: nvml.NvmlSession, device: nvml_devices.Device,
    ) -> tuple[GpuReading, nvml_errors.NotSupported | None]:
        """Busy and memory of one device, and NVML's refusal of its utilization; other errors raise.

        Unsupported utilization is None and the refusal, which the caller judges: the busy ratio is the signal the
        adapter scales on.
        Unsupported memory is only None, said once per GPU in the log: unified-memory GPUs (GB10, Grace
        parts) never report it, and a collector failing for good over a series no decision reads would make
        the pod's GPU signal stale forever and hold its runtime's scale-down."""
        refusal: nvml_errors.NotSupported | None = None
        try:
            busy: Busy | None = self._busy.busy_ratio(session, device, self._clock)
        except nvml_errors.NotSupported as error:
            busy, refusal = None, error
        memory = self._memory.read(session, device, busy)
        reading = GpuReading(
            label=device.label,
            uuid=device.uuid,
            busy_ratio=None if busy is None else busy.ratio,
            memory_used_bytes=None if memory is None else memory.used_bytes,
            memory_total_bytes=None if memory is None else memory.total_bytes,
            as_of=None if busy is None else busy.as_of,
        )
        return reading, refusal

