"""Measuring tools that ship with rtrigid: benchmarks (:mod:`.bench`, :mod:`.batch_bench`,
:mod:`.realtime_bench`), the papers' accuracy study (:mod:`.accuracy`) and the run diagnostics
(:mod:`.diagnostics`).  The independent references they compare against are in
:mod:`rtrigid.references` (:mod:`.mujoco_ref`, :mod:`.pybullet_ref` and :mod:`.reference` here
are the same modules under their older names)."""
