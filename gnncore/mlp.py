"""``MLP``: a plain stack of linear layers with ReLU in between (GIN's default
network, and any small feed-forward block a model needs)."""

from __future__ import annotations

from flax import nnx

from gnncore.inits import linear

__all__ = ["MLP"]


class MLP(nnx.Module):
    """``Linear → ReLU → Linear → ...``: the default network wrapped by GIN.

    Arguments:
        features: layer widths, ``[in, hidden..., out]`` (at least two).
        rngs: ``nnx.Rngs`` for the weights.
    """

    def __init__(self, features: list[int], *, rngs: nnx.Rngs):
        if len(features) < 2:
            raise ValueError("MLP needs at least [in_features, out_features]")
        self.layers = nnx.List([linear(a, b, rngs=rngs)
                                for a, b in zip(features[:-1], features[1:])])

    def __call__(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = nnx.relu(x)
        return x
