"""Drawing with the mouse and real datasets, in a real browser (headless
Chromium through Playwright), the way a person does it: double-clicks, drags,
shift-drags, key presses and the file input, at the place on the page where a
person would point.

Node positions on screen are read from the live Cytoscape instance (the canvas
is drawn on a <canvas>, so there is no DOM element per node); every action is
then a real mouse or keyboard event at that spot. The canvas's ``data-*``
attributes say what it shows and how many of its events still wait for Python.

Same server/browser fixture and skip rules as ``test_browser.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect
from test_browser import (  # noqa: F401  (app is a fixture)
    COMPILE_MS,
    LOAD_MS,
    STEP_MS,
    VIEWPORT,
    app,
    click,
    column,
    expect_steps,
    metric,
    press_step,
    progress,
    shoot,
    wait_idle,
)

CORA = REPO / "assets" / "cora.npz"

# screen positions of the nodes on show: {name: [x, y]} in page pixels
_SCREEN_JS = """(box) => {
    const c = box.gcCanvas, r = box.getBoundingClientRect(), out = {};
    c.cy.nodes().forEach((n) => {
        if (n.id().startsWith('\\u241f')) return;
        const p = n.renderedPosition();
        out[n.id()] = [r.left + p.x, r.top + p.y];
    });
    return out;
}"""
# the same, relative to the canvas's top-left corner (immune to page scrolling)
_RENDERED_JS = """(box) => {
    const out = {};
    box.gcCanvas.cy.nodes().forEach((n) => {
        if (!n.id().startsWith('\\u241f')) out[n.id()] = [n.renderedPosition().x,
                                                            n.renderedPosition().y];
    });
    return out;
}"""
_HANDLE_JS = """(box) => {
    const c = box.gcCanvas, h = c.cy.getElementById('\\u241fhandle');
    if (h.empty()) return null;
    const r = box.getBoundingClientRect(), p = h.renderedPosition();
    return [r.left + p.x, r.top + p.y];
}"""
# what the canvas and Cytoscape's pointer handling believe, for a failure message:
# a hover shows no handle when the canvas is not editable, an edge is being drawn,
# or Cytoscape thinks a button is still down (``capture``: a drag, not a hover)
_HOVER_STATE_JS = """(box) => {
    const c = box.gcCanvas, h = c.cy.renderer().hoverData || {};
    return {editable: c.editable, drawingEdge: !!c.edgeSource, heldRedraw: !!c.heldRedraw,
            batching: c.cy.batching(), capture: !!h.capture, which: h.which || 0,
            pressedAt: h.mdownPos || null, dragging: !!h.dragging, selecting: !!h.selecting,
            last: h.last ? h.last.id() : null,
            grabbed: c.cy.nodes(':grabbed').map((n) => n.id())};
}"""
_SELECTED_JS = """(box) => box.gcCanvas.cy.nodes(':selected').map((n) => n.id())
                                 .filter((id) => !id.startsWith('\\u241f'))"""
_MODEL_JS = """(box, id) => { const p = box.gcCanvas.cy.getElementById(id).position();
                                return [p.x, p.y]; }"""
# when each touch reached the canvas (the browser's own event times, ms)
_TAPS_JS = """(box) => {
    box.tapTimes = [];
    if (!box.tapsRecorded) {
        box.addEventListener('touchstart', (e) => box.tapTimes.push(e.timeStamp), true);
        box.tapsRecorded = true;
    }
}"""
#: the canvas's window for a double tap (explorer/ui/graph_canvas.js)
DOUBLE_TAP_MS = int(re.search(r"const TOUCH_DOUBLE_TAP_MS = (\d+);",
                              (REPO / "explorer" / "ui" / "graph_canvas.js").read_text())[1])


def canvas(page):
    return page.locator(".gc-box")


def open_graph(app, query: str, viewport=None, **options):
    context, page = app.session(query, viewport, **options)
    expect(canvas(page), "the canvas never drew its nodes").not_to_have_attribute(
        "data-nodes", "0", timeout=LOAD_MS)
    wait_idle(page)
    return context, page


def settled(page, nodes: int | None = None, edges: int | None = None,
            timeout: int = STEP_MS) -> None:
    """Wait until Python has acknowledged every canvas event and the canvas
    shows ``nodes``/``edges``."""
    box = canvas(page)
    expect(box, "canvas events never acknowledged").to_have_attribute(
        "data-pending", "0", timeout=timeout)
    if nodes is not None:
        expect(box, f"the canvas does not show {nodes} nodes").to_have_attribute(
            "data-nodes", str(nodes), timeout=timeout)
    if edges is not None:
        expect(box, f"the canvas does not show {edges} edges").to_have_attribute(
            "data-edges", str(edges), timeout=timeout)
    wait_idle(page, timeout)


def screen(page, settle_s: float = 5.0) -> dict[str, list[float]]:
    """Where the nodes are on screen, once that holds still for 150 ms (a fit,
    or the page shifting under a slow rerun, can move them between a read and
    a click: a click on a node that has moved lands on empty space)."""
    import time

    box = canvas(page)
    deadline = time.monotonic() + settle_s
    last = box.evaluate(_SCREEN_JS)
    while True:
        page.wait_for_timeout(150)
        now = box.evaluate(_SCREEN_JS)
        if now == last or time.monotonic() > deadline:
            return now
        last = now


def empty_spots(page, count: int) -> list[tuple[float, float]]:
    """Points on the canvas at least 45 px from every node."""
    r = canvas(page).bounding_box()
    nodes = np.asarray(list(screen(page).values()), float).reshape(-1, 2)
    spots = []
    for fy in np.linspace(0.12, 0.88, 9):
        for fx in np.linspace(0.1, 0.9, 9):
            p = np.array([r["x"] + fx * r["width"], r["y"] + fy * r["height"]])
            taken = np.asarray(spots).reshape(-1, 2)
            if ((not len(nodes) or np.min(np.linalg.norm(nodes - p, axis=1)) > 45)
                    and (not len(taken) or np.min(np.linalg.norm(taken - p, axis=1)) > 45)):
                spots.append((float(p[0]), float(p[1])))
                if len(spots) == count:
                    return spots
    raise AssertionError("no empty spots on the canvas")


def drag(page, start, end, steps: int = 12) -> None:
    page.mouse.move(*start)
    page.mouse.down()
    page.mouse.move(*end, steps=steps)
    page.mouse.up()


def draw_edge(page, source: str, target: str) -> None:
    """Hover ``source``, grab the handle that appears beside it, drop it on ``target``.

    If no handle appears (the page moved under the pointer, as after a notice
    comes or goes, or the hover was lost to a redraw of a busy page), point at
    ``source`` again where it is now, from beside it, as a person would; if the
    handle still does not come, that is a failure, which says what was under
    the pointer."""
    wanted = f"({_HANDLE_JS})(document.querySelector('.gc-box')) !== null"
    pos = screen(page)
    page.mouse.move(*pos[source])
    try:
        page.wait_for_function(wanted, timeout=5000)
    except PlaywrightTimeout:
        first = pos[source]
        pos = screen(page)
        page.mouse.move(pos[source][0] - 40, pos[source][1] - 40)
        page.mouse.move(*pos[source], steps=4)
        try:
            page.wait_for_function(wanted, timeout=5000)
        except PlaywrightTimeout:
            under = page.evaluate("([x, y]) => { const e = document.elementFromPoint(x, y);"
                                  " return e ? e.outerHTML.slice(0, 120) : null; }", pos[source])
            state = canvas(page).evaluate(_HOVER_STATE_JS)
            raise AssertionError(
                f"no edge handle beside node {source!r} at {pos[source]} "
                f"(first pointed at {first}); under the pointer: {under}; "
                f"the canvas's state: {state}") from None
    handle = canvas(page).evaluate(_HANDLE_JS)
    drag(page, handle, pos[target], steps=15)


# -------------------------------------------------------------------- tests
def test_double_click_adds_nodes_where_clicked_and_nothing_else_moves(app):
    context, page = open_graph(app, "?graph=house")
    try:
        settled(page, nodes=5, edges=6)
        before = canvas(page).evaluate(_RENDERED_JS)
        r = canvas(page).bounding_box()
        page_spots = empty_spots(page, 3)
        spots = [(x - r["x"], y - r["y"]) for x, y in page_spots]
        for x, y in page_spots:  # fast: no waiting between the double-clicks
            page.mouse.dblclick(x, y)
        settled(page, nodes=8, edges=6)
        moved = canvas(page).bounding_box()
        assert abs(moved["y"] - r["y"]) < 1, "the canvas moved on the page while drawing"
        after = canvas(page).evaluate(_RENDERED_JS)
        for name, (x, y) in before.items():  # existing nodes never jump
            assert abs(after[name][0] - x) < 1 and abs(after[name][1] - y) < 1, name
        new = [after[n] for n in after if n not in before]
        assert len(new) == 3
        for x, y in spots:  # each new node sits where it was double-clicked
            assert min(np.hypot(nx - x, ny - y) for nx, ny in new) < 3
        expect(page.locator('[data-testid="stMetric"]').filter(has_text="Nodes")).to_contain_text(
            "8")
        wait_idle(page)
        shoot(column(page, "Graph"), "canvas_added_nodes.png")
    finally:
        context.close()


def test_a_double_click_is_two_clicks_on_one_spot_not_any_two_quick_clicks(app):
    context, page = open_graph(app, "?graph=house")
    try:
        settled(page, nodes=5, edges=6)
        before = set(canvas(page).evaluate(_RENDERED_JS))
        r = canvas(page).bounding_box()
        first, second = empty_spots(page, 2)
        # two single clicks on the background within a quarter second (clicking
        # around, deselecting): not a double-click, so no node
        page.mouse.click(*first)
        page.mouse.click(*second)
        page.wait_for_timeout(600)
        settled(page, nodes=5, edges=6)
        assert canvas(page).evaluate("b => b.gcCanvas.cy.nodes().length") == 5
        # a person's double-click as the system counts it, the second click 400 ms
        # after the first (a browser's usual limit is 500 ms): a node where it was made
        x, y = first
        page.mouse.click(x, y)
        page.wait_for_timeout(400)
        page.mouse.down(click_count=2)  # the second press and release of the pair
        page.mouse.up(click_count=2)
        settled(page, nodes=6, edges=6)
        after = canvas(page).evaluate(_RENDERED_JS)
        (nx, ny), = [p for n, p in after.items() if n not in before]
        assert np.hypot(nx - (x - r["x"]), ny - (y - r["y"])) < 3
    finally:
        context.close()


def test_a_double_tap_on_a_touch_screen_adds_a_node_and_two_taps_apart_do_not(app):
    # a tablet in a classroom: no mouse, so no system double-click
    context, page = open_graph(app, "?graph=house", has_touch=True)
    try:
        settled(page, nodes=5, edges=6)
        before = set(canvas(page).evaluate(_RENDERED_JS))
        r = canvas(page).bounding_box()
        first, second = empty_spots(page, 2)
        page.touchscreen.tap(*first)  # two quick taps, far apart: no node
        page.touchscreen.tap(*second)
        page.wait_for_timeout(600)
        settled(page, nodes=5, edges=6)
        page.touchscreen.tap(*first)  # a double tap: a node there
        page.touchscreen.tap(*first)
        settled(page, nodes=6, edges=6)
        after = canvas(page).evaluate(_RENDERED_JS)
        (nx, ny), = [p for n, p in after.items() if n not in before]
        assert np.hypot(nx - (first[0] - r["x"]), ny - (first[1] - r["y"])) < 3
        # a slower double tap, 300 ms between the taps (a phone's limit): a node too.
        # The gap is read from the canvas's own touch events: on a machine too busy to
        # deliver the second tap within the window, the two taps are two single taps
        # (no node, checked), and the double tap is tried again.
        for _ in range(3):
            canvas(page).evaluate(_TAPS_JS)
            page.touchscreen.tap(*second)
            page.wait_for_timeout(300)
            page.touchscreen.tap(*second)
            gap = canvas(page).evaluate("(box) => box.tapTimes[1] - box.tapTimes[0]")
            if gap <= DOUBLE_TAP_MS:
                break
            settled(page, nodes=6, edges=6)
            page.wait_for_timeout(DOUBLE_TAP_MS + 100)  # the next tap starts afresh
        assert 300 <= gap <= DOUBLE_TAP_MS, f"no double tap within the window in 3 tries: {gap}"
        settled(page, nodes=7, edges=6)
    finally:
        context.close()


def test_dragging_the_edge_handle_draws_an_edge_and_the_next_step_retraces(app):
    context, page = open_graph(app, "?graph=house")
    try:
        press_step(page, 1)
        settled(page, nodes=5, edges=6)
        grid = page.locator(".st-key-g_edge_table [data-testid='stDataFrame'] td")
        assert grid.count() == 0  # closed, the table is not even sent (its code loads late)
        draw_edge(page, "0", "4")  # not an edge of the house graph
        settled(page, nodes=5, edges=7)
        assert metric(page, "Edges") == "7"
        expect(page.get_by_text("connected 0 and 4").first).to_be_visible()
        # opened, the edge table lists the house's six edges, then the drawn one
        page.get_by_text("Edge table (7 edges)").click()
        expect(grid, "the opened edge table does not list 7 edges").to_have_count(14,
                                                                                 timeout=LOAD_MS)
        cells = grid.all_inner_texts()
        assert list(zip(cells[::2], cells[1::2])) == [
            ("0", "1"), ("0", "2"), ("1", "3"), ("2", "3"), ("2", "4"), ("3", "4"), ("0", "4")]
        press_step(page, 1)
        expect(column(page, "Train"), "the train panel does not say why it retraced"
               ).to_contain_text(re.compile(
                   r"this step traced: shapes changed: directed edges 12 (->|→) 14"),
                   timeout=STEP_MS)
    finally:
        context.close()


def test_a_dragged_node_stays_where_it_was_dropped(app):
    context, page = open_graph(app, "?graph=house")
    try:
        settled(page, nodes=5)
        start = screen(page)["2"]
        spot = empty_spots(page, 1)[0]
        drag(page, start, spot)
        settled(page)
        model = canvas(page).evaluate(_MODEL_JS, ["2"])
        # reruns: a Step (whole page) and a colour change redraw the canvas from Python
        press_step(page, 1)
        page.locator(".st-key-g_colour").get_by_text("prediction", exact=True).click()
        wait_idle(page)
        settled(page)
        assert canvas(page).evaluate(_MODEL_JS, ["2"]) == pytest.approx(model, abs=1e-6)
        x, y = screen(page)["2"]
        assert abs(x - spot[0]) < 2 and abs(y - spot[1]) < 2
        click(page, "g_undo")  # a move is one undo step of its own
        page.wait_for_function(
            """([m]) => { const p = document.querySelector('.gc-box').gcCanvas.cy
                          .getElementById('2').position();
                          return Math.hypot(p.x - m[0], p.y - m[1]) > 1; }""",
            arg=[model], timeout=STEP_MS)
    finally:
        context.close()


def test_click_selects_and_shift_click_adds_then_connect(app):
    context, page = open_graph(app, "?graph=house")
    try:
        settled(page, nodes=5, edges=6)
        pos = screen(page)
        page.mouse.click(*pos["1"])
        settled(page)
        picked = page.locator(".st-key-g_pick")
        expect(picked, "a click did not select the node").to_contain_text("1")
        page.keyboard.down("Shift")
        page.mouse.click(*pos["4"])
        page.keyboard.up("Shift")
        settled(page)
        expect(picked).to_contain_text("4")
        click(page, "g_connect")
        settled(page, edges=7)
        expect(page.get_by_text("connected 1 and 4").first).to_be_visible()
        # digits typed on the canvas label the selection
        canvas(page).focus()
        page.keyboard.type("2")
        page.keyboard.press("Enter")
        settled(page)
        expect(page.get_by_text("labelled 2 node(s) 2").first).to_be_visible(timeout=STEP_MS)
    finally:
        context.close()


def test_a_click_is_answered_without_sending_cytoscape_again(app):
    """Cytoscape.js (443 kB) travels in a component of its own, once: the
    canvas's answer to a click is a few kB (it used to carry the library)."""
    context, page = open_graph(app, "?graph=karate")
    try:
        settled(page, nodes=34)
        cdp = context.new_cdp_session(page)
        frames: list[int] = []
        cdp.on("Network.webSocketFrameReceived",
               lambda e: frames.append(len(e["response"]["payloadData"])))
        cdp.send("Network.enable")
        acked = int(canvas(page).get_attribute("data-acked") or 0)
        page.mouse.click(*screen(page)["0"])
        page.wait_for_function(f"Number(document.querySelector('.gc-box').dataset.acked) > "
                               f"{acked}", timeout=STEP_MS)
        settled(page)
        expect(page.locator(".st-key-g_pick")).to_contain_text("0")
        assert frames, "no message from the server answered the click"
        assert max(frames) < 60_000, f"a {max(frames):,}-character message answered a click"
        assert page.evaluate("typeof globalThis.cytoscape") == "function"
    finally:
        context.close()


