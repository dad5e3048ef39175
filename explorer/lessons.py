"""Classroom lessons: one JIT pitfall each, measured live, and its fix.

Every lesson runs real code and reports what it saw, never a canned result:
the pitfall (:meth:`Lesson.pitfall`) and the fix (:meth:`Lesson.fix`) each
return an :class:`Outcome` with a verdict, a one-sentence summary built from the
measurements, the evidence, and the few lines of code that the column ran.
Lessons that train a model carry the explorer setup they use
(:attr:`Lesson.setup` / :attr:`Lesson.fix_setup`), so the app can load the
same graph, model and mode into its panels; a run the app already trained can
be handed in and is only observed.

Nothing here is shared between sessions: every call builds its own models.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from explorer.audit import compare_snapshots, snapshot
from explorer.config import RunConfig
from explorer.engine import Run
from explorer.sources import load_graph, load_graph_dataset
from gnncore import Graph
from gnncore.conv.gcn import GCNConv
from gnncore.norm import GraphNorm, LayerNorm
from gnncore.pool import TopKPooling, global_mean_pool
from gnncore.utils import coalesce

__all__ = ["LESSONS", "Lesson", "Outcome", "find", "large_graph"]

LESSON_STEPS = 10  # training steps of the lessons that train
LARGE_NODES = 20_000  # the "large graph" of the overhead and timing lessons
LARGE_DEGREE = 10


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What one side of a lesson (the pitfall or the fix) measured."""

    label: str  # the column's title, e.g. "jax.jit (the pitfall)"
    verdict: str  # a short word for the banner: FROZEN, TRAINING, ValueError, ...
    good: bool  # green (the fix works) or red (the symptom)
    summary: str  # one sentence with the measured numbers
    evidence: tuple[str, ...] = ()
    rows: tuple[dict, ...] = ()  # a small table
    losses: tuple[float, ...] = ()  # a loss curve, when the lesson trains
    matrix: tuple[tuple[float, ...], ...] = ()  # e.g. dropout masks, one row per draw
    code: str = ""  # the lines that produced this column


@dataclasses.dataclass(frozen=True)
class Lesson:
    """One pitfall: what to look at, why it happens, and the fix."""

    number: int
    key: str  # the URL's ``lesson=`` value
    title: str
    symptom: str  # where to look
    explanation: str  # 2–4 sentences
    fix_label: str  # the "apply the fix" button's text
    _pitfall: Callable[..., Outcome]
    _fix: Callable[..., Outcome]
    setup: RunConfig | None = None  # the explorer setup of the pitfall (None: no training)
    fix_setup: RunConfig | None = None
    steps: int = LESSON_STEPS

    def pitfall(self, run: Run | None = None) -> Outcome:
        """Run the pitfall (or observe ``run``, already trained on :attr:`setup`)."""
        return self._pitfall(self, run)

    def fix(self, run: Run | None = None) -> Outcome:
        """Run the fix (or observe ``run``, already trained on :attr:`fix_setup`)."""
        return self._fix(self, run)


# ------------------------------------------------------------------ helpers
def _trained(lesson: Lesson, config: RunConfig, run: Run | None) -> Run:
    if run is None:
        run = Run(config)
        run.train(lesson.steps)
    return run


def _error(err: Exception) -> str:
    """The first line of an exception's message, with its type."""
    text = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return f"{type(err).__name__}: {text}"


def _opt_step(run: Run) -> int:
    run.sync()
    return int(run.optimizer.step[...])


def _training_outcome(run: Run, label: str, code: str, extra=()) -> Outcome:
    """Verdict, loss curve and the optimizer's step of a trained run."""
    report = run.audit()
    losses = tuple(r.loss for r in run.history)
    params = [c for c in report.changes if c.kind == "parameter"]
    moved, total = sum(c.changed for c in params), len(params)
    step = _opt_step(run)
    frozen = report.verdict.status == "frozen"
    if frozen:
        summary = (f"The loss reads {losses[-1]:.6f} at every one of {len(losses)} steps, "
                   f"optimizer.step is still {step} and {moved} of {total} parameters "
                   "changed: no error, nothing learned.")
    else:
        summary = (f"The loss falls from {losses[0]:.4f} to {losses[-1]:.4f} in "
                   f"{len(losses)} steps, optimizer.step is {step} and {moved} of {total} "
                   "parameters changed.")
    return Outcome(label, report.verdict.status.upper(), not frozen, summary,
                   tuple(report.verdict.evidence) + tuple(extra), losses=losses, code=code)


_JAX_JIT_CODE = """\
# plain jax.jit around a mutating step
@jax.jit
def train_step(model, optimizer, batch):
    grads = nnx.grad(loss_fn)(model, batch)
    # updates a traced copy of the state...
    optimizer.update(model, grads)
    # ...which is thrown away on return
    return loss_fn(model, batch)"""

_NNX_JIT_CODE = """\
# nnx.jit carries NNX state updates back out
@nnx.jit
def train_step(model, optimizer, batch):
    grads = nnx.grad(loss_fn)(model, batch)
    optimizer.update(model, grads)
    return loss_fn(model, batch)"""


