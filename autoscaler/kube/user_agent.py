"""What the adapter calls itself to the Kubernetes API: `modelmesh-autoscaler/VERSION (PART)`.

The API server's audit log records each request's User-Agent beside its user (here the adapter's service account,
which every client shares). The library's own (`OpenAPI-Generator/37.0.2/python`) names no one an operator can
find there; the part in brackets says which of the adapter's clients called. No library import: the serving
workers, which make the reviews, never load it.
"""

from __future__ import annotations

from autoscaler import __version__


def user_agent(part: str) -> str:
    """`modelmesh-autoscaler/0.1.0 (discovery)`: the adapter, its version and which of its clients calls."""
    return f"modelmesh-autoscaler/{__version__} ({part})"
