"""What a `simulate` run needs where the test reads only how its trace was read (report.json's `trace`, its
warnings): one policy, and the cheapest. The default four, and skew-aware's advice replayed under each advised
setting, are what a run is for, and cost what the test never looks at: a day of timers took 1.6 CPU-s, 0.35
with fixed alone."""

from __future__ import annotations

from typing import Final

ONE_POLICY: Final = ("--policies", "fixed")
"""fixed: a pod count sized once from the peak, no HPA, no advice."""
