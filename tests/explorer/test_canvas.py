"""The graph canvas's Python side (explorer/canvas.py): events from the browser
applied exactly once and in order, each event type doing what the UI expects,
hostile input refused with a message, and the view of a big graph."""

import math

import networkx as nx
import numpy as np
import pytest
from graphs import random_drawing

from explorer.canvas import (
    DRAW_LIMIT,
    MAX_CLIENTS,
    MAX_EVENTS,
    SCALE,
    apply_events,
    choose_view,
    payload,
)
from explorer.config import RunConfig
from explorer.drawing import Drawing
from explorer.workspace import Workspace


@pytest.fixture
def ws():
    return Workspace(RunConfig(dropout=0.0))  # karate: 34 nodes "0".."33", 78 edges


def _send(ws, *events, client="c"):
    return apply_events(ws, {"client": client, "events": list(events)})


def _edge(seq, a, b):
    return {"seq": seq, "type": "add_edge", "source": str(a), "target": str(b)}


def _payload(ws, view=None):
    view = choose_view(ws.drawing, ws.selected) if view is None else view
    n = len(view.nodes)  # colours and tips: one per node on show
    return payload(ws, view, colours=["#888888"] * n, splits=ws.splits(), tips=[""] * n, fit=0)


def _names_edge(ws, a, b):
    index = {name: i for i, name in enumerate(ws.drawing.names)}
    return ws.drawing.has_edge(index[a], index[b])


def _state(ws):
    return (ws.drawing, ws.revision, len(ws.history), ws.history.can_redo, ws.generation,
            ws.selected)


# ====================================================== exactly once, in order
def test_the_same_message_twice_changes_the_graph_once(ws):
    assert not ws.drawing.has_edge(0, 9)
    message = {"client": "c", "events": [_edge(1, 0, 9)]}
    assert apply_events(ws, message) == (1, [])
    assert len(ws.drawing.edges) == 79 and ws.drawing.has_edge(0, 9)
    drawing, steps = ws.drawing, len(ws.history)
    assert apply_events(ws, message) == (0, [])  # a rerun re-sends it: never replayed
    assert ws.drawing is drawing and len(ws.history) == steps and len(ws.drawing.edges) == 79


def test_a_resent_queue_applies_only_the_new_event(ws):
    for a, b in ((0, 9), (0, 14), (0, 15)):
        assert not ws.drawing.has_edge(a, b)
    assert _send(ws, _edge(1, 0, 9), _edge(2, 0, 14)) == (2, [])
    assert len(ws.drawing.edges) == 80
    # the browser had no ack yet and sends its whole queue again, plus a third
    assert _send(ws, _edge(1, 0, 9), _edge(2, 0, 14), _edge(3, 0, 15)) == (1, [])
    assert len(ws.drawing.edges) == 81 and ws.drawing.has_edge(0, 15)
    assert ws.canvas_acks == {"c": 3}
    assert _payload(ws)["acks"] == {"c": 3}  # the browser drops events 1..3 from its queue


def test_an_event_numbered_below_one_already_passed_in_the_batch_is_skipped(ws):
    # documents the code: within a batch, seq 5 then 4 applies 5 and drops 4
    # silently (4 <= 5 counts as already applied; the ack of 5 covers it too)
    edits, messages = _send(ws, _edge(5, 0, 9), _edge(4, 0, 14))
    assert (edits, messages) == (1, [])
    assert ws.drawing.has_edge(0, 9) and not ws.drawing.has_edge(0, 14)
    assert ws.canvas_acks["c"] == 5


def test_clients_keep_separate_counters(ws):
    assert _send(ws, _edge(1, 0, 9), _edge(2, 0, 14), _edge(3, 0, 15), client="a") == (3, [])
    assert _send(ws, _edge(1, 0, 16), client="b") == (1, [])  # b's 1 is not a's 1
    assert ws.drawing.has_edge(0, 16)
    assert _send(ws, _edge(1, 0, 16), client="b") == (0, [])
    assert _send(ws, _edge(3, 0, 20), client="a") == (0, [])  # a is already at 3
    assert not ws.drawing.has_edge(0, 20)
    assert ws.canvas_acks == {"a": 3, "b": 1}
    assert _payload(ws)["acks"] == {"a": 3, "b": 1}