_FRAMES_JS = """() => ({...globalThis.gcFrames.counts,
    redraws: document.querySelector('.gc-box').gcCanvas.cy.renderer().redrawCount || 0})"""


def test_an_idle_canvas_holds_its_frames_and_a_click_draws_at_once(app):
    """Cytoscape's renderer asks for a frame 60 times a second for as long as
    the page is open (0.15-0.25 of a core with nothing moving). The canvas
    holds those frames while nothing changes (explorer/ui/cytoscape_frames.js):
    a few a second reach Cytoscape on an idle page, and a click on a node wakes
    them, so its selection is drawn by a frame the click released."""
    context, page = open_graph(app, "?graph=house")
    try:
        settled(page, nodes=5, edges=6)
        pos = screen(page)
        settings = page.evaluate("globalThis.gcFrames.settings")
        page.wait_for_timeout(settings["awakeMs"] + 500)  # past the last redraw's awake time
        before = page.evaluate(_FRAMES_JS)
        page.wait_for_timeout(2000)
        idle = page.evaluate(_FRAMES_JS)
        ran = (idle["passed"] + idle["woken"] + idle["timed"]
               - before["passed"] - before["woken"] - before["timed"])
        assert idle["asked"] > before["asked"], "Cytoscape's render loop stopped"
        # one held frame per release, and a release every idleFrameMs (60 fps would be 120)
        most = 2 * 2000 // settings["idleFrameMs"] + 4
        assert ran <= most, f"{ran} frames reached Cytoscape in 2 s on an idle page (> {most})"
        assert idle["redraws"] == before["redraws"], "the idle canvas drew itself again"
        page.mouse.click(*pos["1"])
        page.wait_for_function(
            f"(() => {{ const c = ({_FRAMES_JS})(); return c.redraws > {idle['redraws']}; }})()",
            timeout=STEP_MS)
        clicked = page.evaluate(_FRAMES_JS)
        assert clicked["woken"] > idle["woken"], (
            "the click's redraw did not wake the held frames", idle, clicked)
        settled(page)
        try:
            expect(page.locator(".st-key-g_pick")).to_contain_text("1")
        except AssertionError:  # once in a full run under extra load: say what the canvas saw
            raise AssertionError(
                f"the click at {pos['1']} did not select node 1: the canvas has "
                f"{canvas(page).evaluate(_SELECTED_JS)} selected, node 1 is now at "
                f"{screen(page).get('1')}, and its state is "
                f"{canvas(page).evaluate(_HOVER_STATE_JS)}") from None
    finally:
        context.close()


