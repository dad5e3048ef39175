r"""The one message-passing mechanism every conv layer uses.

.. math::
    \mathbf{x}_i' = \gamma\Big(\mathbf{x}_i,\ \bigoplus_{j \in \mathcal{N}(i)}
    \phi(\mathbf{x}_i, \mathbf{x}_j, \mathbf{e}_{j,i})\Big)

``propagate`` gathers what ``message`` (:math:`\phi`) asks for, reduces the
messages at each target node with ``aggregate`` (:math:`\bigoplus`), and hands
the result to ``update`` (:math:`\gamma`). Layers override the hooks; none of
them writes its own scatter.

How ``propagate`` fills ``message``'s arguments (by parameter name):

- ``x_j`` / ``x_i``: source / target node features gathered per edge;
- ``<name>_j`` / ``<name>_i``: a keyword passed to ``propagate`` as ``name=``
  (an array, or a ``(src, dst)`` pair) gathered at the source / target;
- ``index``: the target node of each edge; ``num_nodes``: the target count;
- any other name: the keyword of that name passed to ``propagate`` as is.

Only what ``message`` asks for is gathered, so a layer that only needs
``x_j`` never pays for ``x_i``.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

import jax.numpy as jnp
from flax import nnx

from gnncore.aggr import Aggregation, MeanAggregation, SumAggregation, resolve
from gnncore.segment import AGGREGATIONS, segment_reduce
from gnncore.sparse import Adjacency

__all__ = ["MessagePassing"]


_MISSING = object()


def _param_names(fn) -> tuple[tuple[str, bool], ...]:
    """``(name, has_default)`` for each named parameter of ``fn``."""
    return tuple(
        (name, p.default is not p.empty)
        for name, p in inspect.signature(fn).parameters.items()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


class MessagePassing(nnx.Module):
    """Base class for message-passing layers.

    Arguments:
        aggr: how messages are reduced at a target node: ``"sum"`` (alias
            ``"add"``), ``"mean"``, ``"max"``, ``"min"``, ``"var"``, ``"std"``,
            ``"softmax"``; a list of these (or of modules), which concatenates
            the results along the last axis, so ``[E, ..., F]`` messages give
            ``[N, ..., len(aggr) * F]`` (a :class:`~gnncore.aggr.MultiAggregation`);
            or an :class:`~gnncore.aggr.Aggregation` module (e.g.
            ``SoftmaxAggregation(learn=True)``, whose parameters then belong to
            this layer). Empty neighbourhoods give 0 for every aggregation.
        aggr_kwargs: keyword arguments for the module built from a name or
            list (e.g. ``{"t": 0.5, "learn": True}`` for ``"softmax"``,
            ``{"mode": "mean"}`` for a list).

    Attributes:
        aggr: the name given (a string), a tuple of names for a list, or the
            module's ``name`` (``"sum"``, ..., ``"softmax"``, a tuple for a
            ``MultiAggregation``, ``"custom"`` otherwise).
        aggr_module: the :class:`~gnncore.aggr.Aggregation` doing the
            reduction (an nnx submodule; learnable ones carry their ``Param``).
            The plain names ``sum/add/mean/max/min/var/std`` call
            :func:`~gnncore.segment.segment_reduce` directly on ``aggr``.

    Class attributes (what a layer supports, declared by each layer class and
    read by :class:`~gnncore.models.GNN` and the explorer):

    - ``has_heads``: the output is split across concatenated attention heads
      (``heads`` / ``concat`` options), so a total width must divide by ``heads``;
    - ``takes_edge_weight``: called as ``layer(x, edge_index, edge_weight)``
      with one scalar weight per edge;
    - ``takes_edge_attr``: called as ``layer(x, edge_index, edge_attr)`` with
      edge features (used when the layer is built with ``edge_dim``);
    - ``spec_defaults``: keyword options a :class:`~gnncore.models.ConvSpec` of
      this layer gets unless it sets them (e.g. ``{"K": 2}`` for ChebConv,
      whose ``K`` has no default of its own).

    Subclasses implement ``__call__`` and call :meth:`propagate`; they override
    :meth:`message` (default: ``x_j``), optionally :meth:`update` (default:
    identity) and, for a fused kernel, :meth:`message_and_aggregate`.

    Example::

        class MeanNeighbours(MessagePassing):
            def __init__(self):
                super().__init__(aggr="mean")

            def __call__(self, x, edge_index):
                return self.propagate(edge_index, x)
    """

    has_heads: ClassVar[bool] = False
    takes_edge_weight: ClassVar[bool] = False
    takes_edge_attr: ClassVar[bool] = False
    spec_defaults: ClassVar[Mapping[str, Any]] = MappingProxyType({})

    # Class-level defaults, for subclasses that set ``self.aggr`` themselves.
    aggr_module: Aggregation | None = None
    _aggr_by_name: bool = True

    def __init__(self, aggr: str | list | tuple | Aggregation = "sum", *,
                 aggr_kwargs: dict | None = None):
        # resolve() raises "unknown aggregation ..." for a bad name.
        self.aggr_module = resolve(aggr, **(aggr_kwargs or {}))
        self._aggr_by_name = isinstance(aggr, str)
        if isinstance(aggr, str):
            self.aggr = aggr
        elif isinstance(aggr, Aggregation):
            self.aggr = aggr.name
        else:
            self.aggr = self.aggr_module.name

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # Signatures are fixed per class: read them once, not on every call.
        _read_hook_signatures(cls)

    # ------------------------------------------------------------------ hooks
    def message(self, x_j):
        """The message sent along each edge (default: the source features)."""
        return x_j

    def aggregate(self, messages, index, num_nodes: int, *, indices_are_sorted=False):
        """Reduce messages ([E, ...]) at their target ``index`` ([E])."""
        if self._aggr_by_name and isinstance(self.aggr, str) and self.aggr in AGGREGATIONS:
            return segment_reduce(messages, index, num_nodes, self.aggr,
                                  indices_are_sorted=indices_are_sorted)
        module = self.aggr_module if self.aggr_module is not None else resolve(self.aggr)
        return module(messages, index, num_nodes, indices_are_sorted=indices_are_sorted)

    def _linear_aggr(self) -> bool:
        """Whether the aggregation is a plain sum or mean (the fused kernel's cases)."""
        if self._aggr_by_name:
            return isinstance(self.aggr, str) and self.aggr in ("sum", "add", "mean")
        return type(self.aggr_module) in (SumAggregation, MeanAggregation)

    def update(self, aggr_out):
        """Post-process the aggregated messages (default: identity)."""
        return aggr_out

    def message_and_aggregate(self, adj: Adjacency, x_src, x_dst, num_nodes: int,
                              **kwargs):
        """Optional fused replacement for ``message`` + ``aggregate``.

        Used when ``propagate`` gets an :class:`Adjacency` instead of a plain
        ``edge_index`` and the aggregation is ``sum``/``mean`` (a name or a plain
        ``SumAggregation``/``MeanAggregation``; linear, so a CSR
        product can do it, see :func:`gnncore.sparse.spmm`). It receives the
        keywords passed to ``propagate`` and must return what ``aggregate``
        would have. Other aggregations, and plain edge lists, take the generic
        path, so the fused result must equal it.
        """
        raise NotImplementedError

    # -------------------------------------------------------------- propagate
    def propagate(self, edge_index, x: Any = None, *, size: tuple[int, int] | None = None,
                  indices_are_sorted: bool = False, **kwargs):
        """Run message → aggregate → update over ``edge_index`` ([2, E]).

        Arguments:
            edge_index: source in row 0, target in row 1; or an
                :class:`Adjacency` (enables the fused sum/mean kernel).
            x: node features ``[N, F]``, or a pair ``(x_src, x_dst)`` for a
                bipartite graph (``x_dst`` may be ``None`` if ``size`` is given).
            size: ``(num_src, num_dst)``; by default taken from the static
                shapes of ``x``. Required when no target features are given.
            indices_are_sorted: promise that ``edge_index[1]`` is sorted.
            **kwargs: forwarded to the hooks by parameter name (see module doc).

        Returns:
            ``[num_dst, ...]`` array from :meth:`update` (with a list ``aggr``
            the aggregated width is ``len(aggr)`` times the message width).
        """
        x_src, x_dst = (x if isinstance(x, (tuple, list)) else (x, x))
        if size is not None:
            num_dst = int(size[1])
        elif x_dst is not None:
            num_dst = x_dst.shape[0]
        else:
            raise ValueError(
                "cannot tell the number of target nodes: pass size=(num_src, num_dst) "
                "to propagate, or target features x=(x_src, x_dst)")
        adj = edge_index if isinstance(edge_index, Adjacency) else None
        if adj is not None:
            edge_index = adj.edge_index
            indices_are_sorted = True
        if adj is not None and self._fused and self._linear_aggr():
            out = self.message_and_aggregate(adj, x_src, x_dst, num_dst, **kwargs)
        else:
            src, dst = edge_index[0], edge_index[1]
            args = {}
            for name, has_default in self._message_params:
                value = self._collect(name, src, dst, x_src, x_dst, num_dst, kwargs)
                if value is _MISSING:
                    if has_default:
                        continue
                    raise TypeError(
                        f"{type(self).__name__}.message() needs {name!r}, which "
                        "propagate() was not given; pass it as a keyword argument")
                args[name] = value
            messages = self.message(**args)
            out = self.aggregate(messages, dst, num_dst,
                                 indices_are_sorted=indices_are_sorted)
        extra = {name: kwargs[name] for name, _ in self._update_params if name in kwargs}
        if any(name == "x" for name, _ in self._update_params):
            extra["x"] = x_dst
        return self.update(out, **extra)

    @staticmethod
    def _collect(name, src, dst, x_src, x_dst, num_dst, kwargs):
        if name == "index":
            return dst
        if name == "num_nodes":
            return num_dst
        if name in ("x_j", "x_i"):
            feats = x_src if name == "x_j" else x_dst
            if feats is None:
                raise ValueError(f"message() needs {name}, but those features are None")
            return jnp.take(feats, src if name == "x_j" else dst, axis=0)
        if name in kwargs:
            return kwargs[name]
        base, suffix = name[:-2], name[-2:]
        if suffix in ("_j", "_i") and base in kwargs:
            value = kwargs[base]
            if isinstance(value, (tuple, list)):
                value = value[0] if suffix == "_j" else value[1]
            if value is None:
                return None
            return jnp.take(value, src if suffix == "_j" else dst, axis=0)
        return _MISSING


def _read_hook_signatures(cls) -> None:
    cls._message_params = _param_names(cls.message)[1:]
    cls._update_params = _param_names(cls.update)[2:]
    cls._fused = cls.message_and_aggregate is not MessagePassing.message_and_aggregate


_read_hook_signatures(MessagePassing)
