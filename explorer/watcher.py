"""Watch your own training step: is it really training?

:func:`watch` wraps any training step: ``nnx.jit``, ``nnx.jit(graph=False)``,
plain ``jax.jit`` (the frozen-training pitfall), a functional state-in /
state-out step, ``nnx.cached_partial``, or eager code. The wrapper has the
step's signature and returns its results; every ``every``-th call it records:

- the synced wall time, and whether the call traced and compiled and *why*
  (which argument's shape, dtype, structure or static value differs from the
  signature the step was last traced for);
- for every NNX variable or state leaf in the arguments and results
  (parameters, optimizer state and step, RNG counters, batch statistics), its
  change ``‖Δ‖ / ‖θ‖`` since the previous recorded call, computed on the
  device and brought back in one transfer with the loss;
- the loss, when the step returns one (a scalar, the first element of a
  tuple, or ``["loss"]`` of a dict).

From those records :attr:`Watched.verdict` says ``training``, ``frozen`` (which
variables never changed, the cause, the fix), ``stale objects`` (the state is
threaded but the original model object never receives it), ``retracing every
call`` (with the argument that keeps changing) or ``non-finite``. The first bad
verdict is raised once as a warning. With ``log_dir`` the records also go to a
run log (:mod:`explorer.runlog`) that the app's "Your runs" page reads.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import inspect
import math
import time
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from flax.nnx import graph as nnx_graph

from explorer.audit import FROZEN_CAUSE, FROZEN_FIX, ZERO_UPDATE_CAUSE, ZERO_UPDATE_FIX, _kind

__all__ = ["CallRecord", "TrainingWarning", "Verdict", "Watched", "watch"]

TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
#: traced on this many calls in a row: "retracing every call"
RETRACE_RUN = 3

STALE_CAUSE = ("the loop threads the state returned by the step, but the original model "
               "object never receives it: it still holds its initial weights")
STALE_FIX = ("write the state back with nnx.update(model, state) (or nnx.merge a new "
             "model) before evaluating, saving or reading the model")
RETRACE_CAUSE = "an argument's shape, dtype, structure or static value changes every call"
RETRACE_FIX = ("keep the arguments' shapes fixed (pad to a few bucket sizes), pass changing "
               "Python values as arrays, and jit the step once outside the loop")
NONFINITE_CAUSE = "the loss or a variable became NaN or Inf"
NONFINITE_FIX = "lower the learning rate, check the data for NaN/Inf, clip gradients"


class TrainingWarning(UserWarning):
    """A watched step looks wrong (frozen, stale, retracing, non-finite)."""


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What the records say: ``status`` is ``training``, ``frozen``, ``stale
    objects``, ``retracing every call``, ``non-finite`` or ``waiting`` (too
    few calls to tell)."""

    status: str
    evidence: tuple[str, ...] = ()
    cause: str = ""
    fix: str = ""

    @property
    def bad(self) -> bool:
        return self.status not in ("training", "waiting", "pure")

    def line(self) -> str:
        text = f"{self.status}"
        if self.evidence:
            text += ": " + "; ".join(self.evidence)
        return text


@dataclasses.dataclass(frozen=True)
class CallRecord:
    """One recorded call of a watched step."""

    call: int  # 1-based call number
    wall_s: float  # the call, synced (block_until_ready on its results)
    traced: bool  # it traced (and compiled) the step
    compiles: int  # XLA compilations during the call
    cause: str  # why it traced ("first call", or what changed)
    loss: float | None
    #: path -> ‖Δ‖/‖θ‖ since the previous recorded call (empty on the first)
    changes: dict[str, float]
    nonfinite: tuple[str, ...]  # variables holding NaN or Inf

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def watch(step: Callable, log_dir=None, every: int = 1, *, name: str | None = None,
          warn: bool = True) -> Watched:
    """Wrap ``step`` (any training step) so that it records and judges its
    calls; see the module's docstring. ``every``: record every ``every``-th
    call (the first call is always recorded); the calls in between only count
    traces. ``log_dir``: also append the records to a run log there.
    ``name``: the run's name (default: the step's name)."""
    return Watched(step, log_dir=log_dir, every=every, name=name, warn=warn)


