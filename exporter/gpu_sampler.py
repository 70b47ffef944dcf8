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

Logs go to the GPU collector's logger (`exporter.collectors.gpu`), the one operators filter on.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from exporter import names, nvml
from exporter.gpu_busy import Busy, BusyWindow
from exporter.nvml_refusals import RefusedQueries

log = logging.getLogger("exporter.collectors.gpu")

NOT_VISIBLE_HINT = (
    "the sidecar requests no GPU and sees the driver and GPUs only through the NVIDIA container runtime with "
    "NVIDIA_VISIBLE_DEVICES=all (manifests/examples/exporter-sidecar-patch.yaml); on a runtime without GPUs set "
    "EXPORTER_NO_GPU=true"
)
"""Said with the failures that mean this container sees no NVIDIA driver or no GPU: NVML's own words name
neither the setting that gives the sidecar sight of the GPUs nor the one that turns the collector off."""
_NOT_VISIBLE_CODES = frozenset({None, nvml.LIBRARY_NOT_FOUND, nvml.DRIVER_NOT_LOADED})
MIG_HINT = (
    "NVML measures no utilization per MIG device anyway: on MIG, read GPU busy from NVIDIA's DCGM exporter (the "
    "adapter's --gpu-source=dcgm) and turn this collector off (EXPORTER_NO_GPU=true, --no-gpu)"
)
"""Said where this container has only MIG devices to read, or none of its own: docs/operations.md's way for MIG."""
MIG_RECHECK_S: Final = 10.0
"""How often the MIG devices of a GPU in MIG mode are listed again, to find those created or destroyed while it stays
in MIG mode (`nvidia-smi mig -cgi`/`-dgi`, the GPU operator's mig-manager applying another profile): enumeration
happened only at NVML's initialisation, so a new MIG device was never served. The default gpu window, and within
the adapter's 15 s refresh: a new device is read before the adapter's next look. A listing costs a GPU 8 calls (the
slot count, then one a slot of 7) and 2 a MIG device (UUID, name), by the fake NVML's counts: spread over ten
passes, 0.8 + 0.2 a MIG device a pass, about its memory read's 1 a pass (what a MIG device costs now, its
utilization asked once a minute: 3 a pass before; its memory too where NVML refuses it). Every pass would have
doubled the cost. A destroyed device is found sooner: at the pass its read fails."""
MEMORY_ASKED_AGAIN_S: Final = 60.0
"""How often a device whose memory query NVML refused for good is asked it again: a MIG device refused it
(NO_PERMISSION in a container on a MIG GPU), a whole GPU that lacks it (NOT_SUPPORTED on unified-memory parts such as
Grace Hopper and GB10). One failing call a minute, not one a pass; memory given back is read within a minute."""
UNMEASURED_AFTER_S: Final = 300.0
"""How long a whole GPU refuses its utilization (NOT_SUPPORTED), from its first read in this process with no answer
since, before it is taken as one NVML does not measure (its busy left out, the pod's read from its other devices,
said once at INFO). Until then it is a failure, the pod's GPU signal missing: an H100 being reset, or a driver
still coming up, refuses it too, and taken at once for one NVML does not measure, a busy GPU 0 (95%) beside an idle
GPU 1 (5%) was left out with `collector_success` 1, the pod read at 0.05 for 0.5, at each exporter start. A reset or
a driver coming up answers within it; a GPU NVML does not measure costs its runtime 5 minutes of held scale-down at
each exporter start. An answer ends it for the process: a refusal after one is a failure for as long."""
UNMEASURED_HINT = (
    "read GPU busy from NVIDIA's DCGM exporter instead, where it measures this GPU (the adapter's "
    "--gpu-source=dcgm), and turn this collector off (EXPORTER_NO_GPU=true, --no-gpu)"
)
"""Said where the only GPUs of a pod are ones NVML does not measure: the adapter has no busy ratio to scale it on."""
VERSION_MISMATCH_HINT = (
    "this container's NVIDIA library and the driver loaded on the node are of different versions, which no retry "
    "here changes: the driver was upgraded on the node without a reboot (reboot the node, or reload its driver), "
    "or reloaded after this container started with the old one's library (delete this pod: a new one is given "
    "the new library)"
)
"""Said with NVML_ERROR_LIB_RM_VERSION_MISMATCH, at init or mid-run: NVML's words name neither cause nor cure."""


