"""Lesson 7: GraphNorm / graph-mode LayerNorm need a static batch size."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from flax import nnx

from explorer.lessons.base import Lesson, Outcome
from explorer.lessons.common import (
    error_text,
    graph_batch,
)
from gnncore.norm import GraphNorm, LayerNorm


def _norm_pitfall(lesson, run):
    graphs, x, batch, _ = graph_batch()
    errors = {}
    for name, norm in (("GraphNorm", GraphNorm(x.shape[1], rngs=nnx.Rngs(0))),
                       ("LayerNorm(mode='graph')", LayerNorm(x.shape[1], mode="graph"))):
        try:
            nnx.jit(lambda n, x, b: n(x, b))(norm, x, batch)
        except ValueError as err:
            errors[name] = error_text(err)
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
    graphs, x, batch, _ = graph_batch()
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


LESSON = Lesson(
    title="GraphNorm / graph-mode LayerNorm need a static batch size",
    symptom="The error message naming num_graphs.",
    explanation=("GraphNorm and `LayerNorm(mode='graph')` compute statistics per graph, one "
                 "segment each, and the segment count must be a static number under a trace. "
                 "Pass `num_graphs=` from the batch (gnncore's `Batch` keeps it as a Python int); "
                 "the explorer's graph-classification runs do exactly that."),
    fix_label="Apply the fix: pass num_graphs=",
    pitfall=_norm_pitfall,
    fix=_norm_fix,
)
