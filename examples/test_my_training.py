"""A pytest test for your own training step: ``assert_training`` runs the
step a few times on a copy of your model and optimizer, and fails, naming the
parameters that never changed, if it is frozen. It works for a mutating step
(``nnx.jit``) and for a functional one (pass the state; the state it returns
is fed back in). Run it with ``pytest examples/test_my_training.py``, or as a
script (``python -m explorer check examples/test_my_training.py``, exit 0).
"""

import jax
import optax
from _data import MLP, data, loss_fn
from flax import nnx

from explorer.audit import assert_training


def model_and_optimizer():
    model = MLP(rngs=nnx.Rngs(0))
    return model, nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)


@nnx.jit
def train_step(model, optimizer, x, y):
    loss, grads = nnx.value_and_grad(loss_fn)(model, x, y)
    optimizer.update(model, grads)
    return loss


def test_my_step_trains():
    model, optimizer = model_and_optimizer()
    report = assert_training(train_step, (model, optimizer), data())
    print(report.verdict.line())  # e.g. "verdict: training: 4 of 4 parameters changed; ..."


def test_my_functional_step_trains():
    graphdef, state = nnx.split(model_and_optimizer())

    @jax.jit
    def functional_step(state, x, y):
        model, optimizer = nnx.merge(graphdef, state)
        loss, grads = nnx.value_and_grad(loss_fn)(model, x, y)
        optimizer.update(model, grads)
        return nnx.state((model, optimizer)), loss

    assert_training(functional_step, (state,), data())


if __name__ == "__main__":
    test_my_step_trains()
    test_my_functional_step_trains()
    print("my training steps train")
