"""Reading Spark's JVM plan objects from Python (py4j): class names and Scala sequences, for the text guard
(:mod:`.guard`) and the plan check (:mod:`.access`)."""

from __future__ import annotations

from typing import Any

__all__ = ["simple_name", "seq", "drain"]


def simple_name(obj: Any) -> str:
    """A JVM object's class name without its package (and without a Scala object's ``$``)."""
    return str(obj.getClass().getSimpleName()).rstrip("$")


def seq(scala_seq: Any) -> list[Any]:
    """The items of a Scala sequence."""
    return drain(scala_seq.iterator())


def drain(iterator: Any) -> list[Any]:
    """The remaining items of a JVM iterator."""
    items = []
    while iterator.hasNext():
        items.append(iterator.next())
    return items
