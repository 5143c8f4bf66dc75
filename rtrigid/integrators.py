"""The integrator registry: every public ``integrator=`` name, what it is and where it runs.

Each :class:`Integrator` entry says whether the scheme is implicit (so it has Newton
statistics and the sub-step fallback), which backends have kernels for it, which joint kinds
its tree kernel supports, and its options (variants of the scheme chosen at construction:
``Simulation(model, "index1", options={"form": 23})``).  The Simulation accepts, the command
line offers and the contract tests iterate exactly what this table says.

A kernel is named as ``"module:function"`` and imported only when a simulation asks for it,
so a run compiles the one scheme it uses.  Every kernel has the signature
``step(n, dt, F, I) -> status`` of :mod:`rtrigid.backends`, and its module a
``work_size(*dims)`` for the scratch it needs.

Each entry also has a ``group``: ``"product"`` for the schemes rtrigid offers for use, or
``"paper"`` for the schemes kept to re-check the papers (``energy_momentum_appd``,
``midpoint_em``, ``variational``, ``index1``, ``director`` and ``director_nullspace``: single
bodies only).  :func:`names` lists every entry, :func:`product_names` and :func:`paper_names`
one group each.

Adding an integrator: write its kernel module under the backend(s) it supports, then add one
entry to :data:`REGISTRY`.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Sequence

from rtrigid.backends import BODIES, TREE, select
from rtrigid.joints import KINDS

if TYPE_CHECKING:
    from rtrigid.model import Actuator, Coupling, Ground, Joint, Model
_B = "rtrigid.backends.bodies."
_T = "rtrigid.backends.tree."


class Integrator(NamedTuple):
    """One row of the registry."""

    name: str
    summary: str
    source: str  # the papers' equations it implements
    implicit: bool
    kernels: dict  # backend -> {variant key: "module:function"}
    joint_kinds: frozenset  # kinds its tree kernel supports (empty: no tree kernel)
    joint_springs: bool = True  # its tree kernel steps joint springs and dampers
    loop_springs: bool = True  # and so does its loop step (with loop joints or couplings)
    armature: bool = False  # its tree kernel steps joint armature (rotor inertia)
    loop_armature: bool = True  # and so does its loop step (with loop joints or couplings)
    friction: dict = {}  # backend -> {variant key: its kernel with joint Coulomb friction}
    # (none: it does not step joint friction)
    friction_contacts: bool = False  # it steps joint friction in a model with contacts
    no_friction: str = ""  # why it does not step joint friction, where a reason is known
    options: dict = {}  # option -> allowed values, the default first
    rigid: dict = {}  # backend -> {variant key: a kernel for models without springs,
    # which compiles less}
    limit_bounce: bool = True  # its joint limits take a restitution (else they are inelastic)
    loops: bool = False  # it steps loop joints (Model.add_loop_joint)
    batched_loops: bool = False  # its loop step is one compiled kernel (LoopStepper.rows,
    # LoopEnergyMomentum.rows) that a Batch runs per copy
    loop_contacts: bool = False  # it steps loop joints and joint couplings with contacts
    contacts: bool = False  # it steps models with a ground (the contact solve after its
    # free flight)
    keeps_energy: bool = True  # its free flight keeps energy (else the contact event's energy
    # budget is taken from the step's start: see
    # rtrigid.contact.solver.flight_allowance)
    step_budget: bool = False  # its tree kernel (loop models aside) keeps Simulation's
    # step_budget (the budget outcome of tree.energy_momentum)
    group: str = "product"  # "product": offered for use; "paper": kept to re-check the
    # papers

    def backends(self) -> tuple[str, ...]:
        """The backends this scheme has kernels for."""
        return tuple(self.kernels)

    def check_options(self, options: dict[str, Any] | None) -> dict[str, Any]:
        """The full option dict (defaults filled in); ``ValueError`` naming a bad one."""
        options = dict(options or {})
        for key in options:
            if key not in self.options:
                known = list(self.options) or "none"
                raise ValueError(f"options: {self.name} has no option {key!r}; known: {known}")
        out: dict[str, Any] = {}
        for key, allowed in self.options.items():
            value = options.get(key, allowed[0])
            if value not in allowed:
                raise ValueError(
                    f"options: {self.name} option {key!r} must be one of "
                    f"{list(allowed)}, got {value!r}"
                )
            out[key] = value
        return out

    def obstacle(
        self,
        backend: str,
        joints: Sequence[Joint],
        loop_joints: Sequence[Joint] = (),
        actuators: Sequence[Actuator] = (),
        *,
        grounds: Sequence[Ground] | bool = (),
        batched: bool = False,
        couplings: Sequence[Coupling] = (),
    ) -> str | None:
        """What in a model this scheme does not step (one sentence), or None.

        The model is described by its backend, inbound joints, loop joints, actuators, grounds
        (or whether it has contacts at all) and its joint couplings (stepped as loops are);
        ``batched``: as copies in a :class:`~rtrigid.Batch`.  The one place that decides
        which models a scheme steps."""
        if grounds and not self.contacts:
            return f"{self.name} does not step contacts"
        rows = [("loop joint", j.name) for j in loop_joints]
        rows += [("joint coupling", c.name) for c in couplings]
        if rows and not self.loops:
            return f"{self.name} does not step closed loops ({rows[0][0]} {rows[0][1]!r})"
        if rows and grounds and not self.loop_contacts:
            return (
                f"{self.name} does not step contacts on a model with loop joints or joint "
                f"couplings ({rows[0][0]} {rows[0][1]!r})"
            )
        if batched and rows and grounds:
            return (
                f"{self.name} does not batch contacts on a model with loop joints or joint "
                f"couplings ({rows[0][0]} {rows[0][1]!r})"
            )
        if batched and rows and not self.batched_loops:
            return (
                f"{self.name} does not batch loop joints ({rows[0][0]} "
                f"{rows[0][1]!r}): its loop step is not one compiled kernel a "
                "Batch can run per copy"
            )
        if backend not in self.kernels:
            return f"{self.name} has no kernel for {backend} models"
        if backend == TREE:
            for j in joints:
                if j.kind not in self.joint_kinds:
                    return f"{self.name} does not support {j.kind} joints (joint {j.name!r})"
                if j.limit_restitution and not self.limit_bounce:
                    return (
                        f"{self.name} keeps joint limits inelastic (the rebound of its "
                        f"locked step is taken out, see docs/guide/joints.md); joint "
                        f"{j.name!r} has limit_restitution {j.limit_restitution:g} (0 "
                        "makes it inelastic)"
                    )
                if getattr(j, "armature", 0.0) and not self.armature:
                    return (
                        f"{self.name} does not step joint armature (rotor inertia; joint "
                        f"{j.name!r} has {j.armature:g})"
                    )
                if getattr(j, "armature", 0.0) and rows and not self.loop_armature:
                    return (
                        f"{self.name} does not step joint armature (rotor inertia) in a model "
                        f"with loop joints or couplings (joint {j.name!r} has {j.armature:g})"
                    )
                if getattr(j, "friction", 0.0):
                    if backend not in self.friction:
                        why = f": {self.no_friction}" if self.no_friction else ""
                        return (
                            f"{self.name} does not step joint friction (joint {j.name!r} "
                            f"has {j.friction:g}){why}"
                        )
                    if rows:
                        return (
                            f"{self.name} does not step joint friction in a model with loop "
                            f"joints or couplings (joint {j.name!r} has {j.friction:g})"
                        )
                    if grounds and not self.friction_contacts:
                        return (
                            f"{self.name} does not step joint friction in a model with "
                            f"contacts (joint {j.name!r} has {j.friction:g}): its friction "
                            "and the contacts are solved apart, and a link resting on the "
                            "ground crept"
                        )
                if (j.stiffness or j.damping) and not self.joint_springs:
                    return (
                        f"{self.name} does not support joint springs or dampers (joint "
                        f"{j.name!r}; a point-to-point spring is another way)"
                    )
                if (j.stiffness or j.damping) and rows and not self.loop_springs:
                    return (
                        f"{self.name} does not step joint springs or dampers in a model with "
                        f"loop joints or couplings (joint {j.name!r})"
                    )
        return None

    def refusal(
        self,
        backend: str,
        joints: Sequence[Joint],
        loop_joints: Sequence[Joint] = (),
        actuators: Sequence[Actuator] = (),
        *,
        grounds: Sequence[Ground] | bool = (),
        batched: bool = False,
        couplings: Sequence[Coupling] = (),
    ) -> str | None:
        """Why this scheme cannot step a model, or None: :meth:`obstacle`, then the schemes
        that step the whole model (never one that would refuse it for another reason)."""
        why = self.obstacle(
            backend,
            joints,
            loop_joints,
            actuators,
            grounds=grounds,
            batched=batched,
            couplings=couplings,
        )
        if why is None:
            return None
        others = accepting(
            backend,
            joints,
            loop_joints,
            actuators,
            grounds=grounds,
            batched=batched,
            couplings=couplings,
        )
        if others:
            return f"{why}; schemes that step this model{' batched' if batched else ''}: {others}"
        return f"{why}; no scheme steps this model as a whole"

    def module(
        self, backend: str, options: dict[str, Any], springs: bool = True, friction: bool = False
    ) -> tuple[ModuleType, Callable[..., Any]]:
        """(kernel module, kernel function) for a backend, a full option dict, whether the
        model has springs and whether it has joint friction."""
        key = tuple(options[k] for k in self.options)
        name = self.kernels[backend][key]
        if friction:
            name = self.friction[backend][key]
        elif not springs:
            name = self.rigid.get(backend, {}).get(key, name)
        path, func = name.split(":")
        module = importlib.import_module(path)
        return module, getattr(module, func)


_ALL_KINDS = frozenset(KINDS)

REGISTRY = {
    i.name: i
    for i in (
        Integrator(
            "nullspace_rk4",
            "RK4 on the quaternion null-space equations, normalised after each step",
            "002 (42), (63)",
            False,
            {BODIES: {(): _B + "nullspace_rk4:step"}, TREE: {(): _T + "nullspace_rk4:step"}},
            _ALL_KINDS,
            armature=True,
            friction={TREE: {(): _T + "nullspace_rk4:step_friction"}},
            loops=True,
            batched_loops=True,
            loop_contacts=True,
            contacts=True,
        ),
        # keeps_energy=False: Euler's flight drops a resting body by g h^2 with kinetic energy for
        # only half of that lift, so the contact event's budget is the step's start energy
        Integrator(
            "semi_implicit_euler",
            "semi-implicit (symplectic) Euler, MuJoCo's default: "
            "one force evaluation per step, rates then coordinates (quaternions by the "
            "exact exponential map), joint dampers and servo kv implicit; first order, "
            "conserves neither energy nor momentum",
            "MuJoCo's Euler",
            False,
            {
                BODIES: {(): _B + "semi_implicit_euler:step"},
                TREE: {(): _T + "semi_implicit_euler:step"},
            },
            _ALL_KINDS,
            armature=True,
            friction={TREE: {(): _T + "semi_implicit_euler:step_friction"}},
            friction_contacts=True,
            contacts=True,
            keeps_energy=False,
        ),
        Integrator(
            "energy_momentum",
            "energy-momentum scheme: energy and angular momentum kept "
            "to round-off (QUAT.EM; Cayley step with mean arms for trees)",
            "000 (51)-(54); 003 (180)-(185)",
            True,
            {BODIES: {(): _B + "energy_momentum:step"}, TREE: {(): _T + "energy_momentum:step"}},
            _ALL_KINDS,
            armature=True,
            loop_armature=False,
            loop_springs=False,
            friction={TREE: {(): _T + "energy_momentum:step"}},
            rigid={BODIES: {(): _B + "energy_momentum:step_rigid"}},
            limit_bounce=False,
            loops=True,
            batched_loops=True,
            contacts=True,
            step_budget=True,
        ),
        Integrator(
            "energy_momentum4",
            "symmetric composition of the energy-momentum step: order "
            "4, energy and angular momentum kept as by energy_momentum; option composition "
            "('suzuki': 5 stages, 'triple_jump': 3)",
            "Suzuki (1990), Yoshida (1990); 000 (51)-(54); 003 (180)-(185)",
            True,
            {
                BODIES: {
                    ("suzuki",): _B + "energy_momentum4:step",
                    ("triple_jump",): _B + "energy_momentum4:step_triple_jump",
                },
                TREE: {
                    ("suzuki",): _T + "energy_momentum4:step",
                    ("triple_jump",): _T + "energy_momentum4:step_triple_jump",
                },
            },
            _ALL_KINDS,
            armature=True,
            loop_armature=False,
            loop_springs=False,
            no_friction=(
                "a stage of its composition runs backward in time, where friction's "
                "dissipation would be negative; energy_momentum steps it"
            ),
            options={"composition": ("suzuki", "triple_jump")},
            rigid={
                BODIES: {
                    ("suzuki",): _B + "energy_momentum4:step_rigid",
                    ("triple_jump",): _B + "energy_momentum4:step_triple_jump_rigid",
                }
            },
            limit_bounce=False,
            loops=True,
            batched_loops=True,
            contacts=True,
            step_budget=True,
        ),
        Integrator(
            "energy_momentum_appd",
            "the same scheme solved as 000 App. D does (7 or 10 unknowns): the reference solver",
            "000 (52)-(54), App. D",
            True,
            {BODIES: {(): _B + "energy_momentum:step_appendix_d"}},
            frozenset(),
            group="paper",
        ),
        Integrator(
            "midpoint_em",
            "energy-conserving mid-point scheme of Geradin & Rixen; "
            "option update='momentum' takes step (iv) instead",
            "003 §11",
            True,
            {
                BODIES: {
                    ("energy",): _B + "midpoint_em:step",
                    ("momentum",): _B + "midpoint_em:step_momentum_update",
                }
            },
            frozenset(),
            options={"update": ("energy", "momentum")},
            group="paper",
        ),
        Integrator(
            "variational",
            "variational integrator QUAT.VI",
            "000 App. E",
            True,
            {BODIES: {(): _B + "variational:step"}},
            frozenset(),
            group="paper",
        ),
        Integrator(
            "index1",
            "index-1 quaternion equations by RK4; options form (23 or 29) and "
            "torque (1: Q_p1, 2: Q_p2)",
            "001 (23), (29), (59), (62)",
            False,
            {
                BODIES: {
                    (29, 2): _B + "index1:step",
                    (23, 1): _B + "index1:step_23_p1",
                    (23, 2): _B + "index1:step_23_p2",
                    (29, 1): _B + "index1:step_29_p1",
                }
            },
            frozenset(),
            options={"form": (29, 23), "torque": (2, 1)},
            group="paper",
        ),
        Integrator(
            "director",
            "rotation-free director formulation by RK4",
            "002 (21)-(25)",
            False,
            {BODIES: {(): _B + "director:step"}},
            frozenset(),
            group="paper",
        ),
        Integrator(
            "director_nullspace",
            "director formulation, null-space form with the Spurrier-Klumpp projection",
            "002 (25), §6",
            False,
            {BODIES: {(): _B + "director:step_nullspace"}},
            frozenset(),
            group="paper",
        ),
    )
}


def names() -> list[str]:
    """Public integrator names, in a stable order."""
    return list(REGISTRY)


def product_names() -> list[str]:
    """The names of the schemes offered for use (group ``"product"``), in :func:`names`'
    order."""
    return [i.name for i in REGISTRY.values() if i.group == "product"]


def paper_names() -> list[str]:
    """The names of the schemes kept to re-check the papers (group ``"paper"``), in
    :func:`names`' order."""
    return [i.name for i in REGISTRY.values() if i.group == "paper"]