class Watched:
    """A watched training step: call it like the step. :attr:`records`,
    :attr:`verdict` and :meth:`report` tell what it did."""

    def __init__(self, step: Callable, *, log_dir=None, every: int = 1,
                 name: str | None = None, warn: bool = True, training: bool | None = True,
                 probe=None):
        if every < 1:
            raise ValueError(f"every must be at least 1; got {every}")
        self.step, self.every, self.warn = step, int(every), warn
        self.name = name or getattr(step, "__qualname__", None) or type(step).__name__
        functools.update_wrapper(self, step, updated=())
        #: None: decide from the calls (see explorer.check); True: a training step
        self.training = training
        #: explorer.check's probe: ``probe.mutates`` says whether the step changed the
        #: parameters or optimizer state of its NNX arguments inside the trace
        self.probe = probe
        self.calls = 0
        self.records: list[CallRecord] = []
        self.traces: list[tuple[int, str]] = []  # (call, cause) of every traced call
        self._traced_run = 0  # traced calls in a row
        self._signature: list | None = None  # of the last traced call
        self._previous: tuple[list[str], list, list[str]] | None = None  # paths, arrays, kinds
        self._kinds: dict[str, str] = {}
        self._ever_changed: set[str] = set()
        self._compared = 0  # recorded calls compared with a previous one
        self._threads_state = False  # results hold NNX state (a functional step)
        self._initial_state: list | None = None  # a functional step's first input leaves
        self._warned = False
        self._compare = jax.jit(_compare)
        self._bound = _bound_arguments(step)  # nnx.cached_partial's modules
        self.log = None
        if log_dir is not None:
            from explorer.runlog import RunLog

            self.log = RunLog.create(log_dir, self.name, step=self.name)

    # ---------------------------------------------------------------- calls
    def __call__(self, *args, **kwargs):
        self.calls += 1
        record = self.calls == 1 or self.calls % self.every == 0
        events = {TRACE_EVENT: 0, COMPILE_EVENT: 0}

        def listen(event, duration, **_):
            if event in events:
                events[event] += 1

        jax.monitoring.register_event_duration_secs_listener(listen)
        start = time.perf_counter()
        try:
            out = self.step(*args, **kwargs)
            if record:
                jax.block_until_ready(out)
        finally:
            wall = time.perf_counter() - start
            jax.monitoring.unregister_event_duration_listener(listen)
        traced = events[TRACE_EVENT] > 0 or events[COMPILE_EVENT] > 0
        cause = ""
        if traced:
            cause = self._trace_cause(args, kwargs)
            self.traces.append((self.calls, cause))
            self._traced_run += 1
        else:
            self._traced_run = 0
        if record:
            self._record(args, kwargs, out, wall, traced, events[COMPILE_EVENT], cause)
        return out

    def _trace_cause(self, args, kwargs) -> str:
        signature = _signature(self.step, args, kwargs)
        previous, self._signature = self._signature, signature
        if previous is None:
            return "first call"
        return _difference(previous, signature) or (
            "traced again with the same argument signature (a new jitted function, or "
            "a static argument whose hash changed)")

    def _record(self, args, kwargs, out, wall, traced, compiles, cause) -> None:
        names = _argument_names(self.step, args, kwargs)
        tracked = _tracked(names, args, kwargs, out)
        for name, value in self._bound:
            tracked = _nnx_items(name, value) + tracked
        states_out = [p for p, _, _ in tracked if p.startswith("result")]
        if states_out:
            self._threads_state = True
        if self._threads_state and self._initial_state is None:
            inputs = [item for name, value in zip(names, list(args) + list(kwargs.values()))
                      for item in _nnx_items(name, value)]
            self._initial_state = [a for _, a, k in inputs if k == "parameter"]
        paths = [p for p, _, _ in tracked]
        arrays = [a for _, a, _ in tracked]
        kinds = [k for _, _, k in tracked]
        self._kinds.update(zip(paths, kinds))
        loss = _loss_of(out)
        prev = self._previous
        if prev is not None and prev[0] == paths:
            stats, copies = self._compare(prev[1], arrays, loss)
            stats = np.asarray(stats)  # the one transfer of this call
            ratios, finite, moved = stats[0, :-1], stats[1, :-1], stats[2, :-1]
            loss_value = float(stats[0, -1]) if loss is not None else None
            changes = {p: float(r) for p, r in zip(paths, ratios)}
            self._ever_changed.update(p for p, m in zip(paths, moved) if m)
            self._compared += 1
        else:
            stats, copies = self._compare(arrays, arrays, loss)
            stats = np.asarray(stats)
            finite = stats[1, :-1]
            loss_value = float(stats[0, -1]) if loss is not None else None
            changes = {}
        self._previous = (paths, copies, kinds)
        nonfinite = tuple(p for p, f in zip(paths, finite) if not f)
        rec = CallRecord(call=self.calls, wall_s=wall, traced=traced, compiles=compiles,
                         cause=cause, loss=loss_value, changes=changes, nonfinite=nonfinite)
        self.records.append(rec)
        verdict = self.verdict_now()
        if self.log is not None:
            self.log.append(rec, verdict, self._kinds)
        if self.warn and verdict.bad and not self._warned:
            self._warned = True
            warnings.warn(f"{self.name}: {verdict.line()}. Cause: {verdict.cause}. "
                          f"Fix: {verdict.fix}.", TrainingWarning, stacklevel=3)

    # -------------------------------------------------------------- verdict
    @property
    def threads_state(self) -> bool:
        """The step returns NNX state that the loop threads (a functional step)."""
        return self._threads_state

    def is_training_step(self) -> bool:
        """Whether this is a training step (explorer.check asks: a pure eval
        step under jax.jit is never judged)."""
        if self.training is not None:
            return self.training
        return bool(self.probe is not None and self.probe.mutates) or self._threads_state

    def verdict_now(self) -> Verdict:
        """The verdict from the calls so far, stale objects not included (the
        model object is stale until the loop ends; see :attr:`verdict`)."""
        if not self.is_training_step():
            return Verdict("pure", ("no NNX state changed hands: not a training step",))
        bad = next((r for r in self.records if r.nonfinite or (
            r.loss is not None and not math.isfinite(r.loss))), None)
        if bad is not None:  # the first recorded call with a NaN or Inf
            what = list(bad.nonfinite[:3]) + (
                [f"loss {bad.loss}"] if bad.loss is not None and not math.isfinite(bad.loss)
                else [])
            return Verdict("non-finite", (f"first at call {bad.call}: " + ", ".join(what),),
                           NONFINITE_CAUSE, NONFINITE_FIX)
        if self._traced_run >= RETRACE_RUN:
            call, cause = self.traces[-1]
            return Verdict("retracing every call",
                           (f"the last {self._traced_run} calls each traced and compiled",
                            f"call {call}: {cause}"), RETRACE_CAUSE, RETRACE_FIX)
        if self._compared == 0:
            return Verdict("waiting", ("one recorded call: nothing to compare yet",))
        params = [p for p, k in self._kinds.items() if k == "parameter"]
        moved = [p for p in params if p in self._ever_changed]
        evidence = [f"{len(moved)} of {len(params)} parameters changed over "
                    f"{self._compared + 1} recorded calls"]
        steps = [p for p, k in self._kinds.items() if k == "step counter"]
        stepped = any(p in self._ever_changed for p in steps)
        if steps:
            evidence.append("optimizer step " + ("advanced" if stepped else "stayed the same"))
        losses = [r.loss for r in self.records if r.loss is not None]
        if len(losses) >= 2 and len(set(losses)) == 1:
            evidence.append(f"loss bit-identical over {len(losses)} recorded calls")
        rngs = [p for p, k in self._kinds.items() if k == "rng"]
        if rngs and not any(p in self._ever_changed for p in rngs):
            evidence.append("RNG counters did not advance: dropout draws the same mask")
        stats = [p for p, k in self._kinds.items() if k == "batch statistic"]
        if stats and not any(p in self._ever_changed for p in stats):
            evidence.append("batch statistics never moved")
        if params and not moved:
            frozen = [p for p in params if p not in self._ever_changed]
            evidence.append("unchanged: " + ", ".join(frozen[:6])
                            + (" …" if len(frozen) > 6 else ""))
            if stepped:
                return Verdict("frozen", tuple(evidence), ZERO_UPDATE_CAUSE, ZERO_UPDATE_FIX)
            return Verdict("frozen", tuple(evidence), FROZEN_CAUSE, FROZEN_FIX)
        return Verdict("training", tuple(evidence))

    @property
    def verdict(self) -> Verdict:
        """The verdict, stale objects included: a functional step whose state
        moved while a live model object still holds the very arrays of the
        first call's input state."""
        now = self.verdict_now()
        if now.status == "training" and self._threads_state:
            stale = self._stale_modules()
            if stale:
                return Verdict("stale objects", now.evidence + (
                    f"{', '.join(stale)} still hold(s) the initial weights",),
                    STALE_CAUSE, STALE_FIX)
        return now

    def _stale_modules(self) -> list[str]:
        if not self._initial_state:
            return []
        initial = {id(a) for a in self._initial_state}
        stale = []
        for obj in gc.get_objects():
            if not isinstance(obj, nnx.Module):
                continue
            try:
                params = [v.get_value() for _, v in
                          nnx.to_flat_state(nnx.state(obj, nnx.Param))]
            except Exception:  # a module in the middle of being built or torn down
                continue
            if params and all(id(p) in initial for p in params):
                stale.append(obj)
        # only the outermost: a stale model's submodules are stale too
        inner = {id(m) for s in stale for path, m in nnx.iter_modules(s) if path}
        return sorted({f"`{type(s).__name__}`" for s in stale if id(s) not in inner})

    # --------------------------------------------------------------- report
    def report(self) -> str:
        """A few lines: calls, traces with their causes, the verdict, the fix."""
        v = self.verdict
        lines = [f"{self.name}: {self.calls} call(s), {len(self.traces)} trace(s)"]
        for call, cause in self.traces[:5]:
            lines.append(f"  traced at call {call}: {cause}")
        if len(self.traces) > 5:
            lines.append(f"  … and {len(self.traces) - 5} more traces")
        lines.append(f"  verdict: {v.line()}")
        if v.bad:
            lines.append(f"  cause: {v.cause}")
            lines.append(f"  fix: {v.fix}")
        return "\n".join(lines)

    def close(self) -> None:
        if self.log is not None:
            self.log.close(self.verdict)

    def __getattr__(self, name: str) -> Any:  # .lower, .trace, ... of a jitted step
        return getattr(self.__dict__["step"], name)


