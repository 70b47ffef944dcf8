"""Reading parsed JSON or YAML documents whose shape tests do not want to spell out."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def values_at(node: Any, key: str) -> Iterator[Any]:
    """Every value under `key` in `node`, however deep in its maps and lists (an OpenAPI document's `$ref`s, a
    dashboard's `expr`s), in document order; a value under `key` is not searched further."""
    if isinstance(node, dict):
        for name, value in node.items():
            if name == key:
                yield value
            else:
                yield from values_at(value, key)
    elif isinstance(node, list):
        for item in node:
            yield from values_at(item, key)