def _said(error: nvml.NvmlError) -> str:
    """The error as the log and the health line say it: with what to do, where NVML's words do not say."""
    if error.code == nvml.LIB_RM_VERSION_MISMATCH:
        return f"{error} ({VERSION_MISMATCH_HINT})"
    return str(error)


def _nothing_to_sample(not_permitted: Sequence[str]) -> str:
    """Why a session that chose no device samples nothing: NVML sees no GPU, or only other containers' MIG devices.

    The MIG devices NVML shows this container and refuses it (NO_PERMISSION) are another container's: NVML does
    see the GPU, so the line said "NVML sees no GPU" and sent the operator to NVIDIA_VISIBLE_DEVICES, set right."""
    if not not_permitted:
        return f"NVML sees no GPU ({NOT_VISIBLE_HINT})"
    return ("the only GPUs NVML shows this container are MIG devices of other containers ("
            + ", ".join(f"GPU {label}" for label in not_permitted) + ": NVML gives this container no permission on "
            f"them); {MIG_HINT}")


def _configured_of_others(gpu: nvml.Device, not_permitted: Sequence[str]) -> str:
    """A GPU named in --gpu-uuids whose MIG devices are all another container's: it was said "not visible", and
    "this container sees none", which sent the operator after a UUID that was right."""
    labels = ", ".join(f"GPU {label}" for label in not_permitted if label.startswith(f"{gpu.index}/"))
    return (f"configured GPU {gpu.uuid} (GPU {gpu.label}) is in MIG mode and its MIG devices are other containers' "
            f"({labels}: NVML gives this container no permission on them); {MIG_HINT}")


def _selection_problems(inventory: nvml.Inventory, selection: nvml.Selection, mig_empty: Sequence[nvml.Device],
                        uuids: Sequence[str]) -> list[str]:
    """What the devices chosen (`selection` of `inventory`, by `uuids` if any) leave unsampled, each in the words that
    send the operator to the right fix: GPUs in MIG mode with no MIG device yet (`mig_empty`), configured GPUs whose
    MIG devices are all another container's, configured UUIDs not visible (with what this container does see), and
    GPUs that failed while being enumerated. Apart from NVML's setup, so that each text reads beside its siblings."""
    # Configured GPUs whose MIG devices are all another container's: seen, so not "not visible".
    of_others = nvml.select_devices(inventory.mig_of_others, uuids).devices if uuids else ()
    missing = [uuid for uuid in selection.missing
               if not nvml.select_devices((*mig_empty, *of_others), [uuid]).devices]
    problems = [f"GPU {gpu.label} {gpu.uuid} is in MIG mode with no MIG device: nothing to sample on it until "
                "its MIG devices are created (looked for again at each retry)" for gpu in mig_empty]
    problems.extend(_configured_of_others(gpu, inventory.not_permitted) for gpu in of_others)
    problems.extend(f"configured GPU {uuid} is not visible" for uuid in missing)
    if missing:
        # Which UUIDs this container does see: a typo is then plain without exec-ing into the pod.
        seen = ", ".join(d.uuid for d in inventory.devices) or "none"
        problems.append(f"this container sees {seen}: the GPUs reported come from EXPORTER_GPU_UUIDS "
                        "(--gpu-uuids) or, with EXPORTER_GPU_POD_RESOURCES_SOCKET, from the kubelet, and the "
                        "sidecar sees the node's GPUs with NVIDIA_VISIBLE_DEVICES=all")
    if not uuids or missing:
        problems.extend(str(failure) for failure in inventory.failures)
    return problems


def _dropped(device: nvml.Device, error: nvml.NvmlError) -> str:
    """A GPU dropped after an error, with its cause, in the same words at the pass that drops it and at every pass
    until NVML re-initialises: a GPU that still enumerates is read again at each re-initialisation and fails again,
    and two texts taking turns (NVML's error, then the bare "dropped") made CollectorHealth log the one outage
    again every minute."""
    return f"GPU {device.label} {device.uuid} dropped until NVML re-initialises: {_said(error)}"


def _busy_beside_memory(busy: Busy | None) -> str:
    """What becomes of a device's busy ratio, said with its memory left out: "read as usual" was said of a GPU that
    refused every query (NOT_SUPPORTED, NO_PERMISSION for a while) beside the collector's failure over its busy."""
    return "its busy ratio is read as usual" if busy is not None else "it has no busy ratio either"


