"""The graph canvas's side in Python, without streamlit: what the canvas shows
(a view of at most :data:`DRAW_LIMIT` nodes), the data sent to it, and the
edits it sends back.

The browser side (``explorer/ui/graph_canvas.js``, on Cytoscape.js) sends
*events*, each with a sequence number from its *client* (one per mounted
canvas). It keeps sending every event until the data it gets back
acknowledges it, so a rerun that was cut short loses nothing; here an event is
applied only if its number is above the last one applied for that client, so a
rerun never replays one. Edits therefore reach the workspace exactly once and
in order, however fast the clicks come.

Events are untrusted input: every field is checked, sizes are capped, and a bad
event is skipped with a message (never a traceback); the graph stays as it was.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import networkx as nx
import numpy as np

from explorer.drawing import AUTO_LAYOUT_NODES, Drawing
from explorer.workspace import Workspace

__all__ = ["DRAW_LIMIT", "EVENT_TYPES", "SCALE", "CanvasView", "apply_events", "choose_view",
           "payload"]

DRAW_LIMIT = AUTO_LAYOUT_NODES  # nodes the canvas draws; a bigger graph is shown as a view
SCALE = 300.0  # canvas pixels per unit of a drawing's positions (y points down there)
MAX_EVENTS = 200  # per batch; a longer queue is a bug or an attack
MAX_CLIENTS = 8  # canvases remembered per session (a remount starts a new client)
LABEL_TEXT_LIMIT = 80  # more nodes on show than this: no name drawn beside each

EVENT_TYPES = ("select", "add_node", "add_edge", "move", "delete", "label", "undo", "redo")


@dataclasses.dataclass(frozen=True)
class CanvasView:
    """The nodes on show (drawing indices) and, when that is not all of them,
    which ones they are (``the highest-degree nodes`` ...)."""

    nodes: tuple[int, ...]
    total: int
    what: str = ""

    @property
    def partial(self) -> bool:
        return len(self.nodes) < self.total

    def caption(self) -> str:
        if not self.partial:
            return ""
        return f"showing {len(self.nodes):,} of {self.total:,} nodes: {self.what}"


def choose_view(drawing: Drawing, selected: Sequence[int] = (), *,
                limit: int = DRAW_LIMIT) -> CanvasView:
    """All nodes when there are at most ``limit``; otherwise the 2-hop
    neighbourhood of the selection (nearest first) when something is selected,
    else the highest-degree nodes."""
    n = drawing.num_nodes
    if n <= limit:
        return CanvasView(tuple(range(n)), n)
    adjacency: list[list[int]] = [[] for _ in range(n)]
    for u, v in drawing.edges:
        adjacency[u].append(v)
        adjacency[v].append(u)
    if selected:
        seen = dict.fromkeys(s for s in selected if 0 <= s < n)
        frontier = list(seen)
        for _ in range(2):  # breadth first: the selection, then 1 hop, then 2 hops
            nxt = []
            for u in frontier:
                for v in adjacency[u]:
                    if v not in seen:
                        seen[v] = None
                        nxt.append(v)
            frontier = nxt
        chosen = list(seen)[:limit]
        return CanvasView(tuple(sorted(chosen)), n, "the 2-hop neighbourhood of the selection"
                          + (" (nearest first, cut at the limit)" if len(seen) > limit else ""))
    degree = np.asarray([len(a) for a in adjacency])
    top = np.argsort(-degree, kind="stable")[:limit]
    return CanvasView(tuple(sorted(int(i) for i in top)), n,
                      "the highest-degree nodes (select a node to see its neighbourhood)")


def view_positions(ws: Workspace, view: CanvasView) -> dict[int, tuple[float, float]]:
    """Positions of the nodes on show: the drawing's own, else a layout of the
    view (computed once per set of nodes and kept in the workspace, so nodes
    do not jump between reruns)."""
    d = ws.drawing
    out = {i: d.positions[i] for i in view.nodes if d.positions[i] is not None}
    missing = [i for i in view.nodes if i not in out]
    cached = {i: ws.view_positions[d.names[i]] for i in missing if d.names[i] in ws.view_positions}
    out.update(cached)
    missing = [i for i in missing if i not in cached]
    if missing:
        shown = set(view.nodes)
        G = nx.Graph()
        G.add_nodes_from(view.nodes)
        G.add_edges_from((u, v) for u, v in d.edges if u in shown and v in shown)
        fixed = [i for i in view.nodes if i in out]
        pos = nx.spring_layout(G, pos={i: out[i] for i in fixed} or None, fixed=fixed or None,
                               seed=ws.config.seed, iterations=30 if len(G) > 200 else 50)
        for i in missing:
            out[i] = (float(pos[i][0]), float(pos[i][1]))
            ws.view_positions[d.names[i]] = out[i]
    return out


def payload(ws: Workspace, view: CanvasView, *, colours: Sequence[str],
            splits: Sequence[str], tips: Sequence[str], fit: int, client_acks=None) -> dict:
    """The JSON the canvas renders: nodes (id = name, position in canvas
    pixels, colour, split shape), edges among them, the selection, whether it
    can be edited, the last event applied per client, and whether the view
    follows the selection (a partial view: a click changes the nodes on
    show, so the canvas waits for the answer to redraw). ``colours`` and
    ``tips`` hold one entry per node on show (in ``view.nodes`` order);
    ``splits`` one per node of the drawing."""
    d = ws.drawing
    pos = view_positions(ws, view)
    shown = set(view.nodes)
    many = len(view.nodes) > LABEL_TEXT_LIMIT
    size = float(np.clip(28 * math.sqrt(30 / max(len(view.nodes), 30)), 9, 28))
    nodes = [{"id": d.names[i], "label": "" if many else d.names[i],
              "x": pos[i][0] * SCALE, "y": -pos[i][1] * SCALE, "colour": colour,
              "split": splits[i] if splits else "none", "tip": tip}
             for i, colour, tip in zip(view.nodes, colours, tips, strict=True)]
    edges = [[d.names[u], d.names[v]] for u, v in d.edges if u in shown and v in shown]
    editable, reason = canvas_editable(ws)
    return {"nodes": nodes, "edges": edges, "directed": d.directed,
            "selected": [d.names[i] for i in ws.selected if i in shown],
            "acks": dict(ws.canvas_acks if client_acks is None else client_acks),
            "editable": editable, "reason": reason, "fit": int(fit), "size": size,
            "follows_selection": view.partial}


def canvas_editable(ws: Workspace) -> tuple[bool, str]:
    if not ws.task.editable:
        return False, "a dataset graph is shown, not edited"
    return True, ""


# ------------------------------------------------------------------ events
def apply_events(ws: Workspace, message) -> tuple[int, list[str]]:
    """Apply the canvas's events that are new for their client, in order.
    Returns ``(edits that changed the drawing, messages)``: a message per
    skipped or refused event. Selections count as no edit."""
    if message is None:  # the widget's value when the canvas sent nothing this run
        return 0, []
    if not isinstance(message, Mapping):
        return 0, ["canvas: a malformed message was ignored"]
    client, events = message.get("client"), message.get("events")
    if not isinstance(client, str) or not 1 <= len(client) <= 64 or not isinstance(events, list):
        return 0, ["canvas: a malformed message was ignored"]
    if len(events) > MAX_EVENTS:
        return 0, [f"canvas: {len(events)} events at once is more than {MAX_EVENTS}; ignored"]
    last = ws.canvas_acks.get(client, 0)
    edits, messages = 0, []
    for event in events:
        seq = event.get("seq") if isinstance(event, Mapping) else None
        if not isinstance(seq, int) or isinstance(seq, bool):
            messages.append("canvas: an event without a sequence number was ignored")
            continue
        if seq <= last:
            continue  # already applied: never replay
        last = seq
        before = ws.drawing
        try:
            _apply(ws, event)
        except ValueError as err:
            messages.append(str(err)[:300])
        except (TypeError, KeyError, IndexError, OverflowError, AttributeError):
            messages.append(f"canvas: a malformed {str(event.get('type'))[:20]!r} event "
                            "was ignored")
        edits += ws.drawing is not before
    ws.canvas_acks.pop(client, None)
    ws.canvas_acks[client] = last  # newest last: the oldest client is dropped first
    while len(ws.canvas_acks) > MAX_CLIENTS:
        ws.canvas_acks.pop(next(iter(ws.canvas_acks)))
    return edits, messages


def _nodes(ws: Workspace, names) -> list[int]:
    index = {name: i for i, name in enumerate(ws.drawing.names)}
    if not isinstance(names, list) or len(names) > ws.drawing.num_nodes:
        raise TypeError("names")
    missing = [n for n in names if n not in index]
    if missing:
        first = missing[0]
        shown = (first if isinstance(first, str) else
                 str(first) if isinstance(first, int) and abs(first) < 10**12 else
                 type(first).__name__)
        raise ValueError(f"no node named {shown[:40]!r} (the graph changed meanwhile)")
    return [index[n] for n in names]


def _point(event) -> tuple[float, float]:
    x, y = event["x"], event["y"]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool)
               and -1e7 <= v <= 1e7 for v in (x, y)):  # NaN fails the comparison too
        raise ValueError("canvas: a position must be two finite numbers")
    return float(x) / SCALE, -float(y) / SCALE


def _apply(ws: Workspace, event: Mapping) -> None:
    kind = event.get("type")
    if kind == "select":
        ws.select(_nodes(ws, event["nodes"]))
        return
    if kind not in EVENT_TYPES:
        raise ValueError(f"canvas: unknown event {str(kind)[:20]!r} ignored")
    editable, why = canvas_editable(ws)
    if not editable:
        raise ValueError(why)
    if kind == "add_node":
        i = ws.add_node(position=_point(event))
        ws.select([i])
    elif kind == "add_edge":
        u, v = _nodes(ws, [event["source"], event["target"]])
        if u == v:
            raise ValueError("drop the edge on another node (self loops are not drawn)")
        ws.add_edge(u, v)
    elif kind == "move":
        moves = event["positions"]
        if not isinstance(moves, Mapping) or len(moves) > ws.drawing.num_nodes:
            raise TypeError("positions")
        nodes = _nodes(ws, list(moves))
        ws.move({i: _point({"x": p[0], "y": p[1]}) for i, p in zip(nodes, moves.values())})
    elif kind == "delete":
        nodes = _nodes(ws, event.get("nodes", []))
        pairs = event.get("edges", [])
        if not isinstance(pairs, list) or len(pairs) > len(ws.drawing.edges):
            raise TypeError("edges")
        edges = [tuple(_nodes(ws, list(p))) for p in pairs]
        if any(len(e) != 2 for e in edges):
            raise TypeError("edges")
        ws.delete(nodes, edges)
    elif kind == "label":
        label = event["label"]
        if not isinstance(label, int) or isinstance(label, bool):
            raise TypeError("label")
        ws.set_label(_nodes(ws, event["nodes"]), label)
    elif kind == "undo":
        ws.undo()
    elif kind == "redo":
        ws.redo()
