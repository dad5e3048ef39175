"""The functional loop that forgets ``nnx.update``: training works (the
threaded ``state`` learns), but ``model`` keeps its initial weights, so the
evaluation at the end reads an untrained model. ``python -m explorer check
examples/functional_forgets_update.py`` calls it "stale objects" and exits 1.
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
# forgot: nnx.update((model, optimizer), state)
model.eval()
print(f"final loss {float(loss_fn(model, x, y)):.6f}  (the untrained model's)")
