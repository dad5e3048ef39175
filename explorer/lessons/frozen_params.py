"""Lesson 1: jax.jit around a mutating step: frozen training."""

from __future__ import annotations

from explorer.lessons.base import Lesson
from explorer.lessons.common import (
    JAX_JIT_CODE,
    KARATE,
    NNX_JIT_CODE,
    trained,
    training_outcome,
)


def _frozen_pitfall(lesson, run):
    return training_outcome(trained(lesson, lesson.setup, run), "jax.jit (the pitfall)",
                             JAX_JIT_CODE)


def _frozen_fix(lesson, run):
    return training_outcome(trained(lesson, lesson.fix_setup, run), "nnx.jit (the fix)",
                             NNX_JIT_CODE)


LESSON = Lesson(
    title="jax.jit around a mutating step: frozen training",
    symptom=("The loss chart is a flat line, the optimizer's step counter stays 0, and the "
             "parameter-change heatmap is blank."),
    explanation=("Plain `jax.jit` treats the NNX modules as inputs and traces a copy of their "
                 "state. The optimizer updates that copy inside the trace, and the copy is thrown "
                 "away when the function returns, so the real model never changes. There is no "
                 "error: the loss is bit-identical every step. `nnx.jit` propagates the updates "
                 "back into the modules."),
    fix_label="Apply the fix: nnx.jit",
    pitfall=_frozen_pitfall,
    fix=_frozen_fix,
    setup=KARATE,
    fix_setup=KARATE.replace(mode="nnx.jit"),
    trains_in_explorer=True,
)