class HeldAnswers:
    """The page's Streamlit websocket, with the server's messages held while
    ``on`` (as a slow server holds them) and then delivered in order."""

    def __init__(self, page):
        self.on = False
        self.held: list = []
        self.client = None
        page.route_web_socket(re.compile(r"/_stcore/stream"), self._route)

    def _route(self, ws):
        self.client = ws
        server = ws.connect_to_server()  # what the page sends still goes straight through
        server.on_message(lambda m: self.held.append(m) if self.on else ws.send(m))

    def release(self):
        while self.held:  # a message may arrive while one is delivered
            self.client.send(self.held.pop(0))
        self.on = False


def test_a_label_typed_before_the_clicks_answer_keeps_the_clicked_node_selected(app):
    """A click on node 2, then its label typed, while the page still waits for
    the click's answer (a busy server): the rerun the label sends carries the
    "Selected nodes" box as the page last had it (node 0). That old value must
    not count as a new pick, which once selected node 0 again on the server and
    the canvas, after node 2 was labelled."""
    context = app.browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        answers = HeldAnswers(page)
        page.goto(app.url + "?graph=house", timeout=LOAD_MS)
        expect(canvas(page)).to_have_attribute("data-nodes", "5", timeout=LOAD_MS)
        settled(page, nodes=5, edges=6)
        pos = screen(page)
        page.mouse.click(*pos["0"])
        settled(page)
        picked = page.locator(".st-key-g_pick")
        expect(picked).to_contain_text("0")
        answers.on = True
        page.mouse.click(*pos["2"])
        # the canvas sends the click, the server answers it (held); then the
        # label goes out with the page's widget values, still node 0 in the box
        page.wait_for_timeout(2500)
        canvas(page).focus()
        page.keyboard.type("1")
        page.keyboard.press("Enter")
        page.wait_for_timeout(2500)
        assert canvas(page).get_attribute("data-pending") != "0", "the answers were not held"
        answers.release()
        settled(page)
        expect(page.get_by_text("labelled 1 node(s) 1").first).to_be_visible(timeout=STEP_MS)
        assert canvas(page).evaluate(_SELECTED_JS) == ["2"], "the canvas lost the clicked node"
        expect(picked, "the server lost the clicked node").to_contain_text("2")
        expect(picked).not_to_contain_text("0")
        tip = canvas(page).evaluate(
            "(box) => box.gcCanvas.cy.getElementById('2').data('tip')")
        assert "label 1" in tip, tip
    finally:
        context.close()


