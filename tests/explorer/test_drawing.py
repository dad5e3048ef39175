"""Drawing operations, undo and stable layouts."""

import numpy as np
import pytest

from explorer.drawing import LAYOUTS, Drawing, History, from_preset


def triangle():
    d = Drawing()
    for name, label in (("a", 0), ("b", 1), ("c", 0)):
        d = d.add_node(name, label)
    return d.add_edge(0, 1).add_edge(1, 2).add_edge(2, 0)


def test_add_and_remove_nodes_reindex_edges():
    d = triangle().add_node("d", 1).add_edge(3, 0)
    assert d.num_nodes == 4 and len(d.edges) == 4
    e = d.remove_nodes([1])
    assert e.names == ("a", "c", "d") and e.labels == (0, 0, 1)
    assert set(e.edges) == {(1, 0), (2, 0)}  # c->a and d->a, renumbered
    with pytest.raises(ValueError, match="no node 7"):
        d.remove_nodes([7])
    with pytest.raises(ValueError, match="already exists"):
        d.add_node("a")


def test_edges_labels_direction_and_clear():
    d = triangle()
    assert d.add_edge(1, 0) is d  # undirected: already there
    assert d.set_directed(True).add_edge(1, 0).edges[-1] == (1, 0)
    assert len(d.remove_edge(1, 0).edges) == 2  # undirected removal matches either order
    assert d.set_label([0, 2], 5).labels == (5, 1, 5)
    cleared = d.clear()
    assert cleared.num_nodes == 0 and cleared.edges == ()


def test_history_undo():
    history = History(Drawing(), limit=3)
    d = history.push(Drawing().add_node("x"))
    d = history.push(d.add_node("y"))
    d = history.push(d.add_edge(0, 1))
    assert len(history) == 3  # the oldest state was dropped
    assert history.undo().edges == () and history.undo().names == ("x",)
    assert history.undo().names == ("x",)  # cannot go past the oldest kept state


@pytest.mark.parametrize("method", LAYOUTS)
def test_layout_keeps_existing_positions_across_edits(method):
    d = from_preset("petersen", layout=method)
    assert all(p is not None for p in d.positions)
    before = d.positions
    edited = d.add_node("new", 0).add_edge(10, 3).layout(method)
    assert edited.positions[:10] == before
    assert edited.positions[10] is not None and np.all(np.isfinite(edited.positions[10]))
    with pytest.raises(ValueError, match="unknown layout"):
        d.layout("random")


def test_to_graph_trains_ready():
    g = triangle().to_graph(features="degree")
    assert g.num_nodes == 3 and g.num_edges == 6  # undirected: both directions
    assert np.asarray(g.y).tolist() == [0, 1, 0]
    assert int(g.train_mask.sum()) == 2  # one per class
    directed = triangle().set_directed(True).to_graph()
    assert directed.num_edges == 3
    with pytest.raises(ValueError, match="no nodes"):
        Drawing().to_graph()


def test_from_preset_keeps_names():
    d = from_preset("florentine")
    assert "Medici" in d.names and d.num_nodes == 15
    g = d.to_graph()
    assert g.num_nodes == 15 and g.num_edges == 40


def test_to_graph_takes_a_given_split():
    split = (np.asarray([True, False, False]), np.asarray([False, False, True]),
             np.asarray([False, True, False]))
    g = triangle().to_graph(split=split)
    assert [np.asarray(m).tolist() for m in (g.train_mask, g.val_mask, g.test_mask)] == [
        m.tolist() for m in split]
    with pytest.raises(ValueError, match="split: the val mask has shape \\[2\\] for 3 nodes"):
        triangle().to_graph(split=(split[0], split[1][:2], split[2]))
    with pytest.raises(ValueError, match="split must be three masks"):
        triangle().to_graph(split=split[:2])
    with pytest.raises(ValueError, match="split: a node is in more than one"):
        triangle().to_graph(split=(split[0], split[0], split[2]))


def test_layout_none_leaves_positions_unset():
    d = from_preset("petersen", layout=None)
    assert d.num_nodes == 10 and all(p is None for p in d.positions)
    assert all(p is not None for p in from_preset("petersen").positions)  # auto: spring
