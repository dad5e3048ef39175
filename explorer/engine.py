"""Training a configured run step by step under one of the five JIT modes.

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
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from explorer import budget
from explorer.audit import AuditReport, VariableChange, compare_snapshots, snapshot, verdict
from explorer.config import JIT_MODES, RunConfig
from explorer.sources import GRAPH_TASKS, load_graph, load_graph_dataset, split_graphs
from gnncore import CONV_TYPES, GNN, ConvSpec, Graph, bucket_size
from gnncore.batch import Batch

__all__ = ["Run", "StepRecord", "TrainingStopped", "build_model", "build_optimizer"]


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


def build_model(config: RunConfig, in_features: int, num_classes: int) -> GNN:
    """The ``gnncore.GNN`` a config describes: for node tasks the last layer
    outputs the classes unless ``head``; a graph-classification dataset gets
    every conv as a hidden block, a ``config.pool`` readout and a linear head."""
    specs = [ConvSpec(la.kind, la.width, dict(la.options)) for la in config.layers]
    graph_task = config.graph in GRAPH_TASKS
    head = config.head or graph_task
    if not head:
        last = specs[-1]
        options = dict(last.options)
        if CONV_TYPES[last.kind].has_heads:
            options["concat"] = False  # the output layer averages its heads
        specs[-1] = ConvSpec(last.kind, num_classes, options)
    rngs = nnx.Rngs(params=config.seed, dropout=config.seed + 1)
    return GNN(in_features, specs, out_features=num_classes, activation=config.activation,
               dropout=config.dropout, norm=config.norm if config.batch_norm else None,
               residual=config.residual, head=head,
               pool=config.pool if graph_task else None, rngs=rngs)


def build_optimizer(config: RunConfig, model: GNN) -> nnx.Optimizer:
    lr, wd = config.learning_rate, config.weight_decay
    if config.optimizer == "adamw":
        tx = optax.adamw(lr, weight_decay=wd)
    elif config.optimizer == "adam":
        # torch-style coupled L2, as in the GCN paper's setup
        tx = optax.chain(optax.add_decayed_weights(wd), optax.adam(lr))
    else:
        tx = optax.chain(optax.add_decayed_weights(wd), optax.sgd(lr))
    return nnx.Optimizer(model, tx, wrt=nnx.Param)


def masked_cross_entropy(logits, labels, mask):
    losses = optax.softmax_cross_entropy_with_integer_labels(logits, jnp.maximum(labels, 0))
    weight = mask.astype(logits.dtype)
    return jnp.sum(losses * weight) / jnp.maximum(jnp.sum(weight), 1.0)


# ------------------------------------------------------------ compiled pieces
# Everything a Run compiles or keeps as a callable is built by the functions
# below from what it needs (the node/graph task's segment count, the trace
# counter, the modules), never from the Run itself: a jitted bound method or a
# closure over ``self`` made every Run a reference cycle, which only Python's
# cycle collector frees. The app turns Streamlit's per-rerun gc.collect() off
# (it cost ~150 ms a training tick), so a replaced run (its graph, model,
# optimizer state, executables) stayed in memory until a rare full collection:
# gigabytes after a few Resets on a big graph. Without the cycle, reference
# counting frees a run as soon as the workspace lets go of it.
class _Shared:
    """The mutable bits the compiled step shares with its Run: the trace count
    (a Python side effect of tracing) and the functional mode's threaded state."""

    __slots__ = ("traces", "state")

    def __init__(self):
        self.traces = 0
        self.state = None


def _forward(model, batch, num_graphs: int | None, **kwargs):
    """Logits for the task's targets: nodes, or (``num_graphs`` set) the graph
    slots of a dataset's batch."""
    x, adj, edge_weight, _, _, node_mask = batch[:6]
    if num_graphs is not None:
        kwargs.update(batch=batch[6], num_graphs=num_graphs)
    return model(x, adj, edge_weight, node_mask=node_mask, **kwargs)


