"""Counting traces, and compiled steps shared between runs.

A run counts how often its training step traced (Python ran the step's body:
JAX was compiling it). Each run normally wraps :func:`recipe.train_step` in a
counter of its own, so each run traces and compiles its step once.

:class:`SharedCompiles` lets runs with the same shapes and settings reuse one
compiled step: the app keeps one per server process (``st.cache_resource``),
so a second browser session, or a Reset, trains at once instead of compiling
again. What it holds is pure and stateless: the jitted step functions (the
executables JAX caches in them, keyed by the argument shapes, dtypes and the
modules' static structure), one counting ``train_step`` they wrap, and the
optax transforms (their functions are part of the optimizer's static
structure, so equal settings must give the same object for two runs to match).
The model and optimizer state stays in each run: it is an argument of every
call, never captured.

A shared step traces in whichever run calls it first; the trace counts in the
run making that call (:func:`counting`), so a run that reuses another's
executable counts no trace.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from explorer.lazy import lazy

recipe = lazy("explorer.engine.recipe")  # JAX: loaded by the first run, not by the store

__all__ = ["SharedCompiles", "TraceCounter", "counted", "counting"]


# Everything a Run compiles or keeps as a callable is built from what it needs
# (the trace counter, the modules), never from the Run itself: a jitted bound
# method or a closure over ``self`` made every Run a reference cycle, which only
# Python's cycle collector frees. The app turns Streamlit's per-rerun
# gc.collect() off (it cost ~150 ms a training tick), so a replaced run (its
# graph, model, optimizer state, executables) stayed in memory until a rare full
# collection: gigabytes after a few Resets on a big graph. Without the cycle,
# reference counting frees a run as soon as the workspace lets go of it.
class TraceCounter:
    """How many times a run's compiled step traced: a Python side effect of tracing."""

    __slots__ = ("traces",)

    def __init__(self):
        self.traces = 0


# The run whose call is tracing a shared step: set by that run around its call,
# in its own thread (each Streamlit session runs its script in a thread of its own).
_calling: contextvars.ContextVar[TraceCounter | None] = contextvars.ContextVar(
    "explorer_trace_counter", default=None)


@contextlib.contextmanager
def counting(counter: TraceCounter):
    """Traces of a shared step inside this block count in ``counter``."""
    token = _calling.set(counter)
    try:
        yield
    finally:
        _calling.reset(token)


def counted(train_step, counter: TraceCounter | None = None):
    """``train_step``, counting each trace in ``counter`` (one run's own
    step), or, with ``None``, in the counter of the run whose call is tracing
    it (:func:`counting`: a step shared by several runs)."""

    def counted_step(model, optimizer, inputs):
        into = counter if counter is not None else _calling.get()
        if into is not None:  # Python runs this once per trace, not per call
            into.traces += 1
        return train_step(model, optimizer, inputs)

    return counted_step


class SharedCompiles:
    """Compiled step functions and optax transforms, shared by the runs built
    with it (``Run(..., shared=...)``).

    Arguments:
        capacity: how many step functions it keeps (the least recently used
            one is dropped beyond that; a run holding it keeps it).

    Thread-safe: sessions build runs concurrently.
    """

    def __init__(self, capacity: int = 64):
        self.capacity = capacity
        self._lock = threading.Lock()
        self._steps: OrderedDict[Hashable, Any] = OrderedDict()
        self._transforms: dict[tuple, Any] = {}
        self._train_step = None
        self.built = 0  # step functions built (a miss)
        self.reused = 0  # step functions handed out again (a hit)
        #: runs built with this store (the first one's model compiles JAX's
        #: eager initialisers; later ones of the same shapes find them compiled)
        self.runs = 0

    @property
    def train_step(self) -> Callable:
        """The training step every shared function wraps; its traces count in
        the run that calls it (:func:`counting`). Made on first use: the app
        makes its store before the first page, which loads no JAX."""
        with self._lock:
            if self._train_step is None:
                self._train_step = counted(recipe.train_step)
            return self._train_step

    def transform(self, name: str, learning_rate: float, weight_decay: float):
        """The optax transform of ``recipe.OPTIMIZERS[name]``, one object per
        settings."""
        key = (name, float(learning_rate), float(weight_decay))
        with self._lock:
            if key not in self._transforms:
                self._transforms[key] = recipe.OPTIMIZERS[name](learning_rate, weight_decay)
            return self._transforms[key]

    def count_run(self) -> None:
        """A run was built with this store (:attr:`runs`)."""
        with self._lock:
            self.runs += 1

    def step(self, key: Hashable, build: Callable[[], Any]):
        """The step function stored under ``key``, built by ``build()`` the
        first time."""
        with self._lock:
            if key in self._steps:
                self._steps.move_to_end(key)
                self.reused += 1
                return self._steps[key]
        fn = build()  # outside the lock: building may trace nothing, but takes time
        with self._lock:
            fn = self._steps.setdefault(key, fn)
            self._steps.move_to_end(key)
            self.built += 1
            while len(self._steps) > self.capacity:
                self._steps.popitem(last=False)
            return fn

    def __len__(self) -> int:
        return len(self._steps)
