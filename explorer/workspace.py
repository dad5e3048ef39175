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
import functools
import gc
import math
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from explorer.audit import AuditReport
from explorer.config import RunConfig
from explorer.drawing import AUTO_LAYOUT_NODES, LAYOUTS, Drawing, History, from_preset
from explorer.engine import Run, StepRecord, Task, TrainingStopped, task_for
from explorer.graphio import MAX_LABEL, load_graph_file
from explorer.race import RaceEntry, race
from explorer.sources import (
    DENSE_FEATURE_NODES,
    DENSE_FEATURES,
    PRESETS,
    SCALABLE_FEATURES,
    GraphSource,
    community_labels,
    preset_file,
)
from gnncore import Graph

__all__ = ["TICK_BUDGET_S", "FileData", "GraphStats", "Workspace"]

# A tick's training time; the redraw comes on top. Each redraw costs the browser
# 0.2-0.3 s of main-thread work on a 2-core machine, so fewer, longer ticks train
# faster and leave the page free for clicks (a click ends the tick early, see
# tick); but the canvas's live colours wait for the tick, so not too long.
TICK_BUDGET_S = 0.6


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
        self.loads = 0  # bumped when a new graph is loaded (the canvas fits it in view)
        self.play_token = -1  # the generation Play was pressed in
        self.playing = False
        self.target_steps = self.config.epochs
        self.run: Run | None = None
        self.notice = ""  # what the last action did, for the UI to show
        self.notice_is_edit = False  # the notice is about an edit of the drawing
        self.error = ""  # why the last action failed or training stopped
        self.source = GraphSource("drawing")
        self.file_data: FileData | None = None  # a file's own features and split
        self.selected: tuple[int, ...] = ()  # nodes selected on the canvas
        self.canvas_acks: dict[str, int] = {}  # canvas client -> last applied event
        self.view_positions: dict[str, tuple[float, float]] = {}  # big-graph view layout
        self.sample = 0  # the dataset graph on show (graph-classification datasets)
        self.race_result: list[RaceEntry] | None = None
        self.compile_info: dict | None = None
        self._graph_key = None
        self._graph: Graph | None = None
        if not self.task.editable:
            self.history = History(Drawing())
            self.source = GraphSource("dataset", self.config.graph)
            self.reset()
            if self.run is not None:
                self.show_sample(0)
            return
        self.source = GraphSource("preset", self.config.graph)
        gf = preset_file(self.config.graph)
        if gf is not None:
            drawing, self.file_data, _ = _from_file(gf, self.config.seed)
            self.history = History(drawing)
        else:
            self.history = History(from_preset(self.config.graph, seed=self.config.seed,
                                               difficulty=self.config.difficulty))
        if self.config.features == "file" and (self.file_data is None
                                               or self.file_data.features is None):
            self.config = self.config.replace(features="one_hot")
            self.notice = "this graph has no node features of its own: one_hot is used"
        self.reset()

    # ================================================================ graph
    @property
    def drawing(self) -> Drawing:
        return self.history.current

    @property
    def task(self) -> type[Task]:
        """What is classified: the drawing's nodes (``NodeTask``, editable) or
        the graphs of a dataset (``GraphTask``)."""
        return self.config.task

    @property
    def graph(self) -> Graph | None:
        """The drawing as a training-ready graph (``None`` when it has no nodes,
        and for a graph-classification dataset, which is not drawn as one)."""
        if not self.task.editable:
            return None
        cfg = self.config
        key = (self.drawing.structure, cfg.features, cfg.seed, cfg.train_per_class,
               id(self.file_data))
        if key != self._graph_key:
            self._graph = self._build_graph(self.drawing)
            self._graph_key = key
        return self._graph

    def _build_graph(self, drawing: Drawing) -> Graph | None:
        if not drawing.num_nodes:
            return None
        x = split = None
        cfg = self.config
        data = self.file_data
        if cfg.features == "file" and not self.has_file_features:
            raise ValueError("features 'file': this graph has no node features of its own")
        if data is not None:
            rows = np.asarray([data.index.get(name, -1) for name in drawing.names])
            known = rows >= 0  # nodes drawn after loading have no row of the file
            if cfg.features == "file":
                x = np.where(known[:, None], data.features[np.maximum(rows, 0)], 0.0
                             ).astype(np.float32)
            if data.split is not None:
                split = tuple(np.where(known, mask[np.maximum(rows, 0)], False)
                              for mask in data.split)
        return drawing.to_graph(features=cfg.features, seed=cfg.seed,
                                train_per_class=cfg.train_per_class, x=x, split=split)

    @property
    def has_file_features(self) -> bool:
        return self.file_data is not None and self.file_data.features is not None

    def split_info(self) -> str:
        """Which split is in use and its sizes, e.g. ``the file's split: 140 train ·
        500 val · 1000 test``."""
        g = self.graph
        if g is None:
            return ""
        sizes = " · ".join(f"{int(np.sum(np.asarray(getattr(g, f'{k}_mask'))))} {k}"
                           for k in ("train", "val", "test"))
        if self.file_data is not None and self.file_data.split is not None:
            return f"the file's own split: {sizes}"
        return (f"a generated split ({self.config.train_per_class} training nodes per "
                f"class, the rest half val, half test; seed {self.config.seed}): {sizes}")

    def training_hint(self) -> str:
        """Why a node run has nothing to learn from, or ``""``: with no labelled
        node in the training split the loss is 0, so only weight decay moves
        the weights and the audit still sees them change."""
        g = self.graph
        if not self.task.editable or g is None:
            return ""
        train = np.asarray(g.train_mask) & (np.asarray(g.y) >= 0)
        if train.any():
            return ""
        labelled = int(np.sum(np.asarray(g.y) >= 0))
        what = ("no node has a label" if labelled == 0 else
                f"none of the {labelled} labelled node(s) is in the training split")
        return (f"Nothing to learn from: {what}, so the loss is 0 and only weight decay "
                "changes the weights. Label nodes (select them and type a class number) "
                "to train.")

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
        if not self.task.editable:
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
        task = task_for(name)
        if not task.editable:  # a dataset of graphs
            features = task.usable_features(self.config.features)
            config = self.config.replace(graph=name, difficulty=0.0, features=features)
            self._replace_graph(Drawing(), GraphSource("dataset", name), None, config)
            self.show_sample(0)
            self.notice = (f"Loaded the {name} dataset: {len(self.run.task.graphs)} graphs, one "
                           "label each.")
            return
        config = self.config.replace(graph=name, difficulty=difficulty)  # validates
        gf = preset_file(name)
        if gf is not None:  # a real dataset shipped as a file: its features and split
            drawing, data, _ = _from_file(gf, config.seed)
            features = PRESETS[name].default_features if data.features is not None else (
                "one_hot" if config.features == "file" else config.features)
            self._replace_graph(drawing, GraphSource("preset", name), data,
                                config.replace(features=features))
            self.notice = (f"Loaded {name}: {drawing.num_nodes:,} nodes, its own features "
                           f"and {self.split_info()}.")
            return
        if config.features == "file":
            config = config.replace(features=PRESETS[name].default_features)
        drawing = from_preset(name, seed=config.seed, difficulty=difficulty)
        self._replace_graph(drawing, GraphSource("preset", name), None, config)
        self.notice = f"Loaded {name}."

    def load_drawing(self, drawing: Drawing, source: GraphSource) -> None:
        """Replace the graph with ``drawing`` (e.g. from a shared link)."""
        if not self.task.editable:
            raise ValueError("a drawn graph cannot go with a graph-classification dataset")
        config = self.config
        if config.features == "file":
            config = config.replace(features="one_hot")
        self._replace_graph(drawing, source, None, config)

    def load_file(self, filename: str, data: bytes) -> list[str]:
        """Replace the graph with an uploaded file. Raises
        :class:`explorer.graphio.GraphFileError` naming the file and the line or
        field; the current graph stays. Returns the file's warnings."""
        gf = load_graph_file(filename, data)
        drawing, file_data, warnings = _from_file(gf, self.config.seed)
        features = ("file" if file_data.features is not None else
                    "one_hot" if self.config.features == "file" else self.config.features)
        if features in DENSE_FEATURES and drawing.num_nodes > DENSE_FEATURE_NODES:
            features = SCALABLE_FEATURES[0]
            warnings.append(f"{drawing.num_nodes:,} nodes and no features in the file: "
                            f"node features are '{features}' (one-hot ids would not fit)")
        self._replace_graph(drawing, GraphSource("file", filename), file_data,
                            self.config.replace(features=features))
        self.notice = (f"Loaded {filename}: {drawing.num_nodes:,} nodes, {len(drawing.edges):,} "
                       f"edges; {self.split_info()}.")
        return warnings

    def use_file_features(self, use: bool) -> None:
        """Train on the file's own node features (``features='file'``) or go back
        to the preset's default kind."""
        if use and not self.has_file_features:
            raise ValueError("this graph has no node features of its own")
        fallback = ("one_hot" if self.drawing.num_nodes <= DENSE_FEATURE_NODES
                    else SCALABLE_FEATURES[0])  # one-hot ids of a big graph would not fit
        self.set_config(self.config.replace(features="file" if use else fallback))

    def _replace_graph(self, drawing: Drawing, source: GraphSource, file_data,
                       config) -> None:
        saved = dict(vars(self))  # every attribute is replaced, never mutated, below
        self.history, self.source, self.config = History(drawing), source, config
        self.revision += 1
        self.loads += 1
        self.file_data, self.selected, self.view_positions = file_data, (), {}
        try:
            self.reset(raise_errors=True)
        except ValueError:
            vars(self).update(saved)  # the previous graph and run, untouched
            raise
        saved.clear()  # the previous run was kept for the rollback: it goes now
        release_memory()  # see _drop_run

    # ------------------------------------------------------ graph datasets
    def show_sample(self, index: int) -> None:
        """Show graph ``index`` of the dataset in the drawing (not editable)."""
        if self.task.editable or self.run is None:
            raise ValueError("only a graph-classification dataset has graphs to show")
        graphs = self.run.task.graphs
        index = int(np.clip(index, 0, len(graphs) - 1))
        g = graphs[index]
        ei = np.asarray(g.edge_index)
        keep = ei[0] < ei[1]  # each undirected edge once
        label = int(self.run.task.labels[index])
        drawing = Drawing(names=tuple(str(i) for i in range(g.num_nodes)),
                          labels=(label,) * g.num_nodes, positions=(None,) * g.num_nodes,
                          edges=tuple(map(tuple, ei[:, keep].T.tolist())))
        self.sample = index
        self.history = History(drawing.layout("kamada_kawai"))
        self.revision += 1
        self.loads += 1

    def graph_split(self, index: int) -> str:
        for name, mask in zip(("train", "val", "test"), self.run.task.split):
            if mask[index]:
                return name
        return "none"

    def graph_table(self) -> list[dict]:
        """One row per graph of the dataset: size, label, prediction, split."""
        if self.task.editable or self.run is None:
            return []
        pred = np.asarray(self.run.predictions())
        return [{"graph": i, "nodes": g.num_nodes, "edges": g.num_edges // 2,
                 "label": int(self.run.task.labels[i]), "predicted": int(pred[i]),
                 "correct": bool(pred[i] == self.run.task.labels[i]), "split": self.graph_split(i)}
                for i, g in enumerate(self.run.task.graphs)]

    # -------------------------------------------------------------- editing
    def edit(self, drawing: Drawing, what: str) -> None:
        """Make ``drawing`` the current graph (one undo step) and carry the run
        over: same feature width and classes → the run continues on the new
        graph (retracing if its shapes changed); otherwise a new run starts. A
        change of positions alone (a move, a re-layout) leaves the run alone."""
        if not self.task.editable:
            raise ValueError("a graph-classification dataset is not edited: load a preset "
                             "graph to draw")
        if drawing == self.drawing:
            return
        before = self.drawing
        self.history.push(drawing)
        self._changed(before, what)
        self.notice_is_edit = True

    def _changed(self, before: Drawing, what: str) -> None:
        if self.drawing.structure == before.structure:
            self.notice = f"{what}."
            return
        self.revision += 1
        if self.drawing.names != before.names:  # indices may now mean other nodes
            keep = {name: i for i, name in enumerate(self.drawing.names)}
            self.selected = tuple(sorted(keep[before.names[i]] for i in self.selected
                                         if i < before.num_nodes and before.names[i] in keep))
        self._graph_changed(what)

    def select(self, nodes: Sequence[int]) -> None:
        """The canvas selection (node indices); buttons act on it."""
        n = self.drawing.num_nodes
        self.selected = tuple(sorted({int(i) for i in nodes if 0 <= int(i) < n}))

    def add_node(self, label: int = -1, position: tuple[float, float] | None = None) -> int:
        """Add a node at ``position`` (a double-click on the canvas) or, without
        one, at a free spot next to the others; no other node moves. Returns
        its index."""
        d = self.drawing
        free = position if position is not None else _free_spot(d)
        # a name the file never used: a new node must not inherit a deleted node's
        # features or split (they are looked up by name)
        name = _fresh_name(d, self.file_data.index if self.file_data else ())
        self.edit(d.add_node(name, label=label, position=free), f"added node {name}")
        return self.drawing.num_nodes - 1

    def add_edge(self, u: int, v: int) -> None:
        """Join ``u`` and ``v`` (an edge drawn on the canvas)."""
        d = self.drawing
        u, v = d._check(u), d._check(v)
        if d.has_edge(u, v):
            raise ValueError(f"nodes {d.names[u]} and {d.names[v]} are already connected")
        self.edit(d.add_edge(u, v), f"connected {d.names[u]} and {d.names[v]}")

    def connect(self, selected: Sequence[int]) -> None:
        nodes = sorted(set(selected))
        if len(nodes) != 2:
            raise ValueError(f"select exactly two nodes to connect (selected: {len(nodes)})")
        self.add_edge(*nodes)

    def disconnect(self, selected: Sequence[int]) -> None:
        nodes = sorted(set(selected))
        if len(nodes) != 2 or not self.drawing.has_edge(*nodes):
            raise ValueError("select the two end nodes of an existing edge")
        self.edit(self.drawing.remove_edge(*nodes), "removed an edge")

    def delete(self, selected: Sequence[int], edges: Sequence[tuple[int, int]] = ()) -> None:
        """Delete nodes (with their edges) and edges, as one undo step."""
        nodes = sorted(set(selected))
        if not nodes and not edges:
            raise ValueError("select nodes or edges to delete first")
        d = self.drawing
        for u, v in edges:
            d = d.remove_edge(u, v)
        d = d.remove_nodes(nodes) if nodes else d
        parts = [f"{len(nodes)} node(s)" if nodes else "",
                 f"{len(edges)} edge(s)" if edges else ""]
        self.edit(d, "deleted " + " and ".join(p for p in parts if p))

    def move(self, positions: Mapping[int, tuple[float, float]]) -> None:
        """Nodes dragged to new places: one undo step, the run is untouched."""
        if positions:
            self.edit(self.drawing.move_nodes(positions), f"moved {len(positions)} node(s)")

    def set_label(self, selected: Sequence[int], label: int) -> None:
        nodes = sorted(set(selected))
        if not nodes:
            raise ValueError("select nodes to label first")
        if not -1 <= int(label) <= MAX_LABEL:
            raise ValueError(f"label must be from -1 (unlabelled) to {MAX_LABEL}")
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
        """Lay every node out afresh (one undo step of its own; the run goes on)."""
        if method not in LAYOUTS:
            raise ValueError(f"unknown layout {method!r}; choose one of {LAYOUTS}")
        d = self.drawing
        if d.num_nodes > AUTO_LAYOUT_NODES:
            self.view_positions = {}  # the canvas lays out the nodes it shows
            self.notice = f"re-laid out the nodes on show ({method})"
            return
        d = dataclasses.replace(d, positions=(None,) * d.num_nodes)
        self.edit(d.layout(method, seed=self.config.seed), f"re-laid out ({method})")

    def clear(self) -> None:
        """A new, empty graph to draw on (undo brings the old one back)."""
        self.edit(self.drawing.clear(), "new empty graph: double-click the canvas to add nodes")

    def undo(self) -> None:
        before = self.drawing
        self.history.undo()
        if self.drawing != before:
            self._changed(before, "undo")
            self.notice_is_edit = True

    def redo(self) -> None:
        before = self.drawing
        self.history.redo()
        if self.drawing != before:
            self._changed(before, "redo")
            self.notice_is_edit = True

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
        self.notice_is_edit = False
        self.compile_info = None
        self.race_result = None
        self._drop_run()
        try:
            if not self.task.editable:
                self.run = Run(self.config)
                return
            graph = self.graph
            if graph is not None:
                self.run = Run(self.config, graph)
        except ValueError as err:
            if raise_errors:
                raise
            self.error = f"cannot build the model: {err}"

    def _drop_run(self) -> None:
        """Let go of the run before a new one is built, so that its memory is
        back first. Reference counting frees it (a Run holds no reference
        cycle: explorer/engine.py), since the app turns Streamlit's per-rerun
        full ``gc.collect()`` off. The young-generation collection frees the
        short-lived cycles that still pin some of its variables (flax's
        recursive flatten helpers leave one per state traversal): about 0.5 ms,
        against ~180 ms for a full collection with JAX loaded; a reset is rare
        and builds a model anyway. :func:`release_memory` also hands the freed
        heap back to the system."""
        self.run = None
        release_memory()

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

    def tick(self, token: int, interrupted: Callable[[], bool] | None = None) -> int:
        """Train one chunk: steps until ``tick_budget_s`` is spent, the target is
        reached, ``steps_per_tick`` steps ran, training stops, a step traced
        (its point shows at once), or ``interrupted()`` (asked between steps;
        the UI passes "someone clicked") is true after the first step. A
        token from an earlier generation (a timer that outlived a reset) does
        nothing. Returns the number of steps run."""
        if not self.playing or token != self.generation or self.run is None:
            return 0
        start = time.perf_counter()
        limit = self.steps_per_tick or math.inf
        done = 0
        while self.playing and done < limit and not self.finished:
            record = self._one_step()
            if record is None:
                break
            done += 1
            if record.traced:  # a compile: show its point (and the retrace) at once
                break
            if time.perf_counter() - start >= self.tick_budget_s:
                break
            if interrupted is not None and interrupted():
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
        if self.graph is None and self.task.editable:
            raise ValueError("the graph is empty: nothing to race on")
        self.playing = False
        self.race_result = race(self.config, self.graph, steps=steps, progress=progress)
        return self.race_result


