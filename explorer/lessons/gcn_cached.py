"""Lesson 9: GCN with cached=True needs an eager precompute."""

from __future__ import annotations

import jax.numpy as jnp
from flax import nnx

from explorer.lessons.base import Lesson, Outcome
from explorer.lessons.common import (
    error_text,
)
from explorer.sources import load_graph
from gnncore.conv.gcn import GCNConv


def _cached_data():
    g = load_graph("karate", features="one_hot")
    return g, GCNConv(g.num_features, 8, cached=True, rngs=nnx.Rngs(0))


def _cached_pitfall(lesson, run):
    g, conv = _cached_data()
    errors = []
    try:
        nnx.jit(lambda c, x, e: c(x, e))(conv, g.x, g.edge_index)
    except ValueError as err:
        errors.append("first call under nnx.jit → " + error_text(err))

    def fill_then_call(c, x, e):
        c.precompute_norm(e, x.shape[0])
        return c(x, e)

    try:
        nnx.jit(fill_then_call)(conv, g.x, g.edge_index)
    except ValueError as err:
        errors.append("precompute_norm inside nnx.jit → " + error_text(err))
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


LESSON = Lesson(
    title="GCN with cached=True needs an eager precompute",
    symptom="The errors: an empty cache, and a precompute refused inside the trace.",
    explanation=("`cached=True` reuses the symmetric normalisation of a graph that never changes. "
                 "Filling the cache during a trace would store tracers in the module — values "
                 "that do not exist outside the trace. Compute it once, eagerly, with "
                 "`precompute_norm` before the first compiled call."),
    fix_label="Apply the fix: precompute_norm eagerly",
    pitfall=_cached_pitfall,
    fix=_cached_fix,
)