# -------------------------------------------------------------- the pieces
def _compare(before, after, loss):
    """Per variable ‖after - before‖ / ‖before‖ (‖Δ‖ when ‖before‖ = 0),
    whether it is finite, whether it changed; the loss in the last column;
    and device copies of ``after`` (the step may donate its inputs)."""
    ratios, finite, moved, copies = [], [], [], []
    for b, a in zip(before, after):
        a32, b32 = a.astype(jnp.float32), b.astype(jnp.float32)
        delta = jnp.sqrt(jnp.sum(jnp.square(a32 - b32)))
        base = jnp.sqrt(jnp.sum(jnp.square(b32)))
        ratios.append(jnp.where(base > 0, delta / jnp.where(base > 0, base, 1.0), delta))
        finite.append(jnp.all(jnp.isfinite(a32)).astype(jnp.float32))
        moved.append(jnp.any(a != b).astype(jnp.float32))
        copies.append(a + jnp.zeros((), a.dtype))
    value = jnp.float32(0) if loss is None else jnp.asarray(loss, jnp.float32)
    stats = jnp.stack([jnp.stack(ratios + [value]), jnp.stack(finite + [jnp.float32(1)]),
                       jnp.stack(moved + [jnp.float32(0)])])
    return stats, copies


def _array(value):
    if isinstance(value, jax.Array) and jax.dtypes.issubdtype(value.dtype,
                                                              jax.dtypes.prng_key):
        return jax.random.key_data(value)
    return value


