"""A small regression problem shared by the examples (no download, seeded)."""

import jax.numpy as jnp
import numpy as np
from flax import nnx


def data(n: int = 64, features: int = 4, seed: int = 0):
    """``(x, y)``: ``y`` is a fixed linear function of ``x`` plus noise."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, features)).astype(np.float32)
    y = x @ rng.normal(size=(features, 1)).astype(np.float32) + 0.1 * rng.normal(size=(n, 1))
    return jnp.asarray(x), jnp.asarray(y, jnp.float32)


class MLP(nnx.Module):
    def __init__(self, features: int = 4, hidden: int = 16, *, rngs: nnx.Rngs):
        self.hidden = nnx.Linear(features, hidden, rngs=rngs)
        self.dropout = nnx.Dropout(0.1, rngs=rngs)
        self.out = nnx.Linear(hidden, 1, rngs=rngs)

    def __call__(self, x):
        return self.out(self.dropout(nnx.relu(self.hidden(x))))


def loss_fn(model, x, y):
    return jnp.mean((model(x) - y) ** 2)