def test_nodes_picked_in_the_selected_nodes_box_are_selected_on_the_canvas(app):
    """Typed into the "Selected nodes" box one after the other (the box is not
    drawn anew between the two: a pick there is already what Python has)."""
    context, page = open_graph(app, "?graph=house")
    try:
        settled(page, nodes=5, edges=6)
        picked = page.locator(".st-key-g_pick")
        picked.locator("input").click()
        page.keyboard.type("1")
        page.keyboard.press("Enter")
        page.keyboard.type("3")
        page.keyboard.press("Enter")
        page.keyboard.press("Escape")
        expect(picked.locator("[data-tag]")).to_have_count(2, timeout=STEP_MS)
        page.wait_for_function(
            f"JSON.stringify(({_SELECTED_JS})(document.querySelector('.gc-box')).sort())"
            " === '[\"1\",\"3\"]'", timeout=STEP_MS)
        wait_idle(page)
        expect(picked.locator("[data-tag]")).to_have_count(2)
    finally:
        context.close()


def test_box_select_delete_then_undo_and_redo(app):
    context, page = open_graph(app, "?graph=house")
    try:
        settled(page, nodes=5, edges=6)
        pos = screen(page)
        # a box around the two nodes nearest the canvas's left edge
        two = sorted(pos, key=lambda n: pos[n][0])[:2]
        xs = [pos[n][0] for n in two]
        ys = [pos[n][1] for n in two]
        others = [n for n in pos if n not in two]
        margin = 30  # generous, as a person draws it: the box must hold node and label
        assert all(not (min(xs) - margin <= pos[n][0] <= max(xs) + margin
                        and min(ys) - margin <= pos[n][1] <= max(ys) + margin)
                   for n in others), "the box would catch a third node"
        page.keyboard.down("Shift")
        start, end = (min(xs) - margin, min(ys) - margin), (max(xs) + margin, max(ys) + margin)
        drag(page, start, end)
        # what the canvas itself selected (read before Python's answer, which sets
        # the canvas's selection to its own), then what Python shows: a failure says
        # which side lost a node (this step failed once in CI, not reproduced since)
        seen = sorted(canvas(page).evaluate(_SELECTED_JS))
        page.keyboard.up("Shift")
        settled(page)
        assert seen == sorted(two), (f"the canvas's box selected {seen}, not {sorted(two)}: "
                                     f"box {start} -> {end}, nodes before {pos}, "
                                     f"nodes now {screen(page, settle_s=0)}")
        expect(page.locator(".st-key-g_pick"), f"Python lost a node the canvas selected "
               f"({seen})").to_contain_text(two[1])
        page.keyboard.press("Delete")
        settled(page, nodes=3)
        assert metric(page, "Nodes") == "3"
        page.keyboard.press("Control+z")
        settled(page, nodes=5, edges=6)
        page.keyboard.press("Control+Shift+z")
        settled(page, nodes=3)
        click(page, "g_undo")
        settled(page, nodes=5, edges=6)
        click(page, "g_redo")
        settled(page, nodes=3)
    finally:
        context.close()


