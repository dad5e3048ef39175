"""One person's explorer session, without streamlit: the graph being drawn, the
run configuration, the live run and its play state.

The UI keeps one :class:`Workspace` per browser session (in
``st.session_state``) and only calls its methods, so everything the app does
is testable headless. Nothing here is shared between workspaces.

The workspace is a thin façade: an :class:`Editor` holds the graph being
drawn (its drawing with undo, its source, a file's features and split, the
selection), a :class:`Player` the run and its play state (generations and
ticks); the workspace holds the :class:`RunConfig` and says in a sentence
what each action did (:attr:`notice`) or why it failed (:attr:`error`).
Loading a graph builds the new editor and run completely before either
replaces the old one, so a failure leaves everything as it was.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

import gnncore
from explorer import engine
from explorer.audit import AuditReport
from explorer.config import RunConfig
from explorer.drawing import Drawing, GraphArrays
from explorer.editor import Editor, FileData, GraphStats, from_file, open_graph
from explorer.graphio import load_graph_file
from explorer.player import TICK_BUDGET_S, Player, release_memory
from explorer.race import RaceEntry, race
from explorer.sources import (
    DENSE_FEATURE_NODES,
    DENSE_FEATURES,
    SCALABLE_FEATURES,
    GraphSource,
)

if TYPE_CHECKING:
    from explorer.engine import Run, SharedCompiles, StepRecord, Task
    from gnncore import Graph

__all__ = ["TICK_BUDGET_S", "FileData", "GraphStats", "Workspace", "release_memory"]


class Workspace:
    """A graph being drawn (:attr:`editor`), a :class:`RunConfig`, the
    :class:`Run` built from them and its play state (:attr:`player`).

    Arguments:
        config: the starting configuration; its ``graph`` preset is loaded.
        tick_budget_s: how long one tick may train before returning.
        shared: compiled steps shared with other workspaces (the app's sessions:
            :class:`~explorer.engine.compiles.SharedCompiles`); ``None``: every
            run compiles its own.
        build: build the run now. ``False`` leaves a node task's run to
            :meth:`build` (:attr:`pending` until then): the app draws a
            session's first page before the model's first JAX calls compile.
            A dataset's run is built at once either way (its graphs are shown
            through it).
    """

    def __init__(self, config: RunConfig | None = None, *,
                 tick_budget_s: float = TICK_BUDGET_S, shared: SharedCompiles | None = None,
                 build: bool = True):
        config = config or RunConfig()
        self.shared = shared
        self.player = Player(tick_budget_s=tick_budget_s)
        self.revision = 0  # bumped by every change of the drawing (UI widget keys)
        self.loads = 0  # bumped when a new graph is loaded (the canvas fits it in view)
        self.notice = ""  # what the last action did, for the UI to show
        self.notice_is_edit = False  # the notice is about an edit of the drawing
        self.error = ""  # why the last action failed or training stopped
        self.canvas_acks: dict[str, int] = {}  # canvas client -> last applied event
        self.race_result: list[RaceEntry] | None = None
        self.compile_info: dict | None = None
        self.editor, self.config = open_graph(config, picked=False)
        #: the run is left to :meth:`build` (``build=False``); any new run clears it
        self.pending = False
        if build or not self.task.editable:
            self.build()
        else:
            self._start(None)
            self.pending = True

    def build(self) -> None:
        """Build the run from the config's seed (what the constructor does
        unless told ``build=False``)."""
        self.reset()
        if not self.task.editable and self.run is not None:
            self.show_sample(0)  # a dataset: its graphs are shown one at a time

    # ========================================================= the parts
    @property
    def task(self) -> type[Task]:
        """What is classified: the drawing's nodes (``NodeTask``, editable) or
        the graphs of a dataset (``GraphTask``)."""
        return self.config.task

    @property
    def drawing(self) -> Drawing:
        return self.editor.drawing

    @property
    def history(self):
        return self.editor.history

    @property
    def source(self) -> GraphSource:
        return self.editor.source

    @property
    def file_data(self) -> FileData | None:
        return self.editor.file_data

    @property
    def has_file_features(self) -> bool:
        return self.editor.has_file_features

    @property
    def selected(self) -> tuple[int, ...]:
        return self.editor.selected

    @property
    def view_positions(self) -> dict[str, tuple[float, float]]:
        return self.editor.view_positions

    @property
    def sample(self) -> int:
        return self.editor.sample

    @property
    def run(self) -> Run | None:
        return self.player.run

    # the play state, read and set by the train panel
    generation = property(lambda self: self.player.generation)
    play_token = property(lambda self: self.player.play_token)
    steps_done = property(lambda self: self.player.steps_done)
    finished = property(lambda self: self.player.finished)
    playing = property(lambda self: self.player.playing,
                       lambda self, value: setattr(self.player, "playing", value))
    target_steps = property(lambda self: self.player.target_steps,
                            lambda self, value: setattr(self.player, "target_steps", value))
    steps_per_tick = property(lambda self: self.player.steps_per_tick,
                              lambda self, value: setattr(self.player, "steps_per_tick", value))
    tick_budget_s = property(lambda self: self.player.tick_budget_s,
                             lambda self, value: setattr(self.player, "tick_budget_s", value))

    # ================================================================ graph
    @property
    def graph(self) -> Graph | None:
        """The drawing as a training-ready graph (``None`` when it has no nodes,
        and for a graph-classification dataset, which is not drawn as one)."""
        if not self.task.editable:
            return None
        return self.editor.graph(self.config)

    @property
    def arrays(self) -> GraphArrays | None:
        """:attr:`graph` as host arrays: what the page shows about it (classes,
        split) without building it, so a first page loads no JAX."""
        if not self.task.editable:
            return None
        return self.editor.arrays(self.config)

    def split_info(self) -> str:
        """Which split is in use and its sizes, e.g. ``the file's split: 140 train ·
        500 val · 1000 test``."""
        g = self.arrays
        if g is None:
            return ""
        sizes = " · ".join(f"{int(np.sum(getattr(g, f'{k}_mask')))} {k}"
                           for k in ("train", "val", "test"))
        if self.file_data is not None and self.file_data.split is not None:
            return f"the file's own split: {sizes}"
        return (f"a generated split ({self.config.train_per_class} training nodes per "
                f"class, the rest half val, half test; seed {self.config.seed}): {sizes}")

    def features_info(self) -> str:
        """How the step takes the node features when they go in as CSR, e.g.
        ``1,433 per node, 1.3 % non-zero: the step takes them as CSR ...``;
        ``""`` when they go in dense (or before the run is built)."""
        if self.run is None:
            return ""
        x = self.run.inputs.x
        if not isinstance(x, gnncore.SparseFeatures):
            return ""
        nodes, width = x.shape
        share = 100 * x.values.shape[0] / (nodes * width)
        return (f"{width:,} per node, {share:.1f} % non-zero: the step takes them as CSR "
                "(SparseFeatures), so the first layer's product costs only the non-zeros")

    def training_hint(self) -> str:
        """Why a node run has nothing to learn from, or ``""``: with no labelled
        node in the training split the loss is 0, so only weight decay moves
        the weights and the audit still sees them change."""
        g = self.arrays
        if g is None:
            return ""
        train = g.train_mask & (g.y >= 0)
        if train.any():
            return ""
        labelled = int(np.sum(g.y >= 0))
        what = ("no node has a label" if labelled == 0 else
                f"none of the {labelled} labelled node(s) is in the training split")
        return (f"Nothing to learn from: {what}, so the loss is 0 and only weight decay "
                "changes the weights. Label nodes (select them and type a class number) "
                "to train.")

    def stats(self) -> GraphStats:
        return self.editor.stats()

    def splits(self) -> list[str]:
        """Per node: ``train``, ``val``, ``test`` or ``none`` (for a dataset: the
        split of the graph on show, for each of its nodes)."""
        if not self.task.editable:
            if self.run is None:
                return []
            return [self.graph_split(self.sample)] * self.drawing.num_nodes
        g = self.arrays
        if g is None:
            return []
        out = np.full(g.num_nodes, "none", dtype=object)
        for name in ("test", "val", "train"):
            out[getattr(g, f"{name}_mask")] = name
        return list(out)

    # ---------------------------------------------------------- loading
    def load_preset(self, name: str, *, difficulty: float | None = None) -> None:
        """Replace the graph with a preset, or switch to a graph-classification
        dataset (``ValueError`` for a bad name or difficulty; the current graph
        stays)."""
        difficulty = self.config.difficulty if difficulty is None else float(difficulty)
        task = engine.task_for(name)
        config = self.config.replace(  # validates
            graph=name, difficulty=difficulty if task.editable else 0.0,
            features=task.usable_features(self.config.features))
        self._load(*open_graph(config, picked=True))
        if not task.editable:
            self.show_sample(0)
            self.notice = (f"Loaded the {name} dataset: {len(self.run.task.graphs)} graphs, "
                           "one label each.")
        elif self.file_data is not None:  # a real dataset shipped as a file
            self.notice = (f"Loaded {name}: {self.drawing.num_nodes:,} nodes, its own "
                           f"features and {self.split_info()}.")
        else:
            self.notice = f"Loaded {name}."

    def load_drawing(self, drawing: Drawing, source: GraphSource) -> None:
        """Replace the graph with ``drawing`` (e.g. from a shared link)."""
        if not self.task.editable:
            raise ValueError("a drawn graph cannot go with a graph-classification dataset")
        config = self.config
        if config.features == "file":
            config = config.replace(features="one_hot")
        self._load(Editor(drawing, source), config)

    def load_file(self, filename: str, data: bytes) -> list[str]:
        """Replace the graph with an uploaded file. Raises
        :class:`explorer.graphio.GraphFileError` naming the file and the line or
        field; the current graph stays. Returns the file's warnings."""
        gf = load_graph_file(filename, data)
        drawing, file_data, warnings = from_file(gf, self.config.seed)
        features = ("file" if file_data.features is not None else
                    "one_hot" if self.config.features == "file" else self.config.features)
        if features in DENSE_FEATURES and drawing.num_nodes > DENSE_FEATURE_NODES:
            features = SCALABLE_FEATURES[0]
            warnings.append(f"{drawing.num_nodes:,} nodes and no features in the file: "
                            f"node features are '{features}' (one-hot ids would not fit)")
        self._load(Editor(drawing, GraphSource("file", filename), file_data),
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

    def reopen(self, editor: Editor, config: RunConfig) -> None:
        """Go back to an earlier editor (its drawing and undo history) with
        ``config``: a new run (a ``ValueError`` leaves everything as it is)."""
        self._load(editor, config)
        if not self.task.editable and self.run is not None:
            self.show_sample(editor.sample)

    def _load(self, editor: Editor, config: RunConfig) -> None:
        """Replace the graph: the new editor and its run are built first (a
        ``ValueError`` leaves the old ones in place), then both replace the old."""
        run = self._new_run(editor, config)  # raises before anything changed
        self.editor, self.config = editor, config
        self.revision += 1
        self.loads += 1
        self._start(run)
        release_memory()  # the old run went with the assignment above

    # ------------------------------------------------------ graph datasets
    def show_sample(self, index: int) -> None:
        """Show graph ``index`` of the dataset in the drawing (not editable)."""
        if self.task.editable or self.run is None:
            raise ValueError("only a graph-classification dataset has graphs to show")
        task = self.run.task
        index = int(np.clip(index, 0, len(task.graphs) - 1))
        self.editor = Editor.for_sample(task.graphs[index], int(task.labels[index]), index,
                                        self.source)
        self.revision += 1
        self.loads += 1

    def graph_split(self, index: int) -> str:
        return self.run.task.split_of(index)

    def graph_table(self) -> list[dict]:
        """One row per graph of the dataset: size, label, prediction, split."""
        if self.task.editable or self.run is None:
            return []
        return self.run.task.table(self.run.predictions())

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
        self._changed(self.editor.push(drawing), what)
        self.notice_is_edit = True

    def _changed(self, before: Drawing, what: str) -> None:
        if self.drawing.structure == before.structure:
            self.notice = f"{what}."
            return
        self.revision += 1
        self.editor.follow_selection(before)
        self._graph_changed(what)

    def select(self, nodes: Sequence[int]) -> None:
        """The canvas selection (node indices); buttons act on it."""
        self.editor.select(nodes)

    def add_node(self, label: int = -1, position: tuple[float, float] | None = None) -> int:
        """Add a node at ``position`` (a double-click on the canvas) or, without
        one, at a free spot next to the others; no other node moves. Returns
        its index."""
        self.edit(*self.editor.with_node(label, position))
        return self.drawing.num_nodes - 1

    def add_edge(self, u: int, v: int) -> None:
        """Join ``u`` and ``v`` (an edge drawn on the canvas)."""
        self.edit(*self.editor.with_edge(u, v))

    def connect(self, selected: Sequence[int]) -> None:
        nodes = sorted(set(selected))
        if len(nodes) != 2:
            raise ValueError(f"select exactly two nodes to connect (selected: {len(nodes)})")
        self.add_edge(*nodes)

    def disconnect(self, selected: Sequence[int]) -> None:
        self.edit(*self.editor.without_edge(selected))

    def delete(self, selected: Sequence[int], edges: Sequence[tuple[int, int]] = ()) -> None:
        """Delete nodes (with their edges) and edges, as one undo step."""
        self.edit(*self.editor.without(selected, edges))

    def move(self, positions: Mapping[int, tuple[float, float]]) -> None:
        """Nodes dragged to new places: one undo step, the run is untouched."""
        if positions:
            self.edit(*self.editor.moved(positions))

    def set_label(self, selected: Sequence[int], label: int) -> None:
        self.edit(*self.editor.labelled(selected, label))

    def set_edges(self, rows: Sequence[tuple[str, str]]) -> None:
        """Replace the edges with ``(source name, target name)`` rows (the edge
        table). A bad row raises ``ValueError`` naming it; nothing changes."""
        self.edit(*self.editor.with_edges(rows))

    def relayout(self, method: str) -> None:
        """Lay every node out afresh (one undo step of its own; the run goes on)."""
        edit = self.editor.relaid_out(method, self.config.seed)
        if edit is None:  # too big to lay out here: the canvas lays out its view
            self.notice = f"re-laid out the nodes on show ({method})"
            return
        self.edit(*edit)

    def clear(self) -> None:
        """A new, empty graph to draw on (undo brings the old one back)."""
        self.edit(self.drawing.clear(), "new empty graph: double-click the canvas to add nodes")

    def undo(self) -> None:
        before = self.editor.undo()
        if before is not None:
            self._changed(before, "undo")
            self.notice_is_edit = True

    def redo(self) -> None:
        before = self.editor.redo()
        if before is not None:
            self._changed(before, "redo")
            self.notice_is_edit = True

    def _graph_changed(self, what: str) -> None:
        self.race_result = None
        graph, run = self.graph, self.run
        if graph is None:
            self.reset()
            self.notice = f"{what}: the graph is empty; add a node to train"
            return
        if self.pending:  # an edit before the first model was built (there is no run)
            self.reset()
            self.notice = f"{what}: the model is built on the edited graph."
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

    def load_setup(self, config: RunConfig) -> None:
        """Put ``config``'s graph (a preset, loaded again only if another one is
        shown), model and mode into the workspace, with a fresh run: what a
        lesson sets up (the lesson panel and its headless rehearsal both call
        this, so they build the same programs)."""
        loaded_seed = None
        if self.source != GraphSource("preset", config.graph):
            self.load_preset(config.graph, difficulty=config.difficulty)
            loaded_seed = self.config.seed
        if not self.set_config(config):
            self.reset()
        if loaded_seed is not None and loaded_seed != config.seed:  # presets depend on the seed
            self.load_preset(config.graph, difficulty=config.difficulty)

    def reset(self) -> None:
        """A new run from the config's seed: fresh weights, empty history, a new
        generation (stale ticks are ignored), paused. The old run is let go
        before the new one is built (its memory is back first); a model that
        cannot be built leaves no run and says why in :attr:`error`."""
        self.player.drop_run()
        try:
            run = self._new_run(self.editor, self.config)
        except ValueError as err:
            self._start(None)
            self.error = f"cannot build the model: {err}"
            return
        self._start(run)

    def _new_run(self, editor: Editor, config: RunConfig) -> Run | None:
        """The run of ``config`` on ``editor``'s graph (``None``: an empty
        drawing). Raises ``ValueError`` when it cannot be built."""
        if not config.task.editable:
            return engine.Run(config, shared=self.shared)
        graph = editor.graph(config)
        return None if graph is None else engine.Run(config, graph, shared=self.shared)

    def _start(self, run: Run | None) -> None:
        self.pending = False
        self.player.start(run, self.config.epochs)
        self.error = self.notice = ""
        self.notice_is_edit = False
        self.compile_info = None
        self.race_result = None

    # ============================================================ training
    def step(self) -> StepRecord | None:
        """One training step (the Step button); pauses live training."""
        if self.run is None:
            self.player.playing = False
            self.error = "nothing to train: the graph is empty or the model failed to build"
            return None
        try:
            return self.player.step()
        except (engine.TrainingStopped, ValueError) as err:
            self.error = str(err)
            return None

    def play(self) -> int:
        """Start live training; returns the token that :meth:`tick` needs. When
        the target is reached, Play trains ``config.epochs`` more steps."""
        if self.run is None:
            self.error = "nothing to train: the graph is empty or the model failed to build"
            return -1
        self.error = ""
        return self.player.play(self.config.epochs)

    def pause(self) -> None:
        self.player.playing = False

    def tick(self, token: int, interrupted: Callable[[], bool] | None = None) -> int:
        """Train one chunk (:meth:`Player.tick`); returns the number of steps
        run. A step that stops training (a NaN) pauses and says why."""
        done, error = self.player.tick(token, interrupted)
        if error is not None:
            self.error = str(error)
        elif done and self.player.finished:
            self.notice = f"Finished {self.steps_done} steps. Play trains more."
        return done

    # ========================================================= diagnostics
    def audit(self) -> AuditReport | None:
        if self.run is None or not self.run.history:
            return None
        return self.run.audit()

    def change_matrix(self, last: int = 200):
        return self.player.change_matrix(last)

    def retrace_info(self) -> dict:
        return self.player.retrace_info()

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
        self.player.playing = False
        self.race_result = race(self.config, self.graph, steps=steps, progress=progress)
        return self.race_result


def _classes(graph: Graph) -> int:
    return max(graph.num_classes(), 2)  # as Run sizes its output layer
