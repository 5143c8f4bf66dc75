"""The hard steps of the jointed ``energy_momentum`` solver on the lively chains:
how far from resolved the motion is, whether the step's discrete equations have a solution
reached from h = 0, and how far candidate starts lie from it.

``python -m studies.em_hard_steps [links] [1/dt] [hard steps]`` (default 50 60 20):
the lively chain of ``rtrigid bench``'s solver section (:func:`lively_chain`) for 600 steps
after 5; on the first ``hard steps`` steps whose explicit start failed (taken along the path
of their solution in h, ``path_steps``, or in sub-steps), the path of the step's
solution mu(h), h from 0 to dt, is traced by plain Newton (``energy_momentum.newton_probe``:
residual and Newton solve at any h) from the line through its last two points, with K = 16
and 64 equal steps; the smallest singular value of (h/2) dres/dmu along it tells whether the
path turns (a fold); and candidate starts (the rates at t_n, the last mean rates, RK4 with 1,
2, 4, 8 sub-steps of ``nullspace_rk4``) are measured against the end point mu(dt).
"""
import sys
import warnings

import numpy as np

from rtrigid.backends.tree import energy_momentum as em
from rtrigid.simulation import SimulationError
from rtrigid import scenarios
from rtrigid.maths import quat


def lively_chain(n, integrator, dt, seed=0):
    """The solver section's lively chain: links tilted ~0.5 rad, random ~1 rad/s."""
    rng = np.random.default_rng(seed)
    q0 = [quat.from_rotvec(rng.normal(scale=0.5, size=3)) for _ in range(n)]
    return scenarios.build("chain", integrator=integrator, dt=dt, n=n, q0=q0,
                           omega0=rng.normal(size=(n, 3)))


def newton(sim, h, mu, iters=25):
    """Plain Newton on the step of size h from mu; (solution or None, iterations)."""
    F, I = sim.backend.F, sim.backend.I
    res, sol, zero = np.zeros(mu.size), np.zeros(mu.size), np.zeros(mu.size)
    mu = mu.copy()
    for it in range(iters):
        em.newton_probe(h, F, I, mu, zero, res, sol)
        if not np.all(np.isfinite(res)):
            return None, it
        em.newton_probe(h, F, I, mu, -0.5 * h * res, res, sol)
        if not np.all(np.isfinite(sol)) or np.abs(sol).max() > 1e3:
            return None, it
        mu += sol
        if np.abs(sol).max() <= 1e-10 * np.abs(mu).max():
            return mu, it + 1
    return None, iters


def path(sim, K):
    """The path (h, mu(h)) in K equal steps of h from 0 to dt, as far as Newton follows it."""
    dt = sim.dt
    nu0 = sim.qvel().copy()
    pts = [(0.0, np.zeros(nu0.size))]
    for h in dt * np.arange(1, K + 1) / K:
        if len(pts) >= 2:
            (h1, m1), (h2, m2) = pts[-2], pts[-1]
            guess = m2 + (h - h2) / (h2 - h1) * (m2 - m1)
        else:
            guess = h * nu0
        mu, _ = newton(sim, h, guess)
        if mu is None:
            break
        pts.append((h, mu))
    return pts


def sigma_min(sim, h, mu):
    """The smallest singular value of (h/2) dres/dmu at mu (dense, from nv Newton solves)."""
    nv = mu.size
    res, sol, inv = np.zeros(nv), np.zeros(nv), np.zeros((nv, nv))
    for j in range(nv):
        e = np.zeros(nv)
        e[j] = 1.0
        em.newton_probe(h, sim.backend.F, sim.backend.I, mu, e, res, sol)
        inv[:, j] = sol
    return 1.0 / np.linalg.svd(inv, compute_uv=False)[0]


