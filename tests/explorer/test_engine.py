"""The engine's JIT modes: the pitfall reproduced, the fixes training."""

import functools
import os
import re
import subprocess
import sys

import jax
import numpy as np
import pytest
from conftest import REPO, xla_compiles
from flax import nnx
from graphs import with_edge

from explorer.audit import compare_snapshots, snapshot
from explorer.cli import _parser
from explorer.config import LayerConfig, RunConfig
from explorer.engine import STEPPERS, Run, TrainingStopped, steppers
from explorer.export import script_for
from explorer.race import lanes, race
from gnncore import Adjacency, Graph

WORKING = ["eager", "nnx.jit", "functional", "cached_partial", "nnx.jit(graph=False)",
           "scan"]
STEPS = 20


def params(run):
    run.sync()
    return [np.asarray(v) for v in jax.tree.leaves(nnx.state(run.model, nnx.Param))]


def leaves_of(run, kind):
    run.sync()
    state = nnx.state(run.model, kind)
    return [np.asarray(jax.random.key_data(v) if jax.dtypes.issubdtype(
        v.dtype, jax.dtypes.prng_key) else v) for v in jax.tree.leaves(state)]


@pytest.fixture(scope="module")
def runs():
    out = {}
    for mode in STEPPERS:
        run = Run(RunConfig(mode=mode, epochs=STEPS))
        start = params(run)
        run.train()
        out[mode] = (run, start)
    return out


def test_jax_jit_mode_is_frozen(runs):
    run, start = runs["jax.jit"]
    losses = [r.loss for r in run.history]
    assert len(set(losses)) == 1  # bit-identical every step
    assert int(run.optimizer.step[...]) == 0
    for before, after in zip(start, params(run)):
        np.testing.assert_array_equal(before, after)


@pytest.mark.parametrize("mode", WORKING)
def test_working_modes_train_and_agree(runs, mode):
    run, start = runs[mode]
    reference = [r.loss for r in runs["nnx.jit"][0].history]
    losses = [r.loss for r in run.history]
    np.testing.assert_allclose(losses, reference, atol=1e-5)
    assert losses[-1] < 0.8 * losses[0]
    run.sync()
    assert int(run.optimizer.step[...]) == STEPS
    assert any(not np.array_equal(a, b) for a, b in zip(start, params(run)))


@pytest.mark.parametrize("mode", list(STEPPERS))
def test_trace_count(runs, mode):
    run, _ = runs[mode]
    counts = [r.trace_count for r in run.history]
    if mode == "eager":
        assert counts == [0] * STEPS and not any(r.traced for r in run.history)
        assert not any(r.cache_hit for r in run.history)
    else:
        assert counts == [1] * STEPS
        assert [r.traced for r in run.history] == [True] + [False] * (STEPS - 1)
        first_call = run.stepper.steps_per_call  # scan: K steps ran in the traced call
        assert [r.cache_hit for r in run.history] == (
            [False] * first_call + [True] * (STEPS - first_call))


def test_same_config_and_seed_give_bit_identical_losses():
    config = RunConfig(mode="functional", epochs=5, seed=3)
    a = [r.loss for r in Run(config).train()]
    b = [r.loss for r in Run(config).train()]
    assert a == b
    c = [r.loss for r in Run(config.replace(seed=4)).train()]
    assert c != a


@pytest.mark.parametrize("mode", list(STEPPERS))
def test_dropout_stream_and_batch_norm_stats_freeze_only_under_jax_jit(mode):
    run = Run(RunConfig(mode=mode, batch_norm=True, dropout=0.5, epochs=3))
    rng0, stats0 = leaves_of(run, nnx.RngState), leaves_of(run, nnx.BatchStat)
    run.train()
    rng1, stats1 = leaves_of(run, nnx.RngState), leaves_of(run, nnx.BatchStat)
    moved_rng = any(not np.array_equal(a, b) for a, b in zip(rng0, rng1))
    moved_stats = any(not np.array_equal(a, b) for a, b in zip(stats0, stats1))
    frozen = mode == "jax.jit"
    assert moved_rng is not frozen
    assert moved_stats is not frozen


