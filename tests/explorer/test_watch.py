"""explorer.watch on every kind of training step, and the run log it writes."""

import json
import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

import explorer
from explorer.runlog import CHUNK, list_runs, read_run, resolve_run
from explorer.watcher import TrainingWarning, watch

X = jnp.asarray(np.random.default_rng(0).normal(size=(16, 3)), jnp.float32)
Y = jnp.asarray(np.random.default_rng(1).normal(size=(16, 1)), jnp.float32)


class Net(nnx.Module):
    def __init__(self, dropout: float = 0.0, *, rngs: nnx.Rngs):
        self.hidden = nnx.Linear(3, 8, rngs=rngs)
        self.drop = nnx.Dropout(dropout, rngs=rngs)
        self.out = nnx.Linear(8, 1, rngs=rngs)

    def __call__(self, x):
        return self.out(self.drop(nnx.relu(self.hidden(x))))


def setup(lr=0.05, dropout=0.0):
    model = Net(dropout, rngs=nnx.Rngs(0))
    return model, nnx.Optimizer(model, optax.sgd(lr), wrt=nnx.Param)


def mse(model, x, y):
    return jnp.mean((model(x) - y) ** 2)


def train_step(model, optimizer, x, y):
    loss, grads = nnx.value_and_grad(mse)(model, x, y)
    optimizer.update(model, grads)
    return loss


def run(step, calls=4, **kwargs):
    model, optimizer = setup(**kwargs)
    watched = watch(step, warn=False)
    losses = [float(watched(model, optimizer, X, Y)) for _ in range(calls)]
    return watched, losses, model


@pytest.mark.parametrize("wrap", ["eager", "nnx.jit", "nnx.jit(graph=False)",
                                  "cached_partial"])
def test_working_steps_are_training_and_return_what_the_step_returns(wrap):
    model, optimizer = setup()
    if wrap == "cached_partial":
        step = watch(nnx.cached_partial(nnx.jit(train_step), model, optimizer), warn=False)
        losses = [float(step(X, Y)) for _ in range(4)]
    else:
        jit = {"eager": lambda f: f, "nnx.jit": nnx.jit,
               "nnx.jit(graph=False)": lambda f: nnx.jit(f, graph=False)}[wrap]
        step = watch(jit(train_step), warn=False)
        losses = [float(step(model, optimizer, X, Y)) for _ in range(4)]
    assert losses[-1] < losses[0]
    v = step.verdict  # cached_partial: the modules it bound are found and compared
    assert v.status == "training", v
    assert v.evidence[0] == "4 of 4 parameters changed over 4 recorded calls"
    assert [r.loss for r in step.records] == pytest.approx(losses)


def test_the_jax_jit_pitfall_is_frozen_and_warned_once():
    model, optimizer = setup(dropout=0.5)
    step = explorer.watch(jax.jit(train_step))  # the package's name for it
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        losses = [float(step(model, optimizer, X, Y)) for _ in range(5)]
    assert len(set(losses)) == 1
    warned = [w for w in caught if issubclass(w.category, TrainingWarning)]
    assert len(warned) == 1 and "frozen" in str(warned[0].message)
    v = step.verdict
    assert v.status == "frozen" and "jax.jit" in v.cause and "nnx.jit" in v.fix
    assert "0 of 4 parameters changed over 5 recorded calls" in v.evidence
    assert "optimizer step stayed the same" in v.evidence
    assert any("RNG counters did not advance" in e for e in v.evidence)
    assert any("model/hidden/kernel" in e for e in v.evidence)
    changes = step.records[-1].changes
    assert changes["model/hidden/kernel"] == 0.0 and changes["optimizer/step"] == 0.0


def test_changes_are_relative_and_per_variable():
    step, _, model = run(nnx.jit(train_step), calls=2)
    second = step.records[1].changes
    assert set(second) >= {"model/hidden/kernel", "model/out/bias", "optimizer/step"}
    assert all(v > 0 for k, v in second.items() if "kernel" in k or "bias" in k)
    assert second["optimizer/step"] == pytest.approx(1.0)  # 1 -> 2: |Δ| / |1|
    assert step.records[0].changes == {}  # nothing to compare the first call with


