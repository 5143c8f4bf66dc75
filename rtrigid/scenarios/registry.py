"""The scenario registry: the :func:`scenario` decorator, :func:`build` and the queries on
registered names, model factories (``"module:function"``) and robot files."""

from __future__ import annotations

import importlib
import inspect
import os
import weakref
from typing import Any, Callable, TypeVar

from rtrigid import integrators
from rtrigid.model import Model
from rtrigid.simulation import Simulation

Builder = Callable[..., Simulation]
_B = TypeVar("_B", bound=Builder)
_BUILDERS: dict[str, tuple[Builder, float, float]] = {}
# simulation -> its scenario's metadata
_INFO: weakref.WeakKeyDictionary[Simulation, dict[str, Any]] = weakref.WeakKeyDictionary()
FACTORY_DT = 1e-3  # the step of a model factory's simulation unless dt is given
FACTORY_T_END = 1.0  # and its default duration
ALL_AXES = [
    ("linear", 0),
    ("linear", 1),
    ("linear", 2),
    ("angular", 0),
    ("angular", 1),
    ("angular", 2),
]


def scenario(dt: float, t_end: float, integrator: str = "energy_momentum") -> Callable[[_B], _B]:
    """Register a builder under its function name with its default step, duration and
    integrator (what :func:`build` uses when none is given)."""

    def register(fn: _B) -> _B:
        _BUILDERS[fn.__name__] = (fn, dt, t_end)
        _DEFAULT_INTEGRATOR[fn.__name__] = integrator
        return fn

    return register


_DEFAULT_INTEGRATOR: dict[str, str] = {}


def default_integrator(name: str) -> str:
    """The integrator :func:`build` steps scenario ``name`` with when none is given."""
    return _DEFAULT_INTEGRATOR.get(name, "energy_momentum")


def names() -> list[str]:
    """The scenario names, in registration order."""
    return list(_BUILDERS)


def defaults(name: str) -> tuple[float, float]:
    """(default dt, default duration) of a scenario."""
    _, dt, t_end = _get(name)
    return dt, t_end


def parameters(name: str) -> dict[str, Any]:
    """The keyword parameters of a scenario with their defaults."""
    fn = _get(name)[0]
    return {
        k: p.default
        for k, p in inspect.signature(fn).parameters.items()
        if k not in ("integrator", "dt", "options")
        and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }


def info(sim: Simulation) -> dict[str, Any]:
    """The metadata of the scenario ``sim`` was built from (empty for other simulations).

    Kept here, beside the simulation rather than on it: ``scenario``, ``t_end``, ``params``,
    ``conserved`` (a list of (quantity, axis) pairs, quantity "linear" or "angular") and,
    where the papers give one, ``reference(t)`` for the quantity ``reference_name``.
    """
    return _INFO.setdefault(sim, {})


def describe(name: str) -> str:
    """One line on what the scenario is (the first line of its builder's docstring)."""
    return (_get(name)[0].__doc__ or "").strip().split("\n")[0].replace("``", "")


def integrators_for(name: str) -> list[str]:
    """The integrators that can step scenario ``name`` (with its default parameters)."""
    fn, dt, _ = _get(name)
    out = []
    for integrator in integrators.names():
        try:
            fn(integrator=integrator, dt=dt)
        except ValueError as exc:
            if not str(exc).startswith("integrator:"):
                raise
        else:
            out.append(integrator)
    return out


def is_factory(name: object) -> bool:
    """Whether ``name`` names a model factory (``"module:function"``) rather than a scenario
    or a file."""
    return isinstance(name, str) and ":" in name and not os.path.isfile(name)


def factory(name: str) -> Callable[..., Any]:
    """The function a ``"module:function"`` name refers to (``ValueError`` if there is none)."""
    module, _, attr = name.partition(":")
    if not module or not attr:
        raise ValueError(f"name: {name!r} is not of the form module:function")
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        raise ValueError(f"name: cannot import module {module!r} of {name!r}: {exc}") from None
    fn: Any = mod
    for part in attr.split("."):
        fn = getattr(fn, part, None)
    if not callable(fn):
        raise ValueError(f"name: module {module!r} has no function {attr!r}")
    return fn