def _classes(graph: Graph) -> int:
    return max(graph.num_classes(), 2)  # as Run sizes its output layer


def release_memory() -> None:
    """Give a dropped run's memory back: a young-generation collection (see
    :meth:`Workspace._drop_run`), then, with glibc, ``malloc_trim`` so that the
    freed heap goes back to the system instead of staying in the process
    (measured on a Cora run: 25 ms, RSS 501 -> 425 MB). Called when a run is
    replaced and when a session's workspace is freed; a tick never calls it."""
    gc.collect(1)
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim():
    try:
        import ctypes
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc: freed memory stays with the allocator
        return None


def _fresh_name(drawing: Drawing, taken=()) -> str:
    """The smallest number from the node count up not used as a node name (nor
    in ``taken``)."""
    used = set(drawing.names) | set(taken)
    n = drawing.num_nodes
    while str(n) in used:
        n += 1
    return str(n)


def _free_spot(drawing: Drawing) -> tuple[float, float]:
    """A place for a new node near the middle of the drawing that keeps clear of
    the others (a spiral outwards from the centre); nothing else moves."""
    placed = np.asarray([p for p in drawing.positions if p is not None], float).reshape(-1, 2)
    if not len(placed):
        return (0.0, 0.0)
    centre = placed.mean(axis=0)
    span = float(np.ptp(placed, axis=0).max()) or 1.0
    gap = span / max(4.0, np.sqrt(len(placed)) * 1.5)
    for k in range(1, 400):
        angle, radius = 2.399963 * k, gap * np.sqrt(k) * 0.8  # golden-angle spiral
        spot = centre + radius * np.array([np.cos(angle), np.sin(angle)])
        if np.min(np.linalg.norm(placed - spot, axis=1)) >= gap:
            return (float(spot[0]), float(spot[1]))
    return (float(centre[0] + span / 2 + gap), float(centre[1]))


