"""`BusyWindow`: how busy each GPU was over the last `window_s` seconds, from NVML's own utilization samples.

Busy is the mean of the samples (`nvmlDeviceGetSamples`, one every 1/6 s to 1 s depending on the GPU) whose
timestamps fall in the window: every sample the driver took counts once, whatever the caller's timing.
Where a device has no samples, or NVML stamps them with a clock too far from ours to window them (behind
or ahead), the driver's latest `nvmlDeviceGetUtilizationRates` reading stands in, read once per pass; samples are
asked for again once a minute, and read again once they come back usable. A MIG device that answers neither (NVML
measures no utilization per MIG device) is asked both again once a minute, not at every pass
(`exporter.nvml_refusals`). Histories are kept
by UUID, across passes and across NVML re-initialisation. The window ends when the samples were read, the time
the busy ratio describes (a GPU that holds the call for seconds moves it past the pass's start). A wall clock
stepped back leaves samples stamped ahead of ours: they are not the current window, which starts again.

Logs go to the GPU collector's logger (`exporter.collectors.gpu`), the one operators filter on.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Final

from exporter import nvml, nvml_devices, nvml_errors
from exporter.nvml_refusals import RefusedQueries

log = logging.getLogger("exporter.collectors.gpu")

_MIN_BEHIND_S: Final = 5.0
"""NVML stamps samples with the host's wall clock. The newest sample it just handed over stamped more than the
window (at least this) behind ours cannot be windowed: utilization rates are read instead, and said. The floor
keeps a short window's newest sample, up to a sample period plus a pass old, from passing for a clock that is off."""
_MAX_AHEAD_S: Final = 60.0
"""Samples stamped ahead of our clock are taken once our clock reaches them (`_CLOCK_STEP_S`): a window that lags
by the difference. Beyond this, rates are read instead, and said."""
_CLOCK_STEP_S: Final = 1.0
"""A sample stamped further than this ahead of our clock was taken before the wall clock stepped back (NTP, a
resumed VM): NVML stamps with the same clock, so a sample is never newer than the moment it is read."""
_SAMPLES_RETRY_S: Final = 60.0
"""How often a device read by rates is asked for samples again: one refused them for a while (a GPU being reset)
or stamped them off our clock (until NTP set it) goes back to them, for one call a minute where it never will. And
how often a MIG device that answered neither query is asked both again: two calls a minute, not two a pass."""
_MAX_SAMPLES: Final = 10_000
"""Bound on a GPU's kept samples whatever NVML's rate (60 at 6 Hz over the default 10 s window)."""


@dataclass(frozen=True)
class Busy:
    """A device's busy ratio and the time its window ends."""

    ratio: float
    """Mean utilization over the window, 0..1."""
    as_of: float
    """Unix time the window ends: when NVML's samples were read (the pass's clock)."""


@dataclass
class _History:
    """Recent utilization of one device, by UUID, kept across passes (and across re-initialisation)."""

    samples: deque[tuple[int, float]] = field(default_factory=lambda: deque(maxlen=_MAX_SAMPLES))
    """(timestamp µs, percent) in the order received."""
    last_seen_us: int = 0
    """Newest NVML sample timestamp received; nvmlDeviceGetSamples returns only newer ones."""
    use_rates: bool = False
    """The device is read by nvmlDeviceGetUtilizationRates each pass: NVML refused it samples while a rate was
    read, or stamped them too far from our clock."""
    samples_again_at: float = math.inf
    """When a device read by rates is asked for samples again, on the window's monotonic clock: on the wall clock a
    step back kept it on rates for the size of the step."""
    rates_said: str = ""
    """Why the log last said the device is read by rates ("refused", "skew"; "" for not said): each said once,
    and a refusal only once a rate was read, so a device on which neither query works (a MIG device, a GPU just
    switched into MIG mode, a GPU refusing every query for a while) is not said to be read by rates."""


