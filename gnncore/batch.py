"""Many graphs as one, padded to bucket sizes so that shapes stay static.

A :class:`Batch` is the disjoint union of its graphs (node ids offset graph by
graph) plus a ``batch`` vector giving each node's graph. Sizes are padded to
buckets for nodes, edges *and* graphs:

- padding nodes have zero features and all belong to one *padding graph*
  (id = the number of real graphs); padding edges are self-loops on the last
  padding node. Nothing flows between padding and real nodes, and a pooled
  readout of a real graph never sees a padding node;
- the graph slots after the real graphs (the padding graph and any empty
  ones) have ``graph_mask`` False, and their labels are -1.

So results for real graphs are identical with and without padding, and a
stream of differently sized batches compiles once per bucket, not once per
batch. ``num_graphs`` (the padded graph count) is static: it is the
``num_segments`` that pooling and graph norms need under a trace.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from gnncore.graph import Graph, bucket_size
from gnncore.utils import to_device

__all__ = ["Batch"]


@dataclasses.dataclass(frozen=True, eq=False)
class Batch:
    """A padded batch of graphs.

    Arguments:
        graph: the padded disjoint union (a :class:`Graph`; ``graph.adj`` is its
            CSR form for the fused kernels).
        batch: ``[num_nodes]`` int32 graph id of each node.
        node_mask: ``[num_nodes]`` bool, True for real nodes.
        edge_mask: ``[num_edges]`` bool, True for real edges.
        graph_mask: ``[num_graphs]`` bool, True for real graphs.
        y: ``[num_graphs]`` int32 graph labels (-1 on padding slots) or ``None``.
        ptr: ``[num_graphs + 1]`` int32 node offsets of each graph.
        num_graphs: static padded graph count.
    """

    graph: Any
    batch: Any
    node_mask: Any
    edge_mask: Any
    graph_mask: Any
    y: Any = None
    ptr: Any = None
    num_graphs: int = 0

    # ------------------------------------------------------------------ build
    @classmethod
    def from_graphs(cls, graphs: Sequence[Graph], y=None, *, num_nodes: int | None = None,
                    num_edges: int | None = None, num_graphs: int | None = None,
                    pad: bool = True) -> Batch:
        """Batch ``graphs`` (host-side), with graph labels ``y`` (one per graph).

        By default sizes are padded to buckets (``bucket_size``): nodes to
        hold at least one padding node, graphs to hold at least the padding
        graph. Pass ``num_nodes`` / ``num_edges`` / ``num_graphs`` to fix them
        (e.g. the largest bucket of a dataset, so that every batch has one
        shape). ``pad=False`` gives the exact union (no padding graph).
        """
        graphs = list(graphs)
        if not graphs:
            raise ValueError("graphs: need at least one graph")
        widths = {g.num_features for g in graphs}
        if len(widths) != 1:
            raise ValueError(f"graphs: every graph needs the same feature width; got "
                             f"{sorted(widths)}")
        for name in ("edge_attr",):
            has = {getattr(g, name) is not None for g in graphs}
            if len(has) != 1:
                raise ValueError(f"graphs: {name} must be given for all graphs or none")
        sizes = np.array([g.num_nodes for g in graphs])
        edges = np.array([g.num_edges for g in graphs])
        n_real, e_real, g_real = int(sizes.sum()), int(edges.sum()), len(graphs)
        if pad:
            num_nodes = bucket_size(n_real + 1) if num_nodes is None else int(num_nodes)
            num_edges = bucket_size(e_real) if num_edges is None else int(num_edges)
            num_graphs = (bucket_size(g_real + 1, minimum=2) if num_graphs is None
                          else int(num_graphs))
            for name, value, need in (("num_nodes", num_nodes, n_real + 1),
                                      ("num_edges", num_edges, e_real),
                                      ("num_graphs", num_graphs, g_real + 1)):
                if value < need:
                    raise ValueError(f"{name}={value} is too small: the batch needs at "
                                     f"least {need} (padding takes one slot)")
        else:
            num_nodes, num_edges, num_graphs = n_real, e_real, g_real
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        edge_index = np.concatenate(
            [np.asarray(g.edge_index, np.int64) + off for g, off in zip(graphs, offsets)],
            axis=1)
        weighted = any(g.edge_weight is not None for g in graphs)
        edge_weight = np.concatenate([
            np.ones(g.num_edges, np.float32) if g.edge_weight is None
            else np.asarray(g.edge_weight, np.float32) for g in graphs]) if weighted else None
        edge_attr = (np.concatenate([np.asarray(g.edge_attr) for g in graphs])
                     if graphs[0].edge_attr is not None else None)
        node_y = (np.concatenate([np.asarray(g.y) for g in graphs])
                  if all(g.y is not None for g in graphs) else None)
        union = Graph.from_arrays(
            edge_index, np.concatenate([np.asarray(g.x) for g in graphs]), num_nodes=n_real,
            edge_weight=edge_weight, edge_attr=edge_attr, y=node_y)
        real_edges = union.num_edges
        if pad:
            union = union.pad_to(num_nodes, num_edges)
        node_graph = np.full(num_nodes, g_real, np.int32)
        node_graph[:n_real] = np.repeat(np.arange(g_real, dtype=np.int32), sizes)
        # padded edges are self-loops on the last node, which sort last by target
        src_dst = np.asarray(union.edge_index)
        edge_mask = np.ones(num_edges, bool)
        if num_edges > real_edges:
            pad_node = num_nodes - 1
            edge_mask = ~((src_dst[0] == pad_node) & (src_dst[1] == pad_node))
        ptr = np.full(num_graphs + 1, num_nodes, np.int32)
        ptr[: g_real + 1] = offsets
        labels = None
        if y is not None:
            y = np.asarray(y, np.int32).reshape(-1)
            if len(y) != g_real:
                raise ValueError(f"y: {len(y)} labels for {g_real} graphs")
            labels = np.full(num_graphs, -1, np.int32)
            labels[:g_real] = y
        # host-built, then copied (jnp.arange would compile a program per new shape)
        return cls(graph=union, batch=to_device(node_graph),
                   node_mask=to_device(np.arange(num_nodes) < n_real),
                   edge_mask=to_device(edge_mask),
                   graph_mask=to_device(np.arange(num_graphs) < g_real),
                   y=None if labels is None else to_device(labels),
                   ptr=to_device(ptr), num_graphs=num_graphs)

    # ------------------------------------------------------------ properties
    @property
    def x(self):
        return self.graph.x

    @property
    def edge_index(self):
        return self.graph.edge_index

    @property
    def adj(self):
        return self.graph.adj

    @property
    def edge_weight(self):
        return self.graph.edge_weight

    @property
    def edge_attr(self):
        return self.graph.edge_attr

    @property
    def num_nodes(self) -> int:
        return self.graph.num_nodes

    @property
    def num_edges(self) -> int:
        return self.graph.num_edges

    def num_real_graphs(self) -> int:
        """Real graphs in the batch (host-side)."""
        return int(np.sum(np.asarray(self.graph_mask)))

    def shape_key(self) -> tuple[int, int, int]:
        """``(num_nodes, num_edges, num_graphs)``: batches with equal keys share
        one compiled step."""
        return (self.num_nodes, self.num_edges, self.num_graphs)


jax.tree_util.register_dataclass(
    Batch, data_fields=["graph", "batch", "node_mask", "edge_mask", "graph_mask", "y", "ptr"],
    meta_fields=["num_graphs"])
