"""What several lessons share: the karate setup, the code they show, a small
batch of graphs, a large random graph, and how a trained run is reported."""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp
import numpy as np

from explorer.config import RunConfig
from explorer.engine import Run
from explorer.lessons.base import Lesson, Outcome
from explorer.sources import load_graph_dataset
from gnncore import Batch, Graph

LARGE_NODES = 20_000  # the "large graph" of the overhead and timing lessons
LARGE_DEGREE = 10

#: the setup of the lessons that train: karate, no dropout, the pitfall's mode
KARATE = RunConfig(graph="karate", dropout=0.0, mode="jax.jit")

JAX_JIT_CODE = """\
# plain jax.jit around a mutating step
@jax.jit
def train_step(model, optimizer, batch):
    grads = nnx.grad(loss_fn)(model, batch)
    # updates a traced copy of the state...
    optimizer.update(model, grads)
    # ...which is thrown away on return
    return loss_fn(model, batch)"""

NNX_JIT_CODE = """\
# nnx.jit carries NNX state updates back out
@nnx.jit
def train_step(model, optimizer, batch):
    grads = nnx.grad(loss_fn)(model, batch)
    optimizer.update(model, grads)
    return loss_fn(model, batch)"""

FUNCTIONAL_CODE = """\
graphdef, state = nnx.split((model, optimizer))

@jax.jit
def train_step(state, batch):
    m, opt = nnx.merge(graphdef, state)
    loss, grads = nnx.value_and_grad(loss_fn)(m, batch)
    opt.update(m, grads)
    return nnx.state((m, opt)), loss

for _ in range(steps):
    state, loss = train_step(state, batch)"""


def trained(lesson: Lesson, config: RunConfig, run: Run | None) -> Run:
    """``run`` if the explorer trained it, else a new run of ``config`` trained
    for the lesson's steps."""
    if run is None:
        run = Run(config)
        run.train(lesson.steps)
    return run


def error_text(err: Exception) -> str:
    """The first line of an exception's message, with its type."""
    text = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return f"{type(err).__name__}: {text}"


def opt_step(run: Run) -> int:
    run.sync()
    return int(run.optimizer.step[...])


def training_outcome(run: Run, label: str, code: str, extra=()) -> Outcome:
    """Verdict, loss curve and the optimizer's step of a trained run."""
    report = run.audit()
    losses = tuple(r.loss for r in run.history)
    params = [c for c in report.changes if c.kind == "parameter"]
    moved, total = sum(c.changed for c in params), len(params)
    step = opt_step(run)
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


def loss_outcome(label: str, losses: tuple[float, ...], how: str, code: str) -> Outcome:
    """TRAINING when the loss fell over the calls (else NOT FALLING): ``how``
    starts the sentence that gives the two numbers."""
    falls = losses[-1] < losses[0]
    return Outcome(label, "TRAINING" if falls else "NOT FALLING", falls,
                   f"{how}: the loss {'falls' if falls else 'does not fall'} from "
                   f"{losses[0]:.4f} to {losses[-1]:.4f} in {len(losses)} calls.",
                   losses=losses, code=code)


def graph_batch(num: int = 4):
    """``(graphs, x, batch, edge_index)`` of the first ``num`` triangle-dataset
    graphs as one exact (unpadded) batch."""
    graphs, _ = load_graph_dataset("triangle", features="degree_one_hot", seed=0)
    graphs = graphs[:num]
    b = Batch.from_graphs(graphs, pad=False)
    return graphs, b.x, b.batch, jnp.asarray(b.edge_index)


def large_graph(num_nodes: int, degree: int = LARGE_DEGREE, *, features: int = 16,
                classes: int = 4, seed: int = 0) -> Graph:
    """A random graph for the timing lessons (labels random; only speed matters)."""
    rng = np.random.default_rng(seed)
    edges = rng.integers(0, num_nodes, size=(2, num_nodes * degree))
    y = rng.integers(0, classes, size=num_nodes)
    train = np.zeros(num_nodes, bool)
    train[rng.choice(num_nodes, size=min(num_nodes, 20 * classes), replace=False)] = True
    return Graph.from_arrays(edges, rng.standard_normal((num_nodes, features)), y=y,
                             train_mask=train, val_mask=np.zeros(num_nodes, bool),
                             test_mask=~train)


#: timed rounds of the lessons that time something; each round times every
#: contestant once, in turn, so that a slow patch of a noisy machine hits all
ROUNDS = 5


@dataclasses.dataclass(frozen=True)
class Timing:
    """A time measured in several rounds: the median and the spread (the
    fastest and the slowest round), in milliseconds."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, rounds_ms) -> Timing:
        values = [float(v) for v in rounds_ms]
        return cls(float(np.median(values)), min(values), max(values))

    def __str__(self) -> str:
        digits = 2 if self.median >= 1 else 3
        return f"{self.median:.{digits}f} ms [{self.low:.{digits}f}–{self.high:.{digits}f}]"

    def faster_than(self, other: Timing) -> bool:
        """Faster beyond the noise: even its slowest round beats the other's fastest."""
        return self.high < other.low

    def overlaps(self, other: Timing) -> bool:
        return not (self.faster_than(other) or other.faster_than(self))

    def times(self, other: Timing) -> str:
        """``2.4×`` (this one's median over the other's)."""
        ratio = self.median / other.median if other.median else math.inf
        return f"{ratio:.1f}×" if ratio >= 1.95 else f"{ratio:.2f}×"
