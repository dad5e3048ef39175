"""What is classified: the nodes of one graph, or whole graphs of a dataset.

A task owns everything that differs between the two: where its graph comes
from, the step's inputs (:class:`StepInputs`), the evaluation targets, the
splits and which rows of the logits are real. The class attributes describe
the kind of task without loading anything, so a config, the UI and the
exporter can ask (``config.task.editable``) instead of comparing names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np

import gnncore
from explorer.lazy import lazy
from explorer.sources import (
    FEATURES,
    GRAPH_FEATURES,
    GRAPH_TASKS,
    load_graph,
    load_graph_dataset,
    split_graphs,
)

if TYPE_CHECKING:
    from explorer.config import RunConfig
    from explorer.engine.inputs import EvalTargets, StepInputs
    from gnncore import Graph

# JAX, and the modules that need it, load with the first task's data: the
# app's first page reads only the class attributes (explorer/lazy.py)
jax = lazy("jax")
_inputs = lazy("explorer.engine.inputs")

__all__ = ["GraphTask", "NodeTask", "Task", "task_for"]


class Task:
    """A loaded task: its graph, the step's inputs and the evaluation targets."""

    kind: ClassVar[str]  # "node" or "graph"
    unit: ClassVar[str]  # what is classified: "nodes" or "graphs"
    editable: ClassVar[bool]  # whether its graph can be drawn and edited
    pooled: ClassVar[bool]  # a pooled readout and a linear head (graph-level)
    feature_kinds: ClassVar[tuple[str, ...]]  # node features it can use
    default_features: ClassVar[str]  # what it uses when a setting does not fit

    @classmethod
    def usable_features(cls, features: str) -> str:
        """``features`` if this kind of task can use them, else its default
        (node ids, ``one_hot``, mean nothing across the graphs of a dataset)."""
        return features if features in cls.feature_kinds else cls.default_features

    graph: Graph  # what the model sees: the graph, or the batch's disjoint union
    num_classes: int
    inputs: StepInputs
    targets: EvalTargets

    @property
    def real_rows(self) -> int:
        """Rows of the logits that are real targets (the rest is padding)."""
        return int(self.targets.labels.shape[0])

    @property
    def real_nodes(self) -> int:
        """Rows of the node embeddings that are real nodes."""
        raise NotImplementedError

    @property
    def split_masks(self) -> tuple:
        """The train, val and test masks over the targets (nodes or graphs)."""
        raise NotImplementedError

    @classmethod
    def load(cls, config: RunConfig, graph: Graph | None = None) -> Task:
        """The task ``config`` describes (``graph``: a drawn or uploaded one)."""
        raise NotImplementedError

    def with_graph(self, graph: Graph) -> Task:
        """The same task on an edited graph."""
        raise ValueError(f"the graphs of a {self.kind}-classification dataset cannot be "
                         "edited")


def _targets(labels, masks) -> EvalTargets:
    """Device copies, built on the host: no per-shape compile."""
    return _inputs.EvalTargets(gnncore.to_device(np.asarray(labels, np.int32)),
                               *(gnncore.to_device(np.asarray(m, bool)) for m in masks))


class NodeTask(Task):
    """Classify the nodes of one graph (a preset, a drawing or an upload).

    Arguments:
        graph: the graph, with features, labels and a train mask.
        bucket_padding: pad nodes and edges up to power-of-two buckets, so
            that editing the graph within a bucket keeps the step's shapes.
    """

    kind, unit, editable, pooled = "node", "nodes", True, False
    feature_kinds, default_features = FEATURES, "one_hot"

    def __init__(self, graph: Graph, *, bucket_padding: bool = False):
        self.graph, self.bucket_padding = graph, bucket_padding
        self.num_classes = max(graph.num_classes(), 2)
        g, n = graph, graph.num_nodes
        if bucket_padding:
            g = g.pad_to(gnncore.bucket_size(n + 1), gnncore.bucket_size(g.num_edges))
        # host-built: no per-shape compile
        node_mask = gnncore.to_device(np.arange(g.num_nodes) < n)
        # Large mostly-zero features (Cora's words, the one-hot ids of a big graph) as
        # CSR: the first layer's product then costs the non-zeros only. Not with
        # buckets: the number of non-zeros would change the shapes at every edit.
        x = g.x if bucket_padding else gnncore.sparse_if_mostly_zero(g.x)
        self.inputs = _inputs.StepInputs(x, g.adj, g.edge_weight, g.y, g.train_mask, node_mask)
        self.targets = _targets(np.asarray(graph.y)[:n],
                                (graph.train_mask, graph.val_mask, graph.test_mask))

    @classmethod
    def load(cls, config: RunConfig, graph: Graph | None = None) -> NodeTask:
        """``graph``, or ``config.graph`` loaded with its features and split."""
        if graph is None:
            graph = load_graph(config.graph, features=config.features, seed=config.seed,
                               train_per_class=config.train_per_class,
                               difficulty=config.difficulty)
        return cls(graph, bucket_padding=config.bucket_padding)

    @property
    def real_nodes(self) -> int:
        return self.graph.num_nodes

    @property
    def split_masks(self) -> tuple:
        g = self.graph
        return (g.train_mask, g.val_mask, g.test_mask)

    def with_graph(self, graph: Graph) -> NodeTask:
        if graph.num_features != self.graph.num_features:
            raise ValueError(f"the new graph has {graph.num_features} features per node but "
                             f"the model takes {self.graph.num_features}: start a new run")
        return NodeTask(graph, bucket_padding=self.bucket_padding)


