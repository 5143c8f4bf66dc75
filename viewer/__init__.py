"""OpenGL viewer for rtrigid simulations (pyglet window, moderngl renderer).

``rtrigid`` never imports this package; it needs the ``viewer`` extras
(``pip install -e ".[viewer]"``) and, without a GPU, Mesa's software OpenGL.
"""
from viewer.app import DEFAULT_KEYS, Viewer

__all__ = ["Viewer", "DEFAULT_KEYS"]
