"""Many copies of one model's structure stepped at once, in parallel over copies.

Every backend's kernel is ``step(n, dt, F, I) -> status`` on two flat buffers (see
:mod:`rtrigid.backends.buffers`).  A :class:`Batch` holds those buffers as rows, ``F`` of shape
(n, len F) and ``I`` of shape (n, len I), and steps copy i with the *same* compiled kernel on the
rows ``F[i]``, ``I[i]`` inside a numba ``prange`` loop (threads without the GIL).  Copy i is
therefore bit for bit a single :class:`~rtrigid.Simulation` of that copy, whatever the thread
count (``numba.set_num_threads``).

Everything but the stepping goes through the façade: one Simulation is built per distinct
model (it freezes the model and validates it), its buffers are copied into the rows, and a
write to copy i (``set_qpos``, ``set_qvel``, reads of energy) runs that Simulation's own code on
a copy of row i, then copies the row back.

A model with a ground is stepped by its contact step (``ContactStepper.rows``): the same
compiled ``run`` the Simulation calls, on rows that hold the Simulation's buffers followed by
its contact arrays (shapes and grounds, the table, the warm start, the solve's scratch), so a
copy's contacts are its own and it too is bit for bit its single Simulation.

Controls in the loop, without Python per copy: arrays over time (``controls=``), or a linear
feedback ``u = u0 - K (x - x_ref)`` with x = (joint coordinates, joint rates) of the kernel's
state (tree models; under ``energy_momentum`` the rates are the scheme's own mean rates of the
last step, see :data:`rtrigid.backends` ``MEAN_RATES``), applied before every step.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Sequence, Union

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rtrigid import integrators
from rtrigid._jit import step_address
from rtrigid.backends import TREE
from rtrigid.backends.batch_drive import drive
from rtrigid.backends.buffers import FAILED, N_STATS, NONFINITE
from rtrigid.model import Model
from rtrigid.simulation import Simulation
from rtrigid.validate import as_int

FAIL_MASK = FAILED | NONFINITE

# What a Batch is built from: a Model, a Simulation, or a factory giving copy i's
Source = Union[Model, Simulation, Callable[[int], Union[Model, Simulation]]]


def _offset(F: NDArray[np.float64], view: NDArray[np.float64]) -> int:
    """Index of view[0] within the flat buffer F."""
    return (view.__array_interface__["data"][0] - F.__array_interface__["data"][0]) // 8


def _stepped(sim: Simulation) -> tuple[Any, NDArray[Any], NDArray[Any]]:
    """(kernel, F, I): what a batch steps for copy ``sim``: its kernel on its buffers, or,
    for a stepper object (a ground's contact step, the loops' step), its ``rows``: the same
    compiled step on its buffers followed by its own arrays (the contacts' shapes, table and
    warm start: ``ContactStepper.rows``; the loops' tables and scratch: ``LoopStepper.rows``,
    ``LoopEnergyMomentum.rows``)."""
    b = sim.backend
    kernel = sim.batch_plan().kernel
    rows = getattr(kernel, "rows", None)
    if rows is None:
        return kernel, b.F, b.I
    return rows(b.F, b.I)


def _digest(sim: Simulation) -> bytes:
    """What tells two copies' models apart: the frozen model, its contact model, its loops."""
    c, lc = sim.batch_plan().contacts, getattr(sim.backend, "loops", None)
    return (
        sim.backend.model_digest
        + (b"" if c is None else c.digest)
        + (b"" if lc is None else lc.lf.tobytes() + lc.li.tobytes())
    )


def _structure(sim: Simulation) -> tuple:
    """What copies of a batch must share: the kernel, the rows' sizes and the model's
    integer part (topology, kinds, sizes)."""
    b = sim.backend
    kernel, F, I = _stepped(sim)
    return (
        kernel,
        F.shape,
        I.shape,
        b.I[: len(b.I) - N_STATS].tobytes(),
        sim.nq,
        sim.nv,
        sim.na,
        sim.dt,
    )