class GraphTask(Task):
    """Classify whole graphs of a dataset (``explorer.sources.GRAPH_TASKS``):
    every graph is trained in one padded batch (``gnncore.Batch``), with a
    pooled readout and a linear head.

    Arguments:
        graphs, labels: the dataset's graphs and one label each.
        split: train/val/test masks over the graphs.
    """

    kind, unit, editable, pooled = "graph", "graphs", False, True
    feature_kinds, default_features = GRAPH_FEATURES, "degree_one_hot"

    def __init__(self, graphs, labels, split):
        self.graphs, self.labels, self.split = graphs, np.asarray(labels), split
        self.batch_data = b = gnncore.Batch.from_graphs(graphs, self.labels)
        self.graph = b.graph  # the disjoint union the model sees
        self.num_classes = max(int(self.labels.max()) + 1, 2)
        train = np.zeros(b.num_graphs, bool)
        train[:len(graphs)] = split[0]
        self.inputs = _inputs.StepInputs(b.x, b.adj, b.edge_weight, b.y,
                                         gnncore.to_device(train), b.node_mask, b.batch,
                                         b.num_graphs)
        self.targets = _targets(self.labels, split)

    @classmethod
    def load(cls, config: RunConfig, graph: Graph | None = None) -> GraphTask:
        """The dataset ``config.graph`` names, with its features and a seeded split."""
        if graph is not None:
            raise ValueError(f"{config.graph!r} is a graph-classification dataset: "
                             "it takes no graph")
        graphs, labels = load_graph_dataset(config.graph, features=config.features,
                                            seed=config.seed)
        return cls(graphs, labels, split_graphs(len(graphs), config.seed))

    @property
    def real_nodes(self) -> int:
        return int(np.sum(np.asarray(self.batch_data.node_mask)))

    @property
    def split_masks(self) -> tuple:
        return self.split

    def split_of(self, index: int) -> str:
        """``train``, ``val`` or ``test``: the split graph ``index`` is in."""
        return next((name for name, mask in zip(("train", "val", "test"), self.split)
                     if mask[index]), "none")

    def table(self, predictions) -> list[dict]:
        """One row per graph: size, label, prediction, split."""
        pred = np.asarray(predictions)
        return [{"graph": i, "nodes": g.num_nodes, "edges": g.num_edges // 2,
                 "label": int(self.labels[i]), "predicted": int(pred[i]),
                 "correct": bool(pred[i] == self.labels[i]), "split": self.split_of(i)}
                for i, g in enumerate(self.graphs)]

    def nodes_of(self, index: int) -> slice:
        """The rows of graph ``index`` in the batch (its nodes)."""
        ptr = self.batch_data.ptr
        return slice(int(ptr[index]), int(ptr[index + 1]))


def task_for(graph: str) -> type[Task]:
    """The kind of task a config's ``graph`` names."""
    return GraphTask if graph in GRAPH_TASKS else NodeTask


def shape_change(old: StepInputs, new: StepInputs) -> str:
    """Why a compiled step will trace again on ``new`` ("" if it will not)."""
    old_n, new_n = old.x.shape[0], new.x.shape[0]
    old_e, new_e = old.adj.num_edges, new.adj.num_edges
    if (old_n, old_e) != (new_n, new_e):
        moved = [f"{what} {a} -> {b}" for what, a, b in
                 (("nodes", old_n, new_n), ("directed edges", old_e, new_e)) if a != b]
        return "shapes changed: " + ", ".join(moved)
    sparse = gnncore.SparseFeatures
    if isinstance(old.x, sparse) != isinstance(new.x, sparse):
        return ("inputs changed: the features now go in as CSR" if isinstance(new.x, sparse)
                else "inputs changed: the features now go in dense")
    if jax.tree.structure(old) != jax.tree.structure(new):
        return "inputs changed: edge weights added or removed"
    if isinstance(new.x, gnncore.SparseFeatures) and old.x.values.shape != new.x.values.shape:
        return (f"shapes changed: feature non-zeros {old.x.values.shape[0]} -> "
                f"{new.x.values.shape[0]}")
    return ""