@pytest.mark.parametrize("mode", ["nnx.jit", "functional"])
def test_nan_loss_stops_and_keeps_the_last_good_state(mode):
    run = Run(RunConfig(mode=mode, learning_rate=1e12, optimizer="sgd", weight_decay=0.0,
                        epochs=50))
    # Whichever goes first: a NaN loss, or parameters that overflowed to Inf.
    with pytest.raises(TrainingStopped, match="became .* at step"):
        for _ in range(50):
            before = params(run)
            run.step()
    after = params(run)
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a, b)
    assert all(np.all(np.isfinite(p)) for p in after)


def test_default_config_learns_karate_club():
    run = Run(RunConfig(mode="functional", epochs=100))
    run.train()
    assert run.history[-1].train_acc == 1.0
    assert run.history[-1].test_acc >= 0.8


def test_gat_and_head_configs_build_and_train():
    config = RunConfig(layers=(LayerConfig("gat", 8, {"heads": 2}), LayerConfig("sage", 8)),
                       head=True, batch_norm=True, residual=True, epochs=3)
    run = Run(config)
    assert run.model.has_head and run.model.out_features == 2
    assert len(run.train()) == 3


def test_a_multi_head_run_builds_its_head_blocks_once_and_trains_the_same(monkeypatch):
    config = RunConfig(layers=(LayerConfig("gat", 8, {"heads": 4}), LayerConfig("gat", 8)),
                       epochs=3)
    run = Run(config)
    assert run.inputs.adj.heads == (4,)
    losses = [r.loss for r in run.train()]
    run.set_graph(with_edge(run.graph, 0, 33))  # an edit: blocks of the new edges
    assert run.inputs.adj.heads == (4,)
    assert run.inputs.adj.head_block(4).cols.shape == (4 * run.inputs.adj.num_edges,)
    run.train(4)
    assert [r.trace_cause for r in run.history if r.traced] == [
        "first call", "shapes changed: directed edges 156 -> 158"]
    # without the blocks the step computes the same indices itself: the same losses
    monkeypatch.setattr(Adjacency, "with_heads", lambda adj, *heads: adj)
    plain = Run(config)
    assert plain.inputs.adj.heads == ()
    assert [r.loss for r in plain.train()] == losses


@pytest.mark.parametrize("mode", ["nnx.jit", "functional"])
def test_shape_change_retraces_once_and_says_why(mode):
    run = Run(RunConfig(mode=mode, epochs=3))
    run.train(2)
    run.set_graph(with_edge(run.graph, 0, 33))
    run.train(3)
    traced = [(r.step, r.trace_cause) for r in run.history if r.traced]
    assert traced == [(1, "first call"), (3, "shapes changed: directed edges 156 -> 158")]
    assert run.history[-1].trace_count == 2


@pytest.mark.parametrize("batch_norm, optimizer", [(False, "adam"), (True, "sgd")])
def test_bucket_padding_keeps_results_and_stops_retracing(batch_norm, optimizer):
    # (BatchNorm runs with SGD: the bias before a BatchNorm has a zero gradient up
    # to rounding, and Adam would blow that rounding noise up to full-size steps.)
    base = RunConfig(mode="nnx.jit", dropout=0.0, batch_norm=batch_norm,
                     optimizer=optimizer, learning_rate=0.05, epochs=3)
    plain, padded = Run(base), Run(base.replace(bucket_padding=True))
    for run in (plain, padded):
        run.train(2)
        run.set_graph(with_edge(run.graph, 0, 33))
        run.train(2)
    np.testing.assert_allclose([r.loss for r in padded.history],
                               [r.loss for r in plain.history], atol=1e-5)
    np.testing.assert_allclose(np.asarray(padded.logits()), np.asarray(plain.logits()),
                               atol=1e-5)
    assert padded.history[-1].trace_count == 1 and plain.history[-1].trace_count == 2
    assert padded.predictions().shape == (34,)


def test_set_graph_rejects_a_different_feature_width():
    run = Run(RunConfig(epochs=1))
    other = Graph.from_arrays(np.asarray(run.graph.edge_index), np.ones((34, 3)))
    with pytest.raises(ValueError, match="3 features per node but the model takes 34"):
        run.set_graph(other)