def test_more_than_max_clients_drop_the_least_recent(ws):
    def select(client, seq, node="0"):
        return _send(ws, {"seq": seq, "type": "select", "nodes": [node]}, client=client)

    for k in range(MAX_CLIENTS):
        select(f"c{k}", 1)
    assert list(ws.canvas_acks) == [f"c{k}" for k in range(MAX_CLIENTS)]
    select("c0", 2)  # c0 is now the most recent; c1 the oldest
    select("new", 1)
    assert len(ws.canvas_acks) == MAX_CLIENTS
    assert "c1" not in ws.canvas_acks and ws.canvas_acks["c0"] == 2
    assert list(ws.canvas_acks)[-1] == "new"
    # a forgotten client starts from zero again (a remount uses a new id anyway)
    assert select("c1", 1, "5") == (0, []) and ws.selected == (5,)  # applied again
    assert "c2" not in ws.canvas_acks and len(ws.canvas_acks) == MAX_CLIENTS


def test_add_node_then_an_edge_to_it_in_one_batch(ws):
    fresh = "34"  # the name the workspace gives the 35th node
    edits, messages = _send(ws, {"seq": 1, "type": "add_node", "x": 30.0, "y": -60.0},
                            _edge(2, fresh, 0))
    assert (edits, messages) == (2, [])
    assert ws.drawing.names[-1] == fresh and ws.drawing.num_nodes == 35
    assert ws.drawing.has_edge(34, 0) and len(ws.drawing.edges) == 79
    assert ws.run.graph.num_nodes == 35 and ws.run.graph.num_edges == 158
    assert ws.canvas_acks["c"] == 2 and _payload(ws)["acks"]["c"] == 2


def test_the_ack_in_the_payload_is_the_last_seq_even_for_a_refused_event(ws):
    # a refused event is still acknowledged: the browser must stop re-sending it
    edits, messages = _send(ws, _edge(1, 0, 9), _edge(2, 0, 1))  # 0-1 already exists
    assert edits == 1 and len(messages) == 1 and "already connected" in messages[0]
    assert _payload(ws)["acks"] == {"c": 2}
    assert _payload(ws)["acks"] is not ws.canvas_acks  # a copy


# ============================================================== event types
def test_add_node_lands_where_double_clicked_and_is_selected(ws):
    before = ws.drawing.positions
    assert _send(ws, {"seq": 1, "type": "add_node", "x": 150.0, "y": -60.0}) == (1, [])
    d = ws.drawing
    assert d.num_nodes == 35 and d.names[-1] == "34" and d.labels[-1] == -1
    assert d.positions[-1] == pytest.approx((150.0 / SCALE, 60.0 / SCALE), abs=1e-12)
    assert d.positions[-1] == pytest.approx((0.5, 0.2), abs=1e-12)
    assert d.positions[:34] == before  # nothing else moved
    assert ws.selected == (34,)
    node = next(n for n in _payload(ws)["nodes"] if n["id"] == "34")
    assert (node["x"], node["y"]) == pytest.approx((150.0, -60.0), abs=1e-9)
    assert _payload(ws)["selected"] == ["34"]


def test_add_edge_keeps_the_run_and_says_it_retraces(ws):
    generation, run = ws.generation, ws.run
    assert _send(ws, _edge(1, 0, 9)) == (1, [])
    assert ws.generation == generation and ws.run is run
    assert len(ws.drawing.edges) == 79 and ws.drawing.has_edge(0, 9)
    assert ws.run.graph.num_edges == 158
    assert "directed edges" in ws.run.pending_retrace
    assert ws.run.pending_retrace == "shapes changed: directed edges 156 -> 158"


