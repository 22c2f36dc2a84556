"""Faults and edits the tests inject, written once: a full disk at a run's figures, a field of a model document
set or removed by its dotted path."""

from __future__ import annotations

from typing import Any

__all__ = ["fail_figures", "set_dotted"]


def fail_figures(monkeypatch: Any) -> None:
    """A fault at the run's figures (a full disk), after its replicates were committed."""
    from judgecal_dist.engine.results.store import RunStore

    real = RunStore.write_bytes

    def write_bytes(self: RunStore, name: str, data: bytes) -> None:
        if name.startswith("figures/"):
            raise OSError(f"{self.url_of(name)}: figures: no space left on device")
        real(self, name, data)

    monkeypatch.setattr(RunStore, "write_bytes", write_bytes)


def set_dotted(doc: Any, path: str, value: Any) -> None:
    """Set the field at the dotted ``path`` of a JSON document in place (list items by index; ``...`` removes it)."""
    *parents, last = path.split(".")
    node = doc
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value is ...:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
