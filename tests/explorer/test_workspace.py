"""The per-session workspace behind the UI: graph editing carried into the run,
ticks and generations, uploads that fail safely, diagnostics and the race."""

import numpy as np
import pytest

from explorer.config import LayerConfig, RunConfig
from explorer.engine import STEPPERS, SharedCompiles
from explorer.graphio import GraphFileError
from explorer.race import race
from explorer.sources import GraphSource
from explorer.workspace import Workspace


@pytest.fixture
def ws():
    return Workspace(RunConfig(dropout=0.0))


def _params(run):
    from flax import nnx

    run.sync()
    return [np.asarray(v) for v in jax_leaves(nnx.state(run.model, nnx.Param))]


def jax_leaves(tree):
    import jax

    return jax.tree.leaves(tree)


def test_starts_with_the_config_preset_and_stats(ws):
    s = ws.stats()
    assert (s.nodes, s.edges, s.classes, s.directed) == (34, 78, 2, False)
    assert s.density == pytest.approx(78 / (34 * 33 / 2))
    assert ws.run is not None and ws.steps_done == 0 and not ws.playing
    splits = ws.splits()
    assert len(splits) == 34 and splits.count("train") == 8  # 4 per class
    assert set(splits) <= {"train", "val", "test", "none"}


def test_a_workspace_told_not_to_build_waits_for_build():
    shared = SharedCompiles()
    ws = Workspace(RunConfig(dropout=0.0), shared=shared, build=False)
    assert ws.pending and ws.run is None and shared.runs == 0
    assert ws.stats().nodes == 34 and ws.target_steps == RunConfig().epochs  # drawn from these
    assert ws.error == "" and ws.steps_done == 0 and not ws.playing
    ws.build()
    assert not ws.pending and ws.run is not None and shared.runs == 1
    built = Workspace(RunConfig(dropout=0.0), shared=shared)  # the default builds at once
    assert not built.pending and shared.runs == 2
    # the run is the seed's: the same first loss as one built at once
    assert ws.step().loss == built.step().loss


def test_any_new_run_ends_the_wait_and_a_dataset_never_waits():
    ws = Workspace(RunConfig(dropout=0.0), build=False)
    ws.load_preset("petersen")
    assert not ws.pending and ws.run is not None
    dataset = Workspace(RunConfig(graph="triangle", features="degree_one_hot", pool="sum"),
                        build=False)  # its graphs are shown through its run
    assert not dataset.pending and dataset.run is not None


def test_an_edit_before_the_first_build_builds_on_the_edited_graph():
    """A canvas edit made while the app waits for the browser to draw the first
    page builds the model on the edited graph, and its notice says so, not that
    a new run started (no run was ever shown)."""
    ws = Workspace(RunConfig(dropout=0.0), build=False)
    node = ws.add_node(label=0)
    assert not ws.pending and ws.run is not None
    assert ws.run.graph.num_nodes == 35 == node + 1
    assert ws.notice == f"added node {node}: the model is built on the edited graph."
    empty = Workspace(RunConfig(dropout=0.0))
    empty.clear()
    assert empty.run is None and not empty.pending
    empty.add_node(label=0)  # from an empty drawing: a new run, and why
    assert "a new run started (no run yet)" in empty.notice


def test_play_ticks_until_the_target_then_stops(ws):
    ws.set_config(ws.config.replace(epochs=12))
    ws.steps_per_tick, ws.tick_budget_s = 5, 60.0
    token = ws.play()
    assert ws.playing and token == ws.generation
    assert ws.tick(token) == 1  # the step that compiled: its point shows at once
    assert ws.tick(token) == 5
    assert ws.tick(token) == 5
    assert ws.tick(token) == 1 and not ws.playing  # reached 12: stopped by itself
    assert "Finished 12 steps" in ws.notice
    assert ws.tick(token) == 0
    token = ws.play()  # Play again: 12 more
    assert ws.target_steps == 24 and ws.tick(token) == 5


