"""The logger of the guarded listener (`connections.py` and the modules it was split into:
`malformed_requests.py`, `connection_room.py`, `guarded_connection.py`).

One name, `autoscaler.api.connections`, as before the split: it is in every line the listener logs, and a
platform engineer's log filter or `--log-level` for it must keep matching.
"""

from __future__ import annotations

import logging

log = logging.getLogger("autoscaler.api.connections")
