"""The protocol document's own examples, run against a real server on loopback.

``docs/hil/protocol.md`` holds ``hil-exchange`` blocks: bytes a client sends and the replies it
must receive (the block syntax is described in the document, section Examples).  Each block
runs on a fresh connection to a server of the named scenario with ``rtrigid serve``'s default
options, so the document cannot drift from the server.
"""
import math
import pathlib
import re
import socket
import struct

import pytest

from rtrigid import scenarios
from rtrigid.io.hil import Server

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "hil" / "protocol.md"
TIMEOUT = 10.0  # guards against a hang; no test measures speed
BLOCK = re.compile(r"^```hil-exchange[ \t]+(\S+)[ \t]*\n(.*?)^```", re.M | re.S)
TYPES = {"u8": "<B", "u16": "<H", "u32": "<I", "i32": "<i", "u64": "<Q", "f64": "<d"}
ANY = None  # a pattern byte that matches any byte


def blocks():
    """(scenario, first line number, block text) of every example in the document."""
    text = DOC.read_text(encoding="utf-8")
    return [(m.group(1), text.count("\n", 0, m.start()) + 2, m.group(2))
            for m in BLOCK.finditer(text)]


def tokens_to_pattern(tokens, where):
    """A list of byte values (ANY for a wildcard) and whether it ends with ``*``."""
    out, rest = [], False
    for i, tok in enumerate(tokens):
        if rest:
            raise ValueError(f"{where}: '*' must be the last token")
        if tok == "*":
            rest = True
        elif tok == "..":
            out.append(ANY)
        elif tok.startswith("str:"):
            raw = tok[4:].encode("utf-8")
            out += struct.pack("<H", len(raw)) + raw
        elif tok.startswith("zero:"):
            out += bytes(int(tok[5:]))
        elif ":" in tok:
            kind, value = tok.split(":", 1)
            if kind not in TYPES:
                raise ValueError(f"{where}: unknown type in {tok!r}")
            fmt = TYPES[kind]
            if value == "?":
                out += [ANY] * struct.calcsize(fmt)
            elif kind == "f64":
                out += struct.pack(fmt, float(value))
            else:
                out += struct.pack(fmt, int(value))
        elif re.fullmatch(r"(?:[0-9a-fA-F]{2})+", tok):
            out += bytes.fromhex(tok)
        else:
            raise ValueError(f"{where}: cannot read token {tok!r}")
    return list(out), rest


def parse(text, first_line):
    """The block as steps: ("send", bytes), ("recv", pattern, rest, line) or ("closed",)."""
    steps = []
    for number, line in enumerate(text.splitlines(), first_line):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{DOC.name}:{number}"
        if line == "closed":
            steps.append(("closed", where))
            continue
        direction, body = line[0], line[1:].split()
        if direction not in "<>":
            raise ValueError(f"{where}: a line starts with '>', '<' or is 'closed'")
        pattern, rest = tokens_to_pattern(body, where)
        if steps and steps[-1][0] == direction and not steps[-1][2]:
            _, before, _, start = steps[-1]
            steps[-1] = (direction, before + pattern, rest, start)
        else:
            steps.append((direction, pattern, rest, where))
    return steps


def recv_exact(sock, size):
    buf = b""
    while len(buf) < size:
        chunk = sock.recv(size - len(buf))
        if not chunk:
            raise AssertionError(f"the server closed the connection {len(buf)} bytes into "
                                 f"{size}")
        buf += chunk
    return buf


def matches(pattern, rest, data):
    if len(data) < len(pattern) or (not rest and len(data) != len(pattern)):
        return False
    return all(p is ANY or p == d for p, d in zip(pattern, data))


def show(pattern, data):
    want = " ".join(".." if p is ANY else f"{p:02x}" for p in pattern)
    return f"expected {want}\n     got {data.hex(' ')}"


@pytest.fixture(scope="module")
def servers():
    made = {}

    def get(name):
        if name not in made:
            # rtrigid serve's defaults: the scenario's integrator and dt, the Server's limits
            made[name] = Server(scenarios.build(name), port=0, scenario=name).start()
        return made[name]

    yield get
    for server in made.values():
        server.stop()


EXAMPLES = blocks()


def test_the_document_has_examples_of_every_request_and_error_kind():
    text = "\n".join(body for _, _, body in EXAMPLES)
    steps = [s for _, line, body in EXAMPLES for s in parse(body, line)]
    sent_kinds = {bytes(s[1][5:6])[0] for s in steps if s[0] == ">" and len(s[1]) >= 16}
    assert {1, 2, 3, 4, 5, 6} <= sent_kinds, sent_kinds
    for code in (1, 2, 3, 4, 6, 7):
        assert f"u16:{code} " in text, f"no example of ERROR {code}"
    assert any(s[0] == "closed" for s in steps)


@pytest.mark.parametrize("scenario, line, body", EXAMPLES,
                         ids=[f"line{line}" for _, line, _ in EXAMPLES])
def test_document_example(servers, scenario, line, body):
    steps = parse(body, line)
    server = servers(scenario)
    sock = socket.create_connection(server.address, timeout=TIMEOUT)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for step in steps:
            if step[0] == ">":
                assert ANY not in step[1], f"{step[3]}: a request cannot hold wildcards"
                sock.sendall(bytes(step[1]))
            elif step[0] == "<":
                _, pattern, rest, where = step
                head = recv_exact(sock, 16)
                (length,) = struct.unpack_from("<I", head, 12)
                data = head + recv_exact(sock, length)
                assert matches(pattern, rest, data), f"{where}: {show(pattern, data)}"
            else:
                try:
                    assert sock.recv(1) == b"", f"{step[1]}: expected the connection closed"
                except ConnectionResetError:
                    pass
    finally:
        sock.close()


def test_the_parser_rejects_what_it_cannot_check():
    """A typo in the document must fail, not turn into a pattern that matches anything."""
    for bad in ("u33:1", "f64:x", "abc", "* 00"):
        with pytest.raises(ValueError):
            tokens_to_pattern(bad.split(), "here")
    pattern, rest = tokens_to_pattern(["u32:1", "f64:inf", "..", "str:ab"], "here")
    assert bytes(p for p in pattern if p is not ANY) == (
        struct.pack("<Id", 1, math.inf) + b"\x02\x00ab")
    assert pattern[12] is ANY and not rest
    assert not matches(pattern, rest, bytes(len(pattern) + 1))  # no '*': the size is exact