def test_the_first_tick_shows_its_point_at_once_even_without_a_compile():
    shared = SharedCompiles()
    first = Workspace(RunConfig(epochs=12), shared=shared)
    first.tick(first.play())
    second = Workspace(RunConfig(epochs=12), shared=shared)  # another session
    second.steps_per_tick, second.tick_budget_s = 5, 60.0
    token = second.play()
    assert second.tick(token) == 1  # the point a person waits for after Play
    assert not second.run.history[0].traced and second.run.history[0].reused
    assert second.tick(token) == 5


def test_scan_mode_ticks_whole_calls_and_never_passes_the_target_or_the_tick():
    ws = Workspace(RunConfig(dropout=0.0, mode="scan", scan_steps=4, epochs=10))
    ws.steps_per_tick, ws.tick_budget_s = 6, 60.0
    token = ws.play()
    assert ws.tick(token) == 4  # the call that compiled: its points show at once
    assert ws.tick(token) == 6  # a call of 4, then one of 2: the target, not past it
    assert ws.steps_done == 10 and not ws.playing and ws.tick(token) == 0
    assert [r.call_steps for r in ws.run.history] == [4] * 8 + [2] * 2
    ws.set_config(ws.config.replace(epochs=100))
    ws.steps_per_tick = 3
    token = ws.play()
    assert ws.tick(token) == 3  # the tick's limit: one call of 3
    record = ws.step()  # one call: K steps
    assert ws.steps_done == 7 and record.step == 7 and record.call_steps == 4


def test_tick_respects_the_time_budget():
    ws = Workspace(RunConfig(epochs=100_000), tick_budget_s=0.05)
    token = ws.play()
    ws.tick(token)  # the compile
    done = ws.tick(token)
    assert 1 <= done < 100_000 and ws.playing


def test_a_waiting_click_ends_the_tick_after_one_step(ws):
    ws.tick_budget_s = 60.0
    token = ws.play()
    assert ws.tick(token, lambda: True) == 1  # the compile; a click already waiting
    asked = []

    def clicked():
        asked.append(ws.steps_done)
        return len(asked) >= 3  # someone clicks while the third step runs

    assert ws.tick(token, clicked) == 3 and ws.playing
    assert asked == [2, 3, 4]  # asked between steps, after each one


def test_pause_and_a_stale_token_do_nothing(ws):
    token = ws.play()
    ws.pause()
    assert ws.tick(token) == 0 and ws.steps_done == 0
    token = ws.play()
    ws.tick(token)
    before = ws.steps_done
    ws.reset()  # a new generation: the old timer must not write into it
    ws.playing = True  # even if something set playing again
    assert ws.tick(token) == 0
    assert ws.steps_done == 0 and before > 0


def test_an_added_edge_reaches_the_run_and_retraces_with_its_cause(ws):
    ws.step()
    ws.step()
    generation = ws.generation
    ws.connect([0, 9])
    assert ws.generation == generation  # same run, same weights, carried over
    assert ws.run.graph.num_edges == 158
    assert "retraces (shapes changed: directed edges 156 -> 158)" in ws.notice
    info = ws.retrace_info()
    assert info["pending"].startswith("shapes changed")
    record = ws.step()
    assert record.traced and "edges 156 -> 158" in record.trace_cause
    assert ws.retrace_info()["traces"] == 2
    assert ws.retrace_info()["last_step"] == 3
    with pytest.raises(ValueError, match="already connected"):
        ws.connect([0, 9])
    with pytest.raises(ValueError, match="exactly two"):
        ws.connect([0])


def test_bucket_padding_absorbs_an_edit_without_a_retrace():
    ws = Workspace(RunConfig(bucket_padding=True))
    ws.step()
    ws.connect([0, 9])
    assert ws.step().traced is False


def test_one_hot_features_make_a_new_node_a_new_run(ws):
    generation = ws.generation
    ws.add_node(label=1)
    assert ws.drawing.num_nodes == 35 and ws.generation == generation + 1
    assert "features per node 34 -> 35" in ws.notice
    assert ws.run.graph.num_nodes == 35


