"""The state audit and the frozen-training verdict, on user code and on runs."""

import jax
import jax.numpy as jnp
import optax
import pytest
from flax import nnx

from explorer.audit import FrozenTrainingError, assert_training, audit_step
from explorer.config import RunConfig
from explorer.engine import STEPPERS, Run


def user_setup():
    model = nnx.Sequential(nnx.Linear(3, 8, rngs=nnx.Rngs(0)), nnx.Dropout(0.5, rngs=nnx.Rngs(1)),
                           nnx.Linear(8, 2, rngs=nnx.Rngs(2)))
    optimizer = nnx.Optimizer(model, optax.adam(0.01), wrt=nnx.Param)
    x = jnp.asarray(jax.random.normal(jax.random.key(0), (16, 3)))
    y = jnp.zeros((16, 2))
    return model, optimizer, x, y


def user_step(model, optimizer, x, y):
    loss, grads = nnx.value_and_grad(lambda m: jnp.mean((m(x) - y) ** 2))(model)
    optimizer.update(model, grads)
    return loss


def test_public_audit_flags_a_user_written_frozen_step():
    model, optimizer, x, y = user_setup()
    report = audit_step(jax.jit(user_step), (model, optimizer), (x, y), steps=3)
    v = report.verdict
    assert v.status == "frozen"
    assert v.evidence[0] == "0 of 4 parameters changed"
    assert "optimizer step stayed the same" in v.evidence
    assert "loss bit-identical for 3 steps" in v.evidence
    assert "dropout RNG did not advance: the same mask every step" in v.evidence
    assert "jax.jit" in v.cause and "nnx.jit" in v.fix
    with pytest.raises(FrozenTrainingError, match="Unchanged parameters: sequential/layers/0/"):
        assert_training(jax.jit(user_step), (model, optimizer), (x, y))


def test_public_audit_passes_a_correct_step():
    model, optimizer, x, y = user_setup()
    report = assert_training(nnx.jit(user_step), (model, optimizer), (x, y))
    assert report.verdict.status == "training"
    assert report.verdict.evidence[:2] == ("4 of 4 parameters changed", "optimizer step advanced")
    assert report.verdict.line().startswith("verdict: training: 4 of 4")
    changed = {c.path: c for c in report.changes}
    assert changed["optimizer/step"].changed and changed["optimizer/step"].kind == "step counter"
    assert all(c.relative_change > 0 for c in report.changes if c.kind == "parameter")


def test_zero_learning_rate_is_frozen_for_another_reason():
    model, _, x, y = user_setup()
    optimizer = nnx.Optimizer(model, optax.sgd(0.0), wrt=nnx.Param)
    v = audit_step(nnx.jit(user_step), (model, optimizer), (x, y)).verdict
    assert v.status == "frozen" and "learning rate" in v.cause and "advanced" in v.evidence[1]


@pytest.mark.parametrize("mode", list(STEPPERS))
def test_run_verdicts_per_mode(mode):
    run = Run(RunConfig(mode=mode, batch_norm=True, dropout=0.5, epochs=4))
    run.train()
    report = run.audit()
    frozen = mode == "jax.jit"
    assert report.verdict.status == ("frozen" if frozen else "training")
    evidence = " / ".join(report.verdict.evidence)
    assert ("BatchNorm running statistics never moved" in evidence) is frozen
    assert ("the same mask every step" in evidence) is frozen
    assert ("loss bit-identical for 4 steps" in evidence) is frozen
    # The per-step heatmap: every parameter moves every step, or none ever does.
    assert len(run.changes) == 4
    params = [[c for c in step if c.kind == "parameter"] for step in run.changes]
    assert all(all(c.changed is not frozen for c in step) for step in params)


def test_snapshot_comparison_matches_the_linear_algebra_norm():
    """compare_snapshots computes its norms without BLAS; same numbers."""
    import numpy as np

    from explorer.audit import compare_snapshots

    rng = np.random.default_rng(0)
    old = rng.normal(size=(1433, 16)).astype(np.float32)
    new = old + rng.normal(scale=1e-3, size=old.shape).astype(np.float32)
    same = rng.normal(size=(7,)).astype(np.float32)
    zero = np.zeros(3, np.float32)
    changes = {c.path: c for c in compare_snapshots(
        {"w": ("parameter", old), "b": ("parameter", same), "z": ("parameter", zero)},
        {"w": ("parameter", new), "b": ("parameter", same.copy()),
         "z": ("parameter", zero + 2.0)})}
    want = (np.linalg.norm((new.astype(np.float64) - old).ravel())
            / np.linalg.norm(old.astype(np.float64).ravel()))
    assert changes["w"].changed and changes["w"].relative_change == pytest.approx(want, rel=1e-12)
    assert not changes["b"].changed and changes["b"].relative_change == 0.0
    # from zero: the absolute change, ||(2, 2, 2)||
    assert changes["z"].relative_change == pytest.approx(np.sqrt(12.0), rel=1e-12)
