"""Lesson 17: A benchmark that includes the first (compiling) call."""

from __future__ import annotations

import time

import jax
import numpy as np

from explorer import compile_cache
from explorer.lessons.base import Lesson, Outcome
from explorer.lessons.loop_of_tiny_jits import data, loss_fn

CALLS = 10


def _measure(lesson: Lesson, rounds: int = 1) -> dict:
    """A freshly jitted step, each call timed (synced), the first included
    (one series whatever ``rounds`` asks: its first call is the point)."""

    @jax.jit
    def step(p, x, y):  # new function object: its first call traces and compiles
        grads = jax.grad(loss_fn)(p, x, y)
        return jax.tree.map(lambda w, g: w - 0.05 * g, p, grads)

    x, y, p = data()
    times = []
    hits = compile_cache.hits()
    for _ in range(CALLS):
        start = time.perf_counter()
        p = jax.block_until_ready(step(p, x, y))
        times.append(1e3 * (time.perf_counter() - start))
    # the app's compilation cache may hold this program (from an earlier run): then
    # the first call traces and reads it back instead of compiling; say which
    return {"times": times, "cached": compile_cache.hits() > hits}


def _first_call(m) -> str:
    """What the first call did besides running."""
    return ("tracing, and reading the compiled program back from the compilation cache "
            "(a cold XLA compile takes longer)" if m["cached"] else
            "tracing and XLA compilation")


def _rows(m, first_too: bool) -> tuple[dict, ...]:
    first = "trace + cache read + run" if m["cached"] else "trace + compile + run"
    return tuple({"call": i + 1, "ms": round(t, 3), "note": first if i == 0 else ""}
                 for i, t in enumerate(m["times"]) if first_too or i)


def _pitfall(lesson, run, m):
    times = m["times"]
    mean = float(np.mean(times))
    return Outcome(
        "the mean over every call, the first included", f"{mean:.2f} ms?", False,
        f"Averaging all {CALLS} calls gives {mean:.2f} ms per step, but the first call alone "
        f"took {times[0]:.1f} ms ({_first_call(m)}) and the others "
        f"{np.median(times[1:]):.3f} ms: the average describes neither.",
        rows=_rows(m, True),
        code="start = time.perf_counter()\nfor _ in range(10):\n"
             "    p = jax.block_until_ready(step(p, x, y))\n"
             "mean = (time.perf_counter() - start) / 10")


def _fix(lesson, run, m):
    times = m["times"]
    first, steady = times[0], float(np.median(times[1:]))
    return Outcome(
        "warm up, then time the steady steps", f"{steady:.3f} ms", first > steady,
        f"Timed apart, the first call is {first:.1f} ms ({_first_call(m)}) and the steady step "
        f"{steady:.3f} ms (the median of the {CALLS - 1} later calls; the same calls as on "
        f"the left): report both, since the first call is {first / steady:.0f}× a step.",
        rows=_rows(m, True),
        code="jax.block_until_ready(step(p, x, y))  # warm-up: compiles\n"
             "times = []\nfor _ in range(9):\n    start = time.perf_counter()\n"
             "    p = jax.block_until_ready(step(p, x, y))\n"
             "    times.append(time.perf_counter() - start)\nsteady = median(times)")


LESSON = Lesson(
    title="A benchmark that includes the first (compiling) call",
    symptom="The per-call times: the first is hundreds of times the rest.",
    explanation=("The first call of a jitted function traces it and compiles it with XLA; "
                 "only later calls run the compiled program alone. A benchmark that averages "
                 "over every call mixes a one-off compile with the steady step and describes "
                 "neither. Warm up first, then time the steady calls (and report the compile "
                 "time on its own)."),
    fix_label="Apply the fix: warm up, then time",
    pitfall=_pitfall,
    fix=_fix,
    measure=_measure,
)