def test_degree_features_keep_the_run_when_a_node_is_added():
    ws = Workspace(RunConfig(features="degree"))
    ws.step()
    generation = ws.generation
    ws.add_node(label=0)
    assert ws.generation == generation and ws.run.graph.num_nodes == 35
    assert ws.step().traced


def test_a_new_class_label_starts_a_new_run(ws):
    generation = ws.generation
    ws.set_label([0, 1], 2)
    assert ws.generation == generation + 1 and "classes 2 -> 3" in ws.notice
    assert ws.drawing.labels[:2] == (2, 2)


def test_edge_table_rows_by_name_and_bad_rows_change_nothing(ws):
    rows = [(ws.drawing.names[u], ws.drawing.names[v]) for u, v in ws.drawing.edges]
    ws.set_edges(rows + [("0", "9"), (None, None)])
    assert ws.drawing.has_edge(0, 9) and ws.run.graph.num_edges == 158
    edges = ws.drawing.edges
    with pytest.raises(ValueError, match=r"edge table row 2, target: no node named 'zzz'"):
        ws.set_edges([("0", "1"), ("0", "zzz")])
    assert ws.drawing.edges == edges


def test_undo_restores_the_graph_and_the_run_follows(ws):
    ws.connect([0, 9])
    ws.delete([33])
    assert ws.drawing.num_nodes == 33
    ws.undo()
    assert ws.drawing.num_nodes == 34 and ws.run.graph.num_nodes == 34
    ws.undo()
    assert not ws.drawing.has_edge(0, 9) and ws.run.graph.num_edges == 156


def test_relayout_moves_nodes_but_keeps_the_run(ws):
    ws.step()
    generation, positions = ws.generation, ws.drawing.positions
    ws.relayout("circular")
    assert ws.drawing.positions != positions and ws.generation == generation
    assert ws.steps_done == 1


def test_deleting_every_node_leaves_no_run_and_a_clear_message(ws):
    ws.delete(range(34))
    assert ws.graph is None and ws.run is None
    assert ws.step() is None and "nothing to train" in ws.error
    assert ws.play() == -1 and not ws.playing
    ws.undo()
    assert ws.run is not None and ws.drawing.num_nodes == 34


def test_valid_upload_replaces_the_graph(ws):
    warnings = ws.load_file("tri.edgelist", b"a b\nb c\nc a\nc d\nd e\ne f\nf d\n")
    assert ws.stats().nodes == 6 and str(ws.source) == "file: tri.edgelist"
    assert any("community" in w for w in warnings)
    assert sorted(set(ws.drawing.labels)) == [0, 1]
    assert ws.run.graph.num_nodes == 6


def test_upload_features_are_used_and_follow_edits():
    ws = Workspace()
    npz = _npz(x=np.arange(12, dtype=np.float32).reshape(4, 3))
    ws.load_file("g.npz", npz)
    assert ws.use_file_features
    np.testing.assert_array_equal(np.asarray(ws.graph.x), np.arange(12).reshape(4, 3))
    ws.delete([1])
    np.testing.assert_array_equal(np.asarray(ws.graph.x), [[0, 1, 2], [6, 7, 8], [9, 10, 11]])


def _npz(x):
    import io

    buf = io.BytesIO()
    np.savez(buf, edge_index=np.array([[0, 1, 2, 3], [1, 2, 3, 0]], np.int32), x=x,
             y=np.array([0, 0, 1, 1], np.int32))
    return buf.getvalue()


