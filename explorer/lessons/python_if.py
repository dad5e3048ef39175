"""Lesson 13: A Python ``if`` on a traced value."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from explorer.lessons.base import Lesson, Outcome
from explorer.lessons.common import error_text

#: the two inputs, as plain numbers: JAX arrays made at import would start
#: JAX's backend while the app imports its lessons, before its first page
INPUTS = {"positive sum": (1.0, 2.0, -0.5), "negative sum": (-1.0, -2.0, 0.5)}


def _inputs() -> dict:
    return {name: jnp.array(values) for name, values in INPUTS.items()}


def clip_or_double(x):
    """Eager reference: double the values when their sum is positive, else clip at 0."""
    if x.sum() > 0:  # Python reads the value: fine eagerly, impossible under a trace
        return 2 * x
    return jnp.maximum(x, 0.0)


def _pitfall(lesson, run):
    try:
        jax.jit(clip_or_double)(_inputs()["positive sum"])
    except jax.errors.TracerBoolConversionError as err:
        eager = {name: clip_or_double(x).tolist() for name, x in _inputs().items()}
        return Outcome(
            "if x.sum() > 0 under jax.jit", type(err).__name__, False,
            "Under jax.jit, x is a tracer: it has a shape and a dtype but no values, so "
            "Python cannot decide which branch to take and JAX refuses: "
            f"{error_text(err)}",
            evidence=tuple(f"eagerly, {name} → {values}" for name, values in eager.items()),
            code="@jax.jit\ndef f(x):\n    if x.sum() > 0:  # needs a value\n"
                 "        return 2 * x\n    return jnp.maximum(x, 0.0)")
    return Outcome("if x.sum() > 0 under jax.jit", "NO ERROR", False,
                   "The traced call did not raise: this lesson's check is broken.")


@jax.jit
def with_where(x):
    return jnp.where(x.sum() > 0, 2 * x, jnp.maximum(x, 0.0))  # both branches, one chosen


@jax.jit
def with_cond(x):
    return lax.cond(x.sum() > 0, lambda v: 2 * v, lambda v: jnp.maximum(v, 0.0), x)


def _fix(lesson, run):
    rows = []
    same = True
    for name, x in _inputs().items():
        eager, where, cond = clip_or_double(x), with_where(x), with_cond(x)
        same &= bool(jnp.array_equal(eager, where) and jnp.array_equal(eager, cond))
        rows.append({"input": name, "eager": str(eager.tolist()),
                     "jnp.where": str(where.tolist()), "lax.cond": str(cond.tolist())})
    return Outcome(
        "jnp.where / lax.cond", "COMPILES" if same else "DIFFERS", same,
        "Both compile once and give the eager answer for either input: jnp.where computes "
        "both branches and picks elementwise; lax.cond compiles both and runs one at run "
        "time." + ("" if same else " (But they differ from the eager result here.)"),
        rows=tuple(rows),
        code="@jax.jit\ndef f(x):\n    return jnp.where(x.sum() > 0,\n"
             "                     2 * x, jnp.maximum(x, 0.0))\n\n"
             "# or run only one branch:\nlax.cond(x.sum() > 0, double, clip, x)")


LESSON = Lesson(
    title="A Python if on a traced value",
    symptom="The error: a traced array cannot be turned into True or False.",
    explanation=("Under `jax.jit` your function sees tracers, not numbers, so Python control "
                 "flow that reads a value (`if x.sum() > 0`) cannot run. JAX raises a "
                 "`TracerBoolConversionError` instead of guessing a branch. Write the choice as "
                 "data: `jnp.where` (both branches, picked elementwise) or `lax.cond` (one "
                 "branch, chosen at run time)."),
    fix_label="Apply the fix: jnp.where / lax.cond",
    pitfall=_pitfall,
    fix=_fix,
)
