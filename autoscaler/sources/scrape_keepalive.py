"""How long the scrape keeps an idle connection to an exporter: across refreshes, so that a fleet served over
HTTPS pays one TLS handshake per pod when the adapter starts, not one per pod at every refresh.

aiohttp's pool drops a connection idle for 15 s, the default refresh interval: about every other refresh met
each pod with a new connection and a full handshake, a millisecond of CPU on each side per pod (over a second
per refresh at 1,000 pods, bench/bench_scrape_tls.py). A pod's connection idles one refresh interval, and up to
two when it was scraped first in one refresh and last in the next (each refresh ends by its deadline, the
interval). The exporter closes a connection idle for `KEEPALIVE_TIMEOUT_S` (75 s): the adapter drops its own
`CLOSE_BEFORE_EXPORTER_S` before, so that a scrape is never sent on a connection the exporter is closing. At
refresh intervals past that, no connection can be reused, and each is dropped 70 s after its scrape.

Python's ssl resumes no TLS session unless handed the last one, which neither asyncio nor aiohttp do: a
connection kept is the only handshake saved.
"""

from __future__ import annotations

from typing import Final

from exporter.listen import KEEPALIVE_TIMEOUT_S

CLOSE_BEFORE_EXPORTER_S: Final = 5.0
"""The adapter's margin under the exporter's keep-alive."""


def scrape_keepalive_s(refresh_interval_s: float) -> float:
    """Seconds the scrape's pool keeps an idle connection, for this refresh interval (`--refresh-interval`)."""
    return min(2 * refresh_interval_s, KEEPALIVE_TIMEOUT_S - CLOSE_BEFORE_EXPORTER_S)
