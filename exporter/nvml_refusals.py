"""`RefusedQueries`: NVML's refusals of one query, per device, said again without asking until a while has passed.

Some refusals are for good: NVML measures no utilization per MIG device, in a container on a MIG GPU it refuses
a MIG device's memory query (NO_PERMISSION), and a unified-memory GPU (Grace Hopper, GB10) lacks the memory query
(NOT_SUPPORTED). Asked at every pass, each was a failing driver call a second per
device, for the container's life. Remembered here by UUID and asked again after `ask_again_s`, so a device that
does answer later (given to this container after all, a driver upgraded) is read again within that time. One
mechanism for every such query (`exporter.gpu_busy`'s utilization, `exporter.gpu_sampler`'s memory).

Timed on a monotonic clock of its own: on the wall clock, an NTP step back of an hour kept a device that answered
again unread for that hour, and a step forward asked every refused device at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from exporter import nvml_errors


def fresh_copy(refusal: nvml_errors.NotSupported) -> nvml_errors.NotSupported:
    """The refusal again, with the same words and code and no traceback: raised or kept, a copy holds no frames."""
    return type(refusal)(str(refusal), refusal.code)


class RefusedQueries:
    """One NVML query's standing refusals, by device UUID."""

    def __init__(self, ask_again_s: float, monotonic: Callable[[], float] = time.monotonic) -> None:
        """`ask_again_s`: seconds a refusal stands before the device is asked again, on `monotonic` (a clock no step
        of the wall clock moves; a test's stepped clock)."""
        self._ask_again_s = ask_again_s
        self._monotonic = monotonic
        self._refused: dict[str, tuple[nvml_errors.NotSupported, float]] = {}

    def standing(self, uuid: str) -> nvml_errors.NotSupported | None:
        """The device's refusal (a fresh copy) while it stands, else None: then ask the device, and `remember` a
        refusal."""
        remembered = self._refused.get(uuid)
        if remembered is None:
            return None
        refusal, ask_again_at = remembered
        if self._monotonic() < ask_again_at:
            return fresh_copy(refusal)
        del self._refused[uuid]
        return None

    def remember(self, uuid: str, refusal: nvml_errors.NotSupported) -> None:
        """Stand by the device's `refusal` for `ask_again_s` from now."""
        self._refused[uuid] = (fresh_copy(refusal), self._monotonic() + self._ask_again_s)

    def keep_only(self, uuids: Iterable[str]) -> None:
        """Forget the refusals of every device not in `uuids` (no longer chosen or visible)."""
        wanted = set(uuids)
        self._refused = {uuid: remembered for uuid, remembered in self._refused.items() if uuid in wanted}
