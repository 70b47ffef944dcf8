"""Constructors for the frozen, slotted dataclasses the decision builds for every runtime on every refresh.

A frozen dataclass's `__init__` sets each field through `object.__setattr__` (looked up on every call), about
0.15 µs a field: a runtime's `RuntimeView` (19 fields), `Aggregate` (17), four `ServedValue`s and four
`SmoothState`s, its `RuntimeMemory` and `Recommendation` come to some 80 fields, over 10 µs a runtime, and
at 5,000 runtimes that is a large share of a refresh. Writing the slots through their descriptors (what
`object.__setattr__` ends up doing) costs half. The objects are ordinary instances of the class: equality,
hashing, `repr` and pickling are the dataclass's own.

`slot_builder(cls, fields)` returns a function taking every field positionally, defaults included; the
caller names the fields in the order it passes them, and they must be the dataclass's, in its order: a field
added to or moved in the model then fails at import instead of shifting values into the wrong fields. The
function is generated once, at import, the way `dataclasses` generates `__init__`; a class with
`__post_init__` or without slots is refused, since the builder would skip what its `__init__` does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, is_dataclass
from typing import Any, TypeVar

T = TypeVar("T")


def slot_builder(cls: type[T], names: tuple[str, ...]) -> Callable[..., T]:
    """A constructor of `cls` that takes all its fields positionally (`names`, in field order) and writes
    them through the slots."""
    if not is_dataclass(cls) or "__slots__" not in cls.__dict__ or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: slot_builder needs a slotted dataclass without __post_init__")
    actual = tuple(f.name for f in fields(cls))
    if actual != names:
        raise TypeError(f"{cls.__name__}'s fields are {actual}, not {names}: update the call that builds it")
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    lines = [f"def build_{cls.__name__}({', '.join(names)}):", "    o = _new(_cls)"]
    for i, name in enumerate(names):
        namespace[f"_set{i}"] = getattr(cls, name).__set__
        lines.append(f"    _set{i}(o, {name})")
    lines.append("    return o")
    exec("\n".join(lines), namespace)
    built: Callable[..., T] = namespace[f"build_{cls.__name__}"]
    built.__doc__ = f"{cls.__name__}({', '.join(names)}), its slots written directly (see policies/slots.py)."
    return built