def test_a_new_empty_graph_is_drawn_from_scratch_and_trains(app):
    context, page = open_graph(app, "?graph=house")
    try:
        click(page, "g_clear")
        settled(page, nodes=0, edges=0)
        for x, y in empty_spots(page, 3):
            page.mouse.dblclick(x, y)
        settled(page, nodes=3)
        draw_edge(page, "0", "1")
        settled(page, edges=1)
        draw_edge(page, "1", "2")
        settled(page, nodes=3, edges=2)
        press_step(page, 1)
        expect(column(page, "Train")).to_contain_text("Loss")
    finally:
        context.close()


def test_prediction_colours_follow_training_live(app):
    context, page = open_graph(app, "?graph=karate&epochs=100000")
    try:
        page.locator(".st-key-g_colour").get_by_text("prediction", exact=True).click()
        wait_idle(page)
        # karate's predictions settle within a few hundred steps: at full speed that is
        # a second or two, so a class slows it down to watch them change (ten steps a
        # second, whatever the machine)
        speed = page.locator(".st-key-t_speed")
        speed.get_by_test_id("stSliderThumbValue").locator("..").click()  # the knob
        for key in ("Home", "ArrowRight", "ArrowRight"):
            page.keyboard.press(key)
        expect(speed.locator("input[type=range]")).to_have_attribute("aria-valuetext",
                                                                     "1 step per tick")
        wait_idle(page)
        click(page, "t_play")  # chosen before or during training: both are live
        # any step: "Step 1" shows for one tick (0.1 s), which a poll can miss
        expect(progress(page), "training never started").to_contain_text(
            re.compile(r"Step [1-9]\d* of \d+"), timeout=COMPILE_MS)
        colours = "b => b.gcCanvas.cy.nodes().map(n => n.data('colour')).join()"
        seen = {canvas(page).evaluate(colours)}
        first = int(canvas(page).get_attribute("data-updates"))
        for _ in range(60):  # the canvas redraws about once a second while it trains
            page.wait_for_timeout(500)
            seen.add(canvas(page).evaluate(colours))
            redraws = int(canvas(page).get_attribute("data-updates")) - first
            if len(seen) >= 3 and redraws >= 3:
                break
        if page.locator(".st-key-t_pause button:visible").is_disabled():
            # seen once in a full run on a loaded machine, not reproduced since: say why
            pytest.fail("training stopped by itself while the colours were watched "
                        f"({redraws} redraws, {len(seen)} colourings); the train panel: "
                        + column(page, "Train").inner_text()[:1500])
        click(page, "t_pause")
        assert redraws >= 3, f"the canvas was redrawn {redraws} times while training"
        assert len(seen) >= 3, (f"the prediction colours changed {len(seen) - 1} times "
                                "while training")
    finally:
        context.close()