# ------------------------------------------------------- 1. frozen parameters
def _frozen_pitfall(lesson, run):
    return _training_outcome(_trained(lesson, lesson.setup, run), "jax.jit (the pitfall)",
                             _JAX_JIT_CODE)


def _frozen_fix(lesson, run):
    return _training_outcome(_trained(lesson, lesson.fix_setup, run), "nnx.jit (the fix)",
                             _NNX_JIT_CODE)


# --------------------------------------------------------- 2. frozen dropout
def _dropout_masks(run: Run, draws: int = 4, width: int = 24) -> np.ndarray:
    """Masks drawn by (a copy of) the run's own Dropout layer, called ``draws``
    times under the run's JIT wrapper: ``[draws, width]`` of 0/1."""
    dropout = nnx.clone(run.model.dropout)  # a copy: the lesson must not touch the run

    def apply(layer, x):
        return layer(x)

    wrapped = jax.jit(apply) if run.config.mode == "jax.jit" else nnx.jit(apply)
    ones = jnp.ones((width,), jnp.float32)
    return np.stack([np.asarray(wrapped(dropout, ones) != 0, np.float32)
                     for _ in range(draws)])


def _rng_count(run: Run) -> int:
    run.sync()
    counts = [int(np.asarray(var.get_value())) for path, var in
              nnx.to_flat_state(nnx.state(run.model, nnx.RngCount))]
    return sum(counts)


def _dropout_outcome(run: Run, label: str, code: str) -> Outcome:
    masks = _dropout_masks(run)
    same = all(np.array_equal(masks[0], m) for m in masks[1:])
    count = _rng_count(run)
    base = _training_outcome(run, label, code)
    rows = tuple({"draw": i + 1, "units kept": int(m.sum()), "same as draw 1":
                  "yes" if np.array_equal(m, masks[0]) else "no"} for i, m in enumerate(masks))
    if same:
        summary = (f"The model's Dropout drew the same mask {len(masks)} times in a row and its "
                   f"RNG counter reads {count} after {len(base.losses)} steps: every step "
                   "drops the same units, and the loss is frozen too.")
    else:
        summary = (f"{len(masks)} draws gave {len({m.tobytes() for m in masks})} different "
                   f"masks; the dropout RNG counter advanced to {count} over "
                   f"{len(base.losses)} steps, so each step drops different units.")
    return dataclasses.replace(base, summary=summary, rows=rows,
                               matrix=tuple(tuple(m.tolist()) for m in masks),
                               good=not same and base.good,
                               verdict="SAME MASK" if same else "NEW MASK EACH STEP")


def _dropout_pitfall(lesson, run):
    return _dropout_outcome(_trained(lesson, lesson.setup, run), "jax.jit (the pitfall)",
                            "dropout = nnx.Dropout(0.5, rngs=rngs)\n"
                            "# the RNG count advances on a traced\n"
                            "# copy and is dropped: same mask each call\n"
                            "jax.jit(lambda d, x: d(x))(dropout, x)")


def _dropout_fix(lesson, run):
    return _dropout_outcome(_trained(lesson, lesson.fix_setup, run), "nnx.jit (the fix)",
                            "dropout = nnx.Dropout(0.5, rngs=rngs)\n"
                            "# the RNG count's update flows back out:\n"
                            "# a new mask every call\n"
                            "nnx.jit(lambda d, x: d(x))(dropout, x)")


# ------------------------------------------------------ 3. frozen BatchNorm
def _bn_outcome(run: Run, label: str, code: str) -> Outcome:
    run.sync()
    norm = run.model.norms[0]
    mean, var = np.asarray(norm.mean[...]), np.asarray(norm.var[...])
    moved_mean = float(np.max(np.abs(mean)))
    moved_var = float(np.max(np.abs(var - 1.0)))
    base = _training_outcome(run, label, code)
    rows = tuple({"channel": i, "running mean": round(float(mean[i]), 5),
                  "running var": round(float(var[i]), 5)} for i in range(min(6, len(mean))))
    frozen = moved_mean == 0.0 and moved_var == 0.0
    if frozen:
        summary = (f"After {len(base.losses)} steps the first BatchNorm's running mean is "
                   "still all zeros and its running variance all ones (their initial "
                   "values): evaluation would normalise with statistics of no data.")
    else:
        summary = (f"After {len(base.losses)} steps the first BatchNorm's running mean moved "
                   f"by up to {moved_mean:.4f} and its variance by up to {moved_var:.4f}: "
                   "evaluation uses statistics of the training graph.")
    return dataclasses.replace(base, summary=summary, rows=rows, good=not frozen,
                               verdict="STATS FROZEN" if frozen else "STATS UPDATED")


def _bn_pitfall(lesson, run):
    return _bn_outcome(_trained(lesson, lesson.setup, run), "jax.jit (the pitfall)",
                       "# BatchNorm's running stats are updated\n"
                       "# in place by every training call\n"
                       "model = GNN(..., norm=\"batch\", rngs=rngs)\n\n"
                       + _JAX_JIT_CODE.replace("updates a traced copy of the state...",
                                               "params and stats of a traced copy..."))


