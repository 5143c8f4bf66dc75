"""OpenGL viewer for rtrigid simulations (pyglet window, moderngl renderer).

``rtrigid`` never imports this package; it needs the ``viewer`` extras
(``pip install -e ".[viewer]"``) and, without a GPU, Mesa's software OpenGL.
"""
__all__ = ["Viewer", "DEFAULT_KEYS"]


def __getattr__(name):
    # pyglet and moderngl load only when a viewer is wanted, not when `rtrigid` lists the
    # commands the viewer adds (viewer.cli)
    if name in __all__:
        from . import app

        return getattr(app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