@pytest.mark.parametrize("name, data, message", [
    ("bad.edgelist", b"0 1\n1\n", "line 2"),
    ("bad.json", b"{not json", "bad.json"),
    ("bad.exe", b"0 1", "unknown extension"),
    ("empty.csv", b"", "empty"),
])
def test_a_bad_upload_names_the_problem_and_keeps_graph_and_run(ws, name, data, message):
    ws.step()
    state = (ws.drawing, ws.run, ws.generation, ws.source, ws.steps_done)
    with pytest.raises(GraphFileError, match=message):
        ws.load_file(name, data)
    assert (ws.drawing, ws.run, ws.generation, ws.source, ws.steps_done) == state


def test_a_model_that_cannot_be_built_keeps_the_previous_graph():
    ws = Workspace(RunConfig(layers=(LayerConfig("gat", 16, {"heads": 3}),
                                     LayerConfig("gcn", 16))))
    assert ws.run is None and "not divisible by heads=3" in ws.error
    ws.set_config(RunConfig())
    assert ws.run is not None and not ws.error


def test_set_config_starts_a_new_run_with_the_same_initial_weights(ws):
    before = _params(ws.run)
    assert not ws.set_config(ws.config)  # unchanged: nothing happens
    assert ws.set_config(ws.config.replace(mode="functional"))
    assert "Changed mode" in ws.notice
    for a, b in zip(before, _params(ws.run)):
        np.testing.assert_array_equal(a, b)
    # the graph fields belong to the graph panel, not to set_config
    ws.set_config(ws.config.replace(graph="petersen", seed=3))
    assert ws.config.graph == "karate" and ws.config.seed == 3


def test_load_preset_validates_and_keeps_the_graph_on_error(ws):
    ws.load_preset("sbm", difficulty=0.5)
    assert ws.stats().nodes == 60 and ws.config.difficulty == 0.5
    with pytest.raises(ValueError, match="difficulty"):
        ws.load_preset("sbm", difficulty=2.0)
    with pytest.raises(ValueError, match="graph"):
        ws.load_preset("nope")
    assert ws.stats().nodes == 60 and str(ws.source) == "preset: sbm"


def test_jax_jit_is_diagnosed_frozen_and_the_heatmap_is_blank():
    ws = Workspace(RunConfig(mode="jax.jit"))
    for _ in range(3):
        ws.step()
    report = ws.audit()
    assert report.verdict.status == "frozen"
    paths, kinds, steps, matrix = ws.change_matrix()
    assert steps == [1, 2, 3] and matrix.shape == (len(paths), 3)
    params = [i for i, k in enumerate(kinds) if k == "parameter"]
    assert params and np.all(matrix[params] == 0)


def test_nnx_jit_trains_and_the_heatmap_lights_up(ws):
    for _ in range(3):
        ws.step()
    assert ws.audit().verdict.status == "training"
    _, kinds, _, matrix = ws.change_matrix()
    params = [i for i, k in enumerate(kinds) if k == "parameter"]
    assert np.all(matrix[params] > 0)


def test_measure_compile_reports_each_part(ws):
    ws.step()
    ws.step()
    info = ws.measure_compile()
    assert info["trace_lower_s"] > 0 and info["compile_s"] > 0
    assert info["first_call_s"] > 0 and info["steady_step_ms"] > 0 and info["steps"] == 2
    ws.set_config(ws.config.replace(mode="eager"))
    assert ws.measure_compile() is None


def test_nan_loss_stops_play_with_a_message():
    ws = Workspace(RunConfig(learning_rate=1e12, optimizer="sgd", weight_decay=0.0))
    token = ws.play()
    for _ in range(20):
        ws.tick(token)
        if not ws.playing:
            break
    assert not ws.playing and "training stopped" in ws.error


def test_default_config_trains_karate_well_within_100_steps():
    for seed in (0, 1, 2):
        ws = Workspace(RunConfig(seed=seed))
        ws.steps_per_tick = 100
        token = ws.play()
        while ws.playing:
            ws.tick(token)
        last = ws.run.history[-1]
        assert ws.steps_done == 100
        assert last.train_acc == 1.0 and last.test_acc >= 0.85, (seed, last)


