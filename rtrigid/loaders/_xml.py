"""A small XML tree that remembers the line of every element, for error messages.

The standard library's expat parser is used directly: ``xml.etree`` drops line numbers, and
the URDF packages (urdf_parser_py, yourdfpy) keep neither the line of an element nor the tags
they do not know, which a loader that refuses what it cannot simulate needs.
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass, field
from xml.parsers import expat

import numpy as np


@dataclass
class Node:
    tag: str
    attrib: dict
    line: int
    children: list = field(default_factory=list)

    def find(self, tag):
        return next((c for c in self.children if c.tag == tag), None)

    def findall(self, tag):
        return [c for c in self.children if c.tag == tag]


def _walk(nodes):
    for node in nodes:
        yield node
        yield from _walk(node.children)


class Source:
    """A parsed file: its root :class:`Node` and the error helpers that name file and line."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self.ignored = {}  # what was ignored -> its lines, for one warning each
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise ValueError(f"path: cannot read {self.path!r}: {e.strerror}") from None
        parser = expat.ParserCreate()
        stack, roots = [], []

        def start(tag, attrib):
            node = Node(tag, dict(attrib), parser.CurrentLineNumber)
            (stack[-1].children if stack else roots).append(node)
            stack.append(node)

        parser.StartElementHandler = start
        parser.EndElementHandler = lambda tag: stack.pop()
        # blank lines before the XML declaration (pybullet's and MuJoCo's readers allow them):
        # parsed from the declaration on, the lines counted from the file's first
        body = data.lstrip()
        skipped = data[: len(data) - len(body)].count(b"\n")
        try:
            parser.Parse(body, True)
        except expat.ExpatError as e:
            if not (roots and not stack):
                raise ValueError(
                    f"{self.path}:{e.lineno + skipped}: malformed XML: {expat.ErrorString(e.code)}"
                ) from None
            # text after the root element closed (pybullet's reader stops there too)
            self.ignored.setdefault("text after the root element ignored", []).append(
                e.lineno + skipped
            )
        if skipped:
            for node in _walk(roots):
                node.line += skipped
        self.root = roots[0]

    def error(self, node, message):
        """A ``ValueError`` naming the file, the element and its line."""
        name = node.attrib.get("name")
        what = f"<{node.tag} name={name!r}>" if name else f"<{node.tag}>"
        return ValueError(f"{self.path}:{node.line}: {what}: {message}")

    def warn_ignored(self):
        """One warning per kind of thing ignored, with its lines (at the loader's caller)."""
        for what, lines in self.ignored.items():
            warnings.warn(f"{self.path}: {what}, lines {', '.join(map(str, lines))}", stacklevel=4)

    def where(self, node):
        return f"{self.path}:{node.line}"

    def floats(self, node, key, n, default=None):
        """Attribute ``key`` of ``node`` as ``n`` finite floats (a float if ``n`` is 1)."""
        text = node.attrib.get(key)
        if text is None:
            if default is None:
                raise self.error(node, f"missing attribute {key!r}")
            return default
        # commas between numbers allowed, as pybullet's reader allows them
        v = np.array([self._number(node, key, text, t) for t in text.replace(",", " ").split()])
        if n == 3 and len(v) > 3:  # pybullet reads a vector's first three numbers
            self.ignored.setdefault(f"{key}: numbers past the third ignored", []).append(node.line)
            v = v[:3]
        if len(v) != n or not np.all(np.isfinite(v)):
            raise self.error(node, f"attribute {key}={text!r}: expected {n} finite numbers")
        return float(v[0]) if n == 1 else v

    def _number(self, node, key, text, token):
        """One number of an attribute; a number with trailing characters (``-1.57.``) is
        read as its number, as pybullet reads it, and listed as ignored."""
        try:
            return float(token)
        except ValueError:
            pass
        lead = re.match(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", token)
        if lead is None:
            raise self.error(node, f"attribute {key}={text!r} is not a list of numbers")
        self.ignored.setdefault(
            f"{key}: characters after a number ignored ({token!r} read as {lead.group(0)})", []
        ).append(node.line)
        return float(lead.group(0))

    def name(self, node):
        name = node.attrib.get("name")
        if not name:
            raise self.error(node, "missing attribute 'name'")
        return name


class ElementIndex:
    """Where each element of an MJCF file is: ``file:line`` by kind and document order.

    MuJoCo's compiled model numbers bodies, joints, geoms, actuators, ... in document order
    (includes expanded in place) and keeps their names, but not their lines.  This index
    walks the same text (``<include file>`` followed, relative to the main file's folder, as
    MuJoCo resolves it) and lists each kind's elements in order, so the compiled element of a
    name, or else of an ordinal, is found.  A file the index cannot read (MuJoCo accepts some
    XML expat does not) leaves it empty: places are then the file alone.
    """

    # kind -> (tags, parent tags) of its elements
    KINDS = {
        "body": ({"body"}, None),
        "joint": ({"joint", "freejoint"}, {"body"}),
        "geom": ({"geom"}, {"body", "worldbody", "frame"}),
        "site": ({"site"}, {"body", "worldbody", "frame"}),
        "actuator": (None, {"actuator"}),
        "sensor": (None, {"sensor"}),
        "equality": (None, {"equality"}),
        "tendon": (None, {"tendon"}),
        "mesh": ({"mesh"}, {"asset"}),
        "option": ({"option"}, {"mujoco"}),
        "flag": ({"flag"}, {"option"}),
        "keyframe": ({"key"}, {"keyframe"}),
        "contact": ({"pair", "exclude"}, {"contact"}),
    }

    def __init__(self, path):
        self.path = os.fspath(path)
        self.elements = {kind: [] for kind in self.KINDS}
        self._read(self.path, depth=0)

    def _read(self, path, depth):
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            return
        body = data.lstrip()  # MuJoCo reads files whose XML does not start at the first byte
        skipped = data[: len(data) - len(body)].count(b"\n")
        parser = expat.ParserCreate()
        stack = []

        def start(tag, attrib):
            line = parser.CurrentLineNumber + skipped
            parent = stack[-1] if stack else None
            stack.append(tag)
            if tag == "include" and "file" in attrib and depth < 8:
                self._read(os.path.join(os.path.dirname(self.path), attrib["file"]), depth + 1)
                return
            if "default" in stack[:-1]:
                return
            for kind, (tags, parents) in self.KINDS.items():
                if (tags is None or tag in tags) and (parents is None or parent in parents):
                    self.elements[kind].append(
                        (attrib.get("name", ""), f"{path}:{line}", dict(attrib))
                    )

        parser.StartElementHandler = start
        parser.EndElementHandler = lambda tag: stack.pop()
        try:
            parser.Parse(body, True)
        except expat.ExpatError:
            return

    def where(self, kind, index=None, name=""):
        """``file:line`` of the ``index``-th element of ``kind`` (0-based, document order),
        found by its ``name`` where it has one; the file alone if it is not found."""
        found = self.elements.get(kind, [])
        if name:
            hits = [w for n, w, _ in found if n == name]
            if len(hits) == 1:
                return hits[0]
        if index is not None and 0 <= index < len(found) and (not name or found[index][0] == name):
            return found[index][1]
        return self.path

    def attribute(self, kind, key):
        """(value, ``file:line``) of the last element of ``kind`` giving attribute ``key``
        (MuJoCo's later elements override earlier ones), or (None, the file)."""
        for _, where, attrib in reversed(self.elements.get(kind, [])):
            if key in attrib:
                return attrib[key], where
        return None, self.path