def test_move_records_positions_exactly_and_is_one_undo_step(ws):
    before = ws.drawing
    generation, revision, graph, run = ws.generation, ws.revision, ws.graph, ws.run
    run_graph, pending = run.graph, run.pending_retrace
    steps = len(ws.history)
    sent = {"0": [123.456789012, -987.654321098], "5": [-0.1, 33.3333333]}
    assert _send(ws, {"seq": 1, "type": "move", "positions": sent}) == (1, [])
    d = ws.drawing
    assert d.positions[0] == (123.456789012 / SCALE, 987.654321098 / SCALE)
    assert d.positions[5] == (-0.1 / SCALE, -33.3333333 / SCALE)
    assert [p for i, p in enumerate(d.positions) if i not in (0, 5)] == \
        [p for i, p in enumerate(before.positions) if i not in (0, 5)]
    shown = {n["id"]: (n["x"], n["y"]) for n in _payload(ws)["nodes"]}
    for name, (x, y) in sent.items():
        assert abs(shown[name][0] - x) < 1e-9 and abs(shown[name][1] - y) < 1e-9
    # not an edit of what training sees: same run, same graph, same revision
    assert ws.generation == generation and ws.revision == revision
    assert ws.graph is graph and ws.run is run and ws.run.graph is run_graph
    assert ws.run.pending_retrace == pending  # no retrace cause added
    assert len(ws.history) == steps + 1
    assert _send(ws, {"seq": 2, "type": "undo"}) == (1, [])
    assert ws.drawing == before and ws.generation == generation


def test_delete_of_nodes_and_edges_is_one_undo_step(ws):
    assert ws.drawing.has_edge(0, 1) and ws.drawing.num_nodes == 34
    before, steps = ws.drawing, len(ws.history)
    event = {"seq": 1, "type": "delete", "nodes": ["33"], "edges": [["0", "1"]]}
    assert _send(ws, event) == (1, [])
    d = ws.drawing
    assert d.num_nodes == 33 and "33" not in d.names
    assert not _names_edge(ws, "0", "1")
    # node 33 had 17 edges in karate, plus the 0-1 edge
    assert len(d.edges) == 78 - 17 - 1
    assert len(ws.history) == steps + 1
    assert _send(ws, {"seq": 2, "type": "undo"}) == (1, [])
    assert ws.drawing == before and ws.run.graph.num_nodes == 34


def test_label_event_sets_the_label(ws):
    generation = ws.generation
    assert ws.drawing.labels[0] == 0 and ws.drawing.labels[1] == 0
    assert _send(ws, {"seq": 1, "type": "label", "nodes": ["0", "1"], "label": 1}) == (1, [])
    assert ws.drawing.labels[:2] == (1, 1)
    assert ws.generation == generation  # still two classes: the run continues
    assert np.asarray(ws.run.graph.y)[:2].tolist() == [1, 1]
    edits, messages = _send(ws, {"seq": 2, "type": "label", "nodes": ["0"], "label": 64})
    assert edits == 0 and messages == ["label must be from -1 (unlabelled) to 63"]
    assert ws.drawing.labels[0] == 1


def test_undo_and_redo_events(ws):
    assert _send(ws, _edge(1, 0, 9), {"seq": 2, "type": "undo"}) == (2, [])
    assert not ws.drawing.has_edge(0, 9) and ws.run.graph.num_edges == 156
    assert _send(ws, {"seq": 3, "type": "redo"}) == (1, [])
    assert ws.drawing.has_edge(0, 9) and ws.run.graph.num_edges == 158
    # the second undo has nothing left to undo: it is no edit
    assert _send(ws, {"seq": 4, "type": "undo"}, {"seq": 5, "type": "undo"}) == (1, [])
    assert ws.drawing.num_nodes == 34 and len(ws.drawing.edges) == 78
    assert not ws.history.can_undo


def test_a_whole_graph_view_does_not_follow_the_selection(ws):
    assert _payload(ws)["follows_selection"] is False  # karate: all 34 on show
    _send(ws, {"seq": 1, "type": "select", "nodes": ["3"]})
    assert _payload(ws)["follows_selection"] is False


def test_select_sets_the_selection_and_is_no_edit(ws):
    revision, steps, drawing = ws.revision, len(ws.history), ws.drawing
    assert _send(ws, {"seq": 1, "type": "select", "nodes": ["3", "1", "3"]}) == (0, [])
    assert ws.selected == (1, 3)
    assert ws.revision == revision and len(ws.history) == steps and ws.drawing is drawing
    assert _payload(ws)["selected"] == ["1", "3"]
    assert ws.canvas_acks["c"] == 1
    assert _send(ws, {"seq": 2, "type": "select", "nodes": []}) == (0, [])
    assert ws.selected == ()


# ========================================================== hostile input
def test_no_message_is_silent(ws):
    before = _state(ws)
    assert apply_events(ws, None) == (0, [])  # the widget's value when nothing was sent
    assert _state(ws) == before and ws.canvas_acks == {}