def _bn_fix(lesson, run):
    return _bn_outcome(_trained(lesson, lesson.fix_setup, run), "nnx.jit (the fix)",
                       "# BatchNorm's running stats are updated\n"
                       "# in place by every training call\n"
                       "model = GNN(..., norm=\"batch\", rngs=rngs)\n\n"
                       + _NNX_JIT_CODE)


# ------------------------------------------- 4. the functional loop, stale window
_FUNCTIONAL_CODE = """\
graphdef, state = nnx.split((model, optimizer))

@jax.jit
def train_step(state, batch):
    m, opt = nnx.merge(graphdef, state)
    loss, grads = nnx.value_and_grad(loss_fn)(m, batch)
    opt.update(m, grads)
    return nnx.state((m, opt)), loss

for _ in range(steps):
    state, loss = train_step(state, batch)"""


def _functional(lesson: Lesson, sync: bool) -> Outcome:
    run = Run(lesson.setup.replace(mode="nnx.jit"))  # modules, batch and loss of the setup
    model, optimizer = run.model, run.optimizer
    before = snapshot(model, optimizer)
    graphdef, state = nnx.split((model, optimizer))

    @jax.jit
    def train_step(state, batch):
        m, opt = nnx.merge(graphdef, state)
        loss = run._train_step(m, opt, batch)
        return nnx.state((m, opt)), loss

    losses = []
    for _ in range(lesson.steps):
        state, loss = train_step(state, run._batch)
        losses.append(float(loss))
    threaded = int(nnx.merge(graphdef, state)[1].step[...])  # a fresh copy: read only
    if sync:
        nnx.update((model, optimizer), state)
    changes = [c for c in compare_snapshots(before, snapshot(model, optimizer))
               if c.kind == "parameter"]
    moved, total = sum(c.changed for c in changes), len(changes)
    step = int(optimizer.step[...])
    trained = f"the loss fell from {losses[0]:.4f} to {losses[-1]:.4f}"
    if sync:
        return Outcome(
            "after nnx.update (the fix)", "UP TO DATE", True,
            f"Training worked ({trained}); after nnx.update the Python objects agree with "
            f"the state: {moved} of {total} parameters changed and optimizer.step is {step}.",
            (f"state's step counter: {threaded}", f"optimizer.step: {step}"),
            losses=tuple(losses),
            code=_FUNCTIONAL_CODE + "\n\n# write the new state back into the objects\n"
                                    "nnx.update((model, optimizer), state)")
    return Outcome(
        "reading `model` before nnx.update", "STALE OBJECTS", False,
        f"Training worked ({trained}), but the Python `model` still holds its initial "
        f"weights: {moved} of {total} parameters differ from the start and optimizer.step "
        f"reads {step} while the threaded state's counter is {threaded}.",
        ("the new values live only in `state`",
         "evaluating or checkpointing `model` now would use the initial weights"),
        losses=tuple(losses),
        code=_FUNCTIONAL_CODE + "\n\n# stale: only `state` holds the new values\n"
                                "evaluate(model)")


def _functional_pitfall(lesson, run):
    return _functional(lesson, sync=False)


def _functional_fix(lesson, run):
    return _functional(lesson, sync=True)


# --------------------------------------------------- 5. nnx.jit per-call overhead
def large_graph(num_nodes: int = LARGE_NODES, degree: int = LARGE_DEGREE, *,
                features: int = 16, classes: int = 4, seed: int = 0) -> Graph:
    """A random graph for the timing lessons (labels random; only speed matters)."""
    rng = np.random.default_rng(seed)
    edges = rng.integers(0, num_nodes, size=(2, num_nodes * degree))
    y = rng.integers(0, classes, size=num_nodes)
    train = np.zeros(num_nodes, bool)
    train[rng.choice(num_nodes, size=min(num_nodes, 20 * classes), replace=False)] = True
    return Graph.from_arrays(edges, rng.standard_normal((num_nodes, features)), y=y,
                             train_mask=train, val_mask=np.zeros(num_nodes, bool),
                             test_mask=~train)


def _median_step_ms(config: RunConfig, graph: Graph | None, steps: int) -> float:
    run = Run(config, graph)
    run.step()  # compile
    run.train(steps)
    return 1e3 * float(np.median([r.wall_s for r in run.history[1:]]))


