"""The served values as the HPA reads them: a Kubernetes quantity, milli units (`1500m`) or plain (`2`)."""

from __future__ import annotations


def quantity_value(quantity: str) -> float:
    """`1500m` -> 1.5, `2` -> 2.0: the adapter serves milli quantities (`autoscaler.api.quantity`); the tests read
    them as the HPA does, written once here."""
    return int(quantity.removesuffix("m")) / 1000 if quantity.endswith("m") else float(quantity)
