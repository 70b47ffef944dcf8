"""Constructors for the frozen, slotted dataclasses the decision builds for every runtime and pod on every refresh.

A frozen dataclass's `__init__` sets each field through `object.__setattr__` (looked up on every call), about 0.15
µs a field: a runtime's `RuntimeView` (20 fields), `Aggregate` (17), four `ServedValue`s and four `SmoothState`s,
its `RuntimeMemory` and `Recommendation` come to some 80 fields (a pod's 13 fields are a plain tuple:
`model.PodViews`). Calling the slots' descriptors directly halves that; cheaper still is what Python does for a
plain slotted class: `obj.field = value` on a *mutable twin* (a subclass that adds no slots, so the same memory
layout, and takes back `object`'s own `__setattr__`, `__delattr__` and `__init__`) is a specialised store of a few
nanoseconds, and one `obj.__class__ = cls` at the end turns the object into the dataclass (Python allows that
assignment exactly between classes of the same layout, and checks it). For a 13-field dataclass that was 0.45 µs
instead of 1 µs through the descriptors and 1.8 µs through `__init__`.

Why the `__class__` swap is safe. CPython lets `obj.__class__ = cls` through only when the old and new
classes have the same instance layout: compatible bases, the same slots, no `__dict__` on one side only.
Otherwise it raises TypeError ("object layout differs"); it never reinterprets memory, and a field's value
stays under its name. A subclass that adds nothing to the layout (`__slots__ = ()`) passes the first test
CPython makes (its base *is* `cls`), which is why the twin is one rather than a sibling class with the same
`__slots__` (that one passes too, after a name-by-name comparison of the slots on every swap). `slot_twin`
swaps a probe object at import, so a layout mismatch fails at import, not mid-refresh. After the swap the
object *is* a `cls`:
equality, hashing, `repr`, pickling and frozenness are the dataclass's own (assignment raises
FrozenInstanceError as usual); the twin is never seen outside the builder.

What breaks if a field is added to (or moved in) one of these dataclasses: nothing silently. `slot_twin`
compares the caller's field list with the dataclass's and raises TypeError at import ("update the call
that builds it"), so the builder's call site (`decision`, `aggregation`, `podviews`) must name the new
field in order, and a function that fills a twin inline (`decision`, `smoothing`) must set it: a slot left unset raises
AttributeError when read. A new field with a default is no exception (the builders take every field). A
`__post_init__` (validation, derived fields) would be skipped by the builders, so it is refused at import.

`slot_builder(cls, fields)` returns a function taking every field positionally, defaults included, in the
order the caller names them (the dataclass's own, as above), generated once at import the way `dataclasses`
generates `__init__`. `slot_twin(cls, fields)` gives the twin itself, for code that fills objects inline
(`decision`, `smoothing`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, is_dataclass
from typing import Any, TypeVar

T = TypeVar("T")


def slot_twin(cls: type[T], names: tuple[str, ...]) -> type[Any]:
    """A mutable subclass of `cls` with its slots (`names`, its fields in order): fill an instance of it
    (`twin()`, then every field), then make it a `cls` with `obj.__class__ = cls`.

    Every field must be set before the object is used: an unset slot raises AttributeError on reading, as
    it would on a dataclass built without its `__init__`."""
    if not is_dataclass(cls) or "__slots__" not in cls.__dict__ or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: slot_builder needs a slotted dataclass without __post_init__")
    actual = tuple(f.name for f in fields(cls))
    if actual != names or tuple(cls.__dict__["__slots__"]) != names:
        raise TypeError(f"{cls.__name__}'s fields are {actual}, not {names}: update the call that builds it")
    # `object`'s own methods, not the dataclass's (frozen: `__setattr__` raises; `__init__` takes the fields):
    # CPython then gives the twin `object`'s C slots, so a store is specialised and `twin()` takes no arguments.
    twin: type[Any] = type(f"_{cls.__name__}Twin", (cls,), {
        "__slots__": (), "__setattr__": object.__setattr__, "__delattr__": object.__delattr__,
        "__init__": object.__init__, "__module__": __name__,
    })
    if any("__new__" in vars(base) for base in cls.__mro__[:-1]):  # `twin()` would call it
        raise TypeError(f"{cls.__name__}: slot_builder needs a class without its own __new__")
    probe = twin()  # the builders call the twin (cheaper than `object.__new__(twin)`)
    probe.__class__ = cls  # raises TypeError here, at import, should the layouts ever differ
    return twin


def slot_builder(cls: type[T], names: tuple[str, ...]) -> Callable[..., T]:
    """A constructor of `cls` that takes all its fields positionally (`names`, in field order) and fills a
    twin (`slot_twin`) that it turns into a `cls`."""
    namespace: dict[str, Any] = {"_cls": cls, "_twin": slot_twin(cls, names)}
    lines = [f"def build_{cls.__name__}({', '.join(names)}):", "    o = _twin()"]
    lines.extend(f"    o.{name} = {name}" for name in names)
    lines.extend(("    o.__class__ = _cls", "    return o"))
    exec("\n".join(lines), namespace)
    built: Callable[..., T] = namespace[f"build_{cls.__name__}"]
    built.__doc__ = f"{cls.__name__}({', '.join(names)}), filled through a twin (see policies/slots.py)."
    return built
