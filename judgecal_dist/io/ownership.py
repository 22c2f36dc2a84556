"""Folders a command owns: the one rule for claiming, reading, reusing and refusing committed results.

Every command that writes a committed result (``score --output``, ``drift --report``, the run folders of
``run``/``fit``) follows it, and refuses before a byte is written:

- a new or empty folder is claimed; a folder holding files the command did not write (no marker) is refused;
- a committed result of the same inputs (settings and the content fingerprints of the input files) is returned as
  it is, with one "already complete" line (:meth:`Ownership.reuse`); an unfinished one of the same inputs resumes;
- a committed result of other inputs is refused, naming the folder and the fix, unless ``--overwrite`` is given;
  then only the files the marker lists are replaced (a user's own files are never deleted);
- an output folder equal to or inside an input (:func:`refuse_output_inside`) is refused before any input is
  read: each rerun would find its own output among its inputs, so the inputs change under it.

The marker lists the files the command wrote, so a rerun removes only those, never a path outside the command's
own names or out of the folder.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from judgecal_dist.errors import InputError
from judgecal_dist.io.filesystem import is_inside, location_key

__all__ = ["Ownership", "refuse_output_inside"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Ownership:
    """Who owns a folder: the marker's file name and format, the command and option named in refusals, and the
    top-level names (prefixes) the marker may list."""

    marker: str
    format: str
    command: str
    option: str
    own_names: tuple[str, ...]

    def reuse(
        self,
        url: str,
        found: Mapping[str, Any] | None,
        inputs: Mapping[str, Any],
        *,
        committed: bool,
        overwrite: bool | None,
    ) -> bool:
        """Whether the committed result at ``url`` is this very result, to be returned as it is.

        ``found`` is the identity the folder records (its marker's ``inputs``; None when no result of known
        inputs is there, e.g. an unfinished write of its own), ``inputs`` this call's. True (said on one line)
        when a committed result has the same inputs and ``overwrite`` is not set; False when the caller writes
        (resumes the same inputs, replaces an unfinished write, or ``overwrite``). ``overwrite=None``: the command
        has no ``--overwrite``.

        Raises
        ------
        InputError
            A result of other inputs and no ``overwrite``; nothing is written or removed.
        """
        if found is None or overwrite:
            return False
        if dict(found) == dict(inputs):
            if committed:
                log.info("%s: already complete (judgecal %s of the same inputs); nothing written", url, self.command)
            return committed
        differ = sorted(k for k in {*found, *inputs} if found.get(k) != inputs.get(k))
        fix = f"pass --overwrite to replace it, or choose another {self.option}"
        raise InputError(
            f"{url}: holds a committed judgecal {self.command} result of other inputs (differing: "
            f"{', '.join(differ)}); {fix if overwrite is not None else f'choose another {self.option}'}"
        )

    def document(self, files: Sequence[str], **fields: Any) -> dict[str, Any]:
        """The marker's content listing ``files`` (plus the command's own ``fields``)."""
        return {"format": self.format, "owner": f"judgecal {self.command}", **fields, "files": list(files)}

    def refuse_unmarked(self, url: str, files: Sequence[str]) -> None:
        """Refuse the folder at ``url`` when it holds ``files`` (names relative to it) but no marker of this command.

        Raises
        ------
        InputError
            One line naming the folder, a few of the files and the fix.
        """
        if files:
            raise InputError(
                f"{url}: holds {len(files)} file(s) that judgecal {self.command} did not write (e.g. "
                f"{list(files)[:3]}) and no {self.marker} marker; {self.command} writes only into a new or empty "
                f"folder, or one it marked as its own (it never deletes files it did not write; an older judgecal's "
                f"result has no marker): move them out of the folder, or choose another {self.option}"
            )

    def read(self, url: str, files: Sequence[str], read_bytes: Callable[[str], bytes]) -> dict[str, Any] | None:
        """The marker of the folder at ``url`` holding ``files`` (names relative to it), or None when it holds none.

        Refuses (naming the folder or the marker and ``option``) a folder with files and no marker, a marker that is
        not JSON or not this command's, and a marker listing a path outside ``own_names`` or out of the folder.
        """
        if self.marker not in files:
            self.refuse_unmarked(url, files)
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


def refuse_output_inside(output: str, output_option: str, inputs: Mapping[str, str | None]) -> None:
    """Refuse an ``output`` equal to or inside one of ``inputs`` (option -> URL), before any input is read.

    A result written into its own input changes that input's fingerprint, so every identical rerun would find
    other inputs and recompute (or, for a dataset, read its own results back as data).

    Raises
    ------
    InputError
        One line naming both options and the fix (an output folder outside the input).
    """
    target = location_key(output)
    for option, url in inputs.items():
        if not url:
            continue
        root = location_key(url)
        if is_inside(target, root):
            relation = "is" if target == root else "is inside"
            raise InputError(
                f"{output_option}: {output} {relation} {option} {url}: a result written into its input changes the "
                f"input under every rerun; choose an {output_option} outside {url}"
            )
