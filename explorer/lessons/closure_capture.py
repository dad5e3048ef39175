"""Lesson 15: A model captured by closure versus passed as an argument."""

from __future__ import annotations

import jax
import optax
from flax import nnx

from explorer.lessons.base import Lesson, Outcome
from explorer.lessons.common import error_text, loss_outcome
from explorer.lessons.module_inside_jit import data, loss_fn

STEPS = 5


def _setup():
    model = nnx.Linear(4, 1, rngs=nnx.Rngs(0))
    return model, nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param)


def _train_step(model, optimizer, x, y):
    loss, grads = nnx.value_and_grad(loss_fn)(model, x, y)
    optimizer.update(model, grads)
    return loss


def _pitfall(lesson, run):
    model, optimizer = _setup()
    captured = jax.jit(lambda x, y: _train_step(model, optimizer, x, y))  # a closure
    try:
        captured(*data())
        error = "no error"
    except ValueError as err:
        error = error_text(err).split(", got ")[0] + "."  # the rest is a repr of the node
    model, optimizer = _setup()
    passed = jax.jit(_train_step)  # passed as arguments: no error, and nothing learned
    losses = tuple(float(passed(model, optimizer, *data())) for _ in range(STEPS))
    return Outcome(
        "captured by closure (loud) / passed to jax.jit (silent)", "ValueError", False,
        "Captured by the jitted function's closure, the model is a graph node of another "
        f"trace level, and Flax refuses to update it: {error} Passed as an argument to "
        f"plain jax.jit instead, nothing fails and nothing is learned: the loss reads "
        f"{losses[0]:.6f} {STEPS} times (lesson 1).",
        evidence=(f"closure: {error}",
                  f"argument of jax.jit: {len(set(losses))} distinct loss over {STEPS} calls"),
        losses=losses,
        code="# captured by the closure: Flax raises\nstep = jax.jit(lambda x, y:\n"
             "    train_step(model, optimizer, x, y))\n\n"
             "# passed to plain jax.jit: frozen, silently\nstep = jax.jit(train_step)")


def _fix(lesson, run):
    model, optimizer = _setup()
    step = nnx.jit(_train_step)
    losses = tuple(float(step(model, optimizer, *data())) for _ in range(STEPS))
    return loss_outcome(
        "passed as arguments to nnx.jit", losses,
        "Passed as arguments to nnx.jit, model and optimizer go into the trace and their "
        "updates come back out",
        code="step = nnx.jit(train_step)\nloss = step(model, optimizer, x, y)")


LESSON = Lesson(
    title="A model captured by closure, or passed to jax.jit",
    symptom="The error of the closure, and the flat loss of the plain jax.jit call.",
    explanation=("A jitted function should get the modules it updates as arguments. Captured "
                 "by a closure, they belong to the code outside the trace, and Flax raises "
                 "instead of updating them. Passed to plain `jax.jit` they are copied in and "
                 "the copies' updates are dropped without an error. Pass them to `nnx.jit` "
                 "(or split and thread the state)."),
    fix_label="Apply the fix: pass them to nnx.jit",
    pitfall=_pitfall,
    fix=_fix,
)
