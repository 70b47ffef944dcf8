"""A runtime's view as /debug shows it where no pod-deletion cost is written: each pod's `deletion_cost` null.

Why: /debug's per-pod `deletion_cost` is read as the order the ReplicaSet removes the runtime's pods in. Where
nothing writes it (`--deletion-cost off`; a policy-file runtime outside `--namespaces`,
`autoscaler.costs_left_outside`) the ranking's cost shown there (900 beside 0 on pods nobody annotated) is an
order nothing follows. The ranking itself stays shown, as each pod's `need`; the values served are untouched.
"""

from __future__ import annotations

import dataclasses
from typing import Final, cast

from autoscaler.model import POD_FIELDS, PodRow, PodViews, RuntimeView

_COST: Final = POD_FIELDS.index("deletion_cost")


def warned(view: RuntimeView, warning: str) -> RuntimeView:
    """`view` with `warning` added to its /debug `warnings`."""
    return dataclasses.replace(view, warnings=(*view.warnings, warning))


def without_costs(view: RuntimeView) -> RuntimeView:
    """`view` with no pod's deletion cost: about 4 µs a runtime and a quarter of one a pod, on the rows
    (`PodViews`) rather than a `PodView` per pod, since under `--deletion-cost off` it runs for every runtime on
    every refresh."""
    rows = tuple(cast(PodRow, (*row[:_COST], None, *row[_COST + 1:])) for row in view.pods.rows)
    return dataclasses.replace(view, pods=PodViews(rows))
