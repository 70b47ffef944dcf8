"""`slot_builder` makes ordinary instances: equal to, hashing like and printing like the dataclass's own."""

from __future__ import annotations

import pickle
from dataclasses import dataclass, fields

import pytest

from autoscaler.model import ServedValue
from autoscaler.policies.slots import slot_builder, slot_twin
from autoscaler.policies.smoothing import SmoothState


def test_built_objects_are_the_dataclass_s_own() -> None:
    build = slot_builder(ServedValue, ("value", "raw", "timestamp"))
    built = build(3.0, 2.5, None)
    assert built == ServedValue(value=3.0, raw=2.5, timestamp=None)
    assert hash(built) == hash(ServedValue(3.0, 2.5, None))
    assert repr(built) == "ServedValue(value=3.0, raw=2.5, timestamp=None)"
    assert pickle.loads(pickle.dumps(built)) == built
    assert [f.name for f in fields(built)] == ["value", "raw", "timestamp"]
    with pytest.raises(AttributeError):
        built.value = 4.0  # type: ignore[misc]  # still frozen
    assert slot_builder(SmoothState, ("value", "updated_at"))(1.5, 10.0) == SmoothState(value=1.5, updated_at=10.0)

    @dataclass(frozen=True, slots=True, order=True)
    class Ordered:
        namespace: str
        deployment: str

    assert slot_builder(Ordered, ("namespace", "deployment"))("ns", "d") < Ordered("ns", "e")  # ordering too


def test_a_class_the_builder_would_get_wrong_is_refused() -> None:
    @dataclass(frozen=True)
    class NoSlots:
        x: int

    @dataclass(frozen=True, slots=True)
    class Checked:
        x: int

        def __post_init__(self) -> None:
            if self.x < 0:
                raise ValueError("negative")

    for cls in (NoSlots, Checked):
        with pytest.raises(TypeError, match="slotted dataclass without __post_init__"):
            slot_builder(cls, ("x",))


def test_fields_named_out_of_order_or_missing_fail_at_once() -> None:
    """A field added to or moved in a model must not shift values into the wrong fields."""
    with pytest.raises(TypeError, match="update the call"):
        slot_builder(ServedValue, ("raw", "value", "timestamp"))
    with pytest.raises(TypeError, match="update the call"):
        slot_builder(ServedValue, ("value", "raw"))


def test_a_twin_filled_field_by_field_becomes_the_dataclass_s_own_object() -> None:
    twin = slot_twin(ServedValue, ("value", "raw", "timestamp"))
    assert twin.__mro__[1] is ServedValue  # a subclass adding nothing to the layout, with object's __setattr__
    built = twin()
    built.value, built.raw, built.timestamp = 1.0, None, 5.0
    built.__class__ = ServedValue
    assert type(built) is ServedValue
    assert built == ServedValue(1.0, None, 5.0)
    assert pickle.loads(pickle.dumps(built)) == built
    with pytest.raises(AttributeError):
        built.value = 2.0  # type: ignore[misc]  # frozen again


def test_a_twin_of_a_class_whose_slots_differ_from_its_fields_is_refused() -> None:
    @dataclass(frozen=True, slots=True)
    class Base:
        x: int

    @dataclass(frozen=True, slots=True)
    class Derived(Base):
        y: int

    with pytest.raises(TypeError, match="update the call"):
        slot_twin(Derived, ("x", "y"))
    assert slot_builder(Base, ("x",))(3) == Base(3)


def test_a_class_with_its_own_new_is_refused() -> None:
    """The twin is called (`twin()`), which would call a `__new__` of the class with no arguments."""
    @dataclass(frozen=True, slots=True)
    class Interned:
        x: int

        def __new__(cls, x: int = 0) -> Interned:
            return object.__new__(cls)

    with pytest.raises(TypeError, match="without its own __new__"):
        slot_builder(Interned, ("x",))
