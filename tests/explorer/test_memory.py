"""Discarded runs are freed by reference counting, not by a full collection.

The app turns Streamlit's per-rerun ``gc.collect()`` off (it cost ~150 ms a
training tick with JAX loaded), so a run that only Python's cycle collector can
free waits for a rare full collection: with a big graph that was gigabytes after
a few Resets. Here the automatic collector is off; weak references with
callbacks note when each replaced run, its modules and its arrays die, and
whether a collection was running then (``gc.callbacks``). A run and its modules
must die by reference counting the moment the workspace lets go of them; their
arrays may wait for the workspace's own young-generation collection (flax's
state traversals leave short-lived cycles that hold variables), never for a
full one.
"""

import gc
import weakref

import jax
import pytest
from flax import nnx

from explorer.config import RunConfig
from explorer.engine import Run
from explorer.workspace import Workspace

MODES = ["eager", "nnx.jit", "jax.jit", "functional", "cached_partial"]
OBJECTS = ("run", "model", "optimizer")  # must die by reference counting


class Deaths:
    """Weak references that record, when their object dies, the generation of
    the collection under way (``None``: reference counting freed it)."""

    def __init__(self):
        self.collecting: int | None = None
        self.generations: set[int] = set()  # every collection that ran
        self.died: dict[str, int | None] = {}
        self.refs: dict[str, weakref.ref] = {}

    def on_gc(self, phase, info):
        if phase == "start":
            self.collecting = info["generation"]
            self.generations.add(info["generation"])
        else:
            self.collecting = None

    def watch(self, name: str, obj) -> None:
        self.refs[name] = weakref.ref(obj, lambda _, n=name: self.died.setdefault(
            n, self.collecting))

    def watch_run(self, i: int, run: Run) -> None:
        """The run, its modules and its largest arrays."""
        self.watch(f"{i} run", run)
        self.watch(f"{i} model", run.model)
        self.watch(f"{i} optimizer", run.optimizer)
        self.watch(f"{i} features", run.inputs.x)  # the graph's node features
        self.watch(f"{i} targets", run.task.targets.labels)

        def biggest(tree):
            return max(jax.tree.leaves(tree), key=lambda a: a.size)

        self.watch(f"{i} parameter", biggest(nnx.state(run.model, nnx.Param)))
        self.watch(f"{i} optimizer moment", biggest(nnx.state(run.optimizer, nnx.OptState)))
        if run.stepper.state is not None:  # the functional mode's threaded state
            self.watch(f"{i} threaded state", biggest(run.stepper.state))

    def alive(self, current: Run | None = None) -> list[str]:
        """What is still alive, but for arrays the ``current`` run shares (a
        reset on the same graph trains on the workspace's same feature array)."""
        shared = ({id(a) for a in jax.tree.leaves((current.inputs, current.task.targets))}
                  if current is not None else set())
        return [name for name, ref in self.refs.items()
                if ref() is not None and id(ref()) not in shared]

    def collected(self) -> dict[str, int]:
        """What needed a collection, and which generation freed it."""
        return {name: gen for name, gen in self.died.items() if gen is not None}


@pytest.fixture
def deaths():
    """The automatic collector off; a :class:`Deaths` watching collections."""
    gc.collect()  # start clean: earlier tests' garbage does not count here
    enabled = gc.isenabled()
    gc.disable()
    d = Deaths()
    gc.callbacks.append(d.on_gc)
    try:
        yield d
    finally:
        gc.callbacks.remove(d.on_gc)
        if enabled:
            gc.enable()


def _check(d: Deaths, current: Run | None = None) -> None:
    assert d.alive(current) == []
    collected = d.collected()
    assert [n for n in collected if n.split(" ", 1)[1] in OBJECTS] == [], (
        f"freed only by the cycle collector: {collected}")
    assert max(d.generations, default=0) <= 1, "a full collection ran"


@pytest.mark.parametrize("mode", MODES)
def test_replaced_runs_are_freed_by_reference_counting(deaths, mode):
    ws = Workspace(RunConfig(graph="karate", mode=mode, dropout=0.0, epochs=50))
    threads = []
    for i in range(10):
        run = ws.run
        deaths.watch_run(i, run)
        threads.append(run.warm_up())  # what the app does after every page draw
        if i % 2:  # replaced while its warm-up may still be compiling
            assert ws.steps_done == 0
        else:
            ws.step()
            ws.step()
        del run
        if i % 3 == 1:
            ws.set_config(ws.config.replace(learning_rate=0.01 + 0.001 * i))
        elif i % 3 == 2:
            ws.load_preset("karate" if i % 2 else "florentine")
        else:
            ws.reset()
    for thread in threads:  # a warm-up still compiling holds its arrays until it ends
        thread.join()
    assert ws.run is not None and ws.steps_done == 0
    _check(deaths, ws.run)
    ws.step()  # the workspace still trains on its new run
    assert ws.steps_done == 1


@pytest.mark.parametrize("mode", ["nnx.jit", "functional", "cached_partial"])
def test_a_dropped_workspace_frees_its_run(deaths, mode):
    """A session that ends drops its workspace: the run goes with it."""
    ws = Workspace(RunConfig(graph="karate", mode=mode, dropout=0.0))
    ws.run.warm_up().join()
    ws.step()
    deaths.watch_run(0, ws.run)
    deaths.watch("workspace", ws)
    deaths.generations.clear()  # building the workspace ran one (its reset)
    del ws
    assert deaths.generations == set()
    by_refcount = {n for n, gen in deaths.died.items() if gen is None}
    assert {"workspace", "0 run", "0 model", "0 optimizer"} <= by_refcount
    # the arrays flax's short-lived cycles hold go at Python's next young
    # collection (automatic in the app; here, with the collector off, by hand)
    gc.collect(1)
    _check(deaths)


@pytest.mark.parametrize("mode", MODES)
def test_a_run_used_everywhere_is_freed(deaths, mode):
    """Every compiled helper (metrics, embeddings, the AOT timing, the naive
    timing lesson, a graph edit) and a graph-classification dataset."""
    for i, config in enumerate((
            RunConfig(graph="karate", mode=mode, dropout=0.0),
            RunConfig(graph="triangle", features="degree_one_hot", mode=mode, dropout=0.0))):
        run = Run(config)
        run.warm_up().join()
        run.train(3)
        run.embeddings()
        run.predictions()
        run.audit()
        run.naive_timing(1)
        if mode != "eager":
            assert run.compile_breakdown()["compile_s"] > 0
        if run.task.editable:
            run.set_graph(run.graph)
            run.step()
        deaths.watch_run(i, run)
        del run
    gc.collect(1)  # what the workspace does when it lets go of a run
    _check(deaths)
