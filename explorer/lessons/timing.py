"""Lesson 11: Timing without block_until_ready measures only dispatch."""

from __future__ import annotations

from explorer.engine import Run
from explorer.lessons import common
from explorer.lessons.base import Lesson, Outcome
from explorer.lessons.common import (
    KARATE,
    large_graph,
)


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
    return _timing(lesson, common.LARGE_NODES, synced=False)


def _timing_fix(lesson, run):
    return _timing(lesson, common.LARGE_NODES, synced=True)


LESSON = Lesson(
    title="Timing without block_until_ready measures only dispatch",
    symptom="The two clocks side by side: the naive one is far too fast.",
    explanation=("JAX dispatches work asynchronously: a compiled call returns as soon as the work "
                 "is queued, with a future for the result. A clock stopped right after the call "
                 "measures Python dispatch, not compute. Call `jax.block_until_ready` on the "
                 "result (or read it back) before stopping the clock."),
    fix_label="Apply the fix: block_until_ready",
    pitfall=_timing_pitfall,
    fix=_timing_fix,
    setup=KARATE.replace(mode="nnx.jit"),
)
