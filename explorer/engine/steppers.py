"""The JIT modes: one *stepper* per way of running the training step.

Every mode wraps the same mutating NNX step ``train_step(model, optimizer,
inputs) -> loss`` (``explorer.engine.recipe``). Each stepper's ``make_*``
function, with the comment above it, is also what an exported script contains
for that mode, so the script's step is the code that ran. :data:`STEPPERS` is
the one table of modes: the config, CLI, UI, race, lessons and export read it.

Adding a mode means one new ``make_*`` function and :class:`Stepper` subclass
here, registered in :data:`STEPPERS`, plus its lesson text.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ClassVar

import jax
from flax import nnx

__all__ = ["STEPPERS", "Stepper", "stepper_for"]


# No compilation: every jax operation of the step is dispatched on its own, one
# at a time, every step. Simple and easy to debug, but the slowest.
def make_eager_step(train_step, model, optimizer):
    def step(inputs):
        return train_step(model, optimizer, inputs)

    return step


# nnx.jit understands NNX modules: it traces the step once, compiles it with
# XLA, and writes the updates the step makes to model and optimizer back into
# them after every call.
def make_nnx_jit_step(train_step, model, optimizer):
    jitted_step = nnx.jit(train_step)

    def step(inputs):
        return jitted_step(model, optimizer, inputs)

    return step


# nnx.jit in tree mode (graph=False, Flax 0.12): model and optimizer go in and
# out as plain pytrees, so each call skips the Python walk over their object
# graph that default nnx.jit repeats every call; the updates still flow back
# into them. (Tree mode needs modules without shared references or cycles.)
def make_nnx_jit_tree_step(train_step, model, optimizer):
    jitted_step = nnx.jit(train_step, graph=False)

    def step(inputs):
        return jitted_step(model, optimizer, inputs)

    return step


# THE PITFALL, kept on purpose. Plain jax.jit sees model and optimizer as
# pytrees: inside the trace it updates *copies* of their variables, and nothing
# flows back out. No error is raised, but after every step the model still
# holds its initial weights (and the same dropout key): the loss never goes
# down, training is frozen.
#
# The fix: use nnx.jit instead (it propagates NNX state updates):
#     jitted_step = nnx.jit(train_step)
# or the functional pattern: graphdef, state = nnx.split((model, optimizer)),
# a jax.jit step that nnx.merge's, calls train_step and returns
# nnx.state((model, optimizer)), the loop threading the state, and
# nnx.update((model, optimizer), state) at the end.
def make_jax_jit_step(train_step, model, optimizer):
    jitted_step = jax.jit(train_step)

    def step(inputs):
        return jitted_step(model, optimizer, inputs)

    return step


# nnx.cached_partial binds model and optimizer to an nnx.jit step once, and
# caches the traversal of their object graph: each call skips the Python work
# of flattening the modules, which nnx.jit otherwise repeats every call.
def make_cached_partial_step(train_step, model, optimizer):
    return nnx.cached_partial(nnx.jit(train_step), model, optimizer)


# The functional pattern. The modules are split once into a static graphdef and
# a pytree of arrays (state): graphdef, state = nnx.split((model, optimizer)).
# The step is a pure function under plain jax.jit: it rebuilds the modules with
# nnx.merge, updates them, and returns the new state, which the loop threads
# from step to step. Until nnx.update((model, optimizer), state), `model`
# itself is stale.
def make_functional_step(train_step, graphdef):
    @jax.jit
    def functional_step(state, inputs):
        model, optimizer = nnx.merge(graphdef, state)
        loss = train_step(model, optimizer, inputs)
        return nnx.state((model, optimizer)), loss

    return functional_step


class Stepper:
    """How one JIT mode runs the training step of a run.

    Arguments:
        train_step: the mutating step ``(model, optimizer, inputs) -> loss``.
        model, optimizer: the run's modules.

    Call it with the step's inputs to run one step; it returns the loss (not
    waited for). In the script an export writes, the mode's ``make`` function
    appears as it is, built by :attr:`script_build` and called by
    :attr:`script_call`.
    """

    mode: ClassVar[str]
    summary: ClassVar[str]  # one line: what the mode does
    compiled: ClassVar[bool] = True  # whether it traces and compiles (eager: no)
    make: ClassVar[Callable]
    script_build: ClassVar[str]  # the script's line that builds the step
    script_call: ClassVar[str] = "loss = step(inputs)"
    script_finish: ClassVar[str] = ""  # after the loop
    script_model: ClassVar[str] = "model"  # the model as of the last step, in the loop
    #: how the mode compiles a function of NNX modules (a lesson calls a model's
    #: own layer the way the mode calls the step)
    jit: ClassVar[Callable] = staticmethod(nnx.jit)

    def __init__(self, train_step, model, optimizer):
        self.train_step, self.model, self.optimizer = train_step, model, optimizer
        self.step = type(self).make(train_step, model, optimizer)

    def __call__(self, inputs):
        return self.step(inputs)

    @property
    def state(self) -> Any:
        """The state a mode threads outside the modules (``None``: the modules
        hold it all)."""
        return None

    def sync(self) -> None:
        """Write a threaded state back into the modules (a no-op unless the mode
        threads one)."""

    def checkpoint(self) -> Any:
        """A copy of the trainable state, for :meth:`restore` after a bad step."""
        return jax.tree.map(lambda a: a, nnx.state((self.model, self.optimizer)))

    def restore(self, state) -> None:
        nnx.update((self.model, self.optimizer), state)

    def lowerable(self, inputs) -> tuple[Callable, tuple] | None:
        """``(fresh jitted step, its arguments)`` for JAX's ahead-of-time API:
        fresh, so that timing it neither hits nor fills the live step's cache.
        ``None`` when the mode compiles nothing."""
        train_step = self.train_step

        def fresh(*args):  # a new function object: JAX's trace cache misses
            return train_step(*args)

        return nnx.jit(fresh), (self.model, self.optimizer, inputs)


class Eager(Stepper):
    mode = "eager"
    summary = "No compilation: every operation is dispatched one at a time."
    compiled = False
    jit = staticmethod(lambda fn: fn)
    make = staticmethod(make_eager_step)
    script_build = "step = make_eager_step(train_step, model, optimizer)"

    def lowerable(self, inputs):
        return None


class NnxJit(Stepper):
    mode = "nnx.jit"
    summary = "The step wrapped in nnx.jit: NNX state updates propagate out."
    make = staticmethod(make_nnx_jit_step)
    script_build = "step = make_nnx_jit_step(train_step, model, optimizer)"


class NnxJitTree(Stepper):
    mode = "nnx.jit(graph=False)"
    summary = ("nnx.jit in tree mode: the modules go in as pytrees, no per-call graph walk; "
               "updates propagate out.")
    jit = staticmethod(functools.partial(nnx.jit, graph=False))
    make = staticmethod(make_nnx_jit_tree_step)
    script_build = "step = make_nnx_jit_tree_step(train_step, model, optimizer)"

    def lowerable(self, inputs):
        train_step = self.train_step

        def fresh(*args):
            return train_step(*args)

        return nnx.jit(fresh, graph=False), (self.model, self.optimizer, inputs)


class JaxJit(Stepper):
    mode = "jax.jit"
    summary = ("The same mutating step under plain jax.jit: updates are silently lost "
               "(frozen training).")
    jit = staticmethod(jax.jit)
    make = staticmethod(make_jax_jit_step)
    script_build = "step = make_jax_jit_step(train_step, model, optimizer)"

    def lowerable(self, inputs):
        train_step = self.train_step

        def fresh(*args):
            return train_step(*args)

        return jax.jit(fresh), (self.model, self.optimizer, inputs)


class CachedPartial(Stepper):
    mode = "cached_partial"
    summary = "nnx.cached_partial over an nnx.jit step: graph traversal cached across calls."
    make = staticmethod(make_cached_partial_step)
    script_build = "step = make_cached_partial_step(train_step, model, optimizer)"


class Functional(Stepper):
    mode = "functional"
    summary = ("nnx.split once, a jax.jit step that merges, updates and returns the state, "
               "threaded by the loop.")
    make = staticmethod(make_functional_step)
    script_build = ("graphdef, state = nnx.split((model, optimizer))\n"
                    "functional_step = make_functional_step(train_step, graphdef)")
    script_call = "state, loss = functional_step(state, inputs)"
    script_finish = ("# Write the threaded state back into the modules: only now does `model`\n"
                     "# hold the trained weights.\n"
                     "nnx.update((model, optimizer), state)")
    script_model = "nnx.merge(graphdef, state)[0]"

    def __init__(self, train_step, model, optimizer):
        self.train_step, self.model, self.optimizer = train_step, model, optimizer
        graphdef, self._state = nnx.split((model, optimizer))
        self.step = make_functional_step(train_step, graphdef)

    def __call__(self, inputs):
        self._state, loss = self.step(self._state, inputs)
        return loss

    @property
    def state(self):
        return self._state

    def sync(self) -> None:
        nnx.update((self.model, self.optimizer), self._state)

    def checkpoint(self):
        return self._state  # immutable arrays: the state itself is the copy

    def restore(self, state) -> None:
        self._state = state
        super().restore(state)

    def lowerable(self, inputs):
        pure = self.step.__wrapped__

        def fresh(*args):
            return pure(*args)

        return jax.jit(fresh), (self._state, inputs)


#: every JIT mode, by name, in the order the UI lists them
STEPPERS: dict[str, type[Stepper]] = {s.mode: s for s in (
    Eager, NnxJit, JaxJit, Functional, CachedPartial, NnxJitTree)}


def stepper_for(mode: str) -> type[Stepper]:
    if mode not in STEPPERS:
        raise ValueError(f"unknown mode {mode!r}; choose one of {list(STEPPERS)}")
    return STEPPERS[mode]