@pytest.mark.parametrize("message", [[], ["events"], "text", 5, 1.5])
def test_a_non_dict_message_is_ignored_with_a_message(ws, message):
    before = _state(ws)
    assert apply_events(ws, message) == (0, ["canvas: a malformed message was ignored"])
    assert _state(ws) == before and ws.canvas_acks == {}


@pytest.mark.parametrize("message", [
    {"events": [_edge(1, 0, 9)]},  # no client
    {"client": None, "events": [_edge(1, 0, 9)]},
    {"client": 7, "events": [_edge(1, 0, 9)]},
    {"client": "", "events": [_edge(1, 0, 9)]},
    {"client": "x" * 65, "events": [_edge(1, 0, 9)]},  # longer than 64
    {"client": "c"},  # no events
    {"client": "c", "events": {"0": _edge(1, 0, 9)}},
    {"client": "c", "events": (_edge(1, 0, 9),)},  # a tuple is not what JSON gives
    {"client": "c", "events": "add_edge"},
])
def test_a_malformed_message_is_refused_with_a_message(ws, message):
    before = _state(ws)
    assert apply_events(ws, message) == (0, ["canvas: a malformed message was ignored"])
    assert _state(ws) == before and ws.canvas_acks == {}


def test_a_64_character_client_is_fine(ws):
    assert _send(ws, _edge(1, 0, 9), client="x" * 64) == (1, [])


def test_more_than_max_events_is_refused_whole(ws):
    before = _state(ws)
    events = [{"seq": i, "type": "select", "nodes": ["0"]} for i in range(1, MAX_EVENTS + 2)]
    events[0] = _edge(1, 0, 9)
    edits, messages = _send(ws, *events)
    assert edits == 0
    assert messages == [f"canvas: {MAX_EVENTS + 1} events at once is more than {MAX_EVENTS}; "
                        "ignored"]
    assert _state(ws) == before and "c" not in ws.canvas_acks
    assert _send(ws, *events[:MAX_EVENTS]) == (1, [])  # exactly MAX_EVENTS is fine
    assert ws.canvas_acks["c"] == MAX_EVENTS


@pytest.mark.parametrize("bad", [
    {"type": "add_edge", "source": "0", "target": "9"},  # no seq
    {"seq": "1", "type": "add_edge", "source": "0", "target": "9"},
    {"seq": 1.0, "type": "add_edge", "source": "0", "target": "9"},
    {"seq": True, "type": "add_edge", "source": "0", "target": "9"},
    {"seq": None, "type": "add_edge", "source": "0", "target": "9"},
    {"seq": 0, "type": "add_edge", "source": "0", "target": "9"},
    {"seq": -3, "type": "add_edge", "source": "0", "target": "9"},
    "add_edge 0 9",
    ["seq", 1],
    None,
])
def test_an_event_without_a_usable_seq_is_never_applied(ws, bad):
    before = _state(ws)
    edits, messages = _send(ws, bad)
    assert edits == 0 and isinstance(messages, list)
    assert _state(ws) == before and ws.canvas_acks == {"c": 0}
    # and it does not hold up a good event behind it
    edits, messages = _send(ws, bad, _edge(1, 0, 14))
    assert edits == 1
    assert messages in ([], ["canvas: an event without a sequence number was ignored"])
    assert ws.drawing.has_edge(0, 14) and not ws.drawing.has_edge(0, 9)


@pytest.mark.parametrize("message", [
    ["not", "a", "dict"],
    {"client": "c", "events": [{"seq": "1", "type": "undo"}]},
    {"client": "c", "events": [{"seq": True, "type": "undo"}]},
    {"client": "c", "events": [{"type": "undo"}]},
    {"client": "c", "events": ["undo"]},
])
def test_input_without_a_usable_seq_gets_a_message(ws, message):
    edits, messages = apply_events(ws, message)
    assert edits == 0 and len(messages) == 1 and messages[0].startswith("canvas:")


