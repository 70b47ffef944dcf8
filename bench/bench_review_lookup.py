"""Instructions of one cached authorization lookup (`SubjectAccessReviewAuthorizer.cached`), the review cache's
part of every request the serving worker answers (`bench_request_cost.py` counts the whole request). Plain
script, no asserts; count under valgrind with two values of N, the difference over their difference is one
lookup's instructions (docs/performance.md, "A pod's models in whole, one lookup for a cached decision"):

    PYTHONHASHSEED=0 valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
        python bench/bench_review_lookup.py --lookups N
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def parse_args() -> argparse.Namespace:
    """The flags, parsed before the modules a run needs are imported (below), so that `--help` and a
    mistyped flag are answered at once."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--lookups", type=int, default=10_000,
                        help="cached lookups to make after the one review (default 10,000)")
    return parser.parse_args()


if __name__ == "__main__":
    parse_args()


from autoscaler.api.authz import SubjectAccessReviewAuthorizer  # noqa: E402
from autoscaler.api.identity import ResourceAttributes, UserInfo  # noqa: E402
from autoscaler.kube.reviews import AccessReviewResult  # noqa: E402

HPA = UserInfo("system:serviceaccount:kube-system:horizontal-pod-autoscaler",
               groups=("system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"))
METRIC = ResourceAttributes("get", "external.metrics.k8s.io", "v1beta1", "modelmesh_gpu_busy", "ml")


class Allowing:
    async def review_access(self, spec: dict[str, Any]) -> AccessReviewResult:
        return AccessReviewResult(True)


async def lookups(count: int) -> None:
    authorizer = SubjectAccessReviewAuthorizer(Allowing())
    await authorizer.authorize(HPA, METRIC)  # reviewed once, then found in the cache
    cached = authorizer.cached
    for _ in range(count):
        cached(HPA, METRIC)


def main() -> None:
    count = parse_args().lookups
    started = time.perf_counter()
    asyncio.run(lookups(count))
    took = time.perf_counter() - started
    # Timed for a first look only (the loop, the event loop's start and the one review included); the figure
    # to compare is the instruction count under valgrind, as the docstring says.
    print(f"{count} cached lookups in {took:.3f} s, the event loop and one review included "
          f"({took / max(count, 1) * 1e9:.0f} ns a lookup at most)")


if __name__ == "__main__":
    main()