def _overhead(lesson: Lesson, modes: tuple[str, ...], label: str, good: bool,
              num_nodes: int) -> Outcome:
    config = lesson.setup.replace(dropout=0.0)
    graphs = {"karate (34 nodes)": None,
              f"random ({num_nodes:,} nodes)": large_graph(num_nodes)}
    times = {(g, m): _median_step_ms(config.replace(mode=m), graph, steps=8)
             for g, graph in graphs.items() for m in modes}
    rows = tuple({"graph": g, "mode": m, "median step ms": round(times[g, m], 3)}
                 for g in graphs for m in modes)
    tiny, large = list(graphs)
    if modes == ("nnx.jit",):
        summary = (f"nnx.jit takes {times[tiny, 'nnx.jit']:.2f} ms per step on the tiny graph, "
                   f"where the model's compute is microseconds: most of it is nnx.jit "
                   f"walking the module graph in Python on every call. On the large graph "
                   f"it takes {times[large, 'nnx.jit']:.1f} ms, mostly compute.")
        return Outcome(label, "PYTHON OVERHEAD", good, summary, rows=rows, code=_NNX_JIT_CODE)
    ratio_tiny = times[tiny, "nnx.jit"] / times[tiny, "functional"]
    ratio_large = times[large, "nnx.jit"] / times[large, "functional"]
    summary = (f"On the tiny graph nnx.jit is {ratio_tiny:.1f}× the functional loop "
               f"({times[tiny, 'nnx.jit']:.2f} vs {times[tiny, 'functional']:.2f} ms; "
               f"cached_partial {times[tiny, 'cached_partial']:.2f} ms); on the large graph "
               f"{ratio_large:.2f}×, where the compute dwarfs the per-call overhead.")
    return Outcome(label, "OVERHEAD SKIPPED", good, summary, rows=rows,
                   evidence=(f"nnx.jit / functional, tiny graph: {ratio_tiny:.2f}",
                             f"nnx.jit / functional, large graph: {ratio_large:.2f}"),
                   code=_FUNCTIONAL_CODE + "\n\n# or keep nnx.jit and cache the graph walk:\n"
                   "step = nnx.cached_partial(\n    train_step, model, optimizer)\n"
                   "loss = step(batch)")


def _overhead_pitfall(lesson, run):
    return _overhead(lesson, ("nnx.jit",), "nnx.jit on a tiny and a large graph", False,
                     LARGE_NODES)


def _overhead_fix(lesson, run):
    return _overhead(lesson, ("nnx.jit", "functional", "cached_partial"),
                     "functional loop and cached_partial", True, LARGE_NODES)


# ------------------------------------------- 6–8: small batches of graphs
def _graph_batch(num: int = 4):
    """``x [N, F]`` and ``batch [N]`` of the first ``num`` triangle-dataset graphs."""
    graphs, _ = load_graph_dataset("triangle", features="degree_one_hot", seed=0)
    graphs = graphs[:num]
    x = jnp.array(np.concatenate([np.asarray(g.x) for g in graphs]))
    batch = jnp.array(np.repeat(np.arange(num, dtype=np.int32),
                                [g.num_nodes for g in graphs]))
    offsets = np.cumsum([0] + [g.num_nodes for g in graphs])
    edges = np.concatenate([np.asarray(g.edge_index) + o for g, o in zip(graphs, offsets)],
                           axis=1)
    return graphs, x, batch, jnp.array(edges)


def _pool_pitfall(lesson, run):
    graphs, x, batch, _ = _graph_batch()
    try:
        jax.jit(lambda x, b: global_mean_pool(x, b))(x, batch)
    except ValueError as err:
        eager = global_mean_pool(x, batch)
        return Outcome(
            "global_mean_pool(x, batch) under jax.jit", "ValueError", False,
            "Under jax.jit the number of graphs would have to be read from the traced "
            f"batch vector, so gnncore refuses: {_error(err)}",
            (f"eagerly the same call works and returns shape {tuple(eager.shape)}: it "
             "reads max(batch) + 1 from the device, a host sync",),
            code="pool = jax.jit(\n    lambda x, b: global_mean_pool(x, b))\n"
                 "pooled = pool(x, batch)")
    return Outcome("global_mean_pool(x, batch) under jax.jit", "NO ERROR", False,
                   "The traced call did not raise: this lesson's check is broken.")


def _pool_fix(lesson, run):
    graphs, x, batch, _ = _graph_batch()
    num = len(graphs)
    pool = jax.jit(functools.partial(global_mean_pool, size=num))
    out, eager = pool(x, batch), global_mean_pool(x, batch)
    diff = float(jnp.max(jnp.abs(out - eager)))
    rows = tuple({"graph": i, "nodes": g.num_nodes,
                  "pooled[:3]": ", ".join(f"{v:.3f}" for v in np.asarray(out[i, :3]))}
                 for i, g in enumerate(graphs))
    return Outcome(
        f"size={num} given statically", "COMPILES", True,
        f"With size={num} fixed when the function is built, the output shape "
        f"{tuple(out.shape)} is known at trace time; the result equals the eager one "
        f"(max |difference| {diff:.1e}).", rows=rows,
        code=f"pool = jax.jit(functools.partial(\n    global_mean_pool, size={num}))\n"
             "# [num_graphs, F]: known when tracing\n"
             "pooled = pool(x, batch)")


