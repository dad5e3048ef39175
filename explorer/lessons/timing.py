"""Lesson 11: Timing without block_until_ready measures only dispatch."""

from __future__ import annotations

import time

import jax

from explorer.engine import Run
from explorer.lessons import common
from explorer.lessons.base import Lesson, Outcome
from explorer.lessons.common import KARATE, ROUNDS, Timing, large_graph

STEPS = 8  # steps per clock and round

NAIVE_CODE = ("start = time.perf_counter()\nfor _ in range(steps):\n"
              "    loss = train_step(model, optimizer, batch)\n"
              "# stops when the work is queued, not done\n"
              "elapsed = time.perf_counter() - start")
SYNCED_CODE = ("start = time.perf_counter()\nfor _ in range(steps):\n"
               "    loss = train_step(model, optimizer, batch)\n"
               "    jax.block_until_ready(loss)\nelapsed = time.perf_counter() - start")


def _measure(lesson: Lesson, rounds: int = ROUNDS) -> dict:
    """Both clocks on one run, in turn, ``ROUNDS`` times: ms per step."""
    num_nodes = common.LARGE_NODES
    run = Run(lesson.setup.replace(dropout=0.0), large_graph(num_nodes))
    jax.block_until_ready(run.stepper(run.inputs))  # compile outside the measurement
    stepper, inputs = run.stepper, run.inputs
    clocks = {"naive": [], "synced": []}
    for _ in range(rounds):
        for name in clocks:
            start = time.perf_counter()
            for _ in range(STEPS):
                loss = stepper(inputs)
                if name == "synced":
                    jax.block_until_ready(loss)
            clocks[name].append(1e3 * (time.perf_counter() - start) / STEPS)
            jax.block_until_ready((loss, stepper.state))  # the naive clock's work, finished
    return {"nodes": num_nodes, "naive": Timing.of(clocks["naive"]),
            "synced": Timing.of(clocks["synced"])}


def _rows(m: dict, both: bool) -> tuple[dict, ...]:
    clocks = [("without block_until_ready", m["naive"])]
    if both:
        clocks.append(("with block_until_ready", m["synced"]))
    return tuple({"clock": name, "ms per step": round(t.median, 3),
                  "fastest–slowest round": f"{t.low:.3f}–{t.high:.3f}"} for name, t in clocks)


def _timing_pitfall(lesson, run, m):
    naive = m["naive"]
    return Outcome(
        "no block_until_ready (the pitfall)", f"{naive.median:.2f} ms?", False,
        f"Stopping the clock right after the call says {naive} per step on a "
        f"{m['nodes']:,}-node graph (the median of {ROUNDS} rounds, [fastest–slowest]): only the "
        "time to dispatch the work, because JAX returns before the device has finished.",
        rows=_rows(m, both=False), code=NAIVE_CODE)


def _timing_fix(lesson, run, m):
    naive, synced = m["naive"], m["synced"]
    if synced.overlaps(naive):
        summary = (f"Waiting for the result gives {synced} per step against {naive} for the "
                   "naive clock: no clear difference at this size (the rounds overlap), the "
                   "device keeps up with the dispatch.")
    else:
        summary = (f"Waiting for the result gives {synced} per step, {synced.times(naive)} "
                   f"what the naive clock says ({naive}, the same measurement as on the "
                   "left: the two clocks took turns).")
    return Outcome("block_until_ready (the fix)", f"{synced.median:.2f} ms", True, summary,
                   rows=_rows(m, both=True), code=SYNCED_CODE)


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
    measure=_measure,
    setup=KARATE.replace(mode="nnx.jit"),
)