HOSTILE = [
    ({"type": "teleport"}, "canvas: unknown event 'teleport' ignored"),
    ({"type": "x" * 1000}, "canvas: unknown event '" + "x" * 20 + "' ignored"),
    ({"type": None}, "canvas: unknown event 'None' ignored"),
    ({}, "canvas: unknown event 'None' ignored"),
    ({"type": "add_node", "x": float("nan"), "y": 0.0}, "a position must be two finite"),
    ({"type": "add_node", "x": 0.0, "y": float("inf")}, "a position must be two finite"),
    ({"type": "add_node", "x": float("-inf"), "y": 1.0}, "a position must be two finite"),
    ({"type": "add_node", "x": 1e8, "y": 0.0}, "a position must be two finite"),
    ({"type": "add_node", "x": 1e308, "y": -1e308}, "a position must be two finite"),
    ({"type": "add_node", "x": "1", "y": "2"}, "a position must be two finite"),
    ({"type": "add_node", "x": True, "y": 0}, "a position must be two finite"),
    ({"type": "add_node", "x": None, "y": 0}, "a position must be two finite"),
    ({"type": "add_node", "x": 1.0}, "canvas: a malformed 'add_node' event was ignored"),
    ({"type": "move", "positions": {"0": [float("nan"), 0.0]}}, "two finite numbers"),
    ({"type": "move", "positions": {"0": [1e9, 0.0]}}, "two finite numbers"),
    ({"type": "move", "positions": {"nobody": [1.0, 0.0]}},
     "no node named 'nobody' (the graph changed meanwhile)"),
    ({"type": "move", "positions": [["0", 1.0, 2.0]]},
     "canvas: a malformed 'move' event was ignored"),
    ({"type": "move", "positions": {"0": 5}}, "canvas: a malformed 'move' event was ignored"),
    ({"type": "add_edge", "source": "0", "target": "nope"},
     "no node named 'nope' (the graph changed meanwhile)"),
    ({"type": "add_edge", "source": "n" * 100, "target": "0"},
     "no node named '" + "n" * 40 + "'"),
    ({"type": "add_edge", "source": 0, "target": 9}, "no node named '0'"),
    ({"type": "add_edge", "source": "0"}, "canvas: a malformed 'add_edge' event was ignored"),
    ({"type": "add_edge", "source": ["0"], "target": "9"},
     "canvas: a malformed 'add_edge' event was ignored"),
    ({"type": "add_edge", "source": "5", "target": "5"},
     "drop the edge on another node (self loops are not drawn)"),
    ({"type": "add_edge", "source": "0", "target": "1"}, "already connected"),
    ({"type": "select", "nodes": "0"}, "canvas: a malformed 'select' event was ignored"),
    ({"type": "select", "nodes": {"0": 1}}, "canvas: a malformed 'select' event was ignored"),
    ({"type": "select", "nodes": ["0"] * 35}, "canvas: a malformed 'select' event was ignored"),
    ({"type": "select", "nodes": ["0", "ghost"]}, "no node named 'ghost'"),
    ({"type": "select"}, "canvas: a malformed 'select' event was ignored"),
    ({"type": "delete", "nodes": ["ghost"]}, "no node named 'ghost'"),
    ({"type": "delete", "nodes": "33"}, "canvas: a malformed 'delete' event was ignored"),
    ({"type": "delete", "edges": [["0"]]}, "canvas: a malformed 'delete' event was ignored"),
    ({"type": "delete", "edges": [["0", "1", "2"]]},
     "canvas: a malformed 'delete' event was ignored"),
    ({"type": "delete", "edges": [5]}, "canvas: a malformed 'delete' event was ignored"),
    ({"type": "delete", "edges": "0-1"}, "canvas: a malformed 'delete' event was ignored"),
    ({"type": "delete", "edges": [["0", "ghost"]]}, "no node named 'ghost'"),
    ({"type": "delete"}, "select nodes or edges to delete first"),
    ({"type": "label", "nodes": ["0"], "label": "1"},
     "canvas: a malformed 'label' event was ignored"),
    ({"type": "label", "nodes": ["0"], "label": 1.0},
     "canvas: a malformed 'label' event was ignored"),
    ({"type": "label", "nodes": ["0"], "label": True},
     "canvas: a malformed 'label' event was ignored"),
    ({"type": "label", "nodes": ["0"]}, "canvas: a malformed 'label' event was ignored"),
    ({"type": "label", "nodes": "0", "label": 1},
     "canvas: a malformed 'label' event was ignored"),
    ({"type": "label", "nodes": [], "label": 1}, "select nodes to label first"),
    ({"type": "label", "nodes": ["0"], "label": -2}, "label must be from -1"),
]


