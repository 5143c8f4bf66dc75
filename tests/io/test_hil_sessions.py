"""Sessions of the lock-step server, over real loopback sockets: a closed connection's
simulation waits for its client to RESUME it with its token and goes on bit for bit where it
stopped; an observer receives every state the stepping client receives, in order; a wrong or
expired token gets an error reply and changes nothing.  Every server is stopped by the test
that started it."""
import math
import time

import numpy as np
import pytest

from rtrigid import scenarios
from rtrigid.io.hil import Client, Server, ServerError

TIMEOUT = 10.0  # guards against a hang; no test measures speed
E_SESSION = 12
CONTROLS = [{"joint0": 0.3 * math.sin(0.1 * k), "joint1": -0.2, "joint2": 0.1 * k % 0.5}
            for k in range(40)]


def _arm():
    return scenarios.build("arm", integrator="nullspace_rk4", n_links=3)


def _client(server):
    return Client(*server.address, timeout=TIMEOUT)


def _bits(state):
    return state["t"], state["qpos"].tobytes(), state["qvel"].tobytes()


def _reference(n_requests):
    """The states an uninterrupted run gives after each request (in process)."""
    sim, out = _arm(), []
    sim.step(0)
    for k in range(n_requests):
        sim.set_controls([CONTROLS[k][f"joint{i}"] for i in range(3)])
        sim.step(5)
        out.append((sim.t, sim.qpos().tobytes(), sim.qvel().tobytes()))
    return out


def test_hello_gives_each_connection_its_own_token_and_the_grace_period():
    with Server(_arm(), port=0, session_grace=30.0).start() as server, \
            _client(server) as a, _client(server) as b:
        assert isinstance(a.session, bytes) and len(a.session) == 16
        assert a.session != b.session
        assert a.limits["session_grace"] == 30.0


def test_a_client_that_reconnects_resumes_its_simulation_bit_for_bit():
    ref = _reference(40)
    with Server(_arm(), port=0, session_grace=30.0).start() as server:
        with _client(server) as first:
            for k in range(25):
                assert _bits(first.step(5, controls=CONTROLS[k])) == ref[k]
            token = first.session
        # the connection is closed: its simulation waits for the token
        with _client(server) as again:
            state = again.resume(token)
            assert _bits(state) == ref[24]
            assert again.session == token
            for k in range(25, 40):
                assert _bits(again.step(5, controls=CONTROLS[k])) == ref[k]
        assert server.counts["resumed"] == 1


def test_a_wrong_token_or_a_live_session_is_refused_and_changes_nothing():
    ref = _reference(3)
    with Server(_arm(), port=0, session_grace=30.0).start() as server, \
            _client(server) as owner, _client(server) as other:
        assert _bits(owner.step(5, controls=CONTROLS[0])) == ref[0]
        with pytest.raises(ServerError) as err:
            other.resume(bytes(16))
        assert err.value.code == E_SESSION
        with pytest.raises(ServerError) as err:  # its connection is still open
            other.resume(owner.session)
        assert err.value.code == E_SESSION
        with pytest.raises(ValueError, match="session"):
            other.resume(b"short")
        # both connections still serve, the owner's simulation untouched
        assert _bits(owner.step(5, controls=CONTROLS[1])) == ref[1]
        assert other.state()["t"] == 0.0


def test_a_session_expires_after_its_grace_period():
    with Server(_arm(), port=0, session_grace=0.2).start() as server:
        with _client(server) as first:
            first.step(3)
            token = first.session
        deadline = time.monotonic() + TIMEOUT
        while server.counts["expired"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.counts["expired"] == 1
        with _client(server) as late:
            with pytest.raises(ServerError) as err:
                late.resume(token)
            assert err.value.code == E_SESSION
            assert late.state()["steps"] == 0  # its own, new simulation


def test_an_observer_sees_every_state_of_the_session_in_order():
    ref = _reference(30)
    with Server(_arm(), port=0).start() as server, \
            _client(server) as owner, _client(server) as observer:
        assert _bits(owner.step(5, controls=CONTROLS[0])) == ref[0]
        now = observer.observe(owner.session)
        assert _bits(now) == ref[0]
        replies = [owner.step(5, controls=CONTROLS[k]) for k in range(1, 30)]
        seen = [observer.next_state() for _ in range(1, 30)]
        assert [_bits(s) for s in seen] == [_bits(r) for r in replies] == ref[1:]
        seqs = [s["seq"] for s in seen]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        with pytest.raises(ServerError) as err:  # an observer steps nothing
            observer.step(1)
        assert err.value.code == E_SESSION
        assert _bits(owner.state()) == ref[29]
        assert _bits(observer.next_state()) == ref[29]  # the STATE reply too


def test_observing_an_unknown_session_is_refused():
    with Server(_arm(), port=0).start() as server, _client(server) as c:
        with pytest.raises(ServerError) as err:
            c.observe(bytes(range(16)))
        assert err.value.code == E_SESSION
        assert c.step(2)["steps"] == 2  # still a stepping client of its own


def test_an_observer_keeps_watching_across_a_resume():
    ref = _reference(6)
    with Server(_arm(), port=0, session_grace=30.0).start() as server, \
            _client(server) as observer:
        with _client(server) as first:
            first.step(5, controls=CONTROLS[0])
            token = first.session
            observer.observe(token)
            first.step(5, controls=CONTROLS[1])
        with _client(server) as again:
            again.resume(token)
            assert _bits(observer.next_state()) == ref[1]
            assert _bits(observer.next_state()) == ref[1]  # the RESUME reply
            again.step(5, controls=CONTROLS[2])
            assert _bits(observer.next_state()) == ref[2]


@pytest.mark.parametrize("grace", [-1.0, math.nan, "1", True])
def test_a_bad_grace_period_is_refused_naming_it(grace):
    with pytest.raises(ValueError, match="session_grace"):
        Server(_arm(), port=0, session_grace=grace)


def test_without_grace_a_closed_session_is_gone():
    with Server(_arm(), port=0, session_grace=0).start() as server:
        with _client(server) as first:
            first.step(1)
            token = first.session
            assert first.limits["session_grace"] == 0.0
        with _client(server) as again:
            # refused whether the server has seen the first connection's end (the session is
            # gone) or not yet (the session is still live)
            with pytest.raises(ServerError) as err:
                again.resume(token)
            assert err.value.code == E_SESSION
            assert np.all(again.state()["qpos"] == _arm().qpos())


@pytest.mark.slow
def test_a_client_away_for_90_s_resumes_where_it_stopped():
    """The rig's pause: the connection closed for 90 s (the default grace is 120 s), then
    the next 15 requests equal those of an uninterrupted run."""
    ref = _reference(40)
    with Server(_arm(), port=0).start() as server:
        with _client(server) as first:
            for k in range(25):
                first.step(5, controls=CONTROLS[k])
            token = first.session
        time.sleep(90.0)
        with _client(server) as again:
            assert _bits(again.resume(token)) == ref[24]
            assert [_bits(again.step(5, controls=CONTROLS[k])) for k in range(25, 40)] == \
                ref[25:]