class BusyWindow:
    """Per-device utilization history, and the busy ratio it gives over a trailing window."""

    def __init__(self, window_s: float, monotonic: Callable[[], float] = time.monotonic) -> None:
        """`window_s`: seconds of NVML samples averaged into busy (positive). `monotonic`: the clock that times
        asking again (samples, refused queries), one no step of the wall clock moves; the window itself is on the
        wall clock, NVML's samples' clock."""
        self._window_s = window_s
        self._monotonic = monotonic
        self._histories: dict[str, _History] = {}
        self._unanswered = RefusedQueries(_SAMPLES_RETRY_S, monotonic)
        """MIG devices' refusals of the rate after their samples were refused: NVML measures no utilization per MIG
        device, so both calls failed at every pass, for good. Said again without asking for a minute. Whole GPUs
        are always asked: one refusing both is being reset, or just switched into MIG mode (which the sampler
        checks at such a pass), and its busy ratio is wanted the pass it answers again."""

    def keep_only(self, uuids: Iterable[str]) -> None:
        """Forget the history of every device not in `uuids` (no longer chosen or visible)."""
        wanted = set(uuids)
        self._histories = {uuid: h for uuid, h in self._histories.items() if uuid in wanted}
        self._unanswered.keep_only(wanted)

    def busy_ratio(self, session: nvml.NvmlSession, device: nvml_devices.Device, clock: Callable[[], float]) -> Busy:
        """Mean utilization over the window ending when NVML's samples came back; raises NotSupported when neither
        NVML query works.

        The window ends when the samples were read, not when the pass began: a hung GPU can hold
        nvmlDeviceGetSamples for seconds, and a window ending before the call then left out the samples that
        came back with it (for good: NVML is asked only for newer ones) while the pass was stamped fresh as of its
        end. `Busy.as_of` is that end, the freshness the collector publishes."""
        history = self._histories.setdefault(device.uuid, _History())
        if (refusal := self._unanswered.standing(device.uuid)) is not None:
            raise refusal
        stepped_back = self._restart_after_step_back(history, device, clock())
        asked = not history.use_rates or self._monotonic() >= history.samples_again_at
        samples: list[nvml_devices.UtilizationSample] = []
        refused = False
        if asked:
            try:
                samples = session.utilization_samples(device, history.last_seen_us)
            except nvml_errors.NotSupported:
                refused = True
        # After the samples call, however long it was held: the window ends now. A utilization rate asked for
        # below is stamped now too, before its own call: no later than the driver's reading it returns.
        now = clock()
        now_us = round(now * 1_000_000)
        cutoff_us = now_us - round(self._window_s * 1_000_000)
        newest_us = now_us + round(_CLOCK_STEP_S * 1_000_000)
        # NVML's buffer still holds samples stamped before a step back of the clock: not this window's.
        current = [sample for sample in samples if sample.timestamp_us <= newest_us]
        behind_us = round(max(self._window_s, _MIN_BEHIND_S) * 1_000_000)
        skew_us = _skew_us(samples, current, now_us, stepped_back, behind_us)
        if skew_us is not None:
            self._rates_for_skew(history, device, skew_us, self._monotonic())
        elif asked and not refused:
            if history.use_rates:
                self._back_to_samples(history, device)
            if current:
                history.last_seen_us = max(history.last_seen_us, current[-1].timestamp_us)
                history.samples.extend((s.timestamp_us, s.percent) for s in current)
        in_window = [(t, p) for t, p in history.samples if cutoff_us < t <= newest_us]
        if history.use_rates or refused or not in_window:
            # Rates mode, no samples, or samples stopped coming: the driver's latest reading stands in for the
            # window. Raises NotSupported where the device has no rate either: nothing is learnt then.
            try:
                in_window.append((now_us, session.utilization_rate(device)))
            except nvml_errors.NotSupported as error:
                if refused and device.is_mig:
                    self._unanswered.remember(device.uuid, error)
                raise
            if refused:
                self._rates_for_refusal(history, device, self._monotonic())
        history.samples.clear()
        history.samples.extend(in_window)
        mean = sum(p for _t, p in in_window) / len(in_window)
        return Busy(min(1.0, max(0.0, mean / 100.0)), now)

    def _restart_after_step_back(self, history: _History, device: nvml_devices.Device, now: float) -> bool:
        """Start the window again when our wall clock stepped back; returns whether it did.

        What we hold is then from "the future", and NVML, asked only for newer samples, would give nothing."""
        asked_us = round(now * 1_000_000)
        if history.last_seen_us <= asked_us + round(_CLOCK_STEP_S * 1_000_000):
            return False
        log.info("GPU %s: the clock went back %.0f s; its utilization window starts again", device.label,
                 (history.last_seen_us - asked_us) / 1_000_000)
        history.samples.clear()
        history.last_seen_us = asked_us - round(self._window_s * 1_000_000)
        return True

    @staticmethod
    def _rates_for_skew(history: _History, device: nvml_devices.Device, skew_us: int, elapsed: float) -> None:
        """Read the device by rates, its samples stamped too far from our clock to window; warned once."""
        if history.rates_said != "skew":
            log.warning("GPU %s: NVML sample time %+.0f s from ours; reading utilization rates instead",
                        device.label, skew_us / 1_000_000)
        history.use_rates, history.rates_said = True, "skew"
        history.samples_again_at = elapsed + _SAMPLES_RETRY_S
        history.samples.clear()

    @staticmethod
    def _rates_for_refusal(history: _History, device: nvml_devices.Device, elapsed: float) -> None:
        """Read the device by rates: NVML refused it samples and a rate was read (said once)."""
        if history.rates_said != "refused":
            log.info("GPU %s %s has no utilization samples; reading utilization rates", device.label, device.uuid)
        history.use_rates, history.rates_said = True, "refused"
        history.samples_again_at = elapsed + _SAMPLES_RETRY_S

    @staticmethod
    def _back_to_samples(history: _History, device: nvml_devices.Device) -> None:
        """Read the device by its samples again: NVML gave usable ones to a device read by rates."""
        if history.rates_said == "refused":
            log.info("GPU %s %s has utilization samples again; reading them", device.label, device.uuid)
        elif history.rates_said == "skew":
            log.info("GPU %s: NVML sample time agrees with ours again; reading its utilization samples",
                     device.label)
        history.use_rates, history.rates_said = False, ""
        history.samples_again_at = math.inf


def _skew_us(samples: list[nvml_devices.UtilizationSample], current: list[nvml_devices.UtilizationSample], now_us: int,
             stepped_back: bool, behind_us: int) -> int | None:
    """How far NVML's sample clock is from ours (µs), where beyond what a window can take (behind by more than
    `behind_us`, ahead by more than `_MAX_AHEAD_S`); None when within. A clock 30 s behind with the 10 s window
    left no sample in it, and rates were read pass after pass without a word (only a minute off was said).

    Judged on the newest sample stamped no later than now; where every sample is stamped ahead of our clock,
    on the newest of all, unless our clock just stepped back (those are then from before the step). They were
    dropped as from before a step, silently, pass after pass, while NVML's clock was ahead of ours."""
    if current:
        judged = current[-1].timestamp_us
    elif samples and not stepped_back:
        judged = samples[-1].timestamp_us
    else:
        return None
    skew_us = judged - now_us
    return skew_us if skew_us < -behind_us or skew_us > round(_MAX_AHEAD_S * 1_000_000) else None