@pytest.mark.parametrize("mode", list(STEPPERS))
def test_compile_breakdown_and_timing_lesson(mode):
    run = Run(RunConfig(mode=mode, epochs=4, scan_steps=2))
    run.train()
    losses = [r.loss for r in run.history]
    breakdown = run.compile_breakdown()
    if mode == "eager":
        assert breakdown is None
    else:
        assert breakdown["trace_lower_s"] > 0 and breakdown["compile_s"] > 0
        assert breakdown["first_call_s"] == run.history[0].call_wall_s
        assert breakdown["steady_step_ms"] > 0
        assert run.trace_count == 1  # the AOT measurement is not a retrace
    timing = run.naive_timing(2)
    assert timing["naive_s"] > 0 and timing["synced_s"] > 0
    assert [r.loss for r in run.history] == losses  # the lesson does not rewrite history


def test_eval_forward_under_plain_jax_jit_is_safe():
    run = Run(RunConfig(mode="nnx.jit", batch_norm=True, dropout=0.5, epochs=3))
    run.train()
    before = params(run), leaves_of(run, nnx.BatchStat), leaves_of(run, nnx.RngState)
    via_jax_jit = np.asarray(run.logits())  # Run evaluates with plain jax.jit
    run.model.eval()
    inputs = run.inputs
    x, adj, edge_weight, node_mask = inputs.x, inputs.adj, inputs.edge_weight, inputs.node_mask
    eager = np.asarray(run.model(x, adj, edge_weight, node_mask=node_mask))
    via_nnx_jit = np.asarray(nnx.jit(lambda m: m(x, adj, edge_weight, node_mask=node_mask))(
        run.model))
    run.model.train()
    np.testing.assert_allclose(via_jax_jit, eager, atol=1e-5)
    np.testing.assert_allclose(via_nnx_jit, eager, atol=1e-5)
    after = params(run), leaves_of(run, nnx.BatchStat), leaves_of(run, nnx.RngState)
    for group_before, group_after in zip(before, after):
        for a, b in zip(group_before, group_after):
            np.testing.assert_array_equal(a, b)


def test_dropping_edge_weights_retraces_and_says_why():
    run = Run(RunConfig(epochs=2))
    assert run.graph.edge_weight is not None  # karate club carries interaction counts
    run.train(1)
    run.set_graph(run.graph.replace(edge_weight=None))
    record = run.step()
    assert record.traced and record.trace_cause == "inputs changed: edge weights added or removed"


def _eager_accuracies(run):
    """The accuracies recomputed from eager logits (no compiled eval at all)."""
    run.sync()
    run.model.eval()
    inputs = run.inputs
    x, adj, edge_weight, node_mask = inputs.x, inputs.adj, inputs.edge_weight, inputs.node_mask
    logits = np.asarray(run.model(x, adj, edge_weight, node_mask=node_mask))
    run.model.train()
    g = run.graph
    pred = logits[:g.num_nodes].argmax(-1)
    y = np.asarray(g.y)
    return {name: float(((pred == y) & np.asarray(mask)).sum() / max(np.asarray(mask).sum(), 1))
            for name, mask in (("train", g.train_mask), ("val", g.val_mask),
                               ("test", g.test_mask))}


def _fresh_snapshot(run):
    run.sync()
    return snapshot(run.model, run.optimizer)