def get(name: str) -> Integrator:
    """The registry entry of ``name``; ``ValueError`` naming ``integrator`` if unknown."""
    if name not in REGISTRY:
        raise ValueError(f"integrator: unknown {name!r}; known: {names()}")
    return REGISTRY[name]


def supporting(kind: str) -> list[str]:
    """Names of the integrators whose tree kernel steps joints of ``kind``."""
    return [i.name for i in REGISTRY.values() if kind in i.joint_kinds]


def accepting(
    backend: str,
    joints: Sequence[Joint],
    loop_joints: Sequence[Joint] = (),
    actuators: Sequence[Actuator] = (),
    *,
    grounds: Sequence[Ground] | bool = (),
    batched: bool = False,
    couplings: Sequence[Coupling] = (),
) -> list[str]:
    """Names of the schemes offered for use that step the whole model described as
    :meth:`Integrator.obstacle` takes it, in :func:`names`' order."""
    return [
        i.name
        for i in REGISTRY.values()
        if i.group == "product"
        and i.obstacle(
            backend,
            joints,
            loop_joints,
            actuators,
            grounds=grounds,
            batched=batched,
            couplings=couplings,
        )
        is None
    ]


def for_model(model: Model, *, batched: bool = False) -> list[str]:
    """Names of the schemes offered for use that step ``model`` (an :class:`rtrigid.Model`)
    as a whole; ``batched``: as copies in a :class:`~rtrigid.Batch`."""
    from rtrigid.contact import has_contacts  # (the contact package imports the model)

    return accepting(
        select(model),
        model.inbound_joints(),
        getattr(model, "loop_joints", []),
        model.actuators,
        grounds=has_contacts(model),
        batched=batched,
        couplings=getattr(model, "couplings", []),
    )


