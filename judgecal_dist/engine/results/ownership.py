"""Folders a command owns by a marker file: the one rule for claiming, reading and refusing them.

A command that writes into a folder the user names (``score --output``, ``drift --report``) writes only into a new
or empty folder, or one holding its marker; the marker lists the files it wrote, so a rerun removes only those,
never a path outside the command's own names or out of the folder. Anything else is refused before a byte is
written.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from judgecal_dist.errors import InputError

__all__ = ["Ownership"]


@dataclass(frozen=True)
class Ownership:
    """Who owns a folder: the marker's file name and format, the command and option named in refusals, and the
    top-level names (prefixes) the marker may list."""

    marker: str
    format: str
    command: str
    option: str
    own_names: tuple[str, ...]

    def document(self, files: Sequence[str], **fields: Any) -> dict[str, Any]:
        """The marker's content listing ``files`` (plus the command's own ``fields``)."""
        return {"format": self.format, "owner": f"judgecal {self.command}", **fields, "files": list(files)}

    def read(self, url: str, files: Sequence[str], read_bytes: Callable[[str], bytes]) -> dict[str, Any] | None:
        """The marker of the folder at ``url`` holding ``files`` (names relative to it), or None when it holds none.

        Refuses (naming the folder or the marker and ``option``) a folder with files and no marker, a marker that is
        not JSON or not this command's, and a marker listing a path outside ``own_names`` or out of the folder.
        """
        if self.marker not in files:
            if files:
                raise InputError(
                    f"{url}: holds {len(files)} file(s) that judgecal {self.command} did not write (e.g. "
                    f"{list(files)[:3]}) and no {self.marker} marker; {self.command} writes only into a new or empty "
                    f"folder, or one it marked as its own (it never deletes files it did not write): choose another "
                    f"{self.option}"
                )
            return None
        where = f"{url}/{self.marker}"
        try:
            content = json.loads(read_bytes(self.marker).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise InputError(f"{where}: not a {self.command} marker ({err}); choose another {self.option}") from err
        listed = content.get("files") if isinstance(content, dict) else None
        own = isinstance(listed, list) and all(
            isinstance(f, str) and f.startswith(self.own_names) and ".." not in f.split("/") for f in listed
        )
        if not own or content.get("format") != self.format:
            raise InputError(f"{where}: not a {self.format} marker; choose another {self.option}")
        return dict(content)