def _norm_pitfall(lesson, run):
    graphs, x, batch, _ = _graph_batch()
    errors = {}
    for name, norm in (("GraphNorm", GraphNorm(x.shape[1], rngs=nnx.Rngs(0))),
                       ("LayerNorm(mode='graph')", LayerNorm(x.shape[1], mode="graph"))):
        try:
            nnx.jit(lambda n, x, b: n(x, b))(norm, x, batch)
        except ValueError as err:
            errors[name] = _error(err)
    if "GraphNorm" not in errors:
        return Outcome("GraphNorm(x, batch) under nnx.jit", "NO ERROR", False,
                       "The traced call did not raise: this lesson's check is broken.")
    return Outcome(
        "GraphNorm(x, batch) under nnx.jit", "ValueError", False,
        "GraphNorm normalises each graph by its own statistics, one segment per graph; "
        f"how many segments cannot come from a traced batch vector: {errors['GraphNorm']}",
        tuple(f"{name} under nnx.jit → {text}" for name, text in errors.items()
              if name != "GraphNorm"),
        code="norm = GraphNorm(F, rngs=rngs)\n"
             "apply = nnx.jit(lambda n, x, b: n(x, b))\n"
             "out = apply(norm, x, batch)")


def _norm_fix(lesson, run):
    graphs, x, batch, _ = _graph_batch()
    num = len(graphs)
    x = x + jnp.array(np.random.default_rng(0).normal(size=x.shape), jnp.float32)
    norm = GraphNorm(x.shape[1], rngs=nnx.Rngs(0))
    out = np.asarray(nnx.jit(lambda n, x, b: n(x, b, num_graphs=num))(norm, x, batch))
    b = np.asarray(batch)
    rows = tuple({"graph": i, "nodes": int((b == i).sum()),
                  "mean of output": round(float(out[b == i].mean()), 4),
                  "std of output": round(float(out[b == i].std()), 4)} for i in range(num))
    return Outcome(
        f"num_graphs={num} passed", "COMPILES", True,
        f"With num_graphs={num} (a Python int) the segment count is static; each graph's "
        "output is normalised on its own (per-graph means ≈ 0 in the table).", rows=rows,
        code="norm = GraphNorm(F, rngs=rngs)\n"
             f"apply = nnx.jit(\n    lambda n, x, b: n(x, b, num_graphs={num}))\n"
             "out = apply(norm, x, batch)")


def _shapes_pitfall(lesson, run):
    graphs, x, batch, edges = _graph_batch()
    score = x @ jnp.linspace(-1.0, 1.0, x.shape[1])
    errors = []
    try:
        jax.jit(lambda x, s: x[s > 0])(x, score)
    except Exception as err:  # JAX's NonConcreteBooleanIndexError
        errors.append("x[score > 0] under jax.jit → " + _error(err))
    doubled = jnp.concatenate([edges, edges], axis=1)  # every edge twice
    try:
        jax.jit(lambda e: coalesce(e)[0])(doubled)
    except ValueError as err:
        errors.append("coalesce(edge_index) under jax.jit → " + _error(err))
    return Outcome(
        "boolean selection and coalesce under jax.jit", f"{len(errors)} ERRORS",
        False, "How many nodes pass a threshold, or how many edges stay after merging "
               "duplicates, depends on the values: a traced function cannot have an output "
               "whose shape depends on its inputs' values.", tuple(errors),
        code="# the output's length depends on the data\n"
             "jax.jit(lambda x, s: x[s > 0])(x, score)\n"
             "jax.jit(lambda e: coalesce(e)[0])(edge_index)")


def _shapes_fix(lesson, run):
    graphs, x, batch, edges = _graph_batch()
    num = len(graphs)
    pool = TopKPooling(x.shape[1], ratio=2, rngs=nnx.Rngs(0))  # keep 2 nodes per graph
    out = nnx.jit(lambda p, x, e, b: p(x, e, b, num_graphs=num))(pool, x, edges, batch)
    kept = np.asarray(out.node_mask)
    slot_graph = np.asarray(out.batch)
    rows = tuple({"graph": i, "nodes in": g.num_nodes,
                  "slots kept": int(((slot_graph == i) & kept).sum())}
                 for i, g in enumerate(graphs))
    doubled = np.concatenate([np.asarray(edges)] * 2, axis=1)
    merged, _ = coalesce(doubled)
    return Outcome(
        "static-size TopKPooling + eager coalesce", "COMPILES", True,
        f"TopKPooling(ratio=2) keeps 2 nodes per graph in a fixed {out.x.shape[0]}-slot "
        "output with a node mask, so the shape is known when tracing; coalesce runs once "
        f"on the host before jit ({doubled.shape[1]} → {merged.shape[1]} edges).",
        (f"output x shape {tuple(out.x.shape)}, node_mask true for {int(kept.sum())} slots",),
        rows=rows,
        code="# eagerly, once, before jit\n"
             "edge_index, _ = coalesce(edge_index)\n"
             "# 2 slots per graph + a mask: static\n"
             "pool = TopKPooling(F, ratio=2, rngs=rngs)\n"
             "apply = nnx.jit(lambda p, x, e, b:\n"
             "                p(x, e, b, num_graphs=B))\n"
             "out = apply(pool, x, edge_index, batch)")


