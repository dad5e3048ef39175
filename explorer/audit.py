"""Did the step really change the model? A per-variable audit and a verdict.

The frozen-training pitfall raises no error, so the evidence has to be
collected: snapshot every ``nnx.Variable`` of the model and optimizer before
and after a step, compare, and read the pattern: no parameter moved, the
optimizer's step counter stayed put, the dropout RNG did not advance (so the
same mask is drawn every step), BatchNorm statistics never moved, the loss is
bit-identical. Works on any NNX code, not only the explorer's runs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import numpy as np

from explorer.lazy import lazy

# loaded by the first audit: the app's first page imports this module (its
# report types and verdict texts) without JAX (explorer/lazy.py)
jax = lazy("jax")
jnp = lazy("jax.numpy")
nnx = lazy("flax.nnx")

__all__ = ["AuditReport", "FrozenTrainingError", "VariableChange", "Verdict",
           "assert_training", "audit_step", "compare_snapshots", "parameters_finite", "snapshot",
           "traced_changes", "variable_kinds", "verdict"]

KINDS = ("parameter", "batch statistic", "rng", "optimizer state", "step counter", "other")


class FrozenTrainingError(AssertionError):
    """Raised by :func:`assert_training` when a step leaves the model unchanged."""


def _kind(path: tuple, var: nnx.Variable) -> str:
    if isinstance(var, nnx.Param):
        return "parameter"
    if isinstance(var, nnx.BatchStat):
        return "batch statistic"
    if isinstance(var, nnx.RngState):
        return "rng"
    if isinstance(var, nnx.training.optimizer.OptState):
        return "step counter" if path and path[-1] == "step" else "optimizer state"
    return "other"


def _host(value) -> np.ndarray:
    if hasattr(value, "dtype") and jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key):
        value = jax.random.key_data(value)
    return np.array(value, copy=True)


def _variables(*nodes, states: Sequence | None = None):
    """``(name, kind, value)`` of every array variable of ``nodes``, in one fixed
    order: the names and order of :func:`snapshot` and :func:`traced_changes`.
    ``value`` is the variable's array as it is (a tracer inside ``jit``).
    ``states``: ``nnx.state(node)`` of each node, where the caller has read
    them already."""
    names = [type(node).__name__.lower() for node in nodes]
    for i, node in enumerate(nodes):
        prefix = () if len(nodes) == 1 else (
            (names[i],) if names.count(names[i]) == 1 else (f"{names[i]}{i}",))
        state = states[i] if states is not None else (
            node if isinstance(node, nnx.State) else nnx.state(node))
        for path, var in nnx.to_flat_state(state):
            value = var.get_value()
            if value is None or not hasattr(value, "shape"):
                continue
            name = "/".join(str(p) for p in prefix + tuple(path))
            yield name, _kind(tuple(path), var), value


def snapshot(*nodes, states: Sequence | None = None) -> dict[str, tuple[str, np.ndarray]]:
    """Host copies of every array variable of ``nodes``: ``{path: (kind, value)}``
    (``states``: see :func:`_variables`)."""
    return {name: (kind, _host(value))
            for name, kind, value in _variables(*nodes, states=states)}


def variable_kinds(*nodes) -> list[tuple[str, str]]:
    """``(path, kind)`` of every variable :func:`snapshot` copies, in its order."""
    return [(name, kind) for name, kind, _ in _variables(*nodes)]


def _numbers(value):
    if jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key):
        value = jax.random.key_data(value)
    return value


def traced_changes(before: Sequence, after: Sequence) -> tuple[jax.Array, jax.Array]:
    """What :func:`compare_snapshots` computes, as jax operations that run inside
    a compiled step (``before``/``after``: the same modules, e.g. ``(model,
    optimizer)``, before and after one step): ``(changed, relative_change)``,
    one entry per variable of :func:`variable_kinds`, in its order. The norms
    are float32 here (float64 on the host), so they agree to float32 rounding."""
    changed, relative = [], []
    for (_, _, old), (_, _, new) in zip(_variables(*before), _variables(*after)):
        old, new = _numbers(old), _numbers(new)
        changed.append(jnp.any(new != old))
        old32, new32 = old.astype(jnp.float32), new.astype(jnp.float32)
        delta = jnp.sqrt(jnp.sum(jnp.square(new32 - old32)))
        base = jnp.sqrt(jnp.sum(jnp.square(old32)))
        relative.append(jnp.where(base > 0, delta / jnp.where(base > 0, base, 1.0), delta))
    if not changed:
        return jnp.zeros((0,), bool), jnp.zeros((0,), jnp.float32)
    return jnp.stack(changed), jnp.stack(relative)


def parameters_finite(*nodes) -> jax.Array:
    """Whether every ``nnx.Param`` of ``nodes`` is finite (jax operations: they
    run inside a compiled step)."""
    checks = [jnp.all(jnp.isfinite(value)) for _, kind, value in _variables(*nodes)
              if kind == "parameter"]
    return jnp.all(jnp.stack(checks)) if checks else jnp.array(True)


@dataclasses.dataclass(frozen=True)
class VariableChange:
    """One variable across one step (or a span of steps)."""

    path: str
    kind: str
    changed: bool
    relative_change: float  # ||after - before|| / ||before|| (or ||Δ|| if ||before|| = 0)


def _norm(x: np.ndarray) -> float:
    """The 2-norm without BLAS: ``np.linalg.norm`` calls OpenBLAS, whose worker
    threads, fighting XLA and a browser for a 2-core machine, turned a 1 ms
    comparison of every variable into 50-130 ms on every training step."""
    return math.sqrt(float(np.sum(np.square(x))))


def compare_snapshots(before, after) -> list[VariableChange]:
    changes = []
    for path, (kind, old) in before.items():
        if path not in after:
            continue
        new = after[path][1]
        if old.shape != new.shape:
            changes.append(VariableChange(path, kind, True, float("inf")))
            continue
        delta = _norm(new.astype(np.float64) - old.astype(np.float64))
        base = _norm(old.astype(np.float64))
        changes.append(VariableChange(path, kind, bool(np.any(new != old)),
                                      float(delta / base) if base > 0 else float(delta)))
    return changes


@dataclasses.dataclass(frozen=True)
class Verdict:
    """``training`` or ``frozen``, with the evidence, the cause and the fix."""

    status: str
    evidence: tuple[str, ...]
    cause: str = ""
    fix: str = ""

    def line(self) -> str:
        return f"verdict: {self.status}: " + "; ".join(self.evidence)


@dataclasses.dataclass(frozen=True)
class AuditReport:
    changes: tuple[VariableChange, ...]
    losses: tuple[float, ...]
    has_dropout: bool
    has_batch_norm: bool
    verdict: Verdict

    def frozen_variables(self) -> list[str]:
        return [c.path for c in self.changes if c.kind == "parameter" and not c.changed]


FROZEN_CAUSE = ("the training step mutates NNX modules inside plain jax.jit, which traces a "
                "copy of their state and drops every update when it returns")
FROZEN_FIX = ("wrap the step in nnx.jit, or thread the state explicitly: nnx.split once, "
              "a jax.jit step that nnx.merges, updates and returns nnx.state")

ZERO_UPDATE_CAUSE = ("the optimizer stepped but every update was zero: a learning rate of 0, "
                     "a loss that does not depend on the parameters, or zero gradients")
ZERO_UPDATE_FIX = "check the learning rate and that the loss is computed from the model"


def verdict(changes: Sequence[VariableChange], losses: Sequence[float] = (), *,
            has_dropout: bool = False, has_batch_norm: bool = False) -> Verdict:
    """Read a set of changes (over one or more steps) into a verdict."""
    by_kind = {k: [c for c in changes if c.kind == k] for k in KINDS}
    params = by_kind["parameter"]
    moved = sum(c.changed for c in params)
    evidence = [f"{moved} of {len(params)} parameters changed"]
    steps = by_kind["step counter"]
    if steps:
        evidence.append("optimizer step " + ("advanced" if any(c.changed for c in steps)
                                             else "stayed the same"))
    repeated = _repeated_losses(losses)
    if repeated >= 2:
        evidence.append(f"loss bit-identical for {repeated} steps")
    if has_dropout and by_kind["rng"] and not any(c.changed for c in by_kind["rng"]):
        evidence.append("dropout RNG did not advance: the same mask every step")
    stats = by_kind["batch statistic"]
    if has_batch_norm and stats and not any(c.changed for c in stats):
        evidence.append("BatchNorm running statistics never moved")
    if params and moved == 0:
        if steps and any(c.changed for c in steps):
            # The optimizer ran and its updates reached the model, but were zero.
            return Verdict("frozen", tuple(evidence), ZERO_UPDATE_CAUSE, ZERO_UPDATE_FIX)
        return Verdict("frozen", tuple(evidence), FROZEN_CAUSE, FROZEN_FIX)
    return Verdict("training", tuple(evidence))


def _repeated_losses(losses: Sequence[float]) -> int:
    """Length of the final run of bit-identical losses."""
    run = 1 if losses else 0
    for a, b in zip(reversed(losses[:-1]), reversed(losses[1:])):
        if a != b:
            break
        run += 1
    return run


def _has(nodes, module_type, attr, predicate) -> bool:
    for node in nodes:
        if not nnx.graph.is_graph_node(node):
            continue
        for _, m in nnx.iter_modules(node):
            if isinstance(m, module_type) and predicate(getattr(m, attr, None)):
                return True
    return False


def _step_arguments(modules) -> tuple:
    """``modules`` as a tuple of NNX modules / optimizers / states, or a
    ``TypeError`` that says what is expected."""
    shape = ("modules must be a tuple (or list) of the step's NNX arguments, in order: "
             "(model, optimizer) for step(model, optimizer, *args), or (state,) for a "
             "functional step(state, *args) -> (state, loss)")
    if nnx.graph.is_graph_node(modules) or isinstance(modules, nnx.State):
        raise TypeError(f"{shape}; got a bare {type(modules).__name__}: pass "
                        f"({type(modules).__name__.lower()},)")
    if not isinstance(modules, (tuple, list)):
        raise TypeError(f"{shape}; got {type(modules).__name__}")
    for i, m in enumerate(modules):
        if not (nnx.graph.is_graph_node(m) or isinstance(m, nnx.State)):
            raise TypeError(f"{shape}; modules[{i}] is a {type(m).__name__}")
    if not modules:
        raise TypeError(f"{shape}; got an empty {type(modules).__name__}")
    return tuple(modules)


def audit_step(step_fn: Callable, modules: Sequence, args: Sequence = (), *,
               steps: int = 3) -> AuditReport:
    """Run your training step ``steps`` times on a copy of ``modules`` and
    audit what changed; ``modules`` themselves are never touched.

    Arguments:
        step_fn: your training step, compiled or not, called as
            ``step_fn(*modules, *args)``; a scalar it returns (or the first
            scalar of a tuple it returns) is taken as the loss.
        modules: the step's NNX arguments as a tuple, e.g. ``(model,
            optimizer)``. For a functional step, ``(state,)`` from
            ``nnx.split``: the state it returns is fed back in, as a loop
            would, and the audit compares the first and the last state.
        args: the rest of the step's arguments (a batch).
        steps: how many times to call it.

    Returns an :class:`AuditReport` whose ``verdict`` says ``training`` or
    ``frozen``. Raises ``TypeError`` when ``modules`` is not a tuple of NNX
    modules, optimizers or states.
    """
    from explorer.watcher import _loss_of

    modules = _step_arguments(modules)
    nodes = [i for i, m in enumerate(modules) if nnx.graph.is_graph_node(m)]
    work = list(modules)
    if nodes:  # cloned together: a model shared by an optimizer stays shared
        for i, copy in zip(nodes, nnx.clone(tuple(modules[i] for i in nodes))):
            work[i] = copy
    initial = list(work)
    before = snapshot(*initial)
    losses = []
    for _ in range(steps):
        out = step_fn(*work, *args)
        loss = _loss_of(out)
        if loss is not None:
            losses.append(float(loss))
        returned = ([out] if isinstance(out, nnx.State) else
                    [o for o in out if isinstance(o, nnx.State)]
                    if isinstance(out, (tuple, list)) else [])
        inputs = [i for i, m in enumerate(work) if isinstance(m, nnx.State)]
        for i, state in zip(inputs, returned):  # a functional step: thread its state
            work[i] = state
    changes = compare_snapshots(before, snapshot(*work))
    has_dropout = _has(initial, nnx.Dropout, "rate", lambda r: bool(r)) or any(
        c.kind == "rng" for c in changes) and not nodes
    has_bn = any(c.kind == "batch statistic" for c in changes)
    return AuditReport(tuple(changes), tuple(losses), has_dropout, has_bn,
                       verdict(changes, losses, has_dropout=has_dropout,
                               has_batch_norm=has_bn))


def assert_training(step_fn: Callable, modules: Sequence, args: Sequence = (), *,
                    steps: int = 2) -> AuditReport:
    """Like :func:`audit_step` (on a copy: your modules are not trained),
    but raise :class:`FrozenTrainingError` listing the parameters that never
    changed when the verdict is ``frozen``."""
    report = audit_step(step_fn, modules, args, steps=steps)
    if report.verdict.status == "frozen":
        frozen = report.frozen_variables()
        raise FrozenTrainingError(
            f"training step is frozen: {'; '.join(report.verdict.evidence)}. Unchanged "
            f"parameters: {', '.join(frozen)}. Cause: {report.verdict.cause}. "
            f"Fix: {report.verdict.fix}.")
    return report