@pytest.mark.parametrize("event, expected", HOSTILE,
                         ids=[f"{i}-{str(e.get('type'))[:10]}" for i, (e, _) in enumerate(HOSTILE)])
def test_a_bad_event_is_refused_with_a_message_and_changes_nothing(ws, event, expected):
    before = _state(ws)
    edits, messages = _send(ws, {"seq": 1, **event})
    assert edits == 0
    assert len(messages) == 1 and isinstance(messages[0], str)
    assert expected in messages[0]
    assert len(messages[0]) < 200  # a hostile name or type is not echoed in full
    assert _state(ws) == before
    assert ws.canvas_acks == {"c": 1}  # acknowledged: the browser stops re-sending it


def test_a_refused_event_does_not_stop_the_good_ones_after_it(ws):
    edits, messages = _send(ws, {"seq": 1, "type": "add_edge", "source": "0", "target": "x"},
                            _edge(2, 0, 9), {"seq": 3, "type": "teleport"}, _edge(4, 0, 14))
    assert edits == 2 and len(messages) == 2
    assert ws.drawing.has_edge(0, 9) and ws.drawing.has_edge(0, 14)
    assert ws.canvas_acks == {"c": 4}


def test_a_huge_integer_coordinate_is_refused_not_raised(ws):
    before = _state(ws)
    edits, messages = _send(ws, {"seq": 1, "type": "add_node", "x": 10**400, "y": 0})
    assert edits == 0 and "a position must be two finite numbers" in messages[0]
    assert _state(ws) == before


@pytest.mark.parametrize("position", [[1.0], []])
def test_a_short_move_position_is_refused_not_raised(ws, position):
    before = _state(ws)
    edits, messages = _send(ws, {"seq": 1, "type": "move", "positions": {"0": position}})
    assert edits == 0 and messages == ["canvas: a malformed 'move' event was ignored"]
    assert _state(ws) == before


# ================================================================== the view
def test_a_graph_up_to_the_limit_is_shown_whole():
    d = random_drawing(DRAW_LIMIT, 1500)
    view = choose_view(d, (3,))
    assert view.nodes == tuple(range(DRAW_LIMIT)) and view.total == DRAW_LIMIT
    assert not view.partial and view.caption() == ""
    small = choose_view(random_drawing(10, 12))
    assert small.nodes == tuple(range(10)) and small.caption() == ""
    assert choose_view(Drawing()).nodes == ()


def test_a_big_graph_without_selection_shows_the_highest_degree_nodes():
    d = random_drawing(1200, 4000, seed=1)
    view = choose_view(d)
    assert len(view.nodes) == DRAW_LIMIT and view.total == 1200 and view.partial
    assert list(view.nodes) == sorted(view.nodes)
    degree = dict(nx.Graph(list(d.edges)).degree())
    degree = [degree.get(i, 0) for i in range(1200)]
    chosen = set(view.nodes)
    assert min(degree[i] for i in chosen) >= max(degree[i] for i in range(1200)
                                                 if i not in chosen)
    # ties at the cut go to the lower index
    expected = sorted(range(1200), key=lambda i: (-degree[i], i))[:DRAW_LIMIT]
    assert chosen == set(expected)
    assert view.caption() == ("showing 500 of 1,200 nodes: the highest-degree nodes "
                              "(select a node to see its neighbourhood)")
    assert len(choose_view(random_drawing(DRAW_LIMIT + 1, 900)).nodes) == DRAW_LIMIT


