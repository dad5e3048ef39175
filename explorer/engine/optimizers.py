"""The optimizers a config can name (:data:`OPTIMIZERS`), in a module of their
own so that the app's first page can list and check them before JAX and optax
load (``explorer/lazy.py``). Their sources go into exported scripts as they
are (``explorer.export``), where ``optax`` is the real module."""

from __future__ import annotations

from explorer.lazy import lazy

optax = lazy("optax")

__all__ = ["OPTIMIZERS", "adam", "adamw", "sgd"]


def adam(learning_rate, weight_decay):
    """Adam with torch-style coupled L2 weight decay (the GCN paper's setup)."""
    return optax.chain(optax.add_decayed_weights(weight_decay), optax.adam(learning_rate))


def adamw(learning_rate, weight_decay):
    """Adam with decoupled weight decay."""
    return optax.adamw(learning_rate, weight_decay=weight_decay)


def sgd(learning_rate, weight_decay):
    """Plain gradient descent with coupled L2 weight decay."""
    return optax.chain(optax.add_decayed_weights(weight_decay), optax.sgd(learning_rate))


#: the optimizers a config can name, each ``(learning_rate, weight_decay) -> optax transform``
OPTIMIZERS = {"adam": adam, "adamw": adamw, "sgd": sgd}
