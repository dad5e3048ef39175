"""One person's explorer session, without streamlit: the graph being drawn, the
run configuration, the live run and its play state.

The UI keeps one :class:`Workspace` per browser session (in
``st.session_state``) and only calls its methods, so everything the app does
is testable headless. Nothing here is shared between workspaces.

Live training is a sequence of *ticks*: each runs a chunk of steps until a
time budget is spent, then the UI redraws. ``reset()`` starts a new
*generation*; a tick carrying an older generation's token does nothing, so a
timer that fires after a reset can never write into the new run.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence

import networkx as nx
import numpy as np

from explorer.audit import AuditReport
from explorer.config import RunConfig
from explorer.drawing import LAYOUTS, Drawing, History, from_preset
from explorer.engine import Run, StepRecord, TrainingStopped
from explorer.graphio import load_graph_file
from explorer.race import RaceEntry, race
from explorer.sources import GRAPH_FEATURES, GRAPH_TASKS
from gnncore import Graph

__all__ = ["TICK_BUDGET_S", "GraphStats", "Workspace"]

TICK_BUDGET_S = 0.4  # a tick's training time; the redraw comes on top


@dataclasses.dataclass(frozen=True)
class GraphStats:
    nodes: int
    edges: int  # undirected graphs count each edge once
    classes: int
    density: float
    directed: bool
    labelled: int


class Workspace:
    """A drawing (with undo), a :class:`RunConfig`, the :class:`Run` built from
    them, and the play state.

    Arguments:
        config: the starting configuration; its ``graph`` preset is loaded.
        tick_budget_s: how long one tick may train before returning.
    """

    def __init__(self, config: RunConfig | None = None, *,
                 tick_budget_s: float = TICK_BUDGET_S):
        self.config = config or RunConfig()
        self.tick_budget_s = tick_budget_s
        self.steps_per_tick: int | None = None  # None: as many as fit the budget
        self.generation = 0  # bumped by reset(): a new run
        self.revision = 0  # bumped by every change of the drawing (UI widget keys)
        self.play_token = -1  # the generation Play was pressed in
        self.playing = False
        self.target_steps = self.config.epochs
        self.run: Run | None = None
        self.notice = ""  # what the last action did, for the UI to show
        self.error = ""  # why the last action failed or training stopped
        self.source = ""
        self.file_features: dict[str, np.ndarray] | None = None
        self.use_file_features = False
        self.sample = 0  # the dataset graph on show (graph-classification datasets)
        self.race_result: list[RaceEntry] | None = None
        self.compile_info: dict | None = None
        self._graph_key = None
        self._graph: Graph | None = None
        if self.task == "graph":
            self.history = History(Drawing())
            self.source = f"dataset: {self.config.graph}"
            self.reset()
            if self.run is not None:
                self.show_sample(0)
            return
        drawing = from_preset(self.config.graph, seed=self.config.seed,
                              difficulty=self.config.difficulty)
        self.history = History(drawing)
        self.source = f"preset: {self.config.graph}"
        self.reset()

    # ================================================================ graph
    @property
    def drawing(self) -> Drawing:
        return self.history.current

    @property
    def task(self) -> str:
        """``node`` (the drawing's nodes) or ``graph`` (a dataset of graphs)."""
        return self.config.task

    @property
    def graph(self) -> Graph | None:
        """The drawing as a training-ready graph (``None`` when it has no nodes,
        and for a graph-classification dataset, which is not drawn as one)."""
        if self.task == "graph":
            return None
        cfg = self.config
        key = (self.drawing, cfg.features, cfg.seed, cfg.train_per_class,
               self.use_file_features, id(self.file_features))
        if key != self._graph_key:
            self._graph = self._build_graph(self.drawing)
            self._graph_key = key
        return self._graph

    def _build_graph(self, drawing: Drawing) -> Graph | None:
        if not drawing.num_nodes:
            return None
        x = None
        if self.use_file_features and self.file_features:
            width = next(iter(self.file_features.values())).shape
            x = np.stack([self.file_features.get(name, np.zeros(width, np.float32))
                          for name in drawing.names])
        cfg = self.config
        return drawing.to_graph(features=cfg.features, seed=cfg.seed,
                                train_per_class=cfg.train_per_class, x=x)

    def stats(self) -> GraphStats:
        d = self.drawing
        n, e = d.num_nodes, len(d.edges)
        pairs = n * (n - 1) if d.directed else n * (n - 1) / 2
        labels = [v for v in d.labels if v >= 0]
        return GraphStats(nodes=n, edges=e, classes=len(set(labels)),
                          density=e / pairs if pairs else 0.0, directed=d.directed,
                          labelled=len(labels))

    def splits(self) -> list[str]:
        """Per node: ``train``, ``val``, ``test`` or ``none`` (for a dataset: the
        split of the graph on show, for each of its nodes)."""
        if self.task == "graph":
            if self.run is None:
                return []
            return [self.graph_split(self.sample)] * self.drawing.num_nodes
        g = self.graph
        if g is None:
            return []
        out = np.full(g.num_nodes, "none", dtype=object)
        for name in ("test", "val", "train"):
            out[np.asarray(getattr(g, f"{name}_mask"))] = name
        return list(out)

    def load_preset(self, name: str, *, difficulty: float | None = None) -> None:
        """Replace the graph with a preset, or switch to a graph-classification
        dataset (``ValueError`` for a bad name or difficulty; the current graph
        stays)."""
        difficulty = self.config.difficulty if difficulty is None else float(difficulty)
        if name in GRAPH_TASKS:
            features = (self.config.features if self.config.features in GRAPH_FEATURES
                        else "degree_one_hot")
            config = self.config.replace(graph=name, difficulty=0.0, features=features)
            self._replace_graph(Drawing(), f"dataset: {name}", None, config)
            self.show_sample(0)
            self.notice = (f"Loaded the {name} dataset: {len(self.run.graphs)} graphs, one "
                           "label each.")
            return
        config = self.config.replace(graph=name, difficulty=difficulty)  # validates
        drawing = from_preset(name, seed=config.seed, difficulty=difficulty)
        self._replace_graph(drawing, f"preset: {name}", None, config)
        self.notice = f"Loaded {name}."

    def load_drawing(self, drawing: Drawing, source: str) -> None:
        """Replace the graph with ``drawing`` (e.g. from a shared link)."""
        if self.task == "graph":
            raise ValueError("a drawn graph cannot go with a graph-classification dataset")
        self._replace_graph(drawing, source, None, self.config)

    def load_file(self, filename: str, data: bytes) -> list[str]:
        """Replace the graph with an uploaded file. Raises
        :class:`explorer.graphio.GraphFileError` naming the file and the line or
        field; the current graph stays. Returns the file's warnings."""
        gf = load_graph_file(filename, data)
        drawing = gf.to_drawing(seed=self.config.seed)
        warnings = list(gf.warnings)
        if gf.labels is None or not np.any(np.asarray(gf.labels) >= 0):
            labels = _community_labels(drawing)
            drawing = dataclasses.replace(drawing, labels=tuple(labels))
            warnings.append("the file has no labels: nodes are labelled by community")
        features = None
        if gf.features is not None:
            features = {name: np.asarray(row, np.float32)
                        for name, row in zip(gf.names, gf.features)}
        self._replace_graph(drawing, f"file: {filename}", features, self.config)
        self.notice = f"Loaded {filename}: {drawing.num_nodes} nodes, {len(drawing.edges)} edges."
        return warnings

    def _replace_graph(self, drawing: Drawing, source: str, features, config) -> None:
        saved = dict(vars(self))  # every attribute is replaced, never mutated, below
        self.history, self.source, self.config = History(drawing), source, config
        self.revision += 1
        self.file_features, self.use_file_features = features, features is not None
        try:
            self.reset(raise_errors=True)
        except ValueError:
            vars(self).update(saved)  # the previous graph and run, untouched
            raise

    # ------------------------------------------------------ graph datasets
    def show_sample(self, index: int) -> None:
        """Show graph ``index`` of the dataset in the drawing (not editable)."""
        if self.task != "graph" or self.run is None:
            raise ValueError("only a graph-classification dataset has graphs to show")
        graphs = self.run.graphs
        index = int(np.clip(index, 0, len(graphs) - 1))
        g = graphs[index]
        ei = np.asarray(g.edge_index)
        keep = ei[0] < ei[1]  # each undirected edge once
        label = int(self.run.labels[index])
        drawing = Drawing(names=tuple(str(i) for i in range(g.num_nodes)),
                          labels=(label,) * g.num_nodes, positions=(None,) * g.num_nodes,
                          edges=tuple(map(tuple, ei[:, keep].T.tolist())))
        self.sample = index
        self.history = History(drawing.layout("kamada_kawai"))
        self.revision += 1

    def graph_split(self, index: int) -> str:
        for name, mask in zip(("train", "val", "test"), self.run.split):
            if mask[index]:
                return name
        return "none"

    def graph_table(self) -> list[dict]:
        """One row per graph of the dataset: size, label, prediction, split."""
        if self.task != "graph" or self.run is None:
            return []
        pred = np.asarray(self.run.predictions())
        return [{"graph": i, "nodes": g.num_nodes, "edges": g.num_edges // 2,
                 "label": int(self.run.labels[i]), "predicted": int(pred[i]),
                 "correct": bool(pred[i] == self.run.labels[i]), "split": self.graph_split(i)}
                for i, g in enumerate(self.run.graphs)]

    # -------------------------------------------------------------- editing
    def edit(self, drawing: Drawing, what: str) -> None:
        """Make ``drawing`` the current graph (undoable) and carry the run over:
        same feature width and classes → the run continues on the new graph
        (retracing if its shapes changed); otherwise a new run starts."""
        if self.task == "graph":
            raise ValueError("a graph-classification dataset is not edited: load a preset "
                             "graph to draw")
        if drawing == self.drawing:
            return
        self.history.push(drawing)
        self.revision += 1
        self._graph_changed(what)

    def add_node(self, label: int = -1) -> None:
        d = self.drawing.add_node(label=label)
        self.edit(d.layout("spring", seed=d.num_nodes), f"added node {d.names[-1]}")

    def connect(self, selected: Sequence[int]) -> None:
        nodes = sorted(set(selected))
        if len(nodes) != 2:
            raise ValueError(f"select exactly two nodes to connect (selected: {len(nodes)})")
        u, v = nodes
        if self.drawing.has_edge(u, v):
            raise ValueError(f"nodes {self.drawing.names[u]} and {self.drawing.names[v]} "
                             "are already connected")
        self.edit(self.drawing.add_edge(u, v),
                  f"connected {self.drawing.names[u]} and {self.drawing.names[v]}")

    def disconnect(self, selected: Sequence[int]) -> None:
        nodes = sorted(set(selected))
        if len(nodes) != 2 or not self.drawing.has_edge(*nodes):
            raise ValueError("select the two end nodes of an existing edge")
        self.edit(self.drawing.remove_edge(*nodes), "removed an edge")

    def delete(self, selected: Sequence[int]) -> None:
        nodes = sorted(set(selected))
        if not nodes:
            raise ValueError("select nodes to delete first")
        self.edit(self.drawing.remove_nodes(nodes), f"deleted {len(nodes)} node(s)")

    def set_label(self, selected: Sequence[int], label: int) -> None:
        nodes = sorted(set(selected))
        if not nodes:
            raise ValueError("select nodes to label first")
        if not -1 <= int(label) < 64:
            raise ValueError("label must be from -1 (unlabelled) to 63")
        self.edit(self.drawing.set_label(nodes, int(label)),
                  f"labelled {len(nodes)} node(s) {int(label)}")

    def set_edges(self, rows: Sequence[tuple[str, str]]) -> None:
        """Replace the edges with ``(source name, target name)`` rows (the edge
        table). A bad row raises ``ValueError`` naming it; nothing changes."""
        index = {name: i for i, name in enumerate(self.drawing.names)}
        d = dataclasses.replace(self.drawing, edges=())
        for row, (u, v) in enumerate(rows, start=1):
            u, v = ("" if u is None else str(u).strip(), "" if v is None else str(v).strip())
            if not u and not v:
                continue  # a blank row the editor added
            for end, name in (("source", u), ("target", v)):
                if name not in index:
                    raise ValueError(f"edge table row {row}, {end}: no node named {name!r}")
            d = d.add_edge(index[u], index[v])
        added = len(d.edges) - len(self.drawing.edges)
        self.edit(d, f"edge table: {added:+d} edge(s)")

    def relayout(self, method: str) -> None:
        if method not in LAYOUTS:
            raise ValueError(f"unknown layout {method!r}; choose one of {LAYOUTS}")
        d = dataclasses.replace(self.drawing, positions=(None,) * self.drawing.num_nodes)
        self.history.push(d.layout(method, seed=self.config.seed))  # same graph: run goes on
        self.revision += 1

    def undo(self) -> None:
        before = self.drawing
        self.history.undo()
        if self.drawing != before:
            self.revision += 1
            self._graph_changed("undo")

    def _graph_changed(self, what: str) -> None:
        self.race_result = None
        graph, run = self.graph, self.run
        if graph is None:
            self.reset()
            self.notice = f"{what}: the graph is empty; add a node to train"
            return
        if (run is None or graph.num_features != run.graph.num_features
                or _classes(graph) != _classes(run.graph)):
            why = ("no run yet" if run is None else
                   f"features per node {run.graph.num_features} -> {graph.num_features}"
                   if graph.num_features != run.graph.num_features else
                   f"classes {_classes(run.graph)} -> {_classes(graph)}")
            self.reset()
            self.notice = f"{what}: a new run started ({why})."
            return
        run.set_graph(graph)
        self.compile_info = None
        pending = run.pending_retrace
        self.notice = (f"{what}: the run continues on the edited graph" +
                       (f"; the next step retraces ({pending})." if pending else "."))

    # ============================================================== config
    def set_config(self, config: RunConfig) -> bool:
        """Use ``config`` from now on (its ``graph``/``difficulty`` are those of
        the current graph; use :meth:`load_preset` to change them). A changed
        config starts a new run; returns whether it changed."""
        config = config.replace(graph=self.config.graph, difficulty=self.config.difficulty)
        if config == self.config:
            return False
        changed = [f.name for f in dataclasses.fields(config)
                   if getattr(config, f.name) != getattr(self.config, f.name)]
        self.config = config
        self.reset()
        self.notice = f"Changed {', '.join(changed)}: a new run started."
        return True

    def reset(self, *, raise_errors: bool = False) -> None:
        """A new run from the config's seed: fresh weights, empty history, a new
        generation (stale ticks are ignored), paused."""
        self.generation += 1
        self.playing = False
        self.target_steps = self.config.epochs
        self.error = self.notice = ""
        self.compile_info = None
        self.race_result = None
        self.run = None
        try:
            if self.task == "graph":
                self.run = Run(self.config)
                return
            graph = self.graph
            if graph is not None:
                self.run = Run(self.config, graph)
        except ValueError as err:
            if raise_errors:
                raise
            self.error = f"cannot build the model: {err}"

    # ============================================================ training
    @property
    def steps_done(self) -> int:
        return len(self.run.history) if self.run else 0

    @property
    def finished(self) -> bool:
        return self.steps_done >= self.target_steps

    def step(self) -> StepRecord | None:
        """One training step (the Step button); pauses live training."""
        self.playing = False
        if self.run is None:
            self.error = "nothing to train: the graph is empty or the model failed to build"
            return None
        return self._one_step()

    def play(self) -> int:
        """Start live training; returns the token that :meth:`tick` needs. When
        the target is reached, Play trains ``config.epochs`` more steps."""
        if self.run is None:
            self.error = "nothing to train: the graph is empty or the model failed to build"
            return -1
        if self.finished:
            self.target_steps = self.steps_done + self.config.epochs
        self.playing, self.error = True, ""
        self.play_token = self.generation
        return self.play_token

    def pause(self) -> None:
        self.playing = False

    def tick(self, token: int) -> int:
        """Train one chunk: steps until ``tick_budget_s`` is spent, the target is
        reached, ``steps_per_tick`` steps ran, or training stops. A token from an
        earlier generation (a timer that outlived a reset) does nothing.
        Returns the number of steps run."""
        if not self.playing or token != self.generation or self.run is None:
            return 0
        start = time.perf_counter()
        limit = self.steps_per_tick or math.inf
        done = 0
        while self.playing and done < limit and not self.finished:
            if self._one_step() is None:
                break
            done += 1
            if time.perf_counter() - start >= self.tick_budget_s:
                break
        if self.finished and self.playing:
            self.playing = False
            self.notice = f"Finished {self.steps_done} steps. Play trains more."
        return done

    def _one_step(self) -> StepRecord | None:
        try:
            return self.run.step()
        except (TrainingStopped, ValueError) as err:
            self.playing = False
            self.error = str(err)
            return None

    # ========================================================= diagnostics
    def audit(self) -> AuditReport | None:
        if self.run is None or not self.run.history:
            return None
        return self.run.audit()

    def change_matrix(self, last: int = 200):
        """``(paths, kinds, steps, matrix)`` of the per-step relative change of
        every variable over the last ``last`` steps (the heatmap's data)."""
        changes = self.run.changes[-last:] if self.run else []
        if not changes:
            return [], [], [], np.zeros((0, 0))
        paths = [c.path for c in changes[0]]
        kinds = [c.kind for c in changes[0]]
        first = len(self.run.changes) - len(changes) + 1
        matrix = np.array([[c.relative_change for c in step] for step in changes]).T
        return paths, kinds, list(range(first, first + len(changes))), matrix

    def retrace_info(self) -> dict:
        """Trace count and the cause of the last (re)trace."""
        run = self.run
        if run is None:
            return {"traces": 0, "last_cause": "", "last_step": None}
        last = next((r for r in reversed(run.history) if r.traced), None)
        return {"traces": run.trace_count, "last_cause": last.trace_cause if last else "",
                "last_step": last.step if last else None,
                "pending": run.pending_retrace if run.history else ""}

    def measure_compile(self) -> dict | None:
        """Trace + lower and XLA compile times of the current step (the AOT API
        on a fresh jit; about a second) plus first-call and steady step times."""
        if self.run is None:
            return None
        info = self.run.compile_breakdown()
        self.compile_info = None if info is None else {**info, "steps": self.steps_done,
                                                       "generation": self.generation}
        return self.compile_info

    def start_race(self, steps: int,
                   progress: Callable[[str, int, int], None] | None = None) -> list[RaceEntry]:
        """Every mode from the same initial weights on the current graph."""
        if self.graph is None and self.task == "node":
            raise ValueError("the graph is empty: nothing to race on")
        self.playing = False
        self.race_result = race(self.config, self.graph, steps=steps, progress=progress)
        return self.race_result


def _classes(graph: Graph) -> int:
    return max(graph.num_classes(), 2)  # as Run sizes its output layer


def _community_labels(drawing: Drawing) -> list[int]:
    labels = [-1] * drawing.num_nodes
    G = drawing.to_networkx().to_undirected()
    for c, members in enumerate(nx.community.greedy_modularity_communities(G)):
        for n in members:
            labels[n] = c
    return labels
