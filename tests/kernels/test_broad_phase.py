"""The broad phase leaves out a geom that no other geom may touch (manifold.may_touch's rule:
another body, not both scenery, filter bits agreeing, the bodies not an excluded pair): the
flag Contacts sets per geom row, against that rule pair by pair."""

import numpy as np

import rtrigid as rt
from rtrigid.contact import Contacts
from rtrigid.contact.geometry import GI_PAIRED
from rtrigid.contact.manifold import may_touch
from rtrigid.demos import robots


def _check(model):
    c = Contacts(model)
    geomi, excluded = c.scene.geomi, c.scene.excluded
    ng = len(geomi)
    rule = [any(may_touch.py_func(geomi, excluded, a, b) for b in range(ng) if b != a)
            for a in range(ng)]
    assert list(geomi[:, GI_PAIRED].astype(bool)) == rule
    return np.array(rule)


def test_a_robot_whose_self_collisions_are_excluded_sweeps_no_geom():
    sim = robots.a1_standing("semi_implicit_euler")
    assert not _check(sim.model).any()


def test_the_flag_follows_filter_bits_exclusions_and_scenery():
    model = rt.Model()
    for name in ("a", "b", "c", "d"):
        model.add_body(name, 1.0, (0.01, 0.01, 0.01))
    model.add_geom("a", "sphere", radius=0.1)
    model.add_geom("b", "sphere", radius=0.1)
    model.add_geom("c", "sphere", radius=0.1, contype=2, conaffinity=2)  # meets nothing
    model.add_geom("d", "sphere", radius=0.1, contype=0, conaffinity=4)  # meets the table
    model.add_geom(None, "box", half_extents=(1.0, 1.0, 0.1), contype=4, conaffinity=0)
    # rows: the bodies' geoms in name order, the scenery last
    assert list(_check(model)) == [True, True, False, True, True]
    model.exclude_contacts("a", "b")
    assert list(_check(model)) == [False, False, False, True, True]