class Batch:
    """``n`` copies of a model stepped together (see the module docstring).

    ``model``: an :class:`~rtrigid.Model` (every copy starts as it), a
    :class:`~rtrigid.Simulation` (every copy starts in its state, with its controls and
    loads; it is only read), or a factory ``f(i)`` giving copy i's Model or Simulation (e.g.
    ``lambda i: rt.scenarios.build("arm", kp=kps[i])``); all copies must share the structure
    (same bodies, joints, actuators; parameters may differ) -- a mismatch is refused naming
    the copy.  ``integrator``, ``dt``, ``options``, ``max_iter``, ``max_halvings``: as for
    Simulation (default energy_momentum at 1 ms, or a Simulation's own).
    """

    def __init__(
        self,
        model: Source,
        n: int = 1000,
        integrator: str | None = None,
        dt: float | None = None,
        *,
        options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self.n = as_int(n, "n", minimum=1)
        if isinstance(model, (Model, Simulation)):
            first, factory = model, None
        elif callable(model):
            factory = model
            first = factory(0)
        else:
            raise ValueError(
                f"model: expected an rtrigid Model, a Simulation or a factory "
                f"i -> Model, got {type(model).__name__}"
            )
        if isinstance(first, Simulation):  # its scheme and step unless told otherwise
            integrator = first.integrator if integrator is None else integrator
            dt = first.dt if dt is None else dt
            options = first.options if options is None else options
        integrator = "energy_momentum" if integrator is None else integrator
        self._sim_kw = dict(
            integrator=integrator, dt=1e-3 if dt is None else dt, options=options, **kwargs
        )
        self._sims: dict[bytes, Simulation] = {}
        base = self._copy_source(first, 0)
        from rtrigid.contact import has_contacts

        why = integrators.get(base.integrator).refusal(
            base.backend.name,
            base.model.inbound_joints(),
            base.model.loop_joints,
            base.model.actuators,
            grounds=has_contacts(base.model),
            batched=True,
            couplings=base.model.couplings,
        )
        if why:
            raise ValueError(f"model: {why}")
        self.integrator, self.dt = base.integrator, base.dt
        self.nq, self.nv, self.na = base.nq, base.nv, base.na
        self.actuator_names = base.actuator_names
        self._kernel, Fx, Ix = _stepped(base)
        self._address: int | None = None  # the kernel's code, on the first step
        self._key = _structure(base)
        self._tree = base.backend.name == TREE
        # a row is the Simulation's F (I), then with a ground its contact arrays
        self._nf, self._ni = len(base.backend.F), len(base.backend.I)
        self._sims = {_digest(base): base}
        self._which = [_digest(base)] * self.n
        self.F = np.empty((self.n,) + Fx.shape)
        self.I = np.empty((self.n,) + Ix.shape, np.int64)
        self.F[:], self.I[:] = _buffers(first, base)
        self._base_model = base.model
        if factory is not None:
            for i in range(1, self.n):
                self._load(i, factory(i))
        self._steps = np.zeros(self.n, np.int64)
        # controls: where they sit in A, their ranges
        be, plan = base.backend, base.batch_plan()
        self._c0 = _offset(be.F, plan.controls) if self.na else 0
        self._lo = np.array(plan.ctrl_lo, float)
        self._hi = np.array(plan.ctrl_hi, float)
        # feedback state x = (qpos, qvel) of the kernel's state: absolute indices in F
        if self._tree:
            q0, v0 = _offset(be.F, be.Qg), _offset(be.F, be.nu)
            self._xidx = np.concatenate([q0 + plan.qidx, v0 + plan.vidx]).astype(np.int64)
        else:
            self._xidx = np.zeros(0, np.int64)
        self._status = np.zeros(self.n, np.int64)
        self._noK = np.zeros((1, 0, 0))
        self._noU = np.zeros((0, self.n, max(self.na, 0)))
        self._feedback: tuple[NDArray[np.float64], ...] | None = None

    # -- copies and their Simulations ----------------------------------------------------------
    def _copy_source(self, source: object, i: int, field: str = "model") -> Simulation:
        """The batch's own Simulation of copy i's model (a Model, or a Simulation whose model,
        scheme and step are taken; the caller's Simulation is never written to)."""
        if isinstance(source, Simulation):
            kw = self._sim_kw
            if (source.integrator, source.dt) != (kw["integrator"], kw["dt"]):
                raise ValueError(
                    f"{field}: copy {i}'s Simulation steps {source.integrator} "
                    f"at dt {source.dt:g}, the batch {kw['integrator']} at dt "
                    f"{kw['dt']:g}"
                )
            d = _digest(source)
            if d in self._sims:
                return self._sims[d]
            model = source.model
        elif isinstance(source, Model):
            model = source
        else:
            raise ValueError(
                f"{field}: copy {i}: expected an rtrigid Model or Simulation, "
                f"got {type(source).__name__}"
            )
        try:
            return Simulation(model, **self._sim_kw)
        except ValueError as e:
            raise ValueError(f"{field}: copy {i}: {e}") from None

    def _load(self, i: int, source: Model | Simulation, field: str = "model") -> None:
        """Make copy i a fresh copy of ``source``: a Model (its initial state) or a
        Simulation (its state, controls and loads now)."""
        sim = self._copy_source(source, i, field)
        if _structure(sim) != self._key:
            raise ValueError(
                f"{field}: copy {i}'s model does not share the batch's structure "
                "(bodies, joints, kinds, actuators, springs and integrator must be "
                "those of copy 0; only parameters may differ)"
            )
        d = _digest(sim)
        self._sims.setdefault(d, sim)
        self._which[i] = d
        self.F[i], self.I[i] = _buffers(source, sim)

    def _sim(self, i: int) -> Simulation:
        """The Simulation of copy i's model, holding copy i's row (copy it back after a write)."""
        sim = self._sims[self._which[i]]
        sim.backend.F[:] = self.F[i, : self._nf]
        sim.backend.I[:] = self.I[i, : self._ni]
        return sim

    def _per_copy(
        self,
        X: ArrayLike,
        width: int,
        field: str,
        write: Callable[[Simulation, NDArray[Any]], None],
    ) -> None:
        """Validate (n, width) X, run write(sim, row) on a copy of every row, then commit
        every row at once (all or nothing)."""
        X = np.asarray(X, dtype=float) if not isinstance(X, np.ndarray) else X
        if X.shape != (self.n, width):
            raise ValueError(f"{field}: expected shape ({self.n}, {width}), got {np.shape(X)}")
        F = self.F.copy()
        for i in range(self.n):
            sim = self._sim(i)
            sim.backend.F[:] = F[i, : self._nf]
            try:
                write(sim, X[i])
            except ValueError as e:
                raise ValueError(f"{field}: copy {i}: {e}") from None
            F[i, : self._nf] = sim.backend.F
        self.F[:] = F

    # -- interface ------------------------------------------------------------------------------
    def set_qpos(self, Q: ArrayLike) -> None:
        """Set every copy's generalized coordinates, (n, nq) in Simulation.qpos's layout;
        each row as Simulation.set_qpos takes it.  All or nothing."""
        self._per_copy(Q, self.nq, "qpos", lambda s, q: s.set_qpos(q))

    def set_qvel(self, V: ArrayLike) -> None:
        """Set every copy's generalized rates, (n, nv).  All or nothing."""
        self._per_copy(V, self.nv, "qvel", lambda s, v: s.set_qvel(v))

    def set_params(self, **params: ArrayLike) -> None:
        """Per-copy parameters that do not change structure, each an array over copies
        (or one value for all): ``mass`` (n, nb), ``inertia`` (n, nb, 3), ``gravity``
        (n, 3), ``damping`` / ``stiffness`` (n, njoints), ``kp`` / ``kv`` (n, na), ``friction`` /
        ``restitution`` (n, nb) of the bodies' contacts (a ground's stay).  Each copy
        is rebuilt from the batch's model with its parameters (re-frozen by a Simulation) and
        restarts from that model's initial state.  All or nothing."""
        known = (
            "mass",
            "inertia",
            "gravity",
            "damping",
            "stiffness",
            "kp",
            "kv",
            "friction",
            "restitution",
        )
        for k in params:
            if k not in known:
                raise ValueError(f"{k}: unknown parameter; known: {list(known)}")
        base = self._base_model
        shapes = {
            "mass": (len(base.bodies),),
            "inertia": (len(base.bodies), 3),
            "gravity": (3,),
            "damping": (len(base.joints),),
            "stiffness": (len(base.joints),),
            "kp": (len(base.actuators),),
            "kv": (len(base.actuators),),
            "friction": (len(base.bodies),),
            "restitution": (len(base.bodies),),
        }
        arrays: dict[str, NDArray[np.float64]] = {}
        for k, v in params.items():
            a = np.asarray(v, dtype=float)
            if a.shape == shapes[k]:
                a = np.broadcast_to(a, (self.n,) + shapes[k])
            if a.shape != (self.n,) + shapes[k]:
                raise ValueError(
                    f"{k}: expected shape ({self.n}, "
                    f"{', '.join(map(str, shapes[k]))}), got {np.shape(v)}"
                )
            if not np.all(np.isfinite(a)):
                raise ValueError(f"{k}: must be finite")
            if k in ("mass", "inertia") and not np.all(a > 0):
                raise ValueError(f"{k}: must be > 0")
            if k != "gravity" and not np.all(a >= 0):
                raise ValueError(f"{k}: must be >= 0")
            if k == "restitution" and not np.all(a <= 1):
                raise ValueError(f"{k}: must be in [0, 1]")
            arrays[k] = a
        saved = (self.F.copy(), self.I.copy(), list(self._which), dict(self._sims))
        try:
            for i in range(self.n):
                m = copy.deepcopy(base)
                for k, a in arrays.items():
                    _set_param(m, k, a[i])
                self._load(i, m, field=",".join(params) or "params")
        except Exception:
            self.F[:], self.I[:], self._which[:], self._sims = (
                saved[0],
                saved[1],
                saved[2],
                saved[3],
            )
            raise
        self._steps[:] = 0

    def set_feedback(
        self, K: ArrayLike | None, u0: ArrayLike | None = None, x_ref: ArrayLike | None = None
    ) -> None:
        """Apply ``u = u0 - K (x - x_ref)`` before every step, x = (qpos, qvel) of the kernel's
        state (tree models only); K (nu, nq + nv) for every copy or (n, nu, nq + nv) per copy,
        u0 (n, nu) or (nu,), x_ref (n, nq + nv) or (nq + nv,).  ``set_feedback(None)`` removes
        it; controls= given to step overrides nothing while feedback is set (it is refused)."""
        if K is None:
            self._feedback = None
            return
        if not self._tree:
            raise ValueError(
                "K: feedback needs a jointed (tree) model; single bodies have "
                "no joint state in the kernel"
            )
        nx = self.nq + self.nv
        K = np.asarray(K, dtype=float)
        if K.shape == (self.na, nx):
            K = K[None]
        if K.shape not in ((1, self.na, nx), (self.n, self.na, nx)):
            raise ValueError(
                f"K: expected shape ({self.na}, {nx}) or ({self.n}, {self.na}, {nx}), got {K.shape}"
            )
        u0 = _rows(u0, self.n, self.na, "u0")
        x_ref = _rows(x_ref, self.n, nx, "x_ref")
        if not (np.all(np.isfinite(K))):
            raise ValueError("K: must be finite")
        self._feedback = (np.ascontiguousarray(K), u0, x_ref)

    def step(self, k: int = 1, controls: ArrayLike | None = None) -> None:
        """Step every copy k steps.  ``controls``: (n, nu) held for the k steps or (k, n, nu)
        one row per step (clamped to each ctrl_range, as Simulation.set_controls does); None
        keeps the controls held now (or applies the feedback).  A copy whose step fails is
        rolled back to the start of that step and a ``RuntimeError`` names the copies."""
        k = as_int(k, "k", minimum=0)
        U, u_time = self._controls(k, controls)
        if self._feedback is not None:
            if controls is not None:
                raise ValueError("controls: the batch has a feedback (set_feedback(None) first)")
            K, u0, xref = self._feedback
        else:
            K, u0, xref = self._noK, self._noK[0], self._noK[0]
        self._status[:] = 0
        if self._address is None:  # the kernel compiled (or loaded) on the first step
            self._address = step_address(self._kernel)
        drive(
            self._address,
            k,
            self.dt,
            self.F,
            self.I,
            (U, u_time, self._c0, self._lo, self._hi),
            (K, u0, xref, self._xidx),
            self._status,
        )
        bad = np.nonzero(self._status & FAIL_MASK)[0]
        self._steps += k
        if len(bad):
            raise RuntimeError(
                f"{self.integrator}: copies {bad[:10].tolist()} failed a step "
                "(rolled back to the start of it)"
            )

    @property
    def failed(self) -> NDArray[np.bool_]:
        """(n,) bool: the copies a failed step stopped in the last :meth:`step` call."""
        return (self._status & FAIL_MASK) != 0

    def _controls(self, k: int, controls: ArrayLike | None) -> tuple[NDArray[Any], bool]:
        if controls is None:
            return self._noU, False
        U = np.asarray(controls, dtype=float)
        if not np.all(np.isfinite(U)):
            raise ValueError("controls: must be finite")
        if U.shape == (self.n, self.na):
            return np.ascontiguousarray(U[None]), False
        if U.shape == (k, self.n, self.na):
            return np.ascontiguousarray(U), True
        raise ValueError(
            f"controls: expected shape ({self.n}, {self.na}) or ({k}, {self.n}, "
            f"{self.na}), got {np.shape(controls)}"
        )

    def qpos(self) -> NDArray[np.float64]:
        """(n, nq) generalized coordinates."""
        return np.array([self._sim(i).qpos() for i in range(self.n)]).reshape(self.n, self.nq)

    def qvel(self) -> NDArray[np.float64]:
        """(n, nv) generalized rates at t."""
        return np.array([self._sim(i).qvel() for i in range(self.n)]).reshape(self.n, self.nv)

    def energy(self) -> NDArray[np.float64]:
        """(n,) kinetic plus potential energy."""
        return np.array([self._sim(i).energy() for i in range(self.n)])

    def controls(self) -> NDArray[np.float64]:
        """(n, nu) controls held now."""
        return self.F[:, self._c0 : self._c0 + self.na].copy()

    def rollout(
        self, k: int, controls: ArrayLike | None = None, record: Sequence[str] = ("qpos", "qvel")
    ) -> dict[str, NDArray[np.float64]]:
        """Step k steps recording after each: {name: (k, n, ...)} for names of ``record``
        ("qpos", "qvel", "energy")."""
        k = as_int(k, "k", minimum=0)
        for r in record:
            if r not in ("qpos", "qvel", "energy"):
                raise ValueError(f"record: unknown {r!r}; known: ['qpos', 'qvel', 'energy']")
        U, u_time = self._controls(k, controls)
        out: dict[str, list[Any]] = {r: [] for r in record}
        for s in range(k):
            self.step(1, None if controls is None else (U[s] if u_time else U[0]))
            for r in record:
                out[r].append(getattr(self, r)())
        return {r: np.array(v) for r, v in out.items()}


def _buffers(source: object, sim: Simulation) -> tuple[NDArray[Any], NDArray[Any]]:
    """The (F, I) rows copy i starts from: a Simulation source's own, else ``sim``'s."""
    return _stepped(source if isinstance(source, Simulation) else sim)[1:]


def _rows(a: ArrayLike | None, n: int, width: int, field: str) -> NDArray[np.float64]:
    if a is None:
        return np.zeros((n, width))
    a = np.asarray(a, dtype=float)
    if a.shape == (width,):
        a = np.broadcast_to(a, (n, width))
    if a.shape != (n, width) or not np.all(np.isfinite(a)):
        raise ValueError(
            f"{field}: expected finite ({n}, {width}) or ({width},), got {np.shape(a)}"
        )
    return np.ascontiguousarray(a)


def _set_param(m: Model, k: str, v: Any) -> None:
    """Write parameter k of one copy into the model m."""
    if k == "mass":
        for b, x in zip(m.bodies, v):
            b.mass = float(x)
    elif k == "inertia":
        for b, x in zip(m.bodies, v):
            b.inertia = np.array(x, dtype=float)
    elif k == "gravity":
        m.gravity = np.array(v, dtype=float)
    elif k in ("friction", "restitution"):
        for b, x in zip(m.bodies, v):
            setattr(b, k, float(x))
    elif k in ("damping", "stiffness"):
        for j, x in zip(m.joints, v):
            setattr(j, k, float(x))
    else:
        for a, x in zip(m.actuators, v):
            setattr(a, k, float(x))
