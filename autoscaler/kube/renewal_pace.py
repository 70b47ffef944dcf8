"""When an exec plugin's credential (a token or a client certificate) is renewed, and which requests wait for it.

The token path (`credentials`) and the certificate path (`client_certificate`) follow one pace: renew a little
before the expiry (`renewal_time`), at once after the API server refused the credential (a 401, or for a
certificate a refused handshake) but at most every `EXEC_RETRY_S`, and every `EXEC_RETRY_S` while the plugin keeps
failing. A request that finds a renewal due starts the run (`PluginRun`); it goes on with the current credential
while that is valid and not refused, and otherwise waits for the run, as does a request made while a run that a
refusal started is under way. Written once: the two paths had drifted apart (a refused token was not renewed at
all, and requests during a refusal's run went out with the refused credential on one path and not the other).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from autoscaler.kube.exec_plugin import PluginRun

RENEW_BEFORE_S: Final = 300.0
"""Run the plugin again this long before the credential expires (the library's skew for tokens)..."""
RENEW_BEFORE_FRACTION: Final = 0.2
"""...or this fraction of its lifetime, when that is shorter (a 5-minute Pinniped certificate)."""
EXEC_RETRY_S: Final = 10.0
"""After a failed plugin run, how long requests use the last credential before the plugin runs again; after a run
a refusal asked for, how long before another refusal runs it again (a plugin that hands out the refused credential
again, or a 401 that is not the credential's, would otherwise start a process per request)."""


def renewal_time(now: float, expiry: float) -> float:
    """When a credential valid from `now` until `expiry` is renewed: `RENEW_BEFORE_S` before its expiry, or a
    fifth of its lifetime when that is shorter; never before `now`, never after `expiry`."""
    lifetime = max(0.0, expiry - now)
    return expiry - min(RENEW_BEFORE_S, RENEW_BEFORE_FRACTION * lifetime)


class RenewalPace:
    """One credential's pace: its expiry, when it is renewed, and whether the API server refused it."""

    def __init__(self, clock: Callable[[], float], expiry: float) -> None:
        self._clock = clock
        self.refused = False
        """A refusal of the current credential since the last renewal: renew at the next request..."""
        self._next_forced = -float("inf")  # ...at most every EXEC_RETRY_S: a refusal may not be the credential's
        self._next_try = -float("inf")  # after a failed run
        self.renewed(expiry)

    async def before_request(self, run: PluginRun) -> None:
        """Start the run where a renewal is due (concurrent requests run the plugin once), and wait for it where
        the current credential cannot serve: expired, or refused (a run a refusal started included)."""
        now = self._clock()
        if now >= self._next_try and (now >= self._renew_at or (self.refused and now >= self._next_forced)):
            await run.due(still_valid=not self.refused and now < self._expiry)
        elif self.refused and run.under_way:
            await run.join()  # the run a refusal started: not due again for EXEC_RETRY_S, yet refused

    def run_started(self) -> None:
        """A run begins: another refusal runs the plugin again only `EXEC_RETRY_S` from now."""
        self._next_forced = self._clock() + EXEC_RETRY_S

    def run_failed(self) -> None:
        """The run gave nothing usable: requests go on with the last credential for `EXEC_RETRY_S`."""
        self._next_try = self._clock() + EXEC_RETRY_S

    def renewed(self, expiry: float | None) -> None:
        """A credential valid until `expiry` is in use (None: no expiry stated, asked for again after
        `RENEW_BEFORE_S`, or at a refusal)."""
        now = self._clock()
        if expiry is None:
            self._expiry, self._renew_at = float("inf"), now + RENEW_BEFORE_S
        else:
            self._expiry, self._renew_at = expiry, renewal_time(now, expiry)
        self.refused = False
        self._next_try = -float("inf")