def _gpu_of(device: nvml.Device) -> tuple[str, str]:
    """(label, UUID) of the GPU of a device: the device itself, or a MIG device's GPU."""
    return device.label.split("/")[0], device.parent_uuid or device.uuid


def _mig_watched(visible: Sequence[nvml.Device], sampled: Sequence[nvml.Device],
                 mig_empty: Sequence[nvml.Device]) -> dict[str, tuple[nvml.Device, dict[str, str]]]:
    """The GPUs of the MIG devices `sampled` and the GPUs in MIG mode with none yet (`mig_empty`), each with a device
    to list its MIG devices by and the visible MIG devices on it (UUID: label), to tell a change from."""
    watched: dict[str, tuple[nvml.Device, dict[str, str]]] = {}
    for device in (*(d for d in sampled if d.is_mig), *mig_empty):
        gpu_uuid = _gpu_of(device)[1]
        known = {mig.uuid: mig.label for mig in visible if mig.parent_uuid == gpu_uuid}
        watched.setdefault(gpu_uuid, (device, known))
    return watched


@dataclass(frozen=True)
class GpuReading:
    """What one pass learnt about one GPU or MIG device; None where NVML could not say."""

    label: str
    uuid: str
    busy_ratio: float | None
    memory_used_bytes: int | None
    memory_total_bytes: int | None
    as_of: float | None = None
    """Unix time its busy ratio's window ends (when NVML's samples were read); None without a busy ratio."""