# (scan's records are measured inside its call: test_scan_records_* below)
@pytest.mark.parametrize("mode", [m for m in STEPPERS if m != "scan"])
def test_accuracies_and_changes_follow_every_step_and_every_graph_edit(mode, monkeypatch):
    """A step's record and heatmap row come from the modules' variables as the
    run read them once (every mode updates them in place): they must be what
    the modules hold after the step, read afresh, also after a restore."""
    run = Run(RunConfig(mode=mode, epochs=6, bucket_padding=mode == "functional"))
    for i in range(4):
        if i == 2:  # a step whose loss is NaN is undone: the run restores its checkpoint
            with monkeypatch.context() as patch:
                patch.setattr(type(run.stepper), "__call__", functools.partialmethod(
                    lambda self, inputs, call: call(self, inputs) * np.nan,
                    call=type(run.stepper).__call__))
                with pytest.raises(TrainingStopped):
                    run.step()
        before = _fresh_snapshot(run)
        record = run.step()
        expected = _eager_accuracies(run)
        assert run.accuracies() == pytest.approx(expected, abs=1e-6)
        assert (record.train_acc, record.val_acc, record.test_acc) == pytest.approx(
            (expected["train"], expected["val"], expected["test"]), abs=1e-6)
        assert run.changes[-1] == compare_snapshots(before, _fresh_snapshot(run))
    if mode == "jax.jit":
        assert not any(c.changed for c in run.changes[-1])  # the frozen pitfall, still seen
    else:
        assert any(c.changed for c in run.changes[-1] if c.kind == "parameter")
    first = np.asarray(run.predictions())
    assert np.array_equal(first, np.asarray(run.predictions()))  # asked twice: reused
    g, keep = run.graph, 30
    ei = np.asarray(g.edge_index)
    ei = ei[:, (ei < keep).all(0)]
    smaller = Graph.from_arrays(ei, np.asarray(g.x)[:keep], num_nodes=keep,
                                y=np.asarray(g.y)[:keep],
                                train_mask=np.asarray(g.train_mask)[:keep],
                                val_mask=np.asarray(g.val_mask)[:keep],
                                test_mask=np.asarray(g.test_mask)[:keep])
    run.set_graph(smaller)
    assert run.predictions().shape == (30,) and run.logits().shape[0] == 30
    assert run.accuracies() == pytest.approx(_eager_accuracies(run), abs=1e-6)


def _odd_width(width: int) -> RunConfig:
    """A config whose shapes no other test compiles (the eval is compiled once
    per shape and shared by every run: see the last test of this file)."""
    return RunConfig(epochs=2, seed=3, layers=(LayerConfig("gcn", width), LayerConfig("gcn", 2)))


def test_warm_up_compiles_the_eval_ahead_and_an_unshared_step_compiles_live():
    cold = Run(_odd_width(11))
    assert xla_compiles(cold.accuracies) >= 1  # without a warm-up the first metrics compile
    run = Run(_odd_width(13))
    assert run.warm_up() is run.warm_up()  # once per run
    run.warm_up().join()
    assert xla_compiles(run.accuracies) == 0  # the warm-up's executable is the one used
    records = []
    assert xla_compiles(lambda: records.append(run.step())) >= 1  # the step compiles live
    assert records[0].traced and records[0].trace_count == 1


_EXIT_WHILE_WARMING = """
import atexit

def check():  # registered before explorer's own handler, so it runs after it
    print("warm-up finished:", not run.warm_up().is_alive(), flush=True)

atexit.register(check)
from explorer.config import RunConfig
from explorer.engine import Run
from explorer.engine.compiles import SharedCompiles

run = Run(RunConfig(), shared=SharedCompiles())
run.warm_up()  # and exit while it compiles
"""


