"""A small XML tree that remembers the line of every element, for error messages.

The standard library's expat parser is used directly: ``xml.etree`` drops line numbers, and
the URDF packages (urdf_parser_py, yourdfpy) keep neither the line of an element nor the tags
they do not know, which a loader that refuses what it cannot simulate needs.
"""
from __future__ import annotations

import os
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
        try:
            parser.Parse(data, True)
        except expat.ExpatError as e:
            raise ValueError(f"{self.path}:{e.lineno}: malformed XML: "
                             f"{expat.ErrorString(e.code)}") from None
        self.root = roots[0]

    def error(self, node, message):
        """A ``ValueError`` naming the file, the element and its line."""
        name = node.attrib.get("name")
        what = f"<{node.tag} name={name!r}>" if name else f"<{node.tag}>"
        return ValueError(f"{self.path}:{node.line}: {what}: {message}")

    def warn_ignored(self):
        """One warning per kind of thing ignored, with its lines (at the loader's caller)."""
        for what, lines in self.ignored.items():
            warnings.warn(f"{self.path}: {what}, lines {', '.join(map(str, lines))}",
                          stacklevel=4)

    def where(self, node):
        return f"{self.path}:{node.line}"

    def floats(self, node, key, n, default=None):
        """Attribute ``key`` of ``node`` as ``n`` finite floats (a float if ``n`` is 1)."""
        text = node.attrib.get(key)
        if text is None:
            if default is None:
                raise self.error(node, f"missing attribute {key!r}")
            return default
        try:
            v = np.array([float(t) for t in text.split()])
        except ValueError:
            raise self.error(node, f"attribute {key}={text!r} is not a list of numbers") from None
        if len(v) != n or not np.all(np.isfinite(v)):
            raise self.error(node, f"attribute {key}={text!r}: expected {n} finite numbers")
        return float(v[0]) if n == 1 else v

    def name(self, node):
        name = node.attrib.get("name")
        if not name:
            raise self.error(node, "missing attribute 'name'")
        return name