# ------------------------------------------------------------ 9. GCN cached
def _cached_data():
    g = load_graph("karate", features="one_hot")
    return g, GCNConv(g.num_features, 8, cached=True, rngs=nnx.Rngs(0))


def _cached_pitfall(lesson, run):
    g, conv = _cached_data()
    errors = []
    try:
        nnx.jit(lambda c, x, e: c(x, e))(conv, g.x, g.edge_index)
    except ValueError as err:
        errors.append("first call under nnx.jit → " + _error(err))

    def fill_then_call(c, x, e):
        c.precompute_norm(e, x.shape[0])
        return c(x, e)

    try:
        nnx.jit(fill_then_call)(conv, g.x, g.edge_index)
    except ValueError as err:
        errors.append("precompute_norm inside nnx.jit → " + _error(err))
    return Outcome(
        "GCNConv(cached=True) inside the traced step", f"{len(errors)} ERRORS", False,
        "A cache filled during tracing would hold tracers, not numbers, and would leak "
        "out of the trace; gnncore never fills it implicitly and says so.", tuple(errors),
        code="conv = GCNConv(F, 8, cached=True, rngs=rngs)\n"
             "apply = nnx.jit(lambda c, x, e: c(x, e))\n"
             "# the cache is still empty here\n"
             "out = apply(conv, x, edge_index)")


def _cached_fix(lesson, run):
    g, conv = _cached_data()
    conv.precompute_norm(g.edge_index, g.num_nodes)  # eager, once
    out = nnx.jit(lambda c, x, e: c(x, e))(conv, g.x, g.edge_index)
    plain = GCNConv(g.num_features, 8, rngs=nnx.Rngs(0))  # same weights, no cache
    ref = nnx.jit(lambda c, x, e: c(x, e))(plain, g.x, g.edge_index)
    diff = float(jnp.max(jnp.abs(out - ref)))
    return Outcome(
        "precompute_norm eagerly, then jit", "COMPILES", True,
        f"The normalisation was computed once on the host ({g.num_edges} edges + self "
        f"loops); the compiled call then reads it and matches an uncached GCNConv "
        f"(max |difference| {diff:.1e}).",
        code="conv = GCNConv(F, 8, cached=True, rngs=rngs)\n"
             "# eagerly, once, before the compiled call\n"
             "conv.precompute_norm(edge_index, num_nodes)\n"
             "apply = nnx.jit(lambda c, x, e: c(x, e))\n"
             "out = apply(conv, x, edge_index)")


# ------------------------------------------------------------- 10. retracing
def _with_edges(g: Graph, extra: int) -> Graph:
    """``g`` plus ``extra`` new undirected edges (deterministic non-neighbours)."""
    ei = np.asarray(g.edge_index)
    have = set(zip(ei[0].tolist(), ei[1].tolist()))
    new = []
    for u in range(g.num_nodes):
        for v in range(g.num_nodes - 1, u, -1):
            if len(new) == extra:
                break
            if (u, v) not in have:
                new.append((u, v))
                have.add((u, v))
        if len(new) == extra:
            break
    added = np.array([[u for u, v in new] + [v for u, v in new],
                      [v for u, v in new] + [u for u, v in new]], dtype=ei.dtype)
    weight = None if g.edge_weight is None else np.concatenate(
        [np.asarray(g.edge_weight), np.ones(added.shape[1], np.float32)])
    return Graph.from_arrays(np.concatenate([ei, added], axis=1), g.x, y=g.y,
                             edge_weight=weight, train_mask=g.train_mask, val_mask=g.val_mask,
                             test_mask=g.test_mask)


def _retrace(lesson: Lesson, config: RunConfig, label: str, edits: int = 5) -> Outcome:
    run = Run(config)
    base = run.graph
    rows = []

    def record(r, edges):
        rows.append({"step": r.step, "edges": edges, "traced": "yes" if r.traced else "no",
                     "why": r.trace_cause or "-", "ms": round(1e3 * r.wall_s, 2)})

    record(run.step(), base.num_edges)
    for i in range(1, edits + 1):
        g = _with_edges(base, i)
        run.set_graph(g)
        record(run.step(), g.num_edges)
    traced = [r for r in rows if r["traced"] == "yes"]
    hits = [r["ms"] for r in rows if r["traced"] == "no"]
    compile_ms = float(np.mean([r["ms"] for r in traced]))
    padded = config.bucket_padding
    summary = (f"{len(rows)} steps, {run.trace_count} trace{'s' if run.trace_count > 1 else ''}"
               + (f": the edges stay inside one padded bucket ({rows[0]['edges']} → "
                  f"{rows[-1]['edges']} real edges), so the compiled step is reused "
                  f"({np.median(hits):.2f} ms per cached step vs {compile_ms:.0f} ms for the "
                  "traced one)." if padded else
                  f": every added edge changed the edge count, so every step traced and "
                  f"compiled again ({compile_ms:.0f} ms each on average)."))
    verdict = f"{run.trace_count} TRACE" + ("S" if run.trace_count > 1 else "")
    return Outcome(label, verdict, run.trace_count == 1, summary,
                   rows=tuple(rows), losses=tuple(r.loss for r in run.history),
                   code=("# pad to power-of-two buckets; padding\n"
                         "# nodes are masked out of loss and stats\n"
                         "g = g.pad_to(bucket_size(n + 1),\n"
                         "             bucket_size(e))\n"
                         "loss = train_step(model, optimizer, g)"
                         if padded else
                         "for edit in edits:\n"
                         "    # a new edge count: a new shape\n"
                         "    graph = add_edge(graph)\n"
                         "    # so this call traces and compiles again\n"
                         "    loss = train_step(model, optimizer, graph)"))