def test_a_process_that_exits_while_a_warm_up_compiles_waits_for_it():
    """A daemon thread stopped inside XLA's compiler at exit aborted the
    process ("FATAL: exception not rethrown"); the warm-up now ends first."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([sys.executable, "-c", _EXIT_WHILE_WARMING], cwd=REPO,
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "warm-up finished: True" in out.stdout, out.stdout + out.stderr


def test_runs_of_the_same_shapes_share_the_eval_but_trace_their_own_step():
    first = Run(_odd_width(17))
    first.step()
    second = Run(_odd_width(17).replace(seed=4))
    assert xla_compiles(second.accuracies) == 0  # the eval compiled for the first run
    record = second.step()
    assert record.traced and record.trace_count == 1  # its own step, traced live
    assert second.accuracies() != first.accuracies() or second.history[0].loss != \
        first.history[0].loss  # and its own state


class _Twice(steppers.Stepper):
    """A made-up mode for the test: nnx.jit, compiled under another name."""

    mode = "nnx.jit (again)"
    summary = "The nnx.jit step registered a second time."
    make = staticmethod(steppers.make_nnx_jit_step)
    script_build = "step = make_nnx_jit_step(train_step, model, optimizer)"


def test_a_new_mode_is_one_stepper_in_the_table(monkeypatch):
    """Registering a stepper is all a new mode needs: the config accepts it,
    a run, the race, the CLI and an exported script use it."""
    monkeypatch.setitem(steppers.STEPPERS, _Twice.mode, _Twice)
    config = RunConfig(mode=_Twice.mode, epochs=2)
    run = Run(config)
    losses = [r.loss for r in run.train()]
    reference = [r.loss for r in Run(config.replace(mode="nnx.jit")).train()]
    assert losses == reference and run.audit().verdict.status == "training"
    # the race's lanes are every registered mode; the new one's lane runs in it
    assert lanes(config)[-1] == (_Twice.mode, 1)
    assert [e.mode for e in race(config, steps=1, modes=[_Twice.mode])] == [_Twice.mode]
    assert _Twice.mode in _parser().parse_args(["train", "--mode", _Twice.mode]).mode
    script = script_for(config)
    assert _Twice.summary in script and "step = make_nnx_jit_step(" in script


# ------------------------------------------------------------------ scan mode
def _assert_same_records(scan, functional, noisy=()):
    """Two runs' records and per-step variable changes agree (float tolerance;
    for the ``noisy`` variables, only whether they changed)."""
    assert len(scan.history) == len(functional.history)
    for a, b in zip(scan.history, functional.history):
        assert a.step == b.step
        assert a.loss == pytest.approx(b.loss, abs=1e-5)
        assert (a.train_acc, a.val_acc, a.test_acc) == pytest.approx(
            (b.train_acc, b.val_acc, b.test_acc), abs=1e-6)
    assert len(scan.changes) == len(functional.changes) == len(scan.history)
    for step_a, step_b in zip(scan.changes, functional.changes):
        assert [(c.path, c.kind) for c in step_a] == [(c.path, c.kind) for c in step_b]
        for a, b in zip(step_a, step_b):
            assert a.changed == b.changed, (a, b)
            if a.path not in noisy:
                assert a.relative_change == pytest.approx(b.relative_change, rel=1e-5,
                                                          abs=1e-6), (a, b)


# The bias of the conv before a BatchNorm has a zero gradient up to rounding, and
# rounding differs between any two compiled programs: with Adam it takes
# full-size steps on that noise (so BatchNorm runs with SGD, as in
# test_bucket_padding_keeps_results_and_stops_retracing), and even with SGD its
# relative change is noise over noise; only whether it changed is compared.
@pytest.mark.parametrize("extras, noisy", [
    ({}, ()),
    ({"batch_norm": True, "dropout": 0.5, "optimizer": "sgd", "learning_rate": 0.05},
     ("gnn/convs/0/bias",))])
def test_scan_records_are_the_functional_steps_one_by_one(extras, noisy):
    """K steps in one call, unrolled: each record and each step's variable
    changes are those of the functional mode's steps from the same seed."""
    config = RunConfig(mode="scan", scan_steps=3, epochs=7, **extras)
    scan = Run(config)
    records = scan.advance()
    assert len(records) == 3 and scan.history == records
    assert (records[-1].train_acc, records[-1].val_acc, records[-1].test_acc) == \
        pytest.approx(tuple(scan.accuracies().values()), abs=1e-6)  # eval after the call
    scan.train(4)  # 3 + a last call of 1: exactly the steps asked for
    functional = Run(config.replace(mode="functional"))
    functional.train(7)
    _assert_same_records(scan, functional, noisy)
    # the changes are each step's own, not the call's total repeated
    first = [c.relative_change for c in scan.changes[0] if c.kind == "parameter"]
    second = [c.relative_change for c in scan.changes[1] if c.kind == "parameter"]
    assert first != second
    for a, b in zip(params(scan), params(functional)):
        np.testing.assert_allclose(a, b, atol=1e-5)
    assert scan.audit().verdict.status == "training"


