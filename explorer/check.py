"""``python -m explorer check my_train.py [args…]``: run an unchanged script
and judge every jitted step it trains with.

While the script runs, ``jax.jit`` and ``nnx.jit`` (and so ``nnx.cached_partial``
over them) hand back :class:`explorer.watcher.Watched` steps. A step is judged
only if it is a *training* step: one that changes the NNX parameters or
optimizer state of its arguments inside the trace (``optimizer.update`` on a
module passed in, under either jit), or one that returns NNX state (a
functional step). A pure evaluation step, or a jitted function that never
sees an NNX object, is listed but never flagged. Functions JAX, Flax, optax
or this project jit for themselves are left alone.

At exit it prints, per jitted function, the calls, the traces and their
causes, the verdict and the fix, and exits 1 if any verdict is ``frozen`` or
``stale objects`` (0 otherwise; 2 if the script itself failed).
"""

from __future__ import annotations

import argparse
import functools
import os
import runpy
import sys
import traceback
from pathlib import Path

import jax
from flax import nnx
from flax.nnx import graph as nnx_graph

from explorer.watcher import Watched, has_nnx

__all__ = ["Checker", "main"]

#: code in these packages jits its own helpers: never watched
_LIBRARIES = ("jax", "jaxlib", "flax", "optax", "chex", "gnncore", "explorer", "numpy",
              "orbax")
#: a step whose trace changes these is a training step
_TRAINED = (nnx.Param, nnx.OptState)
BAD = ("frozen", "stale objects")


class Checker:
    """Installs watched ``jax.jit`` / ``nnx.jit`` while a script runs.

    Arguments:
        every: record every ``every``-th call of each step.
        log_dir: write a run log per watched training step there.
    """

    def __init__(self, *, every: int = 1, log_dir=None):
        self.every, self.log_dir = every, log_dir
        self.steps: list[Watched] = []
        self._saved: list[tuple[object, str, object]] = []

    def install(self) -> None:
        for owner in (jax, nnx):
            original = owner.jit
            self._saved.append((owner, "jit", original))
            owner.jit = self._wrap_jit(original, f"{owner.__name__.split('.')[-1]}.jit")

    def uninstall(self) -> None:
        while self._saved:
            owner, name, original = self._saved.pop()
            setattr(owner, name, original)

    def _wrap_jit(self, original, label: str):
        checker = self

        @functools.wraps(original)
        def jit(fun=None, *args, **kwargs):
            if fun is None:  # @jax.jit(static_argnums=...) style
                return lambda f: jit(f, *args, **kwargs)
            caller = sys._getframe(1).f_globals.get("__name__", "")
            if caller.split(".")[0] in _LIBRARIES or not callable(fun):
                return original(fun, *args, **kwargs)
            return checker._watched(original(_probe(fun), *args, **kwargs), fun, label)

        return jit

    def _watched(self, jitted, fun, label: str):
        name = f"{label}({getattr(fun, '__qualname__', type(fun).__name__)})"
        step = _Gate(jitted, name, self)
        return step

    def report(self) -> tuple[str, int]:
        """The report's text and the exit code (1 when a step is frozen or stale)."""
        lines, code = [], 0
        if not self.steps:
            lines.append("check: no jitted function received NNX modules or state")
        for w in self.steps:
            if not w.is_training_step():
                lines.append(f"{w.name}: {w.calls} call(s): no NNX parameter or optimizer "
                             "state changed inside it and it returns no state: not a "
                             "training step (not judged)")
                continue
            lines.append(w.report())
            if w.verdict.status in BAD:
                code = 1
        return "\n".join(lines), code

    def close(self) -> None:
        for w in self.steps:
            if w.is_training_step():
                w.close()


class _Gate:
    """A jitted function as the script sees it: plain until it is first
    called with NNX modules or state, then watched."""

    def __init__(self, jitted, name: str, checker: Checker):
        self._jitted, self._name, self._checker = jitted, name, checker
        self._watched: Watched | None = None
        self._plain = False
        functools.update_wrapper(self, jitted, updated=())

    def __call__(self, *args, **kwargs):
        if self._watched is not None:
            return self._watched(*args, **kwargs)
        if self._plain or not has_nnx(list(args) + list(kwargs.values())):
            self._plain = True
            return self._jitted(*args, **kwargs)
        checker = self._checker
        log_dir = checker.log_dir
        self._watched = Watched(self._jitted, every=checker.every, name=self._name,
                                training=None, warn=False, probe=_probe_flags(self._jitted))
        if log_dir is not None:
            from explorer.runlog import RunLog

            self._watched.log = RunLog.create(log_dir, self._name, step=self._name)
        checker.steps.append(self._watched)
        return self._watched(*args, **kwargs)

    def __get__(self, obj, objtype=None):  # a jitted method
        return self if obj is None else functools.partial(self, obj)

    def __getattr__(self, name):
        return getattr(self.__dict__["_jitted"], name)


class _Flags:
    __slots__ = ("mutates",)

    def __init__(self):
        self.mutates = False


def _probe(fun):
    """``fun``, noting (at trace time) whether it changes the parameters or
    optimizer state of the NNX modules it is given: a training step does."""
    flags = _Flags()

    @functools.wraps(fun)
    def probe(*args, **kwargs):
        before = _trained_ids(args, kwargs)
        out = fun(*args, **kwargs)
        if before and _trained_ids(args, kwargs) != before:
            flags.mutates = True
        return out

    probe._explorer_flags = flags
    return probe


def _probe_flags(jitted) -> _Flags:
    fn = jitted
    while fn is not None:
        flags = getattr(fn, "_explorer_flags", None)
        if flags is not None:
            return flags
        fn = getattr(fn, "__wrapped__", None)
    return _Flags()


def _trained_ids(args, kwargs) -> dict:
    ids = {}
    for i, value in enumerate(list(args) + list(kwargs.values())):
        values = value if isinstance(value, (tuple, list)) else (value,)
        for j, v in enumerate(values):
            if nnx_graph.is_graph_node(v):
                for path, var in nnx.to_flat_state(nnx.state(v, nnx.Any(*_TRAINED))):
                    ids[(i, j, *path)] = id(var.get_value())
    return ids


def main(argv=None, out=None) -> int:
    out = out or sys.stdout
    parser = argparse.ArgumentParser(
        prog="python -m explorer check",
        description="Run a training script unchanged and judge every jitted training step.")
    parser.add_argument("--every", type=int, default=1,
                        help="record every N-th call of each step (default 1)")
    parser.add_argument("--log", type=Path, default=None, metavar="DIR",
                        help="write a run log per training step to DIR (for the app's "
                             "'Your runs' page)")
    parser.add_argument("script", type=Path)
    parser.add_argument("args", nargs=argparse.REMAINDER)
    try:
        args = parser.parse_args(argv)
    except SystemExit as err:
        return int(err.code or 0) and 2
    if not args.script.is_file():
        print(f"error: {args.script}: no such script", file=sys.stderr)
        return 2
    if args.every < 1:
        print("error: --every must be at least 1", file=sys.stderr)
        return 2
    checker = Checker(every=args.every, log_dir=args.log)
    script = str(args.script)
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [script, *args.args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    failed = False
    checker.install()
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as err:
        failed = err.code not in (None, 0)
    except BaseException:  # the script's own error: show it, still report
        traceback.print_exc()
        failed = True
    finally:
        checker.uninstall()
        sys.argv, sys.path[:] = saved_argv, saved_path
    text, code = checker.report()
    checker.close()
    print("\n" + text, file=out)
    return 2 if failed else code