def _retrace_pitfall(lesson, run):
    return _retrace(lesson, lesson.setup, "exact shapes (the pitfall)")


def _retrace_fix(lesson, run):
    return _retrace(lesson, lesson.fix_setup, "bucket padding (the fix)")


# --------------------------------------------------------------- 11. timing
def _timing(lesson: Lesson, num_nodes: int, synced: bool) -> Outcome:
    run = Run(lesson.setup.replace(dropout=0.0), large_graph(num_nodes))
    run.step()  # compile outside the measurement
    t = run.naive_timing(steps=10)
    naive, real = 1e3 * t["naive_s"], 1e3 * t["synced_s"]
    rows = ({"clock": "without block_until_ready", "ms per step": round(naive, 3)},
            {"clock": "with block_until_ready", "ms per step": round(real, 3)})
    if not synced:
        return Outcome(
            "no block_until_ready (the pitfall)", f"{naive:.2f} ms?", False,
            f"Stopping the clock right after the call says {naive:.2f} ms per step on a "
            f"{num_nodes:,}-node graph: only the time to dispatch the work, because JAX "
            "returns before the device has finished.", rows=rows[:1],
            code="start = time.perf_counter()\nfor _ in range(10):\n"
                 "    loss = train_step(model, optimizer, batch)\n"
                 "# stops when the work is queued, not done\n"
                 "elapsed = time.perf_counter() - start")
    return Outcome(
        "block_until_ready (the fix)", f"{real:.2f} ms", True,
        f"Waiting for the result gives {real:.2f} ms per step, {real / naive:.1f}× what the "
        f"naive clock said ({naive:.2f} ms, measured again in the same run).", rows=rows,
        code="start = time.perf_counter()\nfor _ in range(10):\n"
             "    loss = train_step(model, optimizer, batch)\n"
             "    jax.block_until_ready(loss)\nelapsed = time.perf_counter() - start")


def _timing_pitfall(lesson, run):
    return _timing(lesson, LARGE_NODES, synced=False)


def _timing_fix(lesson, run):
    return _timing(lesson, LARGE_NODES, synced=True)


# ------------------------------------------------------------------ the list
_KARATE = RunConfig(graph="karate", dropout=0.0, mode="jax.jit")