def _layered_drawing():
    """Node 0 with 300 neighbours (1..300); 2-hop nodes 301..1200, three hung
    off each neighbour in order; 3-hop nodes 1201..1210 hung off node 301."""
    edges = [(0, i) for i in range(1, 301)]
    edges += [(1 + (j - 301) // 3, j) for j in range(301, 1201)]
    edges += [(301, j) for j in range(1201, 1211)]
    n = 1211
    return Drawing(names=tuple(f"n{i}" for i in range(n)), labels=(0,) * n,
                   positions=(None,) * n, edges=tuple(edges))


def test_a_selection_shows_its_neighbourhood_nearest_first_cut_at_the_limit():
    d = _layered_drawing()
    view = choose_view(d, (0,))
    chosen = set(view.nodes)
    assert len(chosen) == DRAW_LIMIT and view.total == 1211
    assert 0 in chosen and set(range(1, 301)) <= chosen  # every 1-hop neighbour
    two_hop = chosen - set(range(301))
    assert len(two_hop) == DRAW_LIMIT - 301 and two_hop <= set(range(301, 1201))
    # breadth first: the 2-hop nodes are those reached from the first neighbours
    assert two_hop == set(range(301, 301 + DRAW_LIMIT - 301))
    assert view.caption() == ("showing 500 of 1,211 nodes: the 2-hop neighbourhood of the "
                              "selection (nearest first, cut at the limit)")


def test_a_small_neighbourhood_is_exactly_the_two_hop_ball():
    d = _layered_drawing()
    G = nx.Graph(list(d.edges))
    view = choose_view(d, (1201, 5))  # a leaf at depth 3, and a neighbour of 0
    ball = set(nx.ego_graph(G, 1201, radius=2)) | set(nx.ego_graph(G, 5, radius=2))
    assert set(view.nodes) == ball and len(ball) < DRAW_LIMIT
    assert {0, 1, 301, 1210, 313, 315} <= ball
    assert 1000 not in ball and 316 not in ball  # 3 hops from both
    assert view.caption() == (f"showing {len(ball)} of 1,211 nodes: the 2-hop neighbourhood "
                              "of the selection")
    # indices out of range in a selection are ignored
    assert choose_view(d, (5, 99_999, -1)).nodes == choose_view(d, (5,)).nodes


def test_cora_is_shown_as_a_view_with_stable_positions():
    ws = Workspace(RunConfig(graph="cora", features="file"))
    assert ws.stats().nodes == 2708 and ws.config.features == "file"
    info = ws.split_info()
    assert info == "the file's own split: 140 train · 500 val · 1000 test"
    assert choose_view(ws.drawing).caption() == (
        "showing 500 of 2,708 nodes: the highest-degree nodes (select a node to see its "
        "neighbourhood)")
    first = _payload(ws)
    ids = [n["id"] for n in first["nodes"]]
    assert len(ids) == DRAW_LIMIT == len(set(ids))
    shown = set(ids)
    assert all(a in shown and b in shown for a, b in first["edges"])
    index = {name: i for i, name in enumerate(ws.drawing.names)}
    inside = sum(1 for u, v in ws.drawing.edges
                 if ws.drawing.names[u] in shown and ws.drawing.names[v] in shown)
    assert len(first["edges"]) == inside > 0
    assert first["editable"] is True
    assert first["follows_selection"] is True  # a click changes the view: the canvas waits
    assert all(n["label"] == "" for n in first["nodes"])  # too many to name each
    assert len(ws.view_positions) == DRAW_LIMIT
    for n in first["nodes"]:
        assert math.isfinite(n["x"]) and math.isfinite(n["y"])
    second = _payload(ws)
    assert [(n["id"], n["x"], n["y"]) for n in second["nodes"]] == \
        [(n["id"], n["x"], n["y"]) for n in first["nodes"]]
    # select one shown node via the canvas: its neighbourhood is shown, and
    # nodes that were already on show keep their places
    degree = np.bincount(np.asarray(ws.drawing.edges).ravel(), minlength=2708)
    pick = max(sorted(shown), key=lambda name: degree[index[name]])
    assert _send(ws, {"seq": 1, "type": "select", "nodes": [pick]}) == (0, [])
    third = _payload(ws)
    placed = {n["id"]: (n["x"], n["y"]) for n in first["nodes"]}
    again = [(n["x"], n["y"]) == placed[n["id"]] for n in third["nodes"] if n["id"] in placed]
    assert again and all(again)
    assert third["selected"] == [pick] and third["follows_selection"] is True
    near = {ws.drawing.names[v if u == index[pick] else u] for u, v in ws.drawing.edges
            if index[pick] in (u, v)}
    assert {pick} | near <= {n["id"] for n in third["nodes"]}
    caption = choose_view(ws.drawing, ws.selected).caption()
    assert caption.startswith(f"showing {len(third['nodes'])} of 2,708 nodes: the 2-hop "
                              "neighbourhood of the selection")