def test_cora_preset_trains_in_the_app(app):
    context, page = open_graph(app, "?graph=cora&features=file&epochs=5")
    try:
        graph = column(page, "Graph")
        expect(graph).to_contain_text("Showing 500 of 2,708 nodes")
        expect(graph).to_contain_text("140 train · 500 val · 1000 test")
        # its 1,433 word features are 1.3 % non-zero, and the page says how they go in
        expect(graph).to_contain_text("Features: 1,433 per node, 1.3 % non-zero: the step "
                                      "takes them as CSR")
        assert metric(page, "Nodes") == "2,708"
        settled(page, nodes=500)
        # hundreds of undirected edges on show: Cytoscape's cheap straight edges
        kinds = canvas(page).evaluate(
            "b => { const es = b.gcCanvas.cy.edges(); return [es.length, "
            "es.filter(e => e.hasClass('fast')).length, es[0].style('curve-style')]; }")
        assert kinds[0] > 300 and kinds[1] == kinds[0] and kinds[2] == "haystack", kinds
        click(page, "t_play")
        expect_steps(page, 5, COMPILE_MS)
        wait_idle(page)
        acc = metric(page, "Test acc")
        assert re.fullmatch(r"\d+%", acc), f"Test acc shows {acc!r}"
        # a click on a node shows its neighbourhood
        name = next(iter(screen(page)))
        page.mouse.click(*screen(page)[name])
        settled(page)
        expect(graph).to_contain_text("the 2-hop neighbourhood of the selection")
        few = canvas(page).evaluate(
            "b => { const es = b.gcCanvas.cy.edges(); return [es.length, "
            "es.filter(e => e.hasClass('fast')).length]; }")
        assert few[1] == 0 or few[0] > 300, few  # a small view draws its edges in full
    finally:
        context.close()


