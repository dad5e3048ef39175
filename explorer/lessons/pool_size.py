"""Lesson 6: Global pooling needs a static size under a trace."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from explorer.lessons.base import Lesson, Outcome
from explorer.lessons.common import (
    error_text,
    graph_batch,
)
from gnncore.pool import global_mean_pool


def _pool_pitfall(lesson, run):
    graphs, x, batch, _ = graph_batch()
    try:
        jax.jit(lambda x, b: global_mean_pool(x, b))(x, batch)
    except ValueError as err:
        eager = global_mean_pool(x, batch)
        return Outcome(
            "global_mean_pool(x, batch) under jax.jit", "ValueError", False,
            "Under jax.jit the number of graphs would have to be read from the traced "
            f"batch vector, so gnncore refuses: {error_text(err)}",
            (f"eagerly the same call works and returns shape {tuple(eager.shape)}: it "
             "reads max(batch) + 1 from the device, a host sync",),
            code="pool = jax.jit(\n    lambda x, b: global_mean_pool(x, b))\n"
                 "pooled = pool(x, batch)")
    return Outcome("global_mean_pool(x, batch) under jax.jit", "NO ERROR", False,
                   "The traced call did not raise: this lesson's check is broken.")


def _pool_fix(lesson, run):
    graphs, x, batch, _ = graph_batch()
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


LESSON = Lesson(
    title="Global pooling needs a static size under a trace",
    symptom="The error message: the number of graphs cannot come from a traced array.",
    explanation=("Global pooling returns one row per graph, so its output shape depends on how "
                 "many graphs the batch holds. Eagerly that is read from `max(batch) + 1`; under "
                 "a trace the batch vector has no values, only a shape. Pass `size=` (a Python "
                 "int) and the output shape is known when tracing."),
    fix_label="Apply the fix: pass size=",
    pitfall=_pool_pitfall,
    fix=_pool_fix,
)
