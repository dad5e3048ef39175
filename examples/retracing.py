"""A step that traces and compiles again on every call: each batch has a new
size, and XLA compiles for fixed shapes. Training works, but every step pays
for a compile. ``python -m explorer check examples/retracing.py`` reports
"retracing every call" with the argument that keeps changing (exit 0: the
model does train).
"""

import optax
from _data import MLP, data, loss_fn
from flax import nnx

model = MLP(rngs=nnx.Rngs(0))
optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)
x, y = data(n=64)


@nnx.jit
def train_step(model, optimizer, x, y):
    loss, grads = nnx.value_and_grad(loss_fn)(model, x, y)
    optimizer.update(model, grads)
    return loss


for step in range(1, 9):
    n = 32 + step  # a new batch size every step: a new shape, a new trace
    loss = train_step(model, optimizer, x[:n], y[:n])
    print(f"step {step:2d}  batch {n}  loss {float(loss):.6f}")
