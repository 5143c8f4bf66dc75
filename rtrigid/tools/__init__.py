"""Measuring tools: benchmarks (:mod:`.bench`, :mod:`.realtime_bench`, :mod:`.hil_fairness`),
the papers' accuracy study (:mod:`.accuracy`), the run diagnostics (:mod:`.diagnostics`) and
the independent references it all compares against (:mod:`.mujoco_ref`, :mod:`.reference`)."""
