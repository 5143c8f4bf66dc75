"""The stream examples of the protocol document (``hil-stream`` blocks), run against a real
:class:`StreamServer` on a real UDP socket on loopback, its clock moved by hand.

A block's ``>`` datagrams are sent to a fresh server of the named scenario (the defaults of
``rtrigid serve --udp``), ``tick N`` runs N ticks of it in this thread, ``<`` is the next
datagram received, ``skip N`` ignores N of them and ``none`` checks that nothing more came;
a line that begins with four bytes in hex (the magic) starts a new datagram.
Datagrams on loopback are queued for the receiver when ``sendto`` returns, so what a tick
reads and sends does not depend on timing.
"""
import re
import socket

import pytest

from rtrigid import scenarios
from rtrigid.io.hil.stream import StreamServer
from rtrigid.io.realtime import ManualClock
from tests.io.test_hil_spec import ANY, DOC, matches, show, tokens_to_pattern

BLOCK = re.compile(r"^```hil-stream[ \t]+(\S+)[ \t]*\n(.*?)^```", re.M | re.S)
TIMEOUT = 10.0  # guards against a hang; no test measures speed


def blocks():
    text = DOC.read_text(encoding="utf-8")
    return [(m.group(1), text.count("\n", 0, m.start()) + 2, m.group(2))
            for m in BLOCK.finditer(text)]


def parse(text, first_line):
    """The block as steps: (">", bytes), ("<", pattern, rest), ("tick", n), ("skip", n),
    ("none",), each with its line."""
    steps = []
    for number, line in enumerate(text.splitlines(), first_line):
        line = line.split("#", 1)[0].strip()
        where = f"{DOC.name}:{number}"
        if not line:
            continue
        word = line.split()
        if word[0] in ("tick", "skip"):
            if len(word) != 2 or not word[1].isdigit():
                raise ValueError(f"{where}: expected '{word[0]} N'")
            steps.append((word[0], int(word[1]), where))
            continue
        if line == "none":
            steps.append(("none", where))
            continue
        direction = line[0]
        if direction not in "<>":
            raise ValueError(f"{where}: a line starts with '>', '<', 'tick', 'skip' or is "
                             "'none'")
        tokens = line[1:].split()
        pattern, rest = tokens_to_pattern(tokens, where)
        last = steps[-1] if steps else None
        starts = bool(tokens) and re.fullmatch(r"[0-9a-fA-F]{8}", tokens[0]) is not None
        if last and last[0] == direction and not last[2] and not starts:
            steps[-1] = (direction, last[1] + pattern, rest, last[3])
        else:
            steps.append((direction, pattern, rest, where))
    return steps


EXAMPLES = blocks()


def test_the_document_has_stream_examples_of_every_kind():
    steps = [s for _, line, body in EXAMPLES for s in parse(body, line)]
    sent = {bytes(s[1][5:6])[0] for s in steps if s[0] == ">" and len(s[1]) >= 16}
    assert {1, 3, 4} <= sent, sent
    got = {s[1][5] for s in steps if s[0] == "<"}
    assert {0x81, 0x83, 0x84, 0xFF} <= got, got


@pytest.mark.parametrize("scenario, line, body", EXAMPLES,
                         ids=[f"line{line}" for _, line, _ in EXAMPLES])
def test_stream_example(scenario, line, body):
    steps = parse(body, line)
    server = StreamServer(scenarios.build(scenario), port=0, scenario=scenario,
                          clock=ManualClock())
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(TIMEOUT)
    try:
        for step in steps:
            if step[0] == ">":
                assert ANY not in step[1], f"{step[3]}: a datagram cannot hold wildcards"
                sock.sendto(bytes(step[1]), server.address)
            elif step[0] == "tick":
                server.run(ticks=step[1])
            elif step[0] == "skip":
                for _ in range(step[1]):
                    sock.recv(1 << 16)
            elif step[0] == "<":
                _, pattern, rest, where = step
                data = sock.recv(1 << 16)
                assert matches(pattern, rest, data), f"{where}: {show(pattern, data)}"
            else:
                sock.setblocking(False)
                with pytest.raises(BlockingIOError):
                    sock.recv(1 << 16)
                sock.settimeout(TIMEOUT)
    finally:
        sock.close()
        server.close()


def test_the_parser_rejects_a_bad_directive():
    for bad in ("tick", "tick x", "skip 1 2", "wait 3"):
        with pytest.raises(ValueError):
            parse(bad, 1)
