"""The JIT modes: one *stepper* per way of running the training step.

Every mode wraps the same mutating NNX step ``train_step(model, optimizer,
inputs) -> loss`` (``explorer.engine.recipe``). Each stepper's ``make_*``
function, with the comment above it, is also what an exported script contains
for that mode, so the script's step is the code that ran. :data:`STEPPERS` is
the one table of modes: the config, CLI, UI, race, lessons and export read it.

Runs that share compiled steps (the app's sessions: ``explorer.engine.compiles``)
build the jitted part once per server and bind each run's modules to it
(:meth:`Stepper.bind`, the same call the ``make_*`` function's step makes):
for the modes that jit the mutating step, the jitted function is
:attr:`Stepper.jit` of it; the functional and scan modes share what their
``make_*`` function returns, per graphdef.

Adding a mode means one new ``make_*`` function and :class:`Stepper` subclass
here, registered in :data:`STEPPERS`, plus its lesson text.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from explorer.lazy import lazy

if TYPE_CHECKING:
    from explorer.engine.compiles import SharedCompiles

# loaded by the first step a stepper makes: the table of modes (names,
# summaries, settings) is read by the app's first page without JAX
# (explorer/lazy.py)
jax = lazy("jax")
nnx = lazy("flax.nnx")
audit = lazy("explorer.audit")
recipe = lazy("explorer.engine.recipe")

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


# The scan mode: K training steps in ONE compiled call. It is the functional
# pattern (split once, a pure step that merges, updates and returns the state),
# looped K times by jax.lax.scan inside one jax.jit: one dispatch from Python and
# one wait per K steps, and XLA compiles the whole loop. The loop cannot stop to
# report after each step, so whatever is wanted per step is computed inside it:
# `measure(before, after, inputs, targets)` sees each step's states, and its
# results come back stacked with the losses, one row per step. `steps` is
# static (it sizes the loop): each new length compiles anew, so a shorter last
# chunk compiles once more.
def make_scan_step(train_step, graphdef, measure):
    def scan_step(state, inputs, targets, steps):
        def one_step(state, _):
            # the merged modules share `state`'s variables and the step updates
            # them in place: measure gets a copy of the step's input state
            before = jax.tree.map(lambda a: a, state)
            model, optimizer = nnx.merge(graphdef, state)
            loss = train_step(model, optimizer, inputs)
            new_state = nnx.state((model, optimizer))
            return new_state, (loss, measure(before, new_state, inputs, targets))

        return jax.lax.scan(one_step, state, length=steps)

    return jax.jit(scan_step, static_argnames="steps")


# The accuracies of each step, measured inside the scan: the graphdef of an
# eval-mode copy (dropout off, batch norm on its running statistics) merged with
# the step's new state, then the pure evaluate. The same arrays with eval-mode
# behaviour: what evaluating the model right after that step gives.
def make_eval_measure(evaluate, model, optimizer):
    eval_copy = nnx.clone((model, optimizer))
    eval_copy[0].eval()
    eval_graphdef = nnx.graphdef(eval_copy)

    def accuracies(before, after, inputs, targets):
        eval_model, _ = nnx.merge(eval_graphdef, after)
        return evaluate(eval_model, inputs, targets)[2]

    return accuracies


def _bound(jitted_step, model, optimizer):
    def step(inputs):
        return jitted_step(model, optimizer, inputs)

    return step


class Stepper:
    """How one JIT mode runs the training step of a run.

    Arguments:
        train_step: the mutating step ``(model, optimizer, inputs) -> loss``.
        model, optimizer: the run's modules.
        settings: what :meth:`settings` reads from the run's config (none for
            most modes; the scan mode's length).

    ``shared``: a :class:`~explorer.engine.compiles.SharedCompiles` the
    jitted step comes from (and goes to), so that runs with the same shapes
    and settings compile it once; ``train_step`` must then be its
    ``train_step``. ``None``: the stepper compiles its own.

    Call it with the step's inputs to run one step; it returns the loss (not
    waited for). A mode that runs several steps per call (``steps_per_call >
    1``) is driven by :meth:`run_steps` instead. In the script an export
    writes, the mode's ``make`` function appears as it is, built by
    :attr:`script_build` and called by :attr:`script_call`.
    """

    mode: ClassVar[str]
    summary: ClassVar[str]  # one line: what the mode does
    compiled: ClassVar[bool] = True  # whether it traces and compiles (eager: no)
    make: ClassVar[Callable]
    script_build: ClassVar[str]  # the script's line that builds the step
    script_call: ClassVar[str] = "loss = step(inputs)"
    script_finish: ClassVar[str] = ""  # after the loop
    script_model: ClassVar[str] = "model"  # the model as of the last step, in the loop
    #: more engine functions the script copies (with their comments) after ``make``
    script_sources: ClassVar[tuple[Callable, ...]] = ()
    #: the script's whole training loop, for a mode that the default loop (one
    #: step per iteration, :attr:`script_call`) does not fit; ``None``: the default
    script_loop: ClassVar[str | None] = None
    #: how the mode compiles a function of NNX modules (a lesson calls a model's
    #: own layer the way the mode calls the step)
    @staticmethod
    def jit(fn, **options):
        return nnx.jit(fn, **options)
    #: why the compile-vs-run panel does not compare this mode with its state
    #: donated (``donate_argnums``); ``""``: it does (the state is an argument
    #: of a jax.jit call that returns its replacement)
    donation_note: ClassVar[str] = (
        "n/a: this mode hands the modules to nnx.jit, which writes the updates back into "
        "them; donation is compared where the state is a jax.jit argument that the call "
        "returns replaced (functional, scan)")
    #: training steps one call runs (the scan mode: its length K)
    steps_per_call: int = 1
    #: the step comes from a :class:`SharedCompiles` (set by the constructor)
    shared: bool = False
    #: the :class:`~explorer.config.RunConfig` field this mode alone reads (the
    #: train panel shows an input for it while the mode is chosen), its label
    #: and its help text; ``""``: none
    setting: ClassVar[str] = ""
    setting_label: ClassVar[str] = ""
    setting_help: ClassVar[str] = ""

    def __init__(self, train_step, model, optimizer, *, shared: SharedCompiles | None = None,
                 **settings):
        self.train_step, self.model, self.optimizer = train_step, model, optimizer
        kind = type(self)
        self.shared = shared is not None and kind.compiled
        self._jitted = None  # the shared jitted step (None: not shared, or eager)
        if not self.shared:
            self.step = kind.make(train_step, model, optimizer)
        else:  # the jitted step of every run sharing it; these modules bound to it here
            self._jitted = shared.step((kind.mode, train_step), lambda: kind.jit(train_step))
            self.step = kind.bind(self._jitted, model, optimizer)

    @staticmethod
    def bind(jitted_step, model, optimizer) -> Callable:
        """``step(inputs)``: a shared jitted step (:attr:`jit` of the train
        step) called on this run's modules, as :attr:`make`'s step calls its own."""
        return _bound(jitted_step, model, optimizer)

    @classmethod
    def settings(cls, config) -> dict:
        """The keyword arguments this mode's constructor takes from a
        :class:`~explorer.config.RunConfig` (none by default)."""
        return {}

    @classmethod
    def script_settings(cls, config) -> str:
        """Lines the exported script adds to its settings for this mode."""
        return ""

    def __call__(self, inputs):
        return self.step(inputs)

    def run_steps(self, inputs, targets, steps: int):
        """Run ``steps`` (at most :attr:`steps_per_call`) training steps in one
        call: ``(losses [steps], measured)``, not waited for; ``measured`` is
        what the mode computed per step inside the call (a dict of arrays with
        a leading ``[steps]`` axis), ``None`` when the run measures each step
        on the host itself."""
        raise NotImplementedError(f"{self.mode} runs one step per call: call it")

    def ahead(self, inputs, targets) -> Callable[[], None] | None:
        """A function that compiles the shared step for these inputs ahead of
        the first step, by calling it once on copies (the run's own state is
        not touched; the result is thrown away), or ``None`` where there is
        nothing to compile ahead (a step not shared, or eager). It holds what
        it calls, not this stepper (it runs in another thread)."""
        jitted = self._jitted
        if jitted is None:
            return None
        model, optimizer = nnx.clone((self.model, self.optimizer))
        return lambda: jax.block_until_ready(jitted(model, optimizer, inputs))

    @property
    def state(self) -> Any:
        """The state a mode threads outside the modules (``None``: the modules
        hold it all)."""
        return None

    def sync(self) -> None:
        """Write a threaded state back into the modules (a no-op unless the mode
        threads one)."""

    def checkpoint(self, live: nnx.State) -> Any:
        """A copy of the trainable state, for :meth:`restore` after a bad step
        (``live``: ``nnx.state((model, optimizer))``, the modules' own variables)."""
        return jax.tree.map(lambda a: a, live)

    def restore(self, state) -> None:
        nnx.update((self.model, self.optimizer), state)

    def lowerable(self, inputs, targets=None, *, donate: bool = False
                  ) -> tuple[Callable, tuple] | None:
        """``(fresh jitted step, its arguments)`` for JAX's ahead-of-time API:
        fresh, so that timing it neither hits nor fills the live step's cache.
        ``None`` when the mode compiles nothing. ``donate``: the state argument
        donated (only where :attr:`donation_note` is empty); ``targets``: the
        evaluation targets, for a mode that measures inside its call."""
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
    donation_note = "n/a: eager mode compiles nothing, so there is no call to donate to"

    def lowerable(self, inputs, targets=None, *, donate=False):
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
    @staticmethod
    def jit(fn, **options):
        return nnx.jit(fn, graph=False, **options)
    make = staticmethod(make_nnx_jit_tree_step)
    script_build = "step = make_nnx_jit_tree_step(train_step, model, optimizer)"

    def lowerable(self, inputs, targets=None, *, donate=False):
        train_step = self.train_step

        def fresh(*args):
            return train_step(*args)

        return nnx.jit(fresh, graph=False), (self.model, self.optimizer, inputs)


class JaxJit(Stepper):
    mode = "jax.jit"
    summary = ("The same mutating step under plain jax.jit: updates are silently lost "
               "(frozen training).")
    @staticmethod
    def jit(fn, **options):
        return jax.jit(fn, **options)
    make = staticmethod(make_jax_jit_step)
    script_build = "step = make_jax_jit_step(train_step, model, optimizer)"
    donation_note = ("n/a: the step returns no new state (its updates are dropped: the "
                     "pitfall), so no output could take over the input's memory")

    def lowerable(self, inputs, targets=None, *, donate=False):
        train_step = self.train_step

        def fresh(*args):
            return train_step(*args)

        return jax.jit(fresh), (self.model, self.optimizer, inputs)


class CachedPartial(Stepper):
    mode = "cached_partial"
    summary = "nnx.cached_partial over an nnx.jit step: graph traversal cached across calls."
    make = staticmethod(make_cached_partial_step)
    script_build = "step = make_cached_partial_step(train_step, model, optimizer)"

    @staticmethod
    def bind(jitted_step, model, optimizer):
        return nnx.cached_partial(jitted_step, model, optimizer)


class _ThreadedState(Stepper):
    """A mode whose loop threads ``nnx.split``'s state through a pure jitted
    function: the modules are stale until :meth:`sync`."""

    donation_note = ""
    script_finish = ("# Write the threaded state back into the modules: only now does `model`\n"
                     "# hold the trained weights.\n"
                     "nnx.update((model, optimizer), state)")
    script_model = "nnx.merge(graphdef, state)[0]"
    _state: Any

    @property
    def state(self):
        return self._state

    def sync(self) -> None:
        nnx.update((self.model, self.optimizer), self._state)

    def checkpoint(self, live):
        return self._state  # immutable arrays: the state itself is the copy

    def restore(self, state) -> None:
        self._state = state
        super().restore(state)

    def _pure_step(self, shared, graphdef, build) -> None:
        """:attr:`step`: ``build()``, or the one ``shared`` holds for this
        mode and graphdef (built there the first time)."""
        self.shared = shared is not None
        self.step = build() if shared is None else shared.step(
            (self.mode, self.train_step, graphdef), build)

    def _call(self, state, inputs, targets) -> Callable:
        """One call of the pure step on ``state``, as a function of nothing."""
        raise NotImplementedError

    def ahead(self, inputs, targets):
        if not self.shared:
            return None
        call = self._call(self._state, inputs, targets)  # pure: the state is not changed
        return lambda: jax.block_until_ready(call())


class Functional(_ThreadedState):
    mode = "functional"
    summary = ("nnx.split once, a jax.jit step that merges, updates and returns the state, "
               "threaded by the loop.")
    make = staticmethod(make_functional_step)
    script_build = ("graphdef, state = nnx.split((model, optimizer))\n"
                    "functional_step = make_functional_step(train_step, graphdef)")
    script_call = "state, loss = functional_step(state, inputs)"

    def __init__(self, train_step, model, optimizer, *, shared=None, **settings):
        self.train_step, self.model, self.optimizer = train_step, model, optimizer
        graphdef, self._state = nnx.split((model, optimizer))
        self._pure_step(shared, graphdef,
                        functools.partial(make_functional_step, train_step, graphdef))

    def _call(self, state, inputs, targets):
        return functools.partial(self.step, state, inputs)

    def __call__(self, inputs):
        self._state, loss = self.step(self._state, inputs)
        return loss

    def lowerable(self, inputs, targets=None, *, donate=False):
        pure = self.step.__wrapped__

        def fresh(*args):
            return pure(*args)

        return jax.jit(fresh, donate_argnums=(0,) if donate else ()), (self._state, inputs)


def _audited(accuracies, graphdef):
    """The run's measure inside the scan: the accuracies, plus per variable what
    :func:`explorer.audit.compare_snapshots` reports (the parameter-change
    heatmap), plus whether every parameter is still finite (the NaN guard)."""

    def measure(before, after, inputs, targets):
        old, new = nnx.merge(graphdef, before), nnx.merge(graphdef, after)
        changed, relative = audit.traced_changes(old, new)
        return {"accuracy": accuracies(before, after, inputs, targets), "changed": changed,
                "relative_change": relative, "finite": audit.parameters_finite(*new)}

    return measure


class Scan(_ThreadedState):
    """Arguments (besides the step and modules): ``steps``, the length K of the
    scan (``config.scan_steps``)."""

    mode = "scan"
    summary = ("K steps in one compiled call: the functional step looped by jax.lax.scan "
               "inside one jax.jit; each step's loss and accuracies come back stacked.")
    make = staticmethod(make_scan_step)
    setting = "scan_steps"
    setting_label = "Steps per call (K)"
    setting_help = ("How many training steps one compiled call runs (the jax.lax.scan length). "
                    "Each step still gets its own point on the charts: the losses and "
                    "accuracies come back as arrays of K values, and the call's time is shared "
                    "by its steps (that time includes each step's evaluation, which the other "
                    "modes run outside the clock). A shorter last call (to stop exactly at the "
                    "target) compiles once more.")
    script_sources = (make_eval_measure,)
    script_build = ("graphdef, state = nnx.split((model, optimizer))\n"
                    "measure = make_eval_measure(evaluate, model, optimizer)\n"
                    "scan_step = make_scan_step(train_step, graphdef, measure)")
    script_call = "state, (losses, accuracy) = scan_step(state, inputs, targets, steps=steps)"
    script_loop = """\
step = 0
while step < args.steps:
    steps = min(SCAN_STEPS, args.steps - step)  # a shorter last call compiles once more
    start = time.perf_counter()
    state, (losses, accuracy) = scan_step(state, inputs, targets, steps=steps)
    losses = [float(loss) for loss in losses]  # waits for the call to finish
    ms = 1e3 * (time.perf_counter() - start) / steps  # the call's time, shared by its steps
    for loss, (train_acc, val_acc, test_acc) in zip(losses, accuracy.tolist()):
        step += 1
        if not math.isfinite(loss):
            break
        print(f"{step:>6} {loss:>10.6f} {train_acc:>6.2f} {val_acc:>6.2f} "
              f"{test_acc:>6.2f} {ms:>9.2f}")
    if not math.isfinite(loss):
        print(f"stopped: loss became {loss} at step {step} (lower the learning rate)")
        break"""

    def __init__(self, train_step, model, optimizer, *, steps: int = 10, shared=None,
                 **settings):
        self.train_step, self.model, self.optimizer = train_step, model, optimizer
        self.steps_per_call = steps
        graphdef, self._state = nnx.split((model, optimizer))

        def build():  # what it keeps holds graphdefs, not these modules
            accuracies = make_eval_measure(recipe.evaluate, model, optimizer)
            return make_scan_step(train_step, graphdef, _audited(accuracies, graphdef))

        # the eval-mode graphdef inside follows from graphdef: it needs no key of its own
        self._pure_step(shared, graphdef, build)

    def _call(self, state, inputs, targets):
        return functools.partial(self.step, state, inputs, targets, steps=self.steps_per_call)

    @classmethod
    def settings(cls, config) -> dict:
        return {"steps": getattr(config, cls.setting)}

    @classmethod
    def script_settings(cls, config) -> str:
        return f"SCAN_STEPS = {config.scan_steps}  # training steps per compiled call"

    def __call__(self, inputs):
        raise TypeError("the scan mode runs several steps per call: use run_steps(inputs, "
                        "targets, steps)")

    def run_steps(self, inputs, targets, steps: int):
        self._state, (losses, measured) = self.step(self._state, inputs, targets, steps=steps)
        return losses, measured

    def lowerable(self, inputs, targets=None, *, donate=False):
        pure, steps = self.step.__wrapped__, self.steps_per_call

        def fresh(state, inputs, targets):
            return pure(state, inputs, targets, steps)

        return (jax.jit(fresh, donate_argnums=(0,) if donate else ()),
                (self._state, inputs, targets))


#: every JIT mode, by name, in the order the UI lists them
STEPPERS: dict[str, type[Stepper]] = {s.mode: s for s in (
    Eager, NnxJit, JaxJit, Functional, CachedPartial, NnxJitTree, Scan)}


def stepper_for(mode: str) -> type[Stepper]:
    if mode not in STEPPERS:
        raise ValueError(f"unknown mode {mode!r}; choose one of {list(STEPPERS)}")
    return STEPPERS[mode]