_COLUMNS = (
    ("single bodies", lambda i: BODIES in i.kernels),
    ("joint trees", lambda i: TREE in i.kernels),
    ("joint kinds", lambda i: ", ".join(k for k in KINDS if k in i.joint_kinds) or "-"),
    (
        "joint springs and dampers",
        lambda i: (
            ("yes" if i.loop_springs or not i.loops else "not with loops")
            if TREE in i.kernels and i.joint_springs
            else "no"
        ),
    ),
    (
        "joint armature",
        lambda i: (
            ("yes" if i.loop_armature or not i.loops else "not with loops")
            if TREE in i.kernels and i.armature
            else "no"
        ),
    ),
    (
        "joint friction",
        lambda i: (
            ("yes" if i.friction_contacts else "without contacts") if TREE in i.friction else "no"
        ),
    ),
    ("limits that rebound", lambda i: TREE in i.kernels and i.limit_bounce),
    ("closed loops", lambda i: i.loops),
    ("loops in a Batch", lambda i: i.batched_loops),
    ("loops and couplings with contacts", lambda i: i.loop_contacts),
    ("contacts", lambda i: i.contacts),
    ("servos at any gain", lambda i: i.implicit and TREE in i.kernels),
    ("step budget", lambda i: i.step_budget),
    ("implicit", lambda i: i.implicit),
)


def capability_table(group: str = "product") -> str:
    """A Markdown table of what each scheme of ``group`` ("product" or "paper") steps, read
    from the registry (the documentation includes it as generated)."""

    def cell(value: bool | str) -> str:
        return ("yes" if value else "no") if isinstance(value, bool) else value

    rows = [i for i in REGISTRY.values() if i.group == group]
    lines = [
        "| scheme | " + " | ".join(c for c, _ in _COLUMNS) + " |",
        "|---" * (len(_COLUMNS) + 1) + "|",
    ]
    for i in rows:
        lines.append(f"| `{i.name}` | " + " | ".join(cell(f(i)) for _, f in _COLUMNS) + " |")
    return "\n".join(lines)
