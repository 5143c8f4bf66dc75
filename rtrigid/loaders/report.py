"""What a loader made of a file: :class:`LoadReport`, kept as ``model.load_report``.

Every element the loader met falls in one of three kinds:

- ``mapped``: simulated as the file means it;
- ``approximated``: simulated, but not exactly as the file's own simulator does (MuJoCo's
  soft joint limits become hard ones, say);
- ``ignored``: not simulated (a tendon, joint friction, a fluid), warned about once per
  kind of thing, and refused by ``strict=True``.

Each entry names where the element is (``file:line`` where the line is known, else the
file) so that a user can find it.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

KINDS = ("mapped", "approximated", "ignored")


@dataclass(frozen=True)
class Entry:
    """One element: its ``kind`` (of :data:`KINDS`), ``what`` it is (a short phrase that
    groups like elements), ``detail`` (what became of it) and ``where`` (file:line)."""

    kind: str
    what: str
    detail: str
    where: str


@dataclass
class LoadReport:
    """The entries of one load, in the order the loader met them; ``sensors``: the file's
    sensors that a simulation query reads (dicts of name, kind, the query and its
    arguments); ``geoms``: the collision geometry specs (see :mod:`rtrigid.loaders.geoms`)."""

    path: str
    entries: list = field(default_factory=list)
    sensors: list = field(default_factory=list)
    geoms: list = field(default_factory=list)

    def add(self, kind, what, detail, where):
        if kind not in KINDS:
            raise ValueError(f"kind: expected one of {KINDS}, got {kind!r}")
        self.entries.append(Entry(kind, what, detail, where))

    def of(self, kind):
        """The entries of one kind."""
        return [e for e in self.entries if e.kind == kind]

    @property
    def mapped(self):
        return self.of("mapped")

    @property
    def approximated(self):
        return self.of("approximated")

    @property
    def ignored(self):
        return self.of("ignored")

    def refuse_ignored(self):
        """``strict=True``: the first ignored element as a ``ValueError`` naming file:line."""
        ignored = self.ignored
        if ignored:
            e = ignored[0]
            more = f" (and {len(ignored) - 1} more ignored)" if len(ignored) > 1 else ""
            raise ValueError(
                f"{e.where}: {e.what}: {e.detail}; strict=True refuses what is not simulated{more}"
            )

    def warn(self, stacklevel=4, kinds=("approximated", "ignored")):
        """One warning per kind of thing ignored or approximated (of ``kinds``), listing
        where."""
        groups = {}
        for e in self.entries:
            if e.kind in kinds:
                groups.setdefault((e.kind, e.what, e.detail), []).append(e.where)
        for (kind, what, detail), where in groups.items():
            lines = [w.rsplit(":", 1)[1] for w in where if w.startswith(self.path + ":")]
            at = (
                f", lines {', '.join(lines)}"
                if lines and len(lines) == len(where)
                else f" ({'; '.join(where[:5])}{' ...' if len(where) > 5 else ''})"
            )
            warnings.warn(f"{self.path}: {what} {kind}: {detail}{at}", stacklevel=stacklevel)

    def __str__(self):
        out = [f"load report of {self.path}"]
        for kind in KINDS:
            entries = self.of(kind)
            out.append(f"{kind} ({len(entries)}):")
            out.extend(f"  {e.where}: {e.what}: {e.detail}" for e in entries)
        return "\n".join(out)
