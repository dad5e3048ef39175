r"""Aggregation modules: reduce rows of ``x`` that share an ``index``.

The same module serves two purposes:

- inside :class:`~gnncore.message_passing.MessagePassing`, it reduces the
  messages ``[E, F]`` at their target nodes (``index = edge_index[1]``);
- as a graph-level readout, it pools node features ``[N, F]`` over the
  ``batch`` vector (``index = batch``, ``num_segments = num_graphs``).

Every aggregation returns ``[num_segments, ...]`` (``MultiAggregation`` in
``"cat"`` mode: ``[num_segments, ..., len(aggrs) * F]``) and gives 0 for an empty
segment. Semantics follow PyG's ``torch_geometric.nn.aggr``.

``num_segments`` fixes the output shape, so it must be a static Python ``int``.
If it is ``None`` it is read from ``index.max() + 1``, which only works eagerly:
under ``jit``/``grad``/``vmap`` (``index`` is a tracer) a ``ValueError`` asks for
it. Pass it anyway when trailing segments may be empty (e.g. padded batches).

Example::

    readout = MultiAggregation(["mean", "max", "std"])
    h_graph = readout(h, batch, num_graphs)  # [num_graphs, 3 * F]
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from gnncore.segment import (
    _check_num_segments,
    segment_max,
    segment_mean,
    segment_min,
    segment_softmax,
    segment_std,
    segment_sum,
    segment_var,
)

__all__ = [
    "Aggregation",
    "MaxAggregation",
    "MeanAggregation",
    "MinAggregation",
    "MultiAggregation",
    "SoftmaxAggregation",
    "StdAggregation",
    "SumAggregation",
    "VarAggregation",
    "infer_num_segments",
    "resolve",
]


def infer_num_segments(index, num_segments: int | None = None) -> int:
    """``num_segments`` as a static int; if ``None``, ``index.max() + 1`` (eager only)."""
    if num_segments is not None:
        return _check_num_segments(num_segments)
    if isinstance(index, jax.core.Tracer):
        raise ValueError(
            "num_segments is None and cannot be inferred from a traced index (inside "
            "jit/grad/vmap): pass num_segments as a static Python int (the number of "
            "graphs for a readout; in MessagePassing.propagate the number of target "
            "nodes, size=(num_src, num_dst))")
    return int(np.asarray(index).max(initial=-1)) + 1


class Aggregation(nnx.Module):
    """Base class: ``aggr(x, index, num_segments)`` → ``[num_segments, ...]``.

    Subclasses implement :meth:`reduce`, which receives a checked static
    ``num_segments``. ``name`` is what :class:`MessagePassing` stores as its
    ``aggr`` attribute; a subclass that is not a plain sum/mean must not claim
    ``"sum"``/``"mean"`` (layers treat those as linear).
    """

    name = "custom"

    def __call__(self, x, index, num_segments: int | None = None, *,
                 indices_are_sorted: bool = False):
        """Reduce ``x`` ([E, ...]) by ``index`` ([E] ints in ``[0, num_segments)``)."""
        num_segments = infer_num_segments(index, num_segments)
        return self.reduce(x, index, num_segments, indices_are_sorted=indices_are_sorted)

    def reduce(self, x, index, num_segments: int, *, indices_are_sorted: bool = False):
        raise NotImplementedError


class _Simple(Aggregation):
    _fn = staticmethod(segment_sum)

    def reduce(self, x, index, num_segments, *, indices_are_sorted=False):
        return type(self)._fn(x, index, num_segments, indices_are_sorted=indices_are_sorted)


class SumAggregation(_Simple):
    """Sum of each segment."""

    name = "sum"
    _fn = staticmethod(segment_sum)


class MeanAggregation(_Simple):
    """Mean of each segment; 0 for an empty one."""

    name = "mean"
    _fn = staticmethod(segment_mean)


class MaxAggregation(_Simple):
    """Element-wise maximum of each segment; 0 for an empty one."""

    name = "max"
    _fn = staticmethod(segment_max)


class MinAggregation(_Simple):
    """Element-wise minimum of each segment; 0 for an empty one."""

    name = "min"
    _fn = staticmethod(segment_min)


class VarAggregation(_Simple):
    """Population variance of each segment (see :func:`gnncore.segment.segment_var`)."""

    name = "var"
    _fn = staticmethod(segment_var)


class StdAggregation(_Simple):
    """``sqrt(relu(var) + 1e-5)`` of each segment, 0 for an empty one (PyG's formula;
    see :func:`gnncore.segment.segment_std`)."""

    name = "std"
    _fn = staticmethod(segment_std)


class SoftmaxAggregation(Aggregation):
    r"""Softmax-weighted sum with inverse temperature ``t``, per feature:

    .. math::
        \mathrm{out}_s = \sum_{i \in s}
            \frac{\exp(t\, x_i)}{\sum_{k \in s} \exp(t\, x_k)}\, x_i

    ``t = 0`` is the mean, ``t → ∞`` the max, ``t → -∞`` the min.

    Arguments:
        t: initial inverse temperature.
        learn: make ``t`` an :class:`nnx.Param` of shape ``[channels]``.
        semi_grad: no gradient through the softmax weights (only with
            ``learn=False``; saves memory, as in PyG).
        channels: number of learnable temperatures, one per feature (the last
            axis of ``x`` must then have this size); ``1`` shares one ``t``.
    """

    name = "softmax"

    def __init__(self, t: float = 1.0, learn: bool = False, semi_grad: bool = False,
                 channels: int = 1):
        if learn and semi_grad:
            raise ValueError("SoftmaxAggregation: semi_grad needs learn=False "
                             "(t would get no gradient)")
        if not learn and channels != 1:
            raise ValueError("SoftmaxAggregation: channels > 1 needs learn=True")
        self.learn = bool(learn)
        self.semi_grad = bool(semi_grad)
        self.channels = int(channels)
        if learn:
            self.t = nnx.Param(jnp.full((self.channels,), t, dtype=jnp.float32))
        else:
            self.t = float(t)

    def reduce(self, x, index, num_segments, *, indices_are_sorted=False):
        kw = dict(indices_are_sorted=indices_are_sorted)
        if self.learn:
            t = self.t[...]
            if self.channels != 1 and (x.ndim < 2 or x.shape[-1] != self.channels):
                raise ValueError(
                    f"SoftmaxAggregation(channels={self.channels}) needs x with last "
                    f"axis {self.channels}; got shape {tuple(x.shape)}")
            logits = x * t.astype(x.dtype)
        else:
            logits = x if self.t == 1.0 else x * self.t
        alpha = segment_softmax(logits, index, num_segments, **kw)
        if self.semi_grad:
            alpha = jax.lax.stop_gradient(alpha)
        return segment_sum(x * alpha, index, num_segments, **kw)


_COMBINE = {"sum": jnp.sum, "mean": jnp.mean, "max": jnp.max, "min": jnp.min}


class MultiAggregation(Aggregation):
    """Several aggregations of the same input, combined.

    Arguments:
        aggrs: names (``"sum"``, ``"mean"``, ``"max"``, ``"min"``, ``"var"``,
            ``"std"``, ``"softmax"``) and/or :class:`Aggregation` modules.
        mode: ``"cat"`` (default) concatenates the results along the last axis
            in the order given: ``[S, ..., F]`` each → ``[S, ..., len(aggrs) * F]``
            (``x`` needs a feature axis). ``"sum"``/``"mean"``/``"max"``/``"min"``
            combine them element-wise instead (width ``F``).
    """

    def __init__(self, aggrs: Sequence[str | Aggregation], mode: str = "cat"):
        if isinstance(aggrs, (str, Aggregation)) or len(aggrs) == 0:
            raise ValueError("MultiAggregation needs a non-empty list of aggregations")
        if mode != "cat" and mode not in _COMBINE:
            raise ValueError(f"unknown mode {mode!r}; choose 'cat' or one of "
                             f"{sorted(_COMBINE)}")
        self.aggrs = nnx.List([resolve(a) for a in aggrs])
        self.mode = mode

    @property
    def name(self):
        return tuple(a.name for a in self.aggrs)

    def reduce(self, x, index, num_segments, *, indices_are_sorted=False):
        outs = [a.reduce(x, index, num_segments, indices_are_sorted=indices_are_sorted)
                for a in self.aggrs]
        if self.mode == "cat":
            if x.ndim < 2:
                raise ValueError("MultiAggregation(mode='cat') needs x with a feature axis "
                                 f"([E, F]); got shape {tuple(x.shape)}")
            return jnp.concatenate(outs, axis=-1)
        return _COMBINE[self.mode](jnp.stack(jnp.broadcast_arrays(*outs)), axis=0)


_BY_NAME: dict[str, type[Aggregation]] = {
    "sum": SumAggregation,
    "add": SumAggregation,
    "mean": MeanAggregation,
    "max": MaxAggregation,
    "min": MinAggregation,
    "var": VarAggregation,
    "std": StdAggregation,
    "softmax": SoftmaxAggregation,
}


def resolve(aggr: str | Sequence[str | Aggregation] | Aggregation, **kwargs) -> Aggregation:
    """An :class:`Aggregation` for ``aggr``.

    A name (see ``MultiAggregation``) builds that module with ``kwargs``
    (e.g. ``resolve("softmax", t=2.0, learn=True)``); a list/tuple builds a
    :class:`MultiAggregation` (``kwargs``: ``mode``); a module is returned as is.
    """
    if isinstance(aggr, Aggregation):
        if kwargs:
            raise TypeError("resolve() takes no keyword arguments for a module")
        return aggr
    if isinstance(aggr, str):
        try:
            cls = _BY_NAME[aggr]
        except KeyError:
            raise ValueError(
                f"unknown aggregation {aggr!r}; choose one of {sorted(_BY_NAME)}, a list "
                "of them, or an Aggregation module") from None
        return cls(**kwargs)
    if isinstance(aggr, (list, tuple)):
        return MultiAggregation(aggr, **kwargs)
    raise TypeError(f"cannot make an aggregation from {type(aggr).__name__}: pass a name, "
                    "a list of names/modules, or an Aggregation module")