def _train_step_fn(shared: _Shared, num_graphs: int | None):
    """``train_step(model, optimizer, batch) -> loss``: the mutating NNX step
    every mode wraps; each trace counts in ``shared.traces``."""

    def train_step(model, optimizer, batch):
        shared.traces += 1  # a Python side effect: runs once per trace
        y, mask = batch[3], batch[4]

        def loss_fn(m):
            return masked_cross_entropy(_forward(m, batch, num_graphs), y, mask)

        loss, grads = nnx.value_and_grad(loss_fn)(model)
        optimizer.update(model, grads)
        return loss

    return train_step


def _evaluation_fn(num_graphs: int | None):
    """``evaluation(model, batch, targets)``: eval-mode logits of every row,
    their argmax, and the train/val/test accuracies: one compiled function, so
    a step costs one forward and one small host copy for its metrics."""

    def evaluation(model, batch, targets):
        logits = _forward(model, batch, num_graphs)
        pred = jnp.argmax(logits, axis=-1)
        y, masks = targets[0], targets[1:]
        hits = [jnp.sum((pred == y) & mask) / jnp.maximum(jnp.sum(mask), 1)
                for mask in masks]
        return logits, pred, jnp.stack(hits)

    return evaluation


def _hidden_fn(num_graphs: int | None):
    def hidden(model, batch):
        return _forward(model, batch, num_graphs, return_hidden=True)[1]

    return hidden


def _make_step(mode: str, train_step, model, optimizer, shared: _Shared):
    """``(step(batch) -> loss, the functional mode's jitted step or None)``."""
    if mode not in JIT_MODES:
        raise ValueError(f"unknown mode {mode!r}; choose one of {list(JIT_MODES)}")
    if mode == "eager":
        return (lambda batch: train_step(model, optimizer, batch)), None
    if mode == "nnx.jit":
        step = nnx.jit(train_step)
        return (lambda batch: step(model, optimizer, batch)), None
    if mode == "jax.jit":
        # The pitfall, on purpose: the modules go in as pytrees, the update
        # happens on traced copies, and nothing flows back out.
        step = jax.jit(train_step)
        return (lambda batch: step(model, optimizer, batch)), None
    if mode == "cached_partial":
        return nnx.cached_partial(nnx.jit(train_step), model, optimizer), None
    # functional: split once, thread the state through a pure jax.jit step.
    graphdef, shared.state = nnx.split((model, optimizer))

    @jax.jit
    def functional_step(state, batch):
        m, opt = nnx.merge(graphdef, state)
        loss = train_step(m, opt, batch)
        return nnx.state((m, opt)), loss

    def threaded_step(batch):
        shared.state, loss = functional_step(shared.state, batch)
        return loss

    return threaded_step, functional_step


def _compile_eval(evaluate, args) -> None:
    evaluate.lower(*args).compile()