def _state_leaves(prefix: str, state) -> list[tuple[str, Any, str]]:
    out = []
    for path, var in nnx.to_flat_state(state):
        value = var.get_value() if isinstance(var, nnx.Variable) else var
        if isinstance(value, jax.Array) and not value.is_deleted():
            kind = _kind(tuple(path), var) if isinstance(var, nnx.Variable) else "other"
            out.append((prefix + "/" + "/".join(str(p) for p in path), _array(value), kind))
    return out


def _nnx_items(prefix: str, value, depth: int = 0) -> list[tuple[str, Any, str]]:
    """The NNX variables of ``value``: a module or optimizer, an ``nnx.State``,
    or a tuple/list/dict of them (one level deep)."""
    if nnx_graph.is_graph_node(value):
        return _state_leaves(prefix, nnx.state(value))
    if isinstance(value, nnx.State):
        return _state_leaves(prefix, value)
    if depth == 0 and isinstance(value, (tuple, list)):
        return [item for i, v in enumerate(value)
                for item in _nnx_items(f"{prefix}[{i}]", v, 1)]
    if depth == 0 and isinstance(value, dict):
        return [item for k, v in value.items()
                for item in _nnx_items(f"{prefix}[{k!r}]", v, 1)]
    return []


def has_nnx(values) -> bool:
    """Whether ``values`` (arguments) hold NNX modules or state."""
    return any(_nnx_items("", v) for v in values)


