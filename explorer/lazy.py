"""Modules imported on first use, so that the app's first page draws before
JAX, Flax and optax load.

``jax = lazy("jax")`` at the top of a module stands for ``import jax``: the
first attribute read (``jax.jit``) imports the real module, and every read
after that is passed to it. A module-level statement that reads an attribute
(a decorator, a default argument, a base class) imports it at once, as
before. The first import through here brings :mod:`gnncore` first, which asks
for its XLA flags before anything can start the backend (``gnncore.xla``),
then runs what :func:`when_loaded` was given (the app's compilation cache).
"""

from __future__ import annotations

import importlib
import sys
import threading
import types
from collections.abc import Callable

__all__ = ["lazy", "load", "when_loaded"]

_lock = threading.RLock()
_waiting: list[Callable[[], object]] = []  # run once, at the first load (process-wide setup)
_called: set[Callable[[], object]] = set()  # what has run: each callback runs once


class _LazyModule(types.ModuleType):
    """A stand-in for a module, imported on the first attribute read."""

    def __init__(self, name: str):
        super().__init__(name)
        self.__dict__["_module"] = None

    def _load(self) -> types.ModuleType:
        module = self.__dict__["_module"]
        if module is None:
            with _lock:
                load()
                module = importlib.import_module(self.__name__)
                self.__dict__["_module"] = module
        return module

    def __getattr__(self, attribute: str):
        return getattr(self._load(), attribute)

    def __dir__(self) -> list[str]:
        return dir(self._load())

    def __repr__(self) -> str:
        state = "loaded" if self.__dict__["_module"] is not None else "not loaded yet"
        return f"<lazy module {self.__name__!r} ({state})>"


def lazy(name: str) -> types.ModuleType:
    """The module ``name`` (``"jax"``, ``"flax.nnx"``, ``"explorer.engine.run"``),
    imported when one of its attributes is first read; at once if some code
    has imported it already."""
    module = sys.modules.get(name)
    return module if module is not None else _LazyModule(name)


def load() -> None:
    """What the first load of JAX's world needs first: :mod:`gnncore` (its XLA
    flags) and the callbacks :func:`when_loaded` was given. Called by every
    :func:`lazy` module's first load, by the explorer modules that import JAX
    at their top (through :mod:`explorer.jax_first`) and before the lessons
    load."""
    with _lock:
        import gnncore  # noqa: F401  (its XLA flags before the backend starts)

        while _waiting:
            callback = _waiting.pop(0)
            _called.add(callback)
            callback()


def when_loaded(callback: Callable[[], object]) -> None:
    """Call ``callback()`` once in this process: at the next :func:`load`, or
    now if JAX is loaded already; again for the same callback does nothing.
    The app turns its compilation cache on this way: before the first
    compile, after the first page."""
    with _lock:
        if callback in _called or callback in _waiting:
            return
        _waiting.append(callback)
        if "jax" in sys.modules:
            load()
