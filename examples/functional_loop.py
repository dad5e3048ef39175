"""The functional loop, done right: ``nnx.split`` once, a pure ``jax.jit``
step that merges, updates and returns the state, the loop threading it, and
``nnx.update`` at the end so that ``model`` holds the trained weights.
``python -m explorer check examples/functional_loop.py`` exits 0.
"""

import jax
import optax
from _data import MLP, data, loss_fn
from flax import nnx

model = MLP(rngs=nnx.Rngs(0))
optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)
x, y = data()
graphdef, state = nnx.split((model, optimizer))


@jax.jit
def train_step(state, x, y):
    model, optimizer = nnx.merge(graphdef, state)
    loss, grads = nnx.value_and_grad(loss_fn)(model, x, y)
    optimizer.update(model, grads)
    return nnx.state((model, optimizer)), loss


for step in range(1, 11):
    state, loss = train_step(state, x, y)
    print(f"step {step:2d}  loss {float(loss):.6f}")
nnx.update((model, optimizer), state)  # the model object gets the trained weights
model.eval()
print(f"final loss {float(loss_fn(model, x, y)):.6f}")