LESSONS: tuple[Lesson, ...] = (
    Lesson(1, "frozen-params", "jax.jit around a mutating step: frozen training",
           "The loss chart is a flat line, the optimizer's step counter stays 0, and the "
           "parameter-change heatmap is blank.",
           "Plain `jax.jit` treats the NNX modules as inputs and traces a copy of their "
           "state. The optimizer updates that copy inside the trace, and the copy is thrown "
           "away when the function returns, so the real model never changes. There is no "
           "error: the loss is bit-identical every step. `nnx.jit` propagates the updates "
           "back into the modules.",
           "Apply the fix: nnx.jit", _frozen_pitfall, _frozen_fix,
           setup=_KARATE, fix_setup=_KARATE.replace(mode="nnx.jit")),
    Lesson(2, "frozen-dropout", "Frozen dropout: one mask reused every step",
           "The masks below: under jax.jit every draw drops the same units.",
           "Dropout draws its mask from an RNG stream whose counter lives in the module. "
           "Under plain `jax.jit` the counter is advanced on the traced copy and dropped, so "
           "every step starts from the same key and drops the same units — the model "
           "trains (if at all) on one fixed sub-network. Under `nnx.jit` the counter moves "
           "and each step gets a fresh mask.",
           "Apply the fix: nnx.jit", _dropout_pitfall, _dropout_fix,
           setup=_KARATE.replace(dropout=0.5),
           fix_setup=_KARATE.replace(dropout=0.5, mode="nnx.jit")),
    Lesson(3, "frozen-batchnorm", "Frozen BatchNorm running statistics",
           "The running mean and variance of the first BatchNorm: still 0 and 1.",
           "BatchNorm keeps running averages of the batch statistics for evaluation, "
           "updated in place on every training call. Under plain `jax.jit` those in-place "
           "updates happen on a traced copy and vanish, so evaluation mode normalises with "
           "the initial zeros and ones. With `nnx.jit` the statistics follow the data.",
           "Apply the fix: nnx.jit", _bn_pitfall, _bn_fix,
           setup=_KARATE.replace(batch_norm=True, norm="batch"),
           fix_setup=_KARATE.replace(batch_norm=True, norm="batch", mode="nnx.jit")),
    Lesson(4, "functional-loop", "The functional loop, and the stale-object window",
           "The parameter count below: the Python model still holds its initial weights.",
           "The functional loop splits the model once with `nnx.split`, and a pure "
           "`jax.jit` step merges, updates and returns the new state — a correct fix for "
           "frozen training that also skips nnx.jit's per-call graph walk. But the new "
           "values live only in the returned `state`: until `nnx.update(model, state)` the "
           "Python objects are stale, so evaluating or saving them silently uses old weights.",
           "Apply the fix: nnx.update", _functional_pitfall, _functional_fix,
           setup=_KARATE.replace(mode="functional"),
           fix_setup=_KARATE.replace(mode="functional")),
    Lesson(5, "overhead", "nnx.jit's per-call overhead: tiny vs large graph",
           "The step times: on the tiny graph nnx.jit costs several times the functional "
           "loop; on the large graph the gap shrinks.",
           "Every `nnx.jit` call walks the module graph in Python to find and flatten its "
           "state, then writes the updates back. On a 34-node graph the compiled compute is "
           "microseconds, so that walk dominates; on a large graph it disappears in the "
           "compute. The functional loop and `nnx.cached_partial` skip the walk.",
           "Apply the fix: functional / cached_partial", _overhead_pitfall, _overhead_fix,
           setup=_KARATE.replace(mode="nnx.jit"),
           fix_setup=_KARATE.replace(mode="functional")),
    Lesson(6, "pool-size", "Global pooling needs a static size under a trace",
           "The error message: the number of graphs cannot come from a traced array.",
           "Global pooling returns one row per graph, so its output shape depends on how "
           "many graphs the batch holds. Eagerly that is read from `max(batch) + 1`; under "
           "a trace the batch vector has no values, only a shape. Pass `size=` (a Python "
           "int) and the output shape is known when tracing.",
           "Apply the fix: pass size=", _pool_pitfall, _pool_fix),
    Lesson(7, "norm-batch-size", "GraphNorm / graph-mode LayerNorm need a static batch size",
           "The error message naming num_graphs.",
           "GraphNorm and `LayerNorm(mode='graph')` compute statistics per graph, one "
           "segment each, and the segment count must be a static number under a trace. "
           "Pass `num_graphs=` from the batch (gnncore's `Batch` keeps it as a Python int); "
           "the explorer's graph-classification runs do exactly that.",
           "Apply the fix: pass num_graphs=", _norm_pitfall, _norm_fix),
    Lesson(8, "dynamic-shapes", "Data-dependent shapes: TopK selection and coalesce",
           "The two errors: boolean selection and coalesce cannot be traced.",
           "XLA compiles for fixed shapes, so a traced function cannot return an array "
           "whose length depends on its inputs' values — like the nodes above a score "
           "threshold or the edges left after merging duplicates. Keep a static number of "
           "slots with a mask (TopK with k per graph) and do one-off clean-ups such as "
           "`coalesce` eagerly before jit.",
           "Apply the fix: static slots + mask", _shapes_pitfall, _shapes_fix),
    Lesson(9, "gcn-cached", "GCN with cached=True needs an eager precompute",
           "The errors: an empty cache, and a precompute refused inside the trace.",
           "`cached=True` reuses the symmetric normalisation of a graph that never changes. "
           "Filling the cache during a trace would store tracers in the module — values "
           "that do not exist outside the trace. Compute it once, eagerly, with "
           "`precompute_norm` before the first compiled call.",
           "Apply the fix: precompute_norm eagerly", _cached_pitfall, _cached_fix),
    Lesson(10, "retracing", "Retracing on new shapes, and bucket padding",
           "The retrace counter and the per-step times: every edit compiles again.",
           "A compiled step is cached per input shape. Adding an edge changes the edge "
           "count, so the next step traces and compiles again — hundreds of milliseconds "
           "for microseconds of work. Padding nodes and edges up to power-of-two buckets "
           "(with masks) keeps the shapes fixed while the graph changes inside a bucket.",
           "Apply the fix: bucket padding", _retrace_pitfall, _retrace_fix,
           setup=_KARATE.replace(mode="nnx.jit"),
           fix_setup=_KARATE.replace(mode="nnx.jit", bucket_padding=True)),
    Lesson(11, "timing", "Timing without block_until_ready measures only dispatch",
           "The two clocks side by side: the naive one is far too fast.",
           "JAX dispatches work asynchronously: a compiled call returns as soon as the work "
           "is queued, with a future for the result. A clock stopped right after the call "
           "measures Python dispatch, not compute. Call `jax.block_until_ready` on the "
           "result (or read it back) before stopping the clock.",
           "Apply the fix: block_until_ready", _timing_pitfall, _timing_fix,
           setup=_KARATE.replace(mode="nnx.jit")),
)


def find(key: str) -> Lesson | None:
    """A lesson by key (``frozen-params``) or number (``1``); ``None`` if unknown."""
    key = str(key).strip().lower()
    for lesson in LESSONS:
        if key in (lesson.key, str(lesson.number)):
            return lesson
    return None
