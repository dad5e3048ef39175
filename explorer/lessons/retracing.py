"""Lesson 10: Retracing on new shapes, and bucket padding."""

from __future__ import annotations

import time

import jax
import numpy as np

from explorer import compile_cache
from explorer.config import RunConfig
from explorer.engine import Run
from explorer.lessons.base import Lesson, Outcome
from explorer.lessons.common import (
    KARATE,
)
from gnncore import Graph

EDITS = 3  # edges added one at a time after the first step: each is a new shape


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


def _retrace(lesson: Lesson, config: RunConfig, label: str, edits: int = EDITS) -> Outcome:
    """The training step alone (what the code beside it shows), on the graph
    and after each of ``edits`` added edges: does it trace again?"""
    run = Run(config)
    stepper, base = run.stepper, run.graph
    rows, losses = [], []

    def step(edges):
        cause, traces, reads = run.pending_retrace, run.trace_count, compile_cache.hits()
        start = time.perf_counter()
        loss = stepper(run.inputs)
        jax.block_until_ready((loss, stepper.state))
        wall = time.perf_counter() - start
        traced = run.trace_count > traces
        losses.append(float(loss))
        # the app's compilation cache may hold the program (an earlier run): then the
        # traced step reads it back instead of compiling it; the table says which
        rows.append({"step": len(rows) + 1, "edges": edges, "traced": "yes" if traced else "no",
                     "why": (cause or "first call") if traced else "-",
                     "compiled by": ("-" if not traced else "cache read"
                                     if compile_cache.hits() > reads else "XLA"),
                     "ms": round(1e3 * wall, 2)})

    step(base.num_edges)
    for i in range(1, edits + 1):
        g = _with_edges(base, i)
        run.set_graph(g)
        step(g.num_edges)
    by = [r["compiled by"] for r in rows if r["traced"] == "yes"]
    compiled = ("traced and compiled again" if "cache read" not in by else
                "traced again and read its program back from the compilation cache"
                if "XLA" not in by else
                f"traced again ({by.count('XLA')} compiled by XLA, {by.count('cache read')} "
                "read back from the compilation cache)")
    traced = [r for r in rows if r["traced"] == "yes"]
    hits = [r["ms"] for r in rows if r["traced"] == "no"]
    compile_ms = float(np.mean([r["ms"] for r in traced]))
    padded = config.bucket_padding
    summary = (f"{len(rows)} steps, {run.trace_count} trace{'s' if run.trace_count > 1 else ''}"
               + (f": the edges stay inside one padded bucket ({rows[0]['edges']} → "
                  f"{rows[-1]['edges']} real edges), so the compiled step is reused "
                  f"({np.median(hits):.2f} ms per cached step vs {compile_ms:.0f} ms for the "
                  "traced one)." if padded else
                  f": every added edge changed the edge count, so every step {compiled} "
                  f"({compile_ms:.0f} ms each on average)."))
    verdict = f"{run.trace_count} TRACE" + ("S" if run.trace_count > 1 else "")
    return Outcome(label, verdict, run.trace_count == 1, summary,
                   rows=tuple(rows), losses=tuple(losses),
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


LESSON = Lesson(
    title="Retracing on new shapes, and bucket padding",
    symptom="The retrace counter and the per-step times: every edit compiles again.",
    explanation=("A compiled step is cached per input shape. Adding an edge changes the edge "
                 "count, so the next step traces and compiles again — hundreds of milliseconds "
                 "for microseconds of work. Padding nodes and edges up to power-of-two buckets "
                 "(with masks) keeps the shapes fixed while the graph changes inside a bucket."),
    fix_label="Apply the fix: bucket padding",
    pitfall=_retrace_pitfall,
    fix=_retrace_fix,
    setup=KARATE.replace(mode="nnx.jit"),
    fix_setup=KARATE.replace(mode="nnx.jit", bucket_padding=True),
)