def increments(n, q0, q1, h):
    """The solver's unknowns mu for a spherical chain from quaternions q0 to q1 (near root)."""
    out = np.zeros(3 * n)
    for i in range(n):
        a, b = q0[4 * i:4 * i + 4], q1[4 * i:4 * i + 4]
        d = np.array([a @ b,
                      a[0] * b[1] - a[1] * b[0] - a[2] * b[3] + a[3] * b[2],
                      a[0] * b[2] + a[1] * b[3] - a[2] * b[0] - a[3] * b[1],
                      a[0] * b[3] - a[1] * b[2] + a[2] * b[1] - a[3] * b[0]])
        d = -d if d[0] < 0.0 else d
        out[3 * i:3 * i + 3] = 4.0 * d[1:] / (1.0 + d[0])
    return out


def study(n=50, inv_dt=60, hard=20):
    dt = 1.0 / inv_dt
    sim = lively_chain(n, "energy_momentum", dt)
    rk = {m: lively_chain(n, "nullspace_rk4", dt / m) for m in (1, 2, 4, 8)}
    rk0 = {m: r.snapshot() for m, r in rk.items()}
    sim.step(5)
    turns, tips, started_far, found = [], [], 0, []

    def helped():
        stats = sim.solver_stats()
        return stats["fallback_steps"] + stats.get("path_steps", 0)

    for _ in range(600):
        before = helped()
        snap, q0, v0 = sim.snapshot(), sim.qpos().copy(), sim.qvel().copy()
        last = dt * sim.backend.nu.copy()
        sim.step()
        turns.append(max(np.linalg.norm(sim.joint_velocity(i)) for i in range(n)) * dt)
        tips.append(np.linalg.norm(sim.w[-1]) * dt)
        if helped() > before:
            started_far += 1
            if len(found) < hard:
                found.append((snap, q0, v0, last))
    after = sim.snapshot()
    print(f"lively chain, {n} links, dt = 1/{inv_dt}: the explicit start failed on {started_far} "
          f"of 600 steps; "
          f"largest joint turn a step (rates at t_n+1 times dt) median {np.median(turns):.2f}, "
          f"max {np.max(turns):.2f} rad; the tip link's turn median {np.median(tips):.2f}, "
          f"max {np.max(tips):.2f} rad")
    reached = {16: 0, 64: 0}
    sig, dist = [], {}
    for snap, q0, v0, last in found:
        for K in reached:
            sim.restore(snap)
            pts = path(sim, K)
            reached[K] += pts[-1][0] == dt
        star = pts[-1][1]
        if pts[-1][0] < dt:
            continue
        sig.append([sigma_min(sim, h, m) for h, m in pts[1::16] + [pts[-1]]])
        cands = {"dt nu(t_n)": dt * v0, "last mean rates": last}
        for m, r in rk.items():
            r.restore(rk0[m])
            r.set_qpos(q0)
            r.set_qvel(v0)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    r.step(m)
                cands[f"RK4, {m} sub-steps"] = increments(n, q0, r.qpos(), dt)
            except (SimulationError, ValueError):
                cands[f"RK4, {m} sub-steps"] = None
        for name, c in cands.items():
            d = dist.setdefault(name, [[], 0, 0])
            if c is None:
                d[2] += 1
                continue
            d[0].append(np.abs(c - star).max() / np.abs(star).max())
            d[1] += newton(sim, dt, c)[0] is not None
    sim.restore(after)
    k = len(found)
    print(f"  the path mu(h), h = 0..dt, on {k} of those steps: reached dt with 16 steps on "
          f"{reached[16]}, with 64 on {reached[64]}; smallest singular value of (h/2) dres/dmu "
          f"along it (h = dt/64, 17 dt/64, ..., dt): " + "; ".join(
              " ".join(f"{s:.1e}" for s in row) for row in sig[:4]))
    print("  starts against mu(dt): max-norm distance / |mu(dt)| median, max; plain Newton "
          "converges from it")
    for name, (d, ok, bad) in dist.items():
        print(f"    {name:18s} {np.median(d):.2f} {np.max(d):.2f}  {ok} of {len(d)}"
              + (f" (RK4 failed on {bad})" if bad else ""))


if __name__ == "__main__":
    warnings.simplefilter("ignore", RuntimeWarning)  # sub-steps are counted
    study(*(int(a) for a in sys.argv[1:4]))