def test_a_functional_loop_trains_and_a_forgotten_update_is_stale():
    model, optimizer = setup()
    graphdef, state = nnx.split((model, optimizer))

    @jax.jit
    def functional_step(state, x, y):
        m, opt = nnx.merge(graphdef, state)
        loss = train_step(m, opt, x, y)
        return nnx.state((m, opt)), loss

    step = watch(functional_step, warn=False)
    for _ in range(4):
        state, loss = step(state, X, Y)
    assert step.verdict_now().status == "training"
    stale = step.verdict  # the model object never got the new state
    assert stale.status == "stale objects" and "nnx.update" in stale.fix
    assert any("`Net`" in e for e in stale.evidence)
    nnx.update((model, optimizer), state)
    assert step.verdict.status == "training"


def test_retracing_every_call_names_the_argument():
    model, optimizer = setup()
    step = watch(nnx.jit(train_step), warn=False)
    for n in range(4, 9):
        step(model, optimizer, X[:n], Y[:n])
    v = step.verdict
    assert v.status == "retracing every call"
    assert any("x: float32[7, 3] -> float32[8, 3]" in e for e in v.evidence)
    assert [c for c, _ in step.traces] == [1, 2, 3, 4, 5]
    assert step.traces[0][1] == "first call"


def test_a_step_that_hits_the_cache_is_not_retracing():
    step, _, _ = run(nnx.jit(train_step), calls=5)
    assert [r.traced for r in step.records] == [True] + [False] * 4


def test_non_finite_loss_and_parameters():
    step, losses, _ = run(nnx.jit(train_step), calls=4, lr=1e30)
    assert not all(math.isfinite(v) for v in losses)
    v = step.verdict
    assert v.status == "non-finite" and "learning rate" in v.fix


def test_every_records_fewer_calls_but_counts_every_trace():
    model, optimizer = setup()
    step = watch(nnx.jit(train_step), every=3, warn=False)
    for _ in range(7):
        step(model, optimizer, X, Y)
    assert [r.call for r in step.records] == [1, 3, 6]
    assert step.calls == 7 and len(step.traces) == 1
    assert step.verdict.status == "training"


@pytest.mark.parametrize("shape", ["tuple", "dict"])
def test_the_loss_is_found_in_a_tuple_or_a_dict(shape):
    def step_fn(model, optimizer, x, y):
        loss = train_step(model, optimizer, x, y)
        return (loss, {"n": 3}) if shape == "tuple" else {"loss": loss, "n": 3}

    model, optimizer = setup()
    step = watch(nnx.jit(step_fn), warn=False)
    out = step(model, optimizer, X, Y)
    first = out[0] if shape == "tuple" else out["loss"]
    assert step.records[0].loss == pytest.approx(float(first))


def test_the_run_log_is_readable_while_written_and_after_a_torn_line(tmp_path):
    model, optimizer = setup()
    step = watch(nnx.jit(train_step), log_dir=tmp_path, name="my run", warn=False)
    for _ in range(CHUNK + 3):
        step(model, optimizer, X, Y)
    name = list_runs(tmp_path)[0]
    assert name == "my_run"
    live = read_run(resolve_run(tmp_path, name))  # before close: one chunk on disk
    assert len(live.records) == CHUNK + 3 and live.final is None
    assert live.changes.shape == (len(live.paths), CHUNK)
    assert live.verdict["verdict"] == "training"
    step.close()
    done = read_run(tmp_path / name)
    assert done.final["verdict"] == "training" and done.changes.shape[1] == CHUNK + 3
    assert json.loads((tmp_path / name / "meta.json").read_text())["schema"] == 1
    with open(tmp_path / name / "records.jsonl", "a") as f:
        f.write('{"call": 99, "wall_s": 0.1, "tra')  # a crash mid-write
    torn = read_run(tmp_path / name)
    assert torn.skipped == 1 and len(torn.records) == CHUNK + 3
    assert len(list_runs(tmp_path)) == 1
    again = watch(nnx.jit(train_step), log_dir=tmp_path, name="my run", warn=False)
    again(model, optimizer, X, Y)
    again.close()
    assert sorted(list_runs(tmp_path)) == ["my_run", "my_run-2"]


@pytest.mark.parametrize("name", ["..", "../etc", "/etc", "a/b", "", "."])
def test_a_run_outside_the_folder_is_refused(tmp_path, name):
    (tmp_path / "runs").mkdir()
    with pytest.raises(ValueError, match="run"):
        resolve_run(tmp_path / "runs", name)