def test_workspaces_share_nothing():
    a, b = Workspace(), Workspace()
    a.step()
    a.connect([0, 9])
    assert b.steps_done == 0 and not b.drawing.has_edge(0, 9)
    assert a.run.model is not b.run.model


def test_race_starts_every_mode_from_the_same_weights():
    entries = race(RunConfig(dropout=0.0, scan_steps=2), steps=4)  # scan: two calls
    assert [e.mode for e in entries] == list(STEPPERS)
    by_mode = {e.mode: e for e in entries}
    assert by_mode["jax.jit"].verdict == "frozen"
    assert len(set(by_mode["jax.jit"].losses)) == 1
    first = {e.losses[0] for e in entries}
    assert max(first) - min(first) < 1e-5  # same initial weights, same first loss
    for mode in ("eager", "nnx.jit", "functional", "cached_partial", "nnx.jit(graph=False)",
                 "scan"):
        e = by_mode[mode]
        assert e.verdict == "training" and e.params_changed == e.params_total
        np.testing.assert_allclose(e.losses, by_mode["nnx.jit"].losses, rtol=1e-4)
    assert np.isnan(by_mode["eager"].compile_s) and by_mode["nnx.jit"].compile_s > 0
    assert all(e.median_step_ms > 0 for e in entries)
    assert by_mode["scan"].first_call_s > by_mode["scan"].median_step_ms / 1e3
    assert all(e.peak_bytes > 0 for e in entries if e.mode != "eager")
    assert [e.mode for e in entries if e.donation_saves_bytes] == ["functional", "scan"]
    assert all(e.donation_note.startswith("n/a") for e in entries
               if e.mode not in ("functional", "scan"))
    # a scan race no longer than one call has no steady step: not a number, not a guess
    single = race(RunConfig(dropout=0.0, scan_steps=10), steps=4, modes=["scan"])[0]
    assert np.isnan(single.median_step_ms) and len(single.losses) == 4


def test_workspace_race_needs_a_graph_and_reports_progress(ws):
    seen = []
    ws.start_race(2, progress=lambda mode, done, total: seen.append((mode, done, total)))
    assert len(ws.race_result) == len(STEPPERS)
    n = len(STEPPERS)
    assert seen[0] == ("eager", 0, n) and seen[-1] == ("", n, n)
    ws.connect([0, 9])
    assert ws.race_result is None  # an edit invalidates the race
    ws.delete(range(34))
    with pytest.raises(ValueError, match="empty"):
        ws.start_race(2)


def test_embeddings_cover_every_layer(ws):
    hidden = ws.run.embeddings()
    assert [h.shape for h in hidden] == [(34, 16), (34, 2)]


# ------------------------------------------------ history, placement, files
def test_history_drops_the_redo_after_a_new_push():
    from explorer.drawing import Drawing, History

    empty = Drawing()
    a = empty.add_node("a")
    b = a.add_node("b")
    c = a.add_node("c")
    h = History(empty)
    h.push(a)
    h.push(b)
    assert h.undo() is a and h.can_redo and len(h) == 2
    h.push(a)  # the same drawing again is no new state: the redo stays
    assert h.can_redo
    h.push(c)
    assert h.current is c and not h.can_redo and len(h) == 3
    assert h.redo() is c  # b is gone for good
    assert h.undo() is a and h.undo() is empty and not h.can_undo
    assert h.redo() is a and h.redo() is c and h.redo() is c


def test_add_node_without_a_position_keeps_clear_of_the_others(ws):
    before = ws.drawing.positions
    placed = np.asarray(before, float)
    span = float(np.ptp(placed, axis=0).max())
    for count in (35, 36):
        i = ws.add_node()
        d = ws.drawing
        assert i == count - 1 and d.num_nodes == count
        assert d.positions[:34] == before  # nobody moved
        others = np.asarray(d.positions[:i], float)
        new = np.asarray(d.positions[i], float)
        assert np.all(np.isfinite(new))
        assert np.min(np.linalg.norm(others - new, axis=1)) > span / 20 > 0
        # near the drawing, not flung far away
        assert np.all(np.abs(new - placed.mean(axis=0)) <= span)
    assert ws.drawing.positions[34] != ws.drawing.positions[35]