def test_uploading_cora_keeps_its_split(app):
    context, page = open_graph(app, "?graph=house")
    try:
        page.locator('.st-key-g_upload input[type="file"]').set_input_files(str(CORA))
        graph = column(page, "Graph")
        expect(graph, "the upload did not load").to_contain_text("Showing 500 of 2,708 nodes",
                                                                 timeout=COMPILE_MS)
        expect(graph).to_contain_text("the file's own split: 140 train · 500 val · 1000 test")
        assert metric(page, "Nodes") == "2,708"
        expect(page.locator(".st-key-g_preset input")).to_have_value("file: cora.npz")
        expect(page.locator(".st-key-m_features input")).to_have_value("file")
    finally:
        context.close()


@pytest.mark.parametrize("width", [1400, 1000])
def test_screenshots_of_the_graph_panel(app, width):
    context, page = open_graph(app, "?graph=karate", {"width": width, "height": 2000})
    try:
        settled(page)
        pos = screen(page)
        page.mouse.click(*pos["0"])
        settled(page)
        path = shoot(column(page, "Graph"), f"graph_panel_{width}.png")
        assert path.stat().st_size > 20_000
        # no button label cut short ("Add no…"): Streamlit ellipsises what does not fit
        cut = column(page, "Graph").locator("button:visible .stMarkdownEllipsis").evaluate_all(
            "els => els.filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.innerText)")
        assert cut == [], f"button labels cut at {width} px: {cut}"
    finally:
        context.close()


