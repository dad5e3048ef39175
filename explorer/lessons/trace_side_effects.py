"""Lesson 12: Python side effects inside a jitted function run at trace time only."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from explorer.lessons.base import Lesson, Outcome

CALLS = 5


def _pitfall(lesson, run):
    log: list[str] = []

    @jax.jit
    def step(x):
        log.append(f"step ran with x of shape {x.shape}")  # a Python side effect
        return 2 * x

    x = jnp.arange(3.0)
    after = []
    for _ in range(CALLS):
        jax.block_until_ready(step(x))
        after.append(len(log))
    rows = tuple({"call": i + 1, "entries in the list": n} for i, n in enumerate(after))
    return Outcome(
        "list.append inside jax.jit", f"RAN {len(log)} OF {CALLS} CALLS", False,
        f"The function was called {CALLS} times, but the list holds {len(log)} entry: Python "
        "ran the body once, while tracing; every later call replays the compiled program, "
        "which has no list and no print in it.", rows=rows,
        evidence=(f"the entry: {log[0]!r}",),
        code="log = []\n\n@jax.jit\ndef step(x):\n    log.append('ran')  # runs when traced\n"
             "    return 2 * x\n\nfor _ in range(5):\n    step(x)\nlen(log)  # 1")


def _fix(lesson, run):
    log: list[float] = []

    @jax.jit
    def step(x):
        # a callback is part of the compiled program: it runs on every call
        jax.debug.callback(lambda total: log.append(float(total)), jnp.sum(x))
        return 2 * x

    x = jnp.arange(3.0)
    after = []
    for _ in range(CALLS):
        jax.block_until_ready(step(x))
        jax.effects_barrier()
        after.append(len(log))
    rows = tuple({"call": i + 1, "entries in the list": n} for i, n in enumerate(after))
    return Outcome(
        "jax.debug.callback (or return the value)", f"RAN {len(log)} OF {CALLS} CALLS",
        len(log) == CALLS,
        f"With jax.debug.callback the list grows on every call ({len(log)} entries after "
        f"{CALLS} calls): the callback is compiled into the program. jax.debug.print does "
        "the same for printing; returning a value from the step is the plainest fix.",
        rows=rows,
        code="@jax.jit\ndef step(x):\n    jax.debug.callback(\n"
             "        lambda t: log.append(float(t)), x.sum())\n    return 2 * x\n\n"
             "for _ in range(5):\n    step(x)\nlen(log)  # 5")


LESSON = Lesson(
    title="Side effects inside a jitted function run at trace time only",
    symptom="The list's length after each call: it stops growing after the first.",
    explanation=("`jax.jit` runs your Python function once, with tracers, to record what it "
                 "computes, and compiles that record. A `print`, an `append` to a list or a "
                 "counter in the body runs during that trace and is not part of the compiled "
                 "program, so later calls skip it. Use `jax.debug.print` / "
                 "`jax.debug.callback`, or return the value."),
    fix_label="Apply the fix: jax.debug.callback",
    pitfall=_pitfall,
    fix=_fix,
)
