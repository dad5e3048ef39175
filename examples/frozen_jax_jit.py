"""Frozen training: the training step is wrapped in plain ``jax.jit``.

jax.jit sees ``model`` and ``optimizer`` as pytrees: the update inside the
trace changes copies, which are thrown away on return. No error; the loss is
the same every step. ``python -m explorer check examples/frozen_jax_jit.py``
says so and exits 1.
"""

import jax
import optax
from _data import MLP, data, loss_fn
from flax import nnx

model = MLP(rngs=nnx.Rngs(0))
optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)
x, y = data()


@jax.jit  # the pitfall: use nnx.jit (see nnx_jit_fixed.py)
def train_step(model, optimizer, x, y):
    loss, grads = nnx.value_and_grad(loss_fn)(model, x, y)
    optimizer.update(model, grads)
    return loss


for step in range(1, 11):
    loss = train_step(model, optimizer, x, y)
    print(f"step {step:2d}  loss {float(loss):.6f}")
