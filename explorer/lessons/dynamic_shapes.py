"""Lesson 8: Data-dependent shapes: TopK selection and coalesce."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from explorer.lessons.base import Lesson, Outcome
from explorer.lessons.common import (
    error_text,
    graph_batch,
)
from gnncore.pool import TopKPooling
from gnncore.utils import coalesce


def _shapes_pitfall(lesson, run):
    graphs, x, batch, edges = graph_batch()
    score = x @ jnp.linspace(-1.0, 1.0, x.shape[1])
    errors = []
    try:
        jax.jit(lambda x, s: x[s > 0])(x, score)
    except Exception as err:  # JAX's NonConcreteBooleanIndexError
        errors.append("x[score > 0] under jax.jit → " + error_text(err))
    doubled = jnp.concatenate([edges, edges], axis=1)  # every edge twice
    try:
        jax.jit(lambda e: coalesce(e)[0])(doubled)
    except ValueError as err:
        errors.append("coalesce(edge_index) under jax.jit → " + error_text(err))
    return Outcome(
        "boolean selection and coalesce under jax.jit", f"{len(errors)} ERRORS",
        False, "How many nodes pass a threshold, or how many edges stay after merging "
               "duplicates, depends on the values: a traced function cannot have an output "
               "whose shape depends on its inputs' values.", tuple(errors),
        code="# the output's length depends on the data\n"
             "jax.jit(lambda x, s: x[s > 0])(x, score)\n"
             "jax.jit(lambda e: coalesce(e)[0])(edge_index)")


def _shapes_fix(lesson, run):
    graphs, x, batch, edges = graph_batch()
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


LESSON = Lesson(
    title="Data-dependent shapes: TopK selection and coalesce",
    symptom="The two errors: boolean selection and coalesce cannot be traced.",
    explanation=("XLA compiles for fixed shapes, so a traced function cannot return an array "
                 "whose length depends on its inputs' values — like the nodes above a score "
                 "threshold or the edges left after merging duplicates. Keep a static number of "
                 "slots with a mask (TopK with k per graph) and do one-off clean-ups such as "
                 "`coalesce` eagerly before jit."),
    fix_label="Apply the fix: static slots + mask",
    pitfall=_shapes_pitfall,
    fix=_shapes_fix,
)