def _tracked(names: list[str], args, kwargs, out) -> list[tuple[str, Any, str]]:
    """The variables to compare: the modules passed in (a mutating step), and
    the state returned (a functional step; its input state is the previous
    call's result, so it is not counted twice)."""
    results = _nnx_items("result", out)
    items = []
    for name, value in zip(names, list(args) + list(kwargs.values())):
        if results and not nnx_graph.is_graph_node(value):
            continue
        items.extend(_nnx_items(name, value))
    return items + results


def _bound_arguments(step) -> list[tuple[str, Any]]:
    """The modules ``nnx.cached_partial`` bound to ``step`` (named after the
    step's parameters); empty for any other step."""
    code = getattr(step, "__code__", None)
    if code is None or "cached_args" not in code.co_freevars or not step.__closure__:
        return []
    cells = dict(zip(code.co_freevars, step.__closure__))
    try:
        bound = tuple(cells["cached_args"].cell_contents)
        inner = cells["f"].cell_contents if "f" in cells else None
    except ValueError:  # an empty cell
        return []
    names = _argument_names(inner, bound, {}) if inner is not None else []
    names += [f"arg{i}" for i in range(len(names), len(bound))]
    return [(n, v) for n, v in zip(names, bound) if nnx_graph.is_graph_node(v)]


def _argument_names(step, args, kwargs) -> list[str]:
    fn = inspect.unwrap(getattr(step, "__wrapped__", step))
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = [params[i] if i < len(params) else f"arg{i}" for i in range(len(args))]
    return names + list(kwargs)


def _loss_of(out):
    """The loss a step returns: a scalar, the first element of a tuple or
    ``["loss"]`` of a dict (``None`` when there is none)."""
    if isinstance(out, dict):
        out = out.get("loss")
    elif isinstance(out, (tuple, list)) and out:
        scalars = [o for o in out if _scalar(o)]
        out = scalars[0] if scalars else None
    return out if _scalar(out) else None


def _scalar(value) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return False
    if isinstance(value, (int, float, np.number)):
        return True
    return isinstance(value, jax.Array) and value.ndim == 0 and jnp.issubdtype(
        value.dtype, jnp.floating)


def _signature(step, args, kwargs) -> list[tuple[str, str]]:
    """``[(argument path, description)]``: shapes and dtypes of arrays, the
    values of everything else, and each argument's structure."""
    names = _argument_names(step, args, kwargs)
    out = []
    for name, value in zip(names, list(args) + list(kwargs.values())):
        if nnx_graph.is_graph_node(value):
            value = nnx.state(value)
        leaves, tree = jax.tree_util.tree_flatten_with_path(value)
        out.append((name, f"structure {tree}"))
        for path, leaf in leaves:
            where = name + jax.tree_util.keystr(path)
            if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
                weak = " (weak)" if getattr(leaf, "weak_type", False) else ""
                out.append((where, f"{leaf.dtype}{list(leaf.shape)}{weak}"))
            else:
                out.append((where, f"value {leaf!r}"[:80]))
    return out


def _difference(before, after) -> str:
    """What changed between two signatures, e.g. ``inputs.x: float32[34, 34]
    -> float32[35, 35]``."""
    old, new = dict(before), dict(after)
    changed = [f"{k}: {old[k]} -> {new[k]}" for k in new if k in old and old[k] != new[k]
               and not new[k].startswith("structure")]
    added = [k for k in new if k not in old]
    removed = [k for k in old if k not in new]
    structure = [k for k in new if k in old and old[k] != new[k]
                 and new[k].startswith("structure")]
    parts = changed[:2]
    if not parts and (added or removed or structure):
        names = sorted({k.split("[")[0].split(".")[0] for k in added + removed + structure})
        parts = [f"the structure of {', '.join(names)} changed"]
    return "; ".join(parts) + (" …" if len(changed) > 2 else "")