def test_scan_records_share_the_call_time_and_say_which_call_traced():
    run = Run(RunConfig(mode="scan", scan_steps=4, epochs=10))
    run.train()
    h = run.history
    assert [r.call_steps for r in h] == [4] * 8 + [2] * 2
    assert [r.traced for r in h] == [True] + [False] * 7 + [True, False]
    assert [r.call_traced for r in h] == [True] * 4 + [False] * 4 + [True] * 2
    assert h[0].trace_cause == "first call"
    assert h[8].trace_cause.startswith("a new scan length: 2 steps in this call instead of 4")
    assert [r.trace_count for r in h] == [1] * 8 + [2] * 2
    assert len({r.wall_s for r in h[:4]}) == 1 and h[0].call_wall_s == pytest.approx(
        4 * h[0].wall_s)
    # the steady time counts only the untraced call, per training step
    assert run.steady_step_ms() == pytest.approx(1e3 * h[4].wall_s)
    timing = run.naive_timing(1)
    assert timing["synced_s"] > 0 and len(run.history) == 10


def test_scan_nan_stops_and_keeps_the_state_from_before_the_call():
    run = Run(RunConfig(mode="scan", scan_steps=4, learning_rate=1e12, optimizer="sgd",
                        weight_decay=0.0, epochs=50))
    reference = Run(run.config.replace(mode="functional"))
    with pytest.raises(TrainingStopped) as stopped:
        for _ in range(50):
            before, done = params(run), len(run.history)
            run.step()
    message = str(stopped.value)
    with pytest.raises(TrainingStopped) as expected:
        reference.train(50)
    what, bad_step = re.search(r"(\w+) became .* at step (\d+)", str(expected.value)).groups()
    assert re.search(f"{what} became .* at step {bad_step} "
                     fr"\(in the call of steps {done + 1} to {done + 4}\)", message), message
    assert "keeps the state from before this call" in message
    assert len(run.history) == done and len(run.changes) == done
    for a, b in zip(before, params(run)):
        np.testing.assert_array_equal(a, b)


def _param_bytes(run) -> int:
    return sum(v.nbytes for v in params(run))


@pytest.mark.parametrize("mode", list(STEPPERS))
def test_compile_breakdown_reports_memory_and_what_donation_saves(mode):
    run = Run(RunConfig(mode=mode, epochs=2, scan_steps=2))
    run.train()
    info = run.compile_breakdown()
    if mode == "eager":
        assert info is None and "n/a" in STEPPERS[mode].donation_note
        return
    for key in ("argument_bytes", "output_bytes", "peak_bytes"):
        assert info[key] > 0, key
    assert info["temp_bytes"] >= 0 and info["alias_bytes"] == 0  # nothing donated here
    # the step takes every parameter (twice over with Adam's moments, and the inputs)
    assert info["argument_bytes"] >= 3 * _param_bytes(run)
    assert info["peak_bytes"] <= (info["argument_bytes"] + info["output_bytes"]
                                  + info["temp_bytes"])
    if STEPPERS[mode].donation_note:  # the modes that do not thread the state
        assert info["donation_note"].startswith("n/a")
        assert info["donation_saves_bytes"] is None and info["donated_peak_bytes"] is None
        return
    # functional and scan: the CPU backend honours donation (jax 0.10): the new
    # state is written into the old one's buffers, which saves one state's bytes
    assert info["donation_note"] == ""
    assert info["donated_alias_bytes"] >= 3 * _param_bytes(run)
    assert info["donation_saves_bytes"] == info["peak_bytes"] - info["donated_peak_bytes"] > 0
    assert info["donation_saves_bytes"] >= _param_bytes(run)
    assert run.trace_count == 1  # neither compile counted as a retrace


def test_memory_of_copes_with_a_backend_without_the_analysis():
    from explorer.engine.run import memory_of

    class NoAnalysis:
        def memory_analysis(self):
            return None

    assert memory_of(NoAnalysis()) == dict.fromkeys(
        ("argument_bytes", "output_bytes", "temp_bytes", "alias_bytes", "peak_bytes"))


def test_a_donation_the_backend_ignores_is_said_not_faked(monkeypatch):
    from explorer.engine import run as run_module

    real = run_module.memory_of
    monkeypatch.setattr(run_module, "memory_of",
                        lambda compiled: {**real(compiled), "alias_bytes": 0})
    run = Run(RunConfig(mode="functional", epochs=1))
    run.train()
    info = run.compile_breakdown()
    assert info["donation_saves_bytes"] is None
    assert info["donation_note"] == "the CPU backend ignores donation: no buffer was aliased"
