"""Compiled steps shared between runs (explorer/engine/compiles.py): the app's
sessions compile a step once per shapes and settings, and still keep their own
weights, optimizer state and trace counts."""

import gc
import threading
import weakref

import numpy as np
import pytest
from conftest import xla_compiles
from graphs import with_edge

from explorer.audit import snapshot
from explorer.config import LayerConfig, RunConfig
from explorer.engine import STEPPERS, Run, SharedCompiles

COMPILED = [mode for mode, kind in STEPPERS.items() if kind.compiled]


def _config(mode: str, **changes) -> RunConfig:
    # a shape of its own (width 19): JAX's own caches hold nothing of it from other files
    return RunConfig(mode=mode, epochs=3, seed=5, scan_steps=3,
                     layers=(LayerConfig("gcn", 19), LayerConfig("gcn", 2))).replace(**changes)


def _values(run) -> dict:
    run.sync()
    return {path: np.array(value) for path, (_, value) in
            snapshot(run.model, run.optimizer).items()}


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("mode", COMPILED)
def test_a_second_run_reuses_the_compile_and_keeps_its_own_state(mode):
    shared = SharedCompiles()
    first = Run(_config(mode), shared=shared)
    fresh = _values(first)
    losses = [r.loss for r in first.train()]
    assert first.trace_count == 1 and first.history[0].traced
    assert not first.history[0].reused
    trained = _values(first)
    assert not _same(fresh, trained) or mode == "jax.jit"  # jax.jit: the frozen pitfall

    second = Run(_config(mode), shared=shared)
    assert _same(_values(second), fresh)  # its own modules: the first run's training is not in them
    records = []
    assert xla_compiles(lambda: records.extend(second.train())) == 0
    assert second.trace_count == 0 and not any(r.traced for r in records)
    assert "earlier run on this server" in records[0].reused
    assert not any(r.reused for r in records[1:])
    assert second.pending_retrace == ""
    assert [r.loss for r in records] == losses  # same start, same program, same losses
    assert _same(_values(first), trained)  # training the second left the first alone
    # and the same as a run compiling its own step
    alone = Run(_config(mode))
    assert [r.loss for r in alone.train()] == losses and alone.trace_count == 1


def test_each_shape_and_static_setting_compiles_once():
    shared = SharedCompiles()
    base = Run(_config("nnx.jit"), shared=shared)
    base.step()
    # a new learning rate is a new optax transform: a new static structure
    other_lr = Run(_config("nnx.jit", learning_rate=0.02), shared=shared)
    assert other_lr.step().traced
    again = Run(_config("nnx.jit", learning_rate=0.02, seed=9), shared=shared)
    assert not again.step().traced and again.history[0].reused  # seed: state, not structure
    # one edge more: new shapes
    bigger = Run(_config("nnx.jit"), with_edge(base.graph, 0, 33), shared=shared)
    assert bigger.step().traced
    # another mode: another jitted function
    functional = Run(_config("functional"), shared=shared)
    assert functional.step().traced
    assert shared.built == 2 and shared.reused == 3  # nnx.jit, functional


def test_an_edit_back_to_known_shapes_does_not_trace_and_says_so():
    run = Run(_config("nnx.jit"))
    run.step()
    graph = run.graph
    run.set_graph(with_edge(graph, 0, 33))
    assert run.step().traced
    run.set_graph(graph)
    assert run.pending_retrace  # the engine cannot know before the call
    record = run.step()
    assert not record.traced and record.reused == (
        "this run compiled the step for these shapes before")
    assert run.pending_retrace == "" and run.trace_count == 2


def test_a_trace_counts_in_the_run_whose_call_traced_whatever_the_thread():
    shared = SharedCompiles()
    first, second = (Run(_config("nnx.jit", seed=s), shared=shared) for s in (1, 2))
    worker = threading.Thread(target=first.step)  # another session's script thread
    worker.start()
    worker.join()
    second.step()
    assert (first.trace_count, second.trace_count) == (1, 0)
    assert second.history[0].reused