@dataclass(frozen=True)
class PassOutcome:
    """One pass's result, applied on the caller's thread: readings to serve and what went wrong."""

    readings: tuple[GpuReading, ...]
    problems: tuple[str, ...]
    duration_s: float | None = None
    """How long the NVML work took (health's collector_duration_seconds)."""
    as_of: float | None = None
    """The time the busy ratios describe, the oldest of their windows' ends: published as the collector's
    success time, not the pass's end, which a hung NVML call puts seconds later. None: no busy ratio."""
    reason: str = names.REASON_NVML


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
        self._devices: tuple[nvml.Device, ...] = ()
        self._busy = BusyWindow(window_s, monotonic)
        self._standing_problems: tuple[str, ...] = ()
        self._announced: tuple[str, str] | None = None
        self._without_memory: set[str] = set()  # GPUs whose memory query is unsupported, logged once each
        self._memory_refused = RefusedQueries(MEMORY_ASKED_AGAIN_S, monotonic)  # for good: `_refused_for_good`
        self._unmeasured_said: tuple[str, ...] = ()  # the devices last said to have no busy ratio beside GPUs that do
        self._measured: set[str] = set()
        """Whole GPUs (UUID) that have given a busy ratio: one refused its utilization after that may be as busy as
        ever, a failure; one refused it from its first read is one NVML does not measure (`_never_measured`)."""
        self._refusing_since: dict[str, float] = {}
        """Whole GPUs (UUID) never measured: when (monotonic) NVML first refused their utilization NOT_SUPPORTED, the
        start of their `UNMEASURED_AFTER_S`."""
        self._sampled: dict[str, str] = {}
        """Whole GPUs (UUID: label) this exporter has sampled, reporting every visible GPU: one no longer enumerated
        (gone at a driver reload, fallen off the bus) is a lost GPU, not a node that always had one fewer."""
        self._reconnect_at = -math.inf
        self._retry_delay_s = retry_initial_s
        self._mig_watched: dict[str, tuple[nvml.Device, dict[str, str]]] = {}
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
        except nvml.NvmlError as error:
            if isinstance(error, nvml.NvmlUnavailable) and error.code in _NOT_VISIBLE_CODES:
                return f"{error} ({NOT_VISIBLE_HINT})"
            return _said(error)
        try:
            inventory = session.inventory()
            driver = session.driver_version()
        except nvml.NvmlError as error:
            session.close()
            return _said(error)
        selection = nvml.select_devices(inventory.devices, self._uuids)
        # GPUs in MIG mode with no MIG device yet: not missing, not lost, not sampled; said as what they are.
        mig_empty = nvml.select_devices(inventory.mig_without_devices, self._uuids).devices
        problems = _selection_problems(inventory, selection, mig_empty, self._uuids)
        if not self._uuids and not inventory.failures:  # with failures, those are the problem said
            problems.extend(self._gone((*selection.devices, *mig_empty)))
        if not selection.devices and not problems:
            problems.append(_nothing_to_sample(inventory.not_permitted))
        self._session = session
        self._devices = selection.devices
        self._mig_watched = _mig_watched(inventory.devices, selection.devices, mig_empty)
        self._mig_recheck_at = self._monotonic() + MIG_RECHECK_S
        self._standing_problems = tuple(problems)
        self._reconnect_at = math.inf
        self._busy.keep_only(device.uuid for device in selection.devices)
        self._memory_refused.keep_only(device.uuid for device in selection.devices)
        chosen = {device.uuid for device in selection.devices}
        self._refusing_since = {uuid: since for uuid, since in self._refusing_since.items() if uuid in chosen}
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

    def _gone(self, devices: Sequence[nvml.Device]) -> list[str]:
        """Problems for the GPUs sampled before and not enumerated now; remembers the ones enumerated now."""
        now = {uuid: label for label, uuid in map(_gpu_of, devices)}
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
        unmeasured: list[tuple[nvml.Device, nvml.NotSupported]] = []  # devices NVML gives no busy ratio, for good
        switched: dict[tuple[str, str], str] = {}  # (GPU label, GPU UUID): why its devices are enumerated again
        if not enumerated and now >= self._mig_recheck_at:
            self._mig_recheck_at = now + MIG_RECHECK_S
            switched.update(self._mig_changes(self._mig_watched))
            if switched:
                return self._enumerate_again(now, switched)
        for device in self._devices:
            try:
                reading, refusal = self._read_device(self._session, device)
                if (not enumerated and not device.is_mig and reading.busy_ratio is None
                        and self._session.mig_enabled(device)):
                    switched[_gpu_of(device)] = ("is now in MIG mode, where NVML measures no utilization of the "
                                                 "whole GPU")
                    continue
            except nvml.NvmlUnavailable as error:
                # NVML itself is gone (driver unloaded, uninitialised under us): start over.
                self._disconnect()
                self._schedule_reconnect(now)
                return PassOutcome((), (_said(error),))
            except nvml.NvmlError as error:
                why = None if enumerated or not device.is_mig else self._why_mig_device_failed(device, switched)
                if why is not None:
                    switched[_gpu_of(device)] = why
                    continue
                lost[device.uuid] = _dropped(device, error)
                problems.append(lost[device.uuid])
                continue
            readings.append(reading)
            if refusal is None:
                self._measured.add(device.uuid)
            elif device.is_mig or self._never_measured(device, refusal, now):
                unmeasured.append((device, refusal))
            else:
                problems.append(self._refused_utilization(device, refusal))
        if switched:
            return self._enumerate_again(now, switched)
        problems.extend(self._unmeasured_problems(unmeasured, readings))
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

    def _why_mig_device_failed(self, device: nvml.Device, switched: Mapping[tuple[str, str], str]) -> str | None:
        """Why a MIG device's read failed where its GPU is still there: it left MIG mode, or the MIG device was
        destroyed (it then read as a GPU lost until NVML re-initialised); None for a failure of the device itself."""
        gpu = _gpu_of(device)
        if gpu in switched:
            return switched[gpu]  # another of its MIG devices said why already
        if self._left_mig_mode(device):
            return "left MIG mode, its MIG devices are gone"
        watched = self._mig_watched.get(gpu[1])
        return self._mig_changes({gpu[1]: watched}).get(gpu) if watched is not None else None

    def _left_mig_mode(self, device: nvml.Device) -> bool:
        """Whether the GPU of a MIG device that failed is out of MIG mode now (its MIG devices are gone)."""
        assert self._session is not None
        try:
            return not self._session.mig_enabled(device)
        except nvml.NvmlError:
            return False  # the GPU does not answer either: lost, as before

    def _mig_changes(self, watched: Mapping[str, tuple[nvml.Device, dict[str, str]]]) -> dict[tuple[str, str], str]:
        """The GPUs of `watched` whose MIG devices are not the ones enumerated, with what changed.

        A GPU that does not answer the listing is left to its reads, which say why (lost, left MIG mode)."""
        assert self._session is not None
        changes: dict[tuple[str, str], str] = {}
        for device, known in watched.values():
            try:
                now = {mig.uuid: mig.label for mig in self._session.mig_devices(device)}
            except nvml.NvmlError:
                continue
            created = [f"GPU {label} {uuid}" for uuid, label in now.items() if uuid not in known]
            destroyed = [f"GPU {label} {uuid}" for uuid, label in known.items() if uuid not in now]
            if created or destroyed:
                what = "; ".join(f"{verb} {', '.join(devices)}"
                                 for verb, devices in (("created", created), ("destroyed", destroyed)) if devices)
                changes[_gpu_of(device)] = (
                    f"had its MIG devices changed, MIG mode on throughout ({what})")
        return changes

    def _enumerate_again(self, now: float, switched: Mapping[tuple[str, str], str]) -> PassOutcome:
        """Re-initialise NVML, which enumerates the GPUs as they are now, and read them in this same pass."""
        for (label, uuid), why in switched.items():
            log.info("GPU %s %s %s: enumerating the GPUs again", label, uuid, why)
        failure = self._connect()
        if failure is not None:
            self._schedule_reconnect(now)
            return PassOutcome((), (failure,))
        return self._read_devices(now, enumerated=True)

    def _never_measured(self, device: nvml.Device, refusal: nvml.NotSupported, now: float) -> bool:
        """Whether a whole GPU's refused utilization is one NVML does not measure: NOT_SUPPORTED (not this container's
        NO_PERMISSION, which may change) on a GPU that has given no busy ratio since the exporter started, its first
        refusal `UNMEASURED_AFTER_S` ago. Sooner, it may be a busy GPU being reset (`_refused_utilization`)."""
        if isinstance(refusal, nvml.NotPermitted) or device.uuid in self._measured:
            return False
        since = self._refusing_since.setdefault(device.uuid, now)
        return now - since >= UNMEASURED_AFTER_S

    def _refused_utilization(self, device: nvml.Device, refusal: nvml.NotSupported) -> str:
        """The failure of a whole GPU refused its utilization: one that answered before (as busy as ever, perhaps),
        one refused NO_PERMISSION, and one on probation, which the line says is taken as one NVML does not measure
        if it goes on refusing: an operator read only that it failed, and then, with success, that it was left out."""
        problem = f"no utilization for GPU {device.label} {device.uuid}: {refusal}"
        if device.uuid in self._refusing_since and device.uuid not in self._measured:
            problem += (f" (a GPU being reset, or a driver coming up, refuses it a while; taken as unmeasured after "
                        f"{_minutes(UNMEASURED_AFTER_S)} if it never answers)")
        return problem

    def _unmeasured_problems(self, unmeasured: Sequence[tuple[nvml.Device, nvml.NotSupported]],
                             readings: Sequence[GpuReading]) -> list[str]:
        """The devices NVML gives no busy ratio (MIG devices, whole GPUs it never measured past their probation,
        `UNMEASURED_AFTER_S`) as problems, or none where another device gives one.

        NVML measures no utilization per MIG device, nor on a GPU that does not support the query. Beside a device
        that has a busy ratio, that is how the node is, not a failure: failing the collector for it kept
        `last_success_timestamp{collector="gpu"}` from ever advancing, so the adapter read the pod's other GPUs as
        missing too and held its runtime's scale-down for good. Said once in the log instead, naming exactly what
        is served. With no busy ratio at all, the adapter has nothing to scale the pod on, whatever the collector
        says: a failure, so that `ModelMeshExporterGpuNotVisible` sends the operator to DCGM."""
        if not unmeasured:
            self._unmeasured_said = ()  # none now (switched out of MIG mode): said again if they come back
            return []
        mig = [f"GPU {device.label} {device.uuid}" for device, _ in unmeasured if device.is_mig]
        whole = [(f"GPU {device.label} {device.uuid}", refusal) for device, refusal in unmeasured if not device.is_mig]
        busy_from = [reading.label for reading in readings if reading.busy_ratio is not None]
        if not busy_from:
            problems = [f"no busy ratio: NVML does not measure the utilization of {gpu} ({refusal}, at every read "
                        f"for over {_minutes(UNMEASURED_AFTER_S)}); {UNMEASURED_HINT}" for gpu, refusal in whole]
            if mig:
                problems.append(f"no busy ratio: MIG devices ({', '.join(mig)}) have none and no other device "
                                f"gives one; {MIG_HINT}")
            return problems
        said = tuple(gpu for gpu, _ in whole) + tuple(mig)
        if said != self._unmeasured_said:
            self._unmeasured_said = said
            why = [f"{gpu} has no busy ratio: NVML has refused its utilization ever since its first read, over "
                   f"{_minutes(UNMEASURED_AFTER_S)} ({refusal}): taken as a GPU NVML does not measure, and asked again "
                   "at every read (a busy ratio it gives is served; a refusal after one is a failure)"
                   for gpu, refusal in whole]
            if mig:
                why.append(f"MIG devices {', '.join(mig)} have no busy ratio: NVML measures no utilization per MIG "
                           "device")
            log.info("%s; this pod's busy ratio is read from GPU %s alone%s", "; ".join(why),
                     ", GPU ".join(busy_from), _without_busy(readings))
        return []

    def _read_device(
        self, session: nvml.NvmlSession, device: nvml.Device,
    ) -> tuple[GpuReading, nvml.NotSupported | None]:
        """Busy and memory of one device, and NVML's refusal of its utilization; other errors raise.

        Unsupported utilization is None and the refusal, which the caller judges: the busy ratio is the signal the
        adapter scales on.
        Unsupported memory is only None, said once per GPU in the log: unified-memory GPUs (GB10, Grace
        parts) never report it, and a collector failing for good over a series no decision reads would make
        the pod's GPU signal stale forever and hold its runtime's scale-down."""
        refusal: nvml.NotSupported | None = None
        try:
            busy: Busy | None = self._busy.busy_ratio(session, device, self._clock)
        except nvml.NotSupported as error:
            busy, refusal = None, error
        memory = self._memory(session, device, busy)
        reading = GpuReading(
            label=device.label,
            uuid=device.uuid,
            busy_ratio=None if busy is None else busy.ratio,
            memory_used_bytes=None if memory is None else memory.used_bytes,
            memory_total_bytes=None if memory is None else memory.total_bytes,
            as_of=None if busy is None else busy.as_of,
        )
        return reading, refusal

    def _memory(self, session: nvml.NvmlSession, device: nvml.Device, busy: Busy | None) -> nvml.MemoryInfo | None:
        """The device's memory, None where unsupported (said once per device). A refusal for good stands for
        `MEMORY_ASKED_AGAIN_S` without asking: a unified-memory GPU was asked at every pass, a call that could only
        fail, beside its utilization (which stays asked at every pass: its busy ratio is wanted the pass it answers)."""
        if self._memory_refused.standing(device.uuid) is not None:
            return None
        try:
            return session.memory(device)
        except nvml.NotSupported as error:
            if _refused_for_good(device, error):
                self._memory_refused.remember(device.uuid, error)
            if device.uuid not in self._without_memory:
                self._without_memory.add(device.uuid)
                log.info("GPU %s %s reports no memory use (%s): its memory series are left out; %s", device.label,
                         device.uuid, error, _busy_beside_memory(busy))
            return None


def _minutes(seconds: float) -> str:
    """A duration as the log says it: "5 min"."""
    return f"{seconds / 60:g} min"


def _without_busy(readings: Sequence[GpuReading]) -> str:
    """What is served of the devices without a busy ratio, for the line that says busy is read from the others:
    "this pod's busy ratio is read from GPU 1 alone" left GPU 0's memory series unsaid."""
    partial = [f"GPU {r.label}" for r in readings if r.busy_ratio is None and r.memory_total_bytes is not None]
    if not partial:
        return ""
    return f" ({', '.join(partial)} {'has its' if len(partial) == 1 else 'have their'} memory alone)"


def _refused_for_good(device: nvml.Device, refusal: nvml.NotSupported) -> bool:
    """Whether NVML's refusal of a device's memory query will stand: a MIG device's, whatever the code (NVML refuses
    one's memory in a container on a MIG GPU for good), and a whole GPU's that lacks the query (NOT_SUPPORTED). A
    whole GPU refused it NO_PERMISSION is this container's standing, which may change: it is asked at every pass."""
    return device.is_mig or not isinstance(refusal, nvml.NotPermitted)