def test_clear_empties_the_graph_and_undo_brings_back_graph_and_run(ws):
    before, generation = ws.drawing, ws.generation
    ws.clear()
    assert ws.drawing.num_nodes == 0 and ws.drawing.edges == ()
    assert ws.graph is None and ws.run is None and ws.stats().nodes == 0
    assert ws.history.can_undo
    ws.undo()
    assert ws.drawing == before
    assert ws.run is not None and ws.generation > generation
    assert ws.run.graph.num_nodes == 34 and ws.run.graph.num_edges == 156
    assert ws.graph.num_nodes == 34 and not ws.error


_TRAIN = [0, 5, 10, 15, 20, 29]
_VAL = [1, 2, 3, 4, 6, 7, 8, 9, 11, 12]


def _file_npz(n=30, *, masks=True, x=True):
    """An undirected ring of ``n`` nodes, labels i % 3; with masks: 6 train,
    10 val, 0 test (the nodes in _TRAIN and _VAL)."""
    import io

    nodes = np.arange(n)
    arrays = {"edge_index": np.stack([nodes, (nodes + 1) % n]).astype(np.int32),
              "y": (nodes % 3).astype(np.int32), "undirected": np.array(True)}
    if x:
        arrays["x"] = (np.arange(n * 4, dtype=np.float32).reshape(n, 4) + 1.0)
    if masks:
        for key, chosen in (("train_mask", _TRAIN), ("val_mask", _VAL), ("test_mask", [])):
            mask = np.zeros(n, bool)
            mask[chosen] = True
            arrays[key] = mask
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _mask(n, chosen):
    mask = np.zeros(n, bool)
    mask[chosen] = True
    return mask


def test_a_file_with_masks_keeps_its_own_split(ws):
    warnings = ws.load_file("split.npz", _file_npz())
    assert warnings == [] and not ws.error and ws.run is not None
    g = ws.graph
    np.testing.assert_array_equal(np.asarray(g.train_mask), _mask(30, _TRAIN))
    np.testing.assert_array_equal(np.asarray(g.val_mask), _mask(30, _VAL))
    np.testing.assert_array_equal(np.asarray(g.test_mask), np.zeros(30, bool))
    assert ws.split_info() == "the file's own split: 6 train · 10 val · 0 test"
    assert ws.splits().count("train") == 6 and ws.splits().count("val") == 10
    assert ws.config.features == "file" and "the file's own split" in ws.notice
    # a node drawn afterwards (a name the file does not have) is in no split
    i = ws.add_node(label=0)
    assert ws.drawing.names[i] == "30"
    g = ws.graph
    assert not (g.train_mask[i] or g.val_mask[i] or g.test_mask[i])
    np.testing.assert_array_equal(np.asarray(g.x)[i], np.zeros(4))
    assert int(np.sum(np.asarray(g.train_mask))) == 6


def test_a_file_without_masks_gets_the_generated_split(ws):
    ws.load_file("nosplit.npz", _file_npz(masks=False))
    assert ws.file_data.split is None
    info = ws.split_info()
    assert info.startswith("a generated split (4 training nodes per class")
    assert info.endswith(": 12 train · 9 val · 9 test")  # 3 classes of 10
    assert int(np.sum(np.asarray(ws.graph.train_mask))) == 12


def test_a_big_edge_list_without_features_gets_scalable_features(ws):
    from explorer.sources import DENSE_FEATURES

    n = 6000  # a ring with a chord every 100 nodes (no labels: community detection)
    lines = [f"{i} {(i + 1) % n}" for i in range(n)]
    lines += [f"{i} {(i + 50) % n}" for i in range(0, n, 100)]
    warnings = ws.load_file("big.edgelist", "\n".join(lines).encode())
    assert ws.stats().nodes == n
    assert ws.config.features == "degree_one_hot" and ws.config.features not in DENSE_FEATURES
    assert any("6,000 nodes and no features in the file" in w and "degree_one_hot" in w
               for w in warnings)
    assert ws.run is not None and not ws.error and ws.run.graph.num_nodes == n
    assert ws.run.graph.num_features == 8


