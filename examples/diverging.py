"""A learning rate far too large: the loss blows up to Inf, then NaN, and
every later step trains on NaN. ``python -m explorer check
examples/diverging.py`` calls it "non-finite" at the first bad call (exit 0:
the step itself is not frozen, it trains on garbage)."""

import optax
from _data import MLP, data, loss_fn
from flax import nnx

model = MLP(rngs=nnx.Rngs(0))
optimizer = nnx.Optimizer(model, optax.sgd(1e6), wrt=nnx.Param)  # far too large
x, y = data()


@nnx.jit
def train_step(model, optimizer, x, y):
    loss, grads = nnx.value_and_grad(loss_fn)(model, x, y)
    optimizer.update(model, grads)
    return loss


for step in range(1, 7):
    loss = train_step(model, optimizer, x, y)
    print(f"step {step:2d}  loss {float(loss):.6g}")