def test_the_store_holds_no_run():
    """What is shared is pure: a run let go of is freed while its compiled
    step stays in the store for the next run."""
    shared = SharedCompiles()
    run = Run(_config("functional"), shared=shared)
    run.train(2)
    gone = weakref.ref(run)
    model = weakref.ref(run.model)
    del run
    gc.collect()
    assert gone() is None and model() is None
    assert len(shared) == 1
    assert not Run(_config("functional"), shared=shared).step().traced


def test_the_store_keeps_the_most_recently_used_steps():
    shared = SharedCompiles(capacity=2)
    built = []
    for key in ("a", "b", "a", "c", "b"):
        shared.step(key, lambda key=key: built.append(key) or key)
    assert built == ["a", "b", "c", "b"]  # "b" was the oldest when "c" came
    assert len(shared) == 2


def test_one_transform_per_optimizer_settings():
    shared = SharedCompiles()
    assert shared.transform("adam", 0.01, 5e-4) is shared.transform("adam", 0.01, 5e-4)
    assert shared.transform("adam", 0.01, 5e-4) is not shared.transform("adam", 0.02, 5e-4)
    assert shared.transform("adam", 0.01, 5e-4) is not shared.transform("sgd", 0.01, 5e-4)


def test_eager_shares_nothing_and_still_trains():
    shared = SharedCompiles()
    run = Run(_config("eager"), shared=shared)
    records = run.train(2)
    assert len(shared) == 0 and not any(r.reused for r in records)
    assert records[-1].loss < records[0].loss


@pytest.mark.parametrize("mode", COMPILED)
def test_the_warm_up_compiles_a_shared_step_ahead_and_leaves_the_run_as_it_was(mode):
    run = Run(_config(mode), shared=SharedCompiles())
    fresh = _values(run)
    run.warm_up().join()
    assert run.compiled_ahead["traced"] and run.compiled_ahead["seconds"] > 0
    assert run.trace_count == 1 and not run.history
    assert _same(_values(run), fresh)  # the call ran on copies
    records = []
    assert xla_compiles(lambda: records.extend(run.train())) == 0
    assert not any(r.traced for r in records) and run.trace_count == 1
    assert "compiled in the background" in records[0].reused
    assert [r.loss for r in records] == [r.loss for r in Run(_config(mode)).train()]


def test_a_step_taken_while_the_warm_up_compiles_waits_for_it_and_traces_once():
    run = Run(_config("functional", learning_rate=0.03), shared=SharedCompiles())
    run.warm_up()
    record = run.step()  # Play clicked at once
    assert run.trace_count == 1 and not record.traced and record.reused


def test_a_run_compiling_its_own_step_never_compiles_it_ahead():
    run = Run(_config("nnx.jit"))
    run.warm_up().join()
    assert run.compiled_ahead == {} and run.trace_count == 0
    assert run.step().traced


def test_a_run_freed_before_its_warm_up_reaches_the_step_skips_that_compile(monkeypatch):
    from explorer.engine import run as run_module

    evaluated, go_on = threading.Event(), threading.Event()

    def eval_compile(fn, args):  # the warm-up's first part, held until the run is gone
        evaluated.set()
        go_on.wait(60)

    monkeypatch.setattr(run_module, "_compile", eval_compile)
    shared = SharedCompiles()
    run = Run(_config("nnx.jit", learning_rate=0.04), shared=shared)
    out = run.compiled_ahead
    thread = run.warm_up()
    assert evaluated.wait(60)
    del run  # replaced while its warm-up compiles the eval (someone dragging a slider)
    gc.collect()
    go_on.set()
    thread.join()
    # the eval may have compiled; the train step of a run nobody holds did not
    assert out == {}
    assert Run(_config("nnx.jit", learning_rate=0.04), shared=shared).step().traced