def test_use_file_features_switches_between_one_hot_and_the_file(ws):
    ws.load_file("feat.npz", _file_npz(masks=False))
    assert ws.has_file_features and ws.config.features == "file"
    assert ws.graph.num_features == 4
    ws.use_file_features(False)
    assert ws.config.features == "one_hot" and ws.graph.num_features == 30
    assert ws.run is not None and ws.run.graph.num_features == 30
    ws.use_file_features(True)
    assert ws.config.features == "file" and ws.run.graph.num_features == 4
    np.testing.assert_array_equal(np.asarray(ws.graph.x)[0], [1, 2, 3, 4])


def test_use_file_features_on_karate_is_refused(ws):
    generation = ws.generation
    with pytest.raises(ValueError, match="no node features of its own"):
        ws.use_file_features(True)
    assert ws.config.features == "one_hot" and ws.generation == generation
    assert not ws.has_file_features
    ws.use_file_features(False)  # already one_hot: nothing changes
    assert ws.generation == generation


def test_a_new_node_never_inherits_a_deleted_file_node(ws):
    ws.load_file("split.npz", _file_npz())
    ws.delete([29])  # node "29": in the file's train set
    i = ws.add_node()
    name = ws.drawing.names[i]
    assert name not in ws.file_data.index and ws.drawing.labels[i] == -1  # "30", not "29"
    g = ws.graph
    assert not g.train_mask[i]
    np.testing.assert_array_equal(np.asarray(g.x)[i], np.zeros(4))


def test_leaving_file_features_on_a_big_file_keeps_a_run(ws):
    from explorer.sources import DENSE_FEATURES

    ws.load_file("bigfeat.npz", _file_npz(6000, masks=False))
    assert ws.config.features == "file" and ws.run is not None
    ws.use_file_features(False)
    assert ws.config.features not in DENSE_FEATURES
    assert ws.run is not None and not ws.error


def test_a_graph_with_nothing_labelled_to_train_on_says_so():
    from explorer.drawing import Drawing
    assert Workspace(RunConfig()).training_hint() == ""  # karate: 8 labelled train nodes
    ws = Workspace(RunConfig())
    ws.load_drawing(Drawing(names=("a",), labels=(-1,), positions=((0.0, 0.0),)),
                    GraphSource("drawing", "one node"))
    assert ws.run is not None
    assert ws.training_hint().startswith("Nothing to learn from: no node has a label, so the "
                                         "loss is 0")
    assert ws.step().loss == 0.0  # what the hint says
    ws.set_label([0], 1)
    assert ws.training_hint() == ""


def test_community_labels_of_a_graph_with_many_edges_come_fast_and_within_the_classes(
        monkeypatch):
    import networkx as nx

    from explorer import sources
    from explorer.drawing import Drawing
    from explorer.graphio import MAX_LABEL

    def slow(*args, **kwargs):
        raise AssertionError("Louvain on a graph this big took minutes")

    monkeypatch.setattr(nx.community, "louvain_communities", slow)
    rng = np.random.default_rng(0)
    n = 6000
    pairs = {tuple(sorted(map(int, rng.choice(n, 2, replace=False))))
             for _ in range(sources.LOUVAIN_MAX_EDGES + 2000)}
    d = Drawing(names=tuple(map(str, range(n))), labels=(-1,) * n, positions=(None,) * n,
                edges=tuple(sorted(pairs)))
    labels = sources.community_labels(d.to_networkx(), MAX_LABEL + 1).tolist()
    assert len(labels) == n and max(labels) <= MAX_LABEL and max(labels) >= 0
