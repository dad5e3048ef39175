"""A run: a model, its optimizer and a task, trained one step at a time under
one JIT mode, with its history, a NaN guard and a per-variable audit.

Each mode is reproduced faithfully, including the pitfall: ``jax.jit`` around a
step that mutates NNX modules traces a *copy* of their state, so every update
is dropped without an error. The engine never "fixes" that; it reports it.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time

import jax
import numpy as np
from flax import nnx

from explorer import budget
from explorer.audit import AuditReport, VariableChange, compare_snapshots, snapshot, verdict
from explorer.config import RunConfig
from explorer.engine import recipe
from explorer.engine.inputs import StepInputs
from explorer.engine.steppers import Stepper, stepper_for
from explorer.engine.tasks import Task, shape_change
from gnncore import CONV_TYPES, Graph

__all__ = ["Run", "StepRecord", "TrainingStopped"]


class TrainingStopped(RuntimeError):
    """Raised by :meth:`Run.step` when the loss is NaN or Inf; the model keeps
    the state from before that step."""


@dataclasses.dataclass(frozen=True)
class StepRecord:
    """What one training step did."""

    step: int
    loss: float
    train_acc: float
    val_acc: float
    test_acc: float
    wall_s: float
    traced: bool
    trace_count: int
    trace_cause: str = ""  # why this step traced: "first call" or the shape change

    @property
    def cache_hit(self) -> bool:
        """A compiled step that reused the cached executable (no trace)."""
        return self.trace_count > 0 and not self.traced


# Everything a Run compiles or keeps as a callable is built from what it needs
# (the trace counter, the modules), never from the Run itself: a jitted bound
# method or a closure over ``self`` made every Run a reference cycle, which only
# Python's cycle collector frees. The app turns Streamlit's per-rerun
# gc.collect() off (it cost ~150 ms a training tick), so a replaced run (its
# graph, model, optimizer state, executables) stayed in memory until a rare full
# collection: gigabytes after a few Resets on a big graph. Without the cycle,
# reference counting frees a run as soon as the workspace lets go of it.
class _TraceCounter:
    """How many times the compiled step traced: a Python side effect of tracing."""

    __slots__ = ("traces",)

    def __init__(self):
        self.traces = 0


def _counted(train_step, counter: _TraceCounter):
    """``train_step``, counting each trace in ``counter``."""

    def counted_step(model, optimizer, inputs):
        counter.traces += 1  # Python runs this once per trace, not per call
        return train_step(model, optimizer, inputs)

    return counted_step


def _hidden(model, inputs):
    return recipe.forward(model, inputs, return_hidden=True)[1]


def _compile(fn, args) -> None:
    fn.lower(*args).compile()


class Run:
    """A model, its optimizer and a task, trained one step at a time.

    Arguments:
        config: the :class:`RunConfig`.
        graph: a ready :class:`gnncore.Graph` for a node task (default:
            ``config.graph`` loaded with its features and split).

    Public state: :attr:`task` (its graph, :attr:`inputs` and targets),
    :attr:`model`, :attr:`optimizer`, :attr:`stepper` (the JIT mode),
    :attr:`train_step` (the mutating NNX step every mode wraps, counting its
    traces), :attr:`history` and :attr:`changes`.
    """

    def __init__(self, config: RunConfig, graph: Graph | None = None):
        self.config = config
        self.task: Task = config.task.load(config, graph)
        g = self.task.graph
        # refused here, before anything of that size is allocated (a link or file
        # could ask for gigabytes): explorer/budget.py, padding's buckets included
        pad = 2 if config.bucket_padding else 1
        budget.check(config, nodes=pad * g.num_nodes, edges=pad * g.num_edges,
                     in_features=g.num_features, classes=self.task.num_classes)
        self.model = recipe.build_model(config, g.num_features, self.task.num_classes)
        self.optimizer = recipe.build_optimizer(config, self.model)
        self.model.train()
        self._counter = _TraceCounter()
        #: the mutating NNX step ``(model, optimizer, inputs) -> loss`` that every
        #: mode wraps (the lessons reuse it); each trace counts in trace_count
        self.train_step = _counted(recipe.train_step, self._counter)
        self.stepper: Stepper = stepper_for(config.mode)(self.train_step, self.model,
                                                         self.optimizer)
        self.history: list[StepRecord] = []
        self._pending_cause = "first call"
        #: per step, how every variable changed (the parameter-change heatmap)
        self.changes: list[list[VariableChange]] = []
        # pure eval-mode forward + metrics: plain jax.jit is safe (it mutates nothing)
        self._eval = jax.jit(recipe.evaluate)
        self._evaluated = None  # (inputs it was computed from, its outputs): see _evaluate
        self._warming: threading.Thread | None = None
        self._hidden = None  # compiled on first use (embeddings)
        self._initial = self._last = snapshot(self.model, self.optimizer)

    # ---------------------------------------------------------------- graph
    @property
    def graph(self) -> Graph:
        """What the model sees: the graph, or a dataset's batch as one graph."""
        return self.task.graph

    @property
    def inputs(self) -> StepInputs:
        """The training step's inputs (padded when the config asks)."""
        return self.task.inputs

    @property
    def trace_count(self) -> int:
        """How many times the compiled step traced (Python ran its body)."""
        return self._counter.traces

    @trace_count.setter
    def trace_count(self, value: int) -> None:
        self._counter.traces = value

    @property
    def pending_retrace(self) -> str:
        """Why the next compiled step will trace ("" when it will hit the cache)."""
        return self._pending_cause if self.stepper.compiled else ""

    def set_graph(self, graph: Graph) -> None:
        """Train on an edited graph from now on (same feature width). When the
        step's input shapes change, the next step retraces; its record says why."""
        old = self.task.inputs
        self.task = self.task.with_graph(graph)
        cause = shape_change(old, self.task.inputs)
        if cause:
            self._pending_cause = cause

    # --------------------------------------------------------------- timing
    def steady_step_ms(self, window: int | None = None) -> float:
        """The median synced time of the steps that reused the compiled step
        (after the first step, which traces and compiles, or, in eager mode,
        fills JAX's per-operation caches); the last ``window`` of them. NaN
        before there is one."""
        hits = [r.wall_s for r in self.history[1:] if not r.traced]
        if window is not None:
            hits = hits[-window:]
        return 1e3 * float(np.median(hits)) if hits else math.nan

    def compile_breakdown(self, window: int = 20) -> dict[str, float] | None:
        """Where a compiled step's time goes, from JAX's ahead-of-time API:
        ``trace_lower_s`` (Python tracing + lowering to StableHLO), ``compile_s``
        (XLA), ``first_call_s`` (the live first step: trace + compile + run) and
        ``steady_step_ms`` (:meth:`steady_step_ms` of the last ``window``).
        ``None`` for eager mode, which compiles nothing."""
        lowerable = self.stepper.lowerable(self.inputs)
        if lowerable is None:
            return None
        fn, args = lowerable
        traces = self.trace_count  # tracing here must not count as a retrace
        start = time.perf_counter()
        lowered = fn.trace(*args).lower()
        traced = time.perf_counter()
        lowered.compile()
        done = time.perf_counter()
        self.trace_count = traces
        first = next((r.wall_s for r in self.history if r.traced), float("nan"))
        return {"trace_lower_s": traced - start, "compile_s": done - traced,
                "first_call_s": first, "steady_step_ms": self.steady_step_ms(window)}

    def naive_timing(self, steps: int = 5) -> dict[str, float]:
        """The timing lesson: mean step time measured without and with
        ``block_until_ready``. Without it, the clock stops when the work has
        been dispatched, not when it is done. Runs ``2 * steps`` training steps
        (not recorded in the history)."""
        stepper, inputs = self.stepper, self.inputs

        def timed(sync: bool) -> float:
            start = time.perf_counter()
            for _ in range(steps):
                loss = stepper(inputs)
                if sync:
                    jax.block_until_ready((loss, stepper.state))
            elapsed = time.perf_counter() - start
            jax.block_until_ready((loss, stepper.state))
            return elapsed / steps

        return {"naive_s": timed(False), "synced_s": timed(True)}

    # ----------------------------------------------------------------- steps
    def sync(self) -> None:
        """Write the functional mode's threaded state back into the modules
        (they are stale between ``nnx.split`` and this call)."""
        self.stepper.sync()

    def step(self) -> StepRecord:
        """Run one training step and return its record."""
        before_traces = self.trace_count
        good_state = self.stepper.checkpoint()
        start = time.perf_counter()
        loss = self.stepper(self.inputs)
        jax.block_until_ready((loss, self.stepper.state))
        wall = time.perf_counter() - start
        loss = float(loss)
        step_no = len(self.history) + 1
        if not math.isfinite(loss):
            self._stop(good_state, f"loss became {loss} at step {step_no}")
        accs = self.accuracies()  # syncs the functional mode's state into the modules
        current = snapshot(self.model, self.optimizer)  # host copies of every variable
        broken = [path for path, (kind, value) in current.items()
                  if kind == "parameter" and not np.all(np.isfinite(value))]
        if broken:
            self._stop(good_state, f"parameters became Inf or NaN at step {step_no} "
                                   f"({', '.join(broken[:3])})")
        compiled = self.stepper.compiled
        traced = compiled and self.trace_count > before_traces
        record = StepRecord(step=step_no, loss=loss, train_acc=accs["train"],
                            val_acc=accs["val"], test_acc=accs["test"], wall_s=wall,
                            traced=traced, trace_count=self.trace_count if compiled else 0,
                            trace_cause=self._pending_cause if traced else "")
        if traced or not compiled:
            self._pending_cause = ""
        self.history.append(record)
        self.changes.append(compare_snapshots(self._last, current))
        self._last = current
        return record

    def audit(self) -> AuditReport:
        """What the steps so far changed (first snapshot vs now) and the verdict."""
        changes = compare_snapshots(self._initial, self._last)
        losses = tuple(r.loss for r in self.history)
        config = self.config
        has_dropout = config.dropout > 0 or any(
            CONV_TYPES[la.kind].has_heads and la.options.get("dropout", 0)
            for la in config.layers)
        has_batch_norm = config.batch_norm and config.norm == "batch"
        report_verdict = verdict(changes, losses, has_dropout=has_dropout,
                                 has_batch_norm=has_batch_norm)
        return AuditReport(tuple(changes), losses, has_dropout, has_batch_norm,
                           report_verdict)

    def train(self, steps: int | None = None) -> list[StepRecord]:
        """Run ``steps`` (default ``config.epochs``) steps; returns their records."""
        return [self.step() for _ in range(steps or self.config.epochs)]

    # ------------------------------------------------------------ evaluation
    def embeddings(self) -> list[np.ndarray]:
        """Eval-mode output of every layer block, ``[N, width]`` each (host
        arrays for the real nodes): what the UI colours nodes by."""
        if self._hidden is None:
            self._hidden = jax.jit(_hidden)
        self.sync()
        self.model.eval()
        try:
            hidden = self._hidden(self.model, self.inputs)
        finally:
            self.model.train()
        real = self.task.real_nodes
        return [np.asarray(h)[:real] for h in hidden]

    def _evaluate(self):
        """``(logits, predictions, host accuracies)`` of the model as it is now
        (eval mode; padded rows included). Computed again only when a variable
        or the graph changed: the key holds the very arrays it was computed
        from, compared by identity (JAX arrays are immutable)."""
        self.sync()
        self._finish_warm_up()
        key = (self.task.inputs, self.task.targets, *jax.tree.leaves(nnx.state(self.model)))
        cached = self._evaluated
        if cached is not None and len(cached[0]) == len(key) and all(
                a is b for a, b in zip(cached[0], key)):
            return cached[1]
        self.model.eval()
        try:
            logits, pred, accs = self._eval(self.model, self.task.inputs, self.task.targets)
        finally:
            self.model.train()
        out = (logits, pred, np.asarray(accs))
        self._evaluated = (key, out)
        return out

    def warm_up(self) -> threading.Thread:
        """Compile the eval function (metrics and predictions) in a background
        thread, so that the first step after Play pays only for its own trace
        and compile. The training step is never compiled ahead: its first call
        is what the app measures and teaches. The next evaluation waits for
        this thread. Returns the thread (already running)."""
        if self._warming is None:
            clone = nnx.clone(self.model)  # eval mode on a copy: the run stays in train mode
            clone.eval()
            args = (clone, self.task.inputs, self.task.targets)
            # the thread gets what it compiles, not the run: a run replaced while
            # it compiles is freed when it ends
            self._warming = threading.Thread(
                target=_compile, args=(self._eval, args), name="eval-warm-up", daemon=True)
            self._warming.start()
        return self._warming

    def _finish_warm_up(self) -> None:
        if self._warming is not None:
            self._warming.join()

    def predictions(self):
        """Eval-mode class predictions for every (real) node, or every graph of a dataset."""
        return self._evaluate()[1][:self.task.real_rows]

    def logits(self):
        """Eval-mode logits for every (real) node, or every graph of a dataset."""
        return self._evaluate()[0][:self.task.real_rows]

    def accuracies(self) -> dict[str, float]:
        """Eval-mode accuracy on the train, val and test nodes (or graphs);
        0 for an empty split."""
        accs = self._evaluate()[2]
        return {name: float(a) for name, a in zip(("train", "val", "test"), accs)}

    # --------------------------------------------------------------- helpers
    def _stop(self, good_state, what: str):
        self.stepper.restore(good_state)
        raise TrainingStopped(f"{what}: training stopped and the model keeps the state from "
                              "before this step (lower the learning rate)")