def _get(name: str) -> tuple[Builder, float, float]:
    if is_factory(name):
        return factory(name), FACTORY_DT, FACTORY_T_END
    if name not in _BUILDERS:
        raise ValueError(
            f"name: unknown scenario {name!r}; known: {names()} (or a model "
            "factory as module:function)"
        )
    return _BUILDERS[name]


def _from_factory(
    name: str,
    integrator: str,
    dt: float | None,
    options: dict[str, Any] | None,
    params: dict[str, Any],
) -> Simulation:
    """Build the simulation of a model factory: ``fn(**params)`` returns a Model (stepped
    here by ``integrator`` at ``dt``) or a Simulation (taken as it is)."""
    made = factory(name)(**params)
    if isinstance(made, Simulation):
        return made
    if not isinstance(made, Model):
        raise ValueError(
            f"name: {name} returned a {type(made).__name__}, not a Model or a Simulation"
        )
    return Simulation(
        made, integrator=integrator, dt=FACTORY_DT if dt is None else dt, options=options
    )


FILE_PARAMETERS: dict[str, Any] = {
    "floating_base": False,
    "merge_fixed": True,
    "ignore": (),
    "limits": True,
    "actuators": None,
    "kp": None,
    "kv": None,
    "collision": True,
    "package_dirs": (),
    "strict": False,
}
FILE_DT, FILE_T_END = 1e-3, 2.0


def is_file(name: object) -> bool:
    """Whether ``name`` names a robot description file rather than a scenario."""
    return isinstance(name, str) and name not in _BUILDERS and os.path.isfile(name)


def build(
    name: str,
    integrator: str | None = None,
    dt: float | None = None,
    options: dict[str, Any] | None = None,
    **params: Any,
) -> Simulation:
    """Build scenario ``name`` stepped by ``integrator`` (with its ``options``); unknown
    parameters are refused with ``ValueError``.  ``integrator`` defaults to the scenario's
    (:func:`default_integrator`: ``energy_momentum``, ``nullspace_rk4`` for the closed
    loops), for a file to ``nullspace_rk4``.

    ``name`` may also be the path of a URDF or MJCF file (:func:`rtrigid.load_model`; its
    parameters are those of ``FILE_PARAMETERS``; dt the file's own time step where it gives
    one (MJCF ``<option timestep>``), else 1 ms; 2 s by default).
    """
    if is_file(name):
        from rtrigid.loaders import load_model

        for key in params:
            if key not in FILE_PARAMETERS:
                raise ValueError(
                    f"{key}: not a parameter of a robot file; known: {sorted(FILE_PARAMETERS)}"
                )
        model = load_model(name, **params)
        if dt is None:
            dt = model.timestep or FILE_DT
        sim = Simulation(model, integrator=integrator or "nullspace_rk4", dt=dt, options=options)
        info(sim).update(
            scenario=name, t_end=FILE_T_END, conserved=[], params={**FILE_PARAMETERS, **params}
        )
        return sim
    fn, default_dt, t_end = _get(name)
    integrator = integrator or default_integrator(name)
    known = parameters(name)
    takes_any = any(p.kind == p.VAR_KEYWORD for p in inspect.signature(fn).parameters.values())
    for key in params:
        if key not in known and not takes_any:
            raise ValueError(f"{key}: not a parameter of {name!r}; known: {sorted(known)}")
    if is_factory(name):
        sim = _from_factory(name, integrator, dt, options, params)
    else:
        sim = fn(
            integrator=integrator, dt=default_dt if dt is None else dt, options=options, **params
        )
    info(sim).setdefault("scenario", name)
    info(sim).setdefault("t_end", t_end)
    info(sim)["params"] = {**known, **params}
    return sim