class Run:
    """A model, its optimizer and a graph, trained one step at a time.

    Arguments:
        config: the :class:`RunConfig`.
        graph: a ready :class:`gnncore.Graph` (default: ``config.graph`` loaded
            with its features and split).
    """

    def __init__(self, config: RunConfig, graph: Graph | None = None):
        self.config = config
        #: "node" (classify the nodes of one graph) or "graph" (classify whole
        #: graphs of a dataset, trained as one padded batch with a pooled head)
        self.task = "graph" if config.graph in GRAPH_TASKS else "node"
        if self.task == "graph":
            if graph is not None:
                raise ValueError(f"{config.graph!r} is a graph-classification dataset: "
                                 "it takes no graph")
            g = self._load_dataset(config)
            classes = max(int(self.labels.max()) + 1, 2)
        else:
            self.graph = graph if graph is not None else load_graph(
                config.graph, features=config.features, seed=config.seed,
                train_per_class=config.train_per_class, difficulty=config.difficulty)
            g = self.graph
            classes = max(g.num_classes(), 2)
        # refused here, before anything of that size is allocated (a link or file
        # could ask for gigabytes): explorer/budget.py, padding's buckets included
        pad = 2 if config.bucket_padding else 1
        budget.check(config, nodes=pad * g.num_nodes, edges=pad * g.num_edges,
                     in_features=g.num_features, classes=classes)
        self.model = build_model(config, g.num_features, classes)
        self.optimizer = build_optimizer(config, self.model)
        self.model.train()
        self._shared = _Shared()  # the trace count and the functional mode's state
        self.history: list[StepRecord] = []
        self._pending_cause = "first call"
        #: per step, how every variable changed (the parameter-change heatmap)
        self.changes: list[list[VariableChange]] = []
        self._batch = self._make_batch(g) if self.task == "node" else self._graph_batch()
        num_graphs = self.num_graphs if self.task == "graph" else None
        #: the mutating NNX step ``(model, optimizer, batch) -> loss`` that every
        #: mode wraps (the lessons reuse it); each trace counts in trace_count
        self._train_step = _train_step_fn(self._shared, num_graphs)
        self._step, self._functional_step = _make_step(
            config.mode, self._train_step, self.model, self.optimizer, self._shared)
        # pure eval-mode forward + metrics: plain jax.jit is safe (it mutates nothing)
        self._eval = jax.jit(_evaluation_fn(num_graphs))
        self._evaluated = None  # (inputs it was computed from, its outputs): see _evaluate
        self._warming: threading.Thread | None = None
        self._hidden = None  # compiled on first use (embeddings)
        self._initial = self._last = snapshot(self.model, self.optimizer)

    # ---------------------------------------------------------------- graph
    def _load_dataset(self, config: RunConfig) -> Graph:
        graphs, labels = load_graph_dataset(config.graph, features=config.features,
                                            seed=config.seed)
        self.graphs, self.labels = graphs, labels
        self.split = split_graphs(len(graphs), config.seed)
        self.batch_data = Batch.from_graphs(graphs, labels)
        self.num_graphs = self.batch_data.num_graphs  # static: the pooling's segment count
        self.graph = self.batch_data.graph
        return self.graph

    def _graph_batch(self):
        b = self.batch_data
        train = np.zeros(b.num_graphs, bool)
        train[: len(self.graphs)] = self.split[0]
        self._targets = _eval_targets(self.labels, self.split, b.num_graphs)
        return (b.x, b.adj, b.edge_weight, b.y, jnp.asarray(train), b.node_mask, b.batch)

    def _make_batch(self, g: Graph):
        """The step's graph arrays; padded to buckets when the config asks."""
        n = g.num_nodes
        masks = (g.train_mask, g.val_mask, g.test_mask)
        if self.config.bucket_padding:
            g = g.pad_to(bucket_size(n + 1), bucket_size(g.num_edges))
        self._targets = _eval_targets(np.asarray(g.y)[:n], masks, g.num_nodes)
        node_mask = jnp.array(np.arange(g.num_nodes) < n)  # host-built: no per-shape compile
        return (g.x, g.adj, g.edge_weight, g.y, g.train_mask, node_mask)

    @property
    def trace_count(self) -> int:
        """How many times the compiled step traced (Python ran its body)."""
        return self._shared.traces

    @trace_count.setter
    def trace_count(self, value: int) -> None:
        self._shared.traces = value

    @property
    def _state(self):
        """The functional mode's threaded state (``None`` in the other modes)."""
        return self._shared.state

    @_state.setter
    def _state(self, value) -> None:
        self._shared.state = value

    @property
    def pending_retrace(self) -> str:
        """Why the next compiled step will trace ("" when it will hit the cache)."""
        return self._pending_cause if self.config.mode != "eager" else ""

    def set_graph(self, graph: Graph) -> None:
        """Train on an edited graph from now on (same feature width). When the
        step's input shapes change, the next step retraces; its record says why."""
        if self.task == "graph":
            raise ValueError("a graph-classification dataset cannot be edited")
        if graph.num_features != self.graph.num_features:
            raise ValueError(f"the new graph has {graph.num_features} features per node but "
                             f"the model takes {self.graph.num_features}: start a new run")
        old = self._batch
        self.graph, self._batch = graph, self._make_batch(graph)
        old_n, new_n = old[0].shape[0], self._batch[0].shape[0]
        old_e, new_e = old[1].num_edges, self._batch[1].num_edges
        if (old_n, old_e) != (new_n, new_e):
            moved = [f"{what} {a} -> {b}" for what, a, b in
                     (("nodes", old_n, new_n), ("directed edges", old_e, new_e))
                     if a != b]
            self._pending_cause = "shapes changed: " + ", ".join(moved)
        elif jax.tree.structure(old) != jax.tree.structure(self._batch):
            self._pending_cause = "inputs changed: edge weights added or removed"

    # ---------------------------------------------------------------- modes
    def _lowerable(self):
        """``(fresh jitted function, args)`` of this mode's step, for the AOT API.
        Fresh, so that timing it neither hits nor fills the live step's cache."""
        mode = self.config.mode
        target = (self._functional_step.__wrapped__ if mode == "functional"
                  else self._train_step)

        def fresh(*args):  # a new function object: JAX's trace cache misses
            return target(*args)

        if mode == "functional":
            return jax.jit(fresh), (self._state, self._batch)
        jit = jax.jit if mode == "jax.jit" else nnx.jit
        return jit(fresh), (self.model, self.optimizer, self._batch)

    def compile_breakdown(self, window: int = 20) -> dict[str, float] | None:
        """Where a compiled step's time goes, from JAX's ahead-of-time API:
        ``trace_lower_s`` (Python tracing + lowering to StableHLO), ``compile_s``
        (XLA), ``first_call_s`` (the live first step: trace + compile + run) and
        ``steady_step_ms`` (median of the last ``window`` cache-hit steps).
        ``None`` for eager mode, which compiles nothing."""
        if self.config.mode == "eager":
            return None
        fn, args = self._lowerable()
        traces = self.trace_count  # tracing here must not count as a retrace
        start = time.perf_counter()
        lowered = fn.trace(*args).lower()
        traced = time.perf_counter()
        lowered.compile()
        done = time.perf_counter()
        self.trace_count = traces
        hits = [r.wall_s for r in self.history if not r.traced][-window:]
        first = next((r.wall_s for r in self.history if r.traced), float("nan"))
        return {"trace_lower_s": traced - start, "compile_s": done - traced,
                "first_call_s": first,
                "steady_step_ms": 1e3 * float(np.median(hits)) if hits else float("nan")}

    def naive_timing(self, steps: int = 5) -> dict[str, float]:
        """The timing lesson: mean step time measured without and with
        ``block_until_ready``. Without it, the clock stops when the work has
        been dispatched, not when it is done. Runs ``2 * steps`` training steps
        (not recorded in the history)."""
        def timed(sync: bool) -> float:
            start = time.perf_counter()
            for _ in range(steps):
                loss = self._step(self._batch)
                if sync:
                    jax.block_until_ready((loss, self._state))
            elapsed = time.perf_counter() - start
            jax.block_until_ready((loss, self._state))
            return elapsed / steps

        return {"naive_s": timed(False), "synced_s": timed(True)}

    # ----------------------------------------------------------------- steps
    def sync(self) -> None:
        """Write the functional mode's threaded state back into the modules
        (they are stale between ``nnx.split`` and this call)."""
        if self._state is not None:
            nnx.update((self.model, self.optimizer), self._state)

    def step(self) -> StepRecord:
        """Run one training step and return its record."""
        before_traces = self.trace_count
        good_state = self._last_good_state()
        start = time.perf_counter()
        loss = self._step(self._batch)
        jax.block_until_ready((loss, self._state))
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
        compiled = self.config.mode != "eager"
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
        has_dropout = self.config.dropout > 0 or any(
            CONV_TYPES[la.kind].has_heads and la.options.get("dropout", 0)
            for la in self.config.layers)
        report_verdict = verdict(changes, losses, has_dropout=has_dropout,
                                 has_batch_norm=self.config.batch_norm
                                 and self.config.norm == "batch")
        return AuditReport(tuple(changes), losses, has_dropout,
                           self.config.batch_norm and self.config.norm == "batch",
                           report_verdict)

    def train(self, steps: int | None = None) -> list[StepRecord]:
        """Run ``steps`` (default ``config.epochs``) steps; returns their records."""
        return [self.step() for _ in range(steps or self.config.epochs)]

    # ------------------------------------------------------------ evaluation
    def embeddings(self) -> list[np.ndarray]:
        """Eval-mode output of every layer block, ``[N, width]`` each (host
        arrays for the real nodes): what the UI colours nodes by."""
        if self._hidden is None:
            self._hidden = jax.jit(
                _hidden_fn(self.num_graphs if self.task == "graph" else None))
        self.sync()
        self.model.eval()
        try:
            hidden = self._hidden(self.model, self._batch)
        finally:
            self.model.train()
        real = self.graph.num_nodes if self.task == "node" else int(
            np.sum(np.asarray(self.batch_data.node_mask)))
        return [np.asarray(h)[:real] for h in hidden]

    def _evaluate(self):
        """``(logits, predictions, host accuracies)`` of the model as it is now
        (eval mode; padded rows included). Computed again only when a variable
        or the graph changed: the key holds the very arrays it was computed
        from, compared by identity (JAX arrays are immutable)."""
        self.sync()
        self._finish_warm_up()
        key = (self._batch, self._targets, *jax.tree.leaves(nnx.state(self.model)))
        cached = self._evaluated
        if cached is not None and len(cached[0]) == len(key) and all(
                a is b for a, b in zip(cached[0], key)):
            return cached[1]
        self.model.eval()
        try:
            logits, pred, accs = self._eval(self.model, self._batch, self._targets)
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
            args = (clone, self._batch, self._targets)
            # the thread gets what it compiles, not the run: a run replaced while
            # it compiles is freed when it ends
            self._warming = threading.Thread(
                target=_compile_eval, args=(self._eval, args), name="eval-warm-up",
                daemon=True)
            self._warming.start()
        return self._warming

    def _finish_warm_up(self) -> None:
        if self._warming is not None:
            self._warming.join()

    def _real_rows(self) -> int:
        return self.graph.num_nodes if self.task == "node" else len(self.graphs)

    def predictions(self):
        """Eval-mode class predictions for every (real) node, or every graph of a dataset."""
        return self._evaluate()[1][:self._real_rows()]

    def logits(self):
        """Eval-mode logits for every (real) node, or every graph of a dataset."""
        return self._evaluate()[0][:self._real_rows()]

    def accuracies(self) -> dict[str, float]:
        """Eval-mode accuracy on the train, val and test nodes (or graphs);
        0 for an empty split."""
        accs = self._evaluate()[2]
        return {name: float(a) for name, a in zip(("train", "val", "test"), accs)}

    # --------------------------------------------------------------- helpers
    def _last_good_state(self):
        if self._state is not None:
            return self._state
        return jax.tree.map(lambda a: a, nnx.state((self.model, self.optimizer)))

    def _stop(self, good_state, what: str):
        self._restore(good_state)
        raise TrainingStopped(f"{what}: training stopped and the model keeps the state from "
                              "before this step (lower the learning rate)")

    def _restore(self, good_state) -> None:
        if self._state is not None:
            self._state = good_state
        nnx.update((self.model, self.optimizer), good_state)


def _eval_targets(labels, masks, rows: int):
    """``(labels, train, val, test)`` as device arrays of ``rows`` entries (the
    logits' rows: padding included, never counted)."""
    y = np.full(rows, -1, np.int32)
    labels = np.asarray(labels)
    y[:len(labels)] = labels
    out = [jnp.asarray(y)]
    for mask in masks:
        m = np.zeros(rows, bool)
        mask = np.asarray(mask, bool)
        m[:len(mask)] = mask
        out.append(jnp.asarray(m))
    return tuple(out)
