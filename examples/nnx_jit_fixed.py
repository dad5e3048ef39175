"""The same loop with ``nnx.jit``: updates reach the model, the loss falls.

It also evaluates with a pure ``jax.jit`` function (it changes nothing, so
plain ``jax.jit`` is fine there): ``check`` lists it and does not judge it.
``python -m explorer check examples/nnx_jit_fixed.py`` exits 0.
"""

import jax
import optax
from _data import MLP, data, loss_fn
from flax import nnx

model = MLP(rngs=nnx.Rngs(0))
optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)
x, y = data()


@nnx.jit
def train_step(model, optimizer, x, y):
    loss, grads = nnx.value_and_grad(loss_fn)(model, x, y)
    optimizer.update(model, grads)
    return loss


@jax.jit  # pure: reads the model, changes nothing
def evaluate(model, x, y):
    return loss_fn(model, x, y)


for step in range(1, 11):
    loss = train_step(model, optimizer, x, y)
    print(f"step {step:2d}  loss {float(loss):.6f}")
model.eval()
print(f"eval loss {float(evaluate(model, x, y)):.6f}")