@dataclasses.dataclass(frozen=True)
class FileData:
    """What a graph file brings besides its drawing: node features and a
    train/val/test split, by node name (nodes drawn later have neither)."""

    index: Mapping[str, int]
    features: np.ndarray | None
    split: tuple[np.ndarray, np.ndarray, np.ndarray] | None


def _from_file(gf, seed: int) -> tuple[Drawing, FileData, list[str]]:
    """A loaded graph file as ``(drawing, its features and split, warnings)``.
    Big graphs are not laid out here: the canvas lays out what it shows."""
    drawing = gf.to_drawing(seed=seed)  # big graphs stay unplaced: the canvas lays out a view
    warnings = list(gf.warnings)
    if gf.labels is None or not np.any(np.asarray(gf.labels) >= 0):
        labels = community_labels(drawing.to_networkx(), MAX_LABEL + 1)
        drawing = dataclasses.replace(drawing, labels=tuple(labels.tolist()))
        warnings.append("the file has no labels: nodes are labelled by community")
    features = None if gf.features is None else np.asarray(gf.features, np.float32)
    split = None if gf.split is None else tuple(np.asarray(m, bool) for m in gf.split)
    index = {name: i for i, name in enumerate(gf.names)}
    return drawing, FileData(index, features, split), warnings
