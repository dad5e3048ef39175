"""A run: a model, its optimizer and a task, trained one step at a time under
one JIT mode, with its history, a NaN guard and a per-variable audit.

Each mode is reproduced faithfully, including the pitfall: ``jax.jit`` around a
step that mutates NNX modules traces a *copy* of their state, so every update
is dropped without an error. The engine never "fixes" that; it reports it.
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import math
import threading
import time
import weakref

from explorer import jax_first  # noqa: F401  (must stay before JAX's import)

# isort: split
import jax
import numpy as np
from flax import nnx

from explorer import budget, compile_cache
from explorer.audit import (
    AuditReport,
    VariableChange,
    compare_snapshots,
    snapshot,
    variable_kinds,
    verdict,
)
from explorer.config import ConfigError, RunConfig
from explorer.engine import recipe, sharding
from explorer.engine.compiles import SharedCompiles, TraceCounter, counted, counting
from explorer.engine.inputs import StepInputs
from explorer.engine.steppers import Stepper, stepper_for
from explorer.engine.tasks import Task, shape_change
from gnncore import CONV_TYPES, Graph, model_heads

__all__ = ["Run", "StepRecord", "TrainingStopped", "memory_of"]


class TrainingStopped(RuntimeError):
    """Raised by :meth:`Run.step` when the loss is NaN or Inf; the model keeps
    the state from before that step."""


@dataclasses.dataclass(frozen=True)
class StepRecord:
    """What one training step did.

    A mode that runs several steps in one compiled call (``scan``) gives each
    of them a record: ``wall_s`` is then the call's synced wall time divided
    by ``call_steps``, and only the call's first record is ``traced`` (with the
    cause) when the call traced; ``call_traced`` marks all of them.
    """

    step: int
    loss: float
    train_acc: float
    val_acc: float
    test_acc: float
    wall_s: float
    traced: bool
    trace_count: int
    trace_cause: str = ""  # why this step traced: "first call" or the shape change
    call_steps: int = 1  # training steps of the call this step ran in
    call_traced: bool = False  # that call traced (True on every one of its records)
    #: why a call that was due to trace (its first, or new shapes) did not: the
    #: step was already compiled for its shapes (``""``: it was not due, or traced)
    reused: str = ""

    @property
    def cache_hit(self) -> bool:
        """A compiled step that reused the cached executable (no trace)."""
        return self.trace_count > 0 and not (self.traced or self.call_traced)

    @property
    def call_wall_s(self) -> float:
        """The synced wall time of the whole call this step ran in."""
        return self.wall_s * self.call_steps


def _hidden(model, inputs):
    return recipe.forward(model, inputs, return_hidden=True)[1]


def _eval_graphdef(model) -> nnx.GraphDef:
    """The model's structure in eval mode (no dropout; batch norm on its
    running statistics), for :func:`_evaluate_state`."""
    model.eval()
    try:
        return nnx.graphdef(model)
    finally:
        model.train()


@functools.partial(jax.jit, static_argnums=0)
def _evaluate_state(graphdef, state, inputs, targets):
    """:func:`recipe.evaluate` on the model rebuilt from ``state`` with
    ``graphdef``, its structure in eval mode: the run's modules are neither
    switched to eval mode and back nor walked as a pytree for each evaluation
    (three walks of every module, a third of a karate step's time). Pure, so
    plain ``jax.jit``; equal graphdefs (runs of the same architecture, in any
    session) share one compile."""
    return recipe.evaluate(nnx.merge(graphdef, state), inputs, targets)


def _compile(fn, args) -> None:
    fn.lower(*args).compile()


def _warm(eval_fn, eval_args, ahead, counter: TraceCounter, out: dict,
          dropped: threading.Event) -> None:
    """The warm-up thread: the eval function compiled, then (``ahead``) the
    training step compiled by one call on copies, unless the run was freed
    meanwhile (``dropped``: someone changing settings quickly replaces run
    after run); ``out`` gets its seconds and whether it traced (the step was
    not compiled before)."""
    _compile(eval_fn, eval_args)
    if ahead is not None and not dropped.is_set():
        before = counter.traces
        start = time.perf_counter()
        with counting(counter):
            ahead()
        out.update(seconds=time.perf_counter() - start, traced=counter.traces > before)


class _WarmUp(threading.Thread):
    """A warm-up thread (:meth:`Run.warm_up`): a daemon, so that it never keeps a
    process alive by itself, but one the process waits for when it exits
    (:func:`_finish_warm_ups`)."""

    def __init__(self, *args):
        super().__init__(target=_warm, args=args, name="warm-up", daemon=True)


def _finish_warm_ups(timeout_s: float = 120.0) -> None:
    """At exit, wait for warm-up threads still compiling. A daemon thread left
    running inside XLA's compiler while the interpreter shuts down aborts the
    process ("FATAL: exception not rethrown", "pure virtual method called"):
    one in six short scripts that exited right after ``warm_up()``, and pytest
    runs whose last AppTest left one compiling. ``atexit`` runs after
    Python's wait for non-daemon threads and before daemon threads are
    stopped; a compile takes seconds."""
    deadline = time.monotonic() + timeout_s
    for thread in threading.enumerate():
        if isinstance(thread, _WarmUp):
            thread.join(max(0.0, deadline - time.monotonic()))


atexit.register(_finish_warm_ups)


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

    def __init__(self, config: RunConfig, graph: Graph | None = None, *,
                 shared: SharedCompiles | None = None):
        self.config = config
        self.task: Task = config.task.load(config, graph)
        g = self.task.graph
        # refused here, before anything of that size is allocated (a link or file
        # could ask for gigabytes): explorer/budget.py, padding's buckets included
        pad = 2 if config.bucket_padding else 1
        budget.check(config, nodes=pad * g.num_nodes, edges=pad * g.num_edges,
                     in_features=g.num_features, classes=self.task.num_classes)
        #: the devices' mesh when ``config.devices`` > 1 (explorer/engine/sharding.py)
        self.mesh = None
        if config.devices > 1:
            try:
                self.mesh = sharding.make_mesh(config.devices)
            except ValueError as err:
                raise ConfigError("devices", str(err)) from None
        self.model = recipe.build_model(config, g.num_features, self.task.num_classes)
        #: the head counts of the model's attention layers (see _place)
        self._heads = model_heads(self.model)
        self._place(self.task)
        tx = None if shared is None else shared.transform(
            config.optimizer, config.learning_rate, config.weight_decay)
        self.optimizer = recipe.build_optimizer(config, self.model, tx)
        if shared is not None:
            shared.count_run()
        if self.mesh is not None:  # one whole copy per device, before any mode splits it
            nnx.update(self.optimizer, sharding.replicate(nnx.state(self.optimizer), self.mesh))
            nnx.update(self.model, sharding.replicate(nnx.state(self.model), self.mesh))
        self.model.train()
        self._counter = TraceCounter()
        #: the mutating NNX step ``(model, optimizer, inputs) -> loss`` that every
        #: mode wraps (the lessons reuse it); each trace in a call of this run's
        #: step counts in trace_count
        self.train_step = (counted(recipe.train_step, self._counter) if shared is None
                           else shared.train_step)
        kind = stepper_for(config.mode)
        self.stepper: Stepper = kind(self.train_step, self.model, self.optimizer,
                                     shared=shared, **kind.settings(config))
        #: the modules' variables themselves, not copies: every mode updates them in
        #: place (nnx.jit's propagation, nnx.update, an eager step's assignments), so
        #: this one read serves every step's checkpoint, metrics and snapshot (a walk
        #: of the modules costs about as much as the compiled karate step)
        self._live = nnx.state((self.model, self.optimizer))
        self.history: list[StepRecord] = []
        self._pending_cause = "first call"
        #: per step, how every variable changed (the parameter-change heatmap)
        self.changes: list[list[VariableChange]] = []
        self._eval_graphdef = _eval_graphdef(self.model)  # see _evaluate_state
        self._evaluated = None  # (inputs it was computed from, its outputs): see _evaluate
        self._warming: threading.Thread | None = None
        #: the training step compiled by the warm-up ("seconds", "traced"); empty
        #: until it ran (it runs for a run that shares compiled steps)
        self.compiled_ahead: dict = {}
        self._hidden = None  # compiled on first use (embeddings)
        self._initial = self._last = snapshot(self.model, self.optimizer)
        self._variables = variable_kinds(self.model, self.optimizer)  # snapshot's order

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
        self.task = self._place(self.task.with_graph(graph))
        cause = shape_change(old, self.task.inputs)
        if cause:
            self._pending_cause = cause

    def _place(self, task: Task) -> Task:
        """``task``'s inputs made ready for this run's model: the index arrays of its
        multi-head attention products built once, on the host
        (``Adjacency.with_heads``: the same results, a shorter step on large graphs),
        and the inputs and targets split over the mesh (if there is one)."""
        adj = task.inputs.adj.with_heads(*self._heads)  # the same as for_model(self.model)
        if adj is not task.inputs.adj:
            task.inputs = dataclasses.replace(task.inputs, adj=adj)
        if self.mesh is not None:
            task.inputs = sharding.place(task.inputs, self.mesh)
            task.targets = sharding.place(task.targets, self.mesh)
        return task

    def layout(self) -> list[dict]:
        """Where each array of the step lives (``sharding.layout``): the
        inputs by path (``inputs.adj.indptr``, ``inputs.x.values`` for CSR
        features), then the model's parameters by path."""
        arrays = {"inputs" + jax.tree_util.keystr(path): a
                  for path, a in jax.tree_util.tree_leaves_with_path(self.inputs)
                  if isinstance(a, jax.Array)}
        self.sync()
        params = jax.tree_util.tree_leaves_with_path(nnx.state(self.model, nnx.Param))
        for path, value in params:
            names = [str(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k))))
                     for k in path]
            arrays[".".join(["model", *(n for n in names if n != "value")])] = value
        return sharding.layout(arrays)

    # --------------------------------------------------------------- timing
    def steady_step_ms(self, window: int | None = None) -> float:
        """The median synced time of the steps that reused the compiled step
        (after the first call, which traces and compiles, or, in eager mode,
        fills JAX's per-operation caches); the last ``window`` of them. Per
        training step: a scan call's time is shared by its steps. NaN before
        there is one."""
        hits = [r.wall_s for r in self.history[1:] if not (r.traced or r.call_traced)]
        if window is not None:
            hits = hits[-window:]
        return 1e3 * float(np.median(hits)) if hits else math.nan

    def compile_breakdown(self, window: int = 20) -> dict | None:
        """Where a compiled step's time and memory go, from JAX's ahead-of-time
        API on a fresh copy of the step: ``trace_lower_s`` (Python tracing +
        lowering to StableHLO), ``compile_s`` (XLA), ``first_call_s`` (the live
        first call: trace + compile + run) and ``steady_step_ms``
        (:meth:`steady_step_ms` of the last ``window``); XLA's memory analysis
        (:func:`memory_of`: ``argument_bytes``, ``output_bytes``, ``temp_bytes``,
        ``alias_bytes``, ``peak_bytes``); and what donating the state argument
        (``donate_argnums=(0,)``) saves: ``donated_peak_bytes``,
        ``donated_alias_bytes``, ``donation_saves_bytes`` (the peak without
        donation minus the peak with it), ``None`` where it does not apply or
        the backend aliased nothing, and ``donation_note`` saying why (``""``
        when there is a number). ``compile_cached``: the persistent compilation
        cache (``explorer.compile_cache``, on in the app) answered, so
        ``compile_s`` is the time to read the program back, not an XLA compile.
        ``None`` for eager mode, which compiles nothing."""
        self._finish_warm_up()  # its trace counts; one racing this restore would be lost
        lowerable = self.stepper.lowerable(self.inputs, self.task.targets)
        if lowerable is None:
            return None
        fn, args = lowerable
        traces = self.trace_count  # tracing here must not count as a retrace
        try:
            start = time.perf_counter()
            lowered = fn.trace(*args).lower()
            traced = time.perf_counter()
            compiled, cached = compile_cache.compile_cold(lowered)  # XLA, not a cache read
            done = time.perf_counter()
            memory = memory_of(compiled)
            donation = self._donation(memory)
        finally:
            self.trace_count = traces
        first = next((r.call_wall_s for r in self.history if r.traced), float("nan"))
        return {"trace_lower_s": traced - start, "compile_s": done - traced,
                "compile_cached": cached, "first_call_s": first,
                "steady_step_ms": self.steady_step_ms(window),
                **memory, **donation}

    def _donation(self, memory: dict) -> dict:
        """The step compiled again with its state donated, against ``memory``."""
        out = {"donated_peak_bytes": None, "donated_alias_bytes": None,
               "donation_saves_bytes": None, "donation_note": self.stepper.donation_note}
        if out["donation_note"]:
            return out
        fn, args = self.stepper.lowerable(self.inputs, self.task.targets, donate=True)
        donated = memory_of(fn.trace(*args).lower().compile())
        if donated["peak_bytes"] is None or memory["peak_bytes"] is None:
            out["donation_note"] = "n/a: this backend reports no memory analysis"
            return out
        out["donated_peak_bytes"] = donated["peak_bytes"]
        out["donated_alias_bytes"] = donated["alias_bytes"]
        if not donated["alias_bytes"]:
            out["donation_note"] = (f"the {jax.default_backend().upper()} backend ignores "
                                    "donation: no buffer was aliased")
            return out
        out["donation_saves_bytes"] = memory["peak_bytes"] - donated["peak_bytes"]
        return out

    def naive_timing(self, steps: int = 5) -> dict[str, float]:
        """The timing lesson: mean step time measured without and with
        ``block_until_ready``. Without it, the clock stops when the work has
        been dispatched, not when it is done. Makes ``2 * steps`` calls of the
        step (in scan mode each runs ``steps_per_call`` training steps, and the
        times are per training step); none is recorded in the history."""
        self._finish_warm_up()
        stepper, inputs, targets = self.stepper, self.inputs, self.task.targets
        per_call = stepper.steps_per_call
        if per_call == 1:
            call = functools.partial(stepper, inputs)
        else:
            call = functools.partial(stepper.run_steps, inputs, targets, per_call)

        def timed(sync: bool) -> float:
            start = time.perf_counter()
            for _ in range(steps):
                out = call()
                if sync:
                    jax.block_until_ready((out, stepper.state))
            elapsed = time.perf_counter() - start
            jax.block_until_ready((out, stepper.state))
            return elapsed / (steps * per_call)

        with counting(self._counter):
            return {"naive_s": timed(False), "synced_s": timed(True)}

    # ----------------------------------------------------------------- steps
    def sync(self) -> None:
        """Write the functional mode's threaded state back into the modules
        (they are stale between ``nnx.split`` and this call)."""
        self.stepper.sync()

    def step(self) -> StepRecord:
        """One call of the mode's step, and its (last) record: one training
        step, or in a mode that runs several per call (scan) a whole call of
        ``steps_per_call`` steps (:meth:`advance`)."""
        return self.advance()[-1]

    def advance(self, limit: int | None = None) -> list[StepRecord]:
        """One call of the mode's step: one training step, or, in a mode that
        runs several per call (scan), ``steps_per_call`` of them (at most
        ``limit``). Returns the call's records (also in :attr:`history`).

        Raises :class:`TrainingStopped` when a loss is NaN or Inf or a
        parameter stops being finite; the model keeps the state from before
        the call, and the message names the step."""
        self._finish_warm_up()  # a step compiling ahead: wait for it, not trace it twice
        per_call = self.stepper.steps_per_call
        if per_call == 1:
            return [self._one_step()]
        return self._many_steps(per_call if limit is None else max(1, min(per_call, limit)))

    def _one_step(self) -> StepRecord:
        before_traces = self.trace_count
        live = self._live  # after the step (and the functional mode's sync): its new values
        good_state = self.stepper.checkpoint(live)
        start = time.perf_counter()
        with counting(self._counter):
            loss = self.stepper(self.inputs)
            jax.block_until_ready((loss, self.stepper.state))
        wall = time.perf_counter() - start
        loss = float(loss)
        step_no = len(self.history) + 1
        if not math.isfinite(loss):
            self._stop(good_state, f"loss became {loss} at step {step_no}")
        accs = self.accuracies()  # syncs the functional mode's state into the modules
        current = snapshot(self.model, self.optimizer,  # host copies of every variable
                           states=(live[0], live[1]))
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
                            trace_cause=self._pending_cause if traced else "",
                            call_traced=traced,
                            reused=self._reuse(compiled and not traced))
        self._pending_cause = ""
        self.history.append(record)
        self.changes.append(compare_snapshots(self._last, current))
        self._last = current
        return record

    def _reuse(self, untraced: bool) -> str:
        """Why a compiled call that was due to trace (first call, new shapes)
        did not: its step was already compiled for these shapes. ``""`` when it
        was not due, or traced."""
        if not (untraced and self._pending_cause):
            return ""
        ahead = self.compiled_ahead
        if ahead.get("traced") and not self.history:
            return (f"it was compiled in the background once the page was drawn (trace, lower "
                    f"and compile took {ahead['seconds']:.2f} s)")
        if self.stepper.shared:
            return ("an earlier run on this server (another session, or this one before a "
                    "Reset) compiled the step for these shapes")
        return "this run compiled the step for these shapes before"

    def _many_steps(self, steps: int) -> list[StepRecord]:
        """One call of ``steps`` training steps (the scan mode), unrolled into
        one record and one set of variable changes per step: the losses, the
        eval-mode accuracies and the changes are each step's own, measured
        inside the call (:func:`explorer.engine.steppers.make_scan_step`); the
        call's wall time is shared equally by its records."""
        before_traces = self.trace_count
        good_state = self.stepper.checkpoint(self._live)
        start = time.perf_counter()
        with counting(self._counter):
            losses, measured = self.stepper.run_steps(self.inputs, self.task.targets, steps)
            jax.block_until_ready((losses, measured, self.stepper.state))
        wall = time.perf_counter() - start
        losses = np.asarray(losses, dtype=np.float64)
        measured = {k: np.asarray(v) for k, v in measured.items()}
        first = len(self.history) + 1
        bad = [i for i in range(steps)
               if not (math.isfinite(losses[i]) and measured["finite"][i])]
        if bad:
            i = bad[0]
            what = (f"loss became {losses[i]}" if not math.isfinite(losses[i]) else
                    "parameters became Inf or NaN")
            self._stop(good_state, f"{what} at step {first + i} (in the call of steps "
                                   f"{first} to {first + steps - 1})", "this call")
        self.sync()
        current = snapshot(self.model, self.optimizer)
        traced = self.trace_count > before_traces
        cause = ""
        if traced:
            cause = self._pending_cause or (
                f"a new scan length: {steps} step{'s' if steps != 1 else ''} in this call "
                f"instead of {self.stepper.steps_per_call} (the length is static)")
        reused = self._reuse(not traced)
        self._pending_cause = ""
        records = []
        for i in range(steps):
            train, val, test = (float(a) for a in measured["accuracy"][i])
            records.append(StepRecord(
                step=first + i, loss=float(losses[i]), train_acc=train, val_acc=val,
                test_acc=test, wall_s=wall / steps, traced=traced and i == 0,
                trace_count=self.trace_count, trace_cause=cause if i == 0 else "",
                call_steps=steps, call_traced=traced, reused=reused if i == 0 else ""))
            self.changes.append([
                VariableChange(path, kind, bool(measured["changed"][i, v]),
                               float(measured["relative_change"][i, v]))
                for v, (path, kind) in enumerate(self._variables)])
        self.history.extend(records)
        self._last = current
        return records

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
        """Run exactly ``steps`` (default ``config.epochs``) training steps;
        returns their records. In scan mode a last call shorter than
        ``steps_per_call`` compiles once more (the scan's length is static)."""
        steps = steps or self.config.epochs
        records: list[StepRecord] = []
        while len(records) < steps:
            records += self.advance(steps - len(records))
        return records

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
        state = self._live[0]
        key = (self.task.inputs, self.task.targets, *jax.tree.leaves(state))
        cached = self._evaluated
        if cached is not None and len(cached[0]) == len(key) and all(
                a is b for a, b in zip(cached[0], key)):
            return cached[1]
        logits, pred, accs = _evaluate_state(self._eval_graphdef, state, self.task.inputs,
                                             self.task.targets)
        out = (logits, pred, np.asarray(accs))
        self._evaluated = (key, out)
        return out

    def warm_up(self) -> threading.Thread:
        """Compile in a background thread what the first step after Play
        needs: the eval function (metrics and predictions) and, for a run that
        shares compiled steps (the app's), the training step itself, called
        once on copies of the modules (:meth:`Stepper.ahead`): the app calls
        this once the page is drawn, so the first point after Play does not
        wait for a compile that could run while the person reads the page.
        Its time and whether it traced go to :attr:`compiled_ahead`, and the
        first step's record says it found the step compiled. A run that
        compiles its own step (the CLI, the lessons' runs) compiles it live on
        its first call, which is what they measure. Steps and evaluations wait
        for this thread. Returns the thread (already running)."""
        if self._warming is None:
            args = (self._eval_graphdef, self._live[0], self.task.inputs, self.task.targets)
            ahead = self.stepper.ahead(self.task.inputs, self.task.targets)
            dropped = threading.Event()
            weakref.finalize(self, dropped.set)
            # the thread gets what it compiles, not the run: a run replaced while
            # it compiles is freed when it ends
            self._warming = _WarmUp(_evaluate_state, args, ahead, self._counter,
                                    self.compiled_ahead, dropped)
            self._warming.start()
        return self._warming

    @property
    def ahead_status(self) -> str:
        """Before the first step of a run that compiles its step ahead:
        ``"compiling"`` until the warm-up has compiled it (or before the
        warm-up started), then ``"compiled"`` (it traced) or ``"found"`` (it
        was already compiled); ``""`` otherwise."""
        if self.history or not self.stepper.shared:
            return ""
        ahead = self.compiled_ahead
        if not ahead:
            return "compiling"
        return "compiled" if ahead["traced"] else "found"

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
    def _stop(self, good_state, what: str, unit: str = "this step"):
        self.stepper.restore(good_state)
        raise TrainingStopped(f"{what}: training stopped and the model keeps the state from "
                              f"before {unit} (lower the learning rate)")


_MEMORY = (("argument_bytes", "argument_size_in_bytes"),
           ("output_bytes", "output_size_in_bytes"),
           ("temp_bytes", "temp_size_in_bytes"),
           ("alias_bytes", "alias_size_in_bytes"))


def memory_of(compiled) -> dict[str, int | None]:
    """XLA's memory analysis of a compiled function (``compiled.memory_analysis()``),
    in bytes: ``argument_bytes`` (its inputs), ``output_bytes``, ``temp_bytes``
    (scratch buffers), ``alias_bytes`` (outputs written into donated inputs)
    and ``peak_bytes`` (XLA's peak, or when it reports none arguments + outputs
    + temporaries - aliased). ``None`` for what the backend does not report."""
    try:
        stats = compiled.memory_analysis()
    except (NotImplementedError, RuntimeError):  # a backend without the analysis
        stats = None

    def read(attr):
        value = getattr(stats, attr, None)
        return None if value is None else int(value)

    out = {key: read(attr) for key, attr in _MEMORY}
    peak = read("peak_memory_in_bytes")
    if not peak and None not in out.values():
        peak = (out["argument_bytes"] + out["output_bytes"] + out["temp_bytes"]
                - out["alias_bytes"])
    out["peak_bytes"] = peak
    return out