def test_node_names_are_never_html(app, tmp_path: Path):
    context, page = open_graph(app, "?graph=house")
    try:
        hostile = tmp_path / "x.edgelist"
        hostile.write_text("<img_src=x_onerror=alert(1)> <b>bold</b>\n<b>bold</b> c\n")
        page.locator('.st-key-g_upload input[type="file"]').set_input_files(str(hostile))
        settled(page, nodes=3, timeout=COMPILE_MS)
        assert page.locator("img[src=x]").count() == 0
        assert page.locator(".gc-root b").count() == 0
        pos = screen(page)
        assert "<b>bold</b>" in pos  # the name is kept as text
    finally:
        context.close()


class _Listener:
    """An HTTP server on a free loopback port that records every request: a
    page that fetched a URL written in user text would show up here."""

    def __init__(self):
        import http.server
        import threading

        seen = self.requests = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (the stdlib's name)
                seen.append(self.path)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_markdown_in_links_file_names_and_node_names_stays_text(app, tmp_path: Path):
    import urllib.parse

    listener = _Listener()
    at = f"http://127.0.0.1:{listener.port}"
    beacon, login = f"![]({at}/beacon)", f"[Sign in]({at}/login)"
    query = "?" + urllib.parse.urlencode({beacon: "1", "lesson": login})
    context, page = open_graph(app, query)

    def shown(selector):  # the text on the page, without the invisible word joiners
        return page.eval_on_selector_all(
            selector, "els => els.map(e => e.innerText.replaceAll('\u2060', '')).join(' | ')")

    try:
        alerts = '[data-testid="stAlert"]'
        assert f"unknown link parameter '{beacon}' ignored" in shown(alerts), shown(alerts)
        assert f"unknown lesson '{login}' ignored" in shown(alerts)
        # names that are markdown, in a file whose name is markdown
        image, link = f"![]({at}/node)", f"[x]({at}/named)"
        upload = tmp_path / "**bold**.edgelist"
        upload.write_text(f"{image} c\n{link} c\n")
        page.locator('.st-key-g_upload input[type="file"]').set_input_files(str(upload))
        settled(page, nodes=3, timeout=COMPILE_MS)
        assert "Loaded **bold**.edgelist" in shown(alerts)
        draw_edge(page, image, link)  # the edit's notice names both nodes
        settled(page, edges=3)
        toast = '[data-testid="stToast"]'
        page.wait_for_selector(toast, timeout=STEP_MS)
        assert f"connected {image} and {link}" in shown(toast), shown(toast)
        page.wait_for_timeout(500)
        for selector in (f"img[src^='{at}']", f"a[href^='{at}']", "strong:text('bold')"):
            assert page.locator(selector).count() == 0, (selector, page.eval_on_selector_all(
                selector, "els => els.map(e => e.parentElement.parentElement.outerHTML)"))
        assert listener.requests == [], listener.requests
    finally:
        context.close()
        listener.close()
