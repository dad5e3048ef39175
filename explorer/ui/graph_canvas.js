// The graph canvas: Cytoscape.js (assets/cytoscape, MIT) inside a Streamlit
// Components v2 component. Python (explorer/canvas.py) sends the nodes and
// edges on show; this file turns mouse and keyboard input into *events* for
// Python, each numbered, and keeps sending every event until the data coming
// back acknowledges it (data.acks[client]). Python applies an event only once,
// so fast clicks are neither lost nor replayed.
//
// User text (node names, tips) only ever goes through Cytoscape's canvas
// labels or textContent, never innerHTML.
//
// Mouse: double-click empty space adds a node; drag a node to move it; drag
// the small handle that appears beside a hovered node onto another node to
// draw an edge; click selects, shift-click adds, shift-drag selects a box.
// Keys (canvas focused): Delete/Backspace, Ctrl+Z, Ctrl+Shift+Z (or Ctrl+Y),
// digits set the label of the selection, Escape clears it, F fits the view.

const INSTANCES = new WeakMap();
const HANDLE = "\u241fhandle";
const GHOST = "\u241fghost";
const TEMP = "\u241ftemp";
const FAST_EDGES = 300; // more undirected edges than this on show: haystack edges
const HOLD_FOR_ANSWER_MS = 1000; // the longest a view waits for its answer before redrawing
const TOUCH_SLOP_PX = 30; // a touch double tap: its two taps at most this far apart
const TOUCH_DOUBLE_TAP_MS = 400; // ... and at most this long apart
const TOUCH_ECHO_MS = 1000; // a double-click this soon after a double tap is its echo
const RESEND_MS = 1500; // a trigger can be lost when a rerun preempts another: send again
// (not sooner: a busy server answers in about a second, and a resend then only queues a second
// rerun behind the first)
const SHAPES = { train: "rectangle", val: "diamond", test: "ellipse", none: "ellipse" };

const STYLE = [
  {
    selector: "node",
    style: {
      width: "data(size)", height: "data(size)", "background-color": "data(colour)",
      shape: (n) => SHAPES[n.data("split")] || "ellipse", "border-width": 1,
      "border-color": "#444", label: "data(label)", "font-size": 11, color: "#222",
      "text-valign": "bottom", "text-margin-y": 3, "text-outline-color": "#fff",
      "text-outline-width": 2, "overlay-opacity": 0,
      // labels too small to read are not drawn: outlined text is most of a redraw's
      // cost when hundreds of nodes are shown zoomed out
      "min-zoomed-font-size": 7,
    },
  },
  {
    selector: "node[split = 'none']",
    style: { "background-color": "#fff", "border-color": "data(colour)", "border-width": 3 },
  },
  { selector: "node:selected", style: { "border-width": 4, "border-color": "#d6336c",
                                        "underlay-color": "#d6336c", "underlay-opacity": 0.25,
                                        "underlay-padding": 5 } },
  { selector: "node.pending", style: { opacity: 0.55 } },
  { selector: "node.target", style: { "underlay-color": "#1c7ed6", "underlay-opacity": 0.35,
                                      "underlay-padding": 7 } },
  {
    selector: "node.handle",
    style: { width: 12, height: 12, shape: "ellipse", "background-color": "#1c7ed6",
             "border-width": 2, "border-color": "#fff", label: "", "z-index": 99 },
  },
  {
    selector: "edge",
    style: { width: 1.6, "line-color": "#9a9a9a", "curve-style": "straight",
             "target-arrow-color": "#9a9a9a", "arrow-scale": 0.8, "overlay-opacity": 0 },
  },
  { selector: "edge.directed", style: { "target-arrow-shape": "triangle" } },
  // many undirected edges on show: Cytoscape's cheapest edge drawing (a straight
  // line from centre to centre, no per-edge geometry), the most of a redraw's cost
  { selector: "edge.fast", style: { "curve-style": "haystack", "haystack-radius": 0 } },
  { selector: "edge:selected", style: { "line-color": "#d6336c", width: 3.5 } },
  { selector: "edge.pending", style: { "line-style": "dashed" } },
  { selector: "edge.ghost", style: { "line-color": "#1c7ed6", "line-style": "dashed",
                                                  width: 2 } },
];

function edgeId(pair) {
  return "e" + JSON.stringify(pair);
}

class GraphCanvas {
  constructor(root) {
    this.root = root;
    this.box = root.querySelector(".gc-box");
    this.info = root.querySelector(".gc-info");
    this.client = Math.random().toString(36).slice(2, 10) + Date.now().toString(36);
    this.seq = 0;
    this.acked = 0;
    this.queue = [];
    this.fitToken = null;
    this.editable = true;
    this.size = 24;
    this.moves = {};
    this.digits = "";
    this.serverSelection = "[]";
    this.send = null;
    this.cy = globalThis.cytoscape({
      container: this.box, style: STYLE, boxSelectionEnabled: true, selectionType: "single",
      minZoom: 0.02, maxZoom: 8, layout: { name: "preset" },
      // a touch screen's double tap (the mouse's double-click is the browser's):
      // Cytoscape's 250 ms is quicker than phones allow (about 300 ms)
      multiClickDebounceTime: TOUCH_DOUBLE_TAP_MS,
    });
    globalThis.gcFrames.follow(this.cy); // held frames, woken by each redraw (cytoscape_frames.js)
    this.box.gcCanvas = this; // for tests and debugging: the live instance
    globalThis.gcMounts = (globalThis.gcMounts || 0) + 1;
    this.bind();
  }

  // ----------------------------------------------------------- outgoing
  push(event) {
    this.flushSelection();
    this.flushMoves();
    this.queue.push({ ...event, seq: ++this.seq });
    this.flush();
  }

  flush() {
    clearTimeout(this.resendTimer);
    if (!this.queue.length || !this.send) return;
    this.send("events", { client: this.client, events: this.queue.slice() });
    this.resendTimer = setTimeout(() => this.flush(), RESEND_MS); // until acknowledged
    this.mark();
  }

  selectedIds() {
    return this.cy.nodes(":selected").map((n) => n.id()).filter(real).sort();
  }

  scheduleSelection() {
    // a microtask: it runs once Cytoscape's tap or box handler is done (so a box's many
    // select events go out as one), but before the page redraws. A timer waited for the
    // redraw of every shown node (a tenth of a second for 500 on a busy 2-core machine).
    if (this.selectPending) return;
    this.selectPending = true;
    // Hold Cytoscape's redraw until Streamlit has sent the event: its send waits for a
    // timer, which a redraw due after the click would run first (70 ms for 500 nodes on
    // an idle 2-core machine, twice that while training). The timer queued here runs
    // after Streamlit's, and releasing redraws. A view that follows the selection (a
    // big graph's neighbourhood view) is about to be replaced: it waits for the answer.
    this.holdRedraw();
    queueMicrotask(() => {
      this.flushSelection();
      if (this.followsSelection) {
        setTimeout(() => this.releaseRedraw(), HOLD_FOR_ANSWER_MS);
      } else {
        setTimeout(() => this.releaseRedraw(), 0);
      }
    });
  }

  holdRedraw() {
    if (this.heldRedraw) return;
    this.cy.startBatch();
    this.heldRedraw = true;
  }

  releaseRedraw() {
    if (!this.heldRedraw) return;
    this.heldRedraw = false;
    this.cy.endBatch();
  }

  flushSelection() {
    if (!this.selectPending) return;
    this.selectPending = false;
    const ids = this.selectedIds();
    if (JSON.stringify(ids) === this.serverSelection) return;
    this.serverSelection = JSON.stringify(ids);
    this.queue.push({ type: "select", nodes: ids, seq: ++this.seq });
    this.flush();
  }

  flushMoves() {
    clearTimeout(this.moveTimer);
    const positions = this.moves;
    this.moves = {};
    if (!Object.keys(positions).length) return;
    this.queue.push({ type: "move", positions, seq: ++this.seq });
    this.flush();
  }

  // ------------------------------------------------------------ input
  bind() {
    const cy = this.cy;
    cy.on("select unselect", "node", () => {
      if (!this.applying) this.scheduleSelection();
    });
    const addAt = (p) => {
      cy.add({ group: "nodes", classes: "pending", position: { x: p.x, y: p.y },
               data: { id: `${TEMP}${this.seq + 1}`, label: "", colour: "#b0b0b0",
                       split: "none", size: this.size } });
      this.push({ type: "add_node", x: p.x, y: p.y });
    };
    // A mouse's double-click is the browser's: the system's double-click speed
    // and the same spot. (Cytoscape's dbltap pairs any two taps within 250 ms,
    // wherever they were: two quick clicks in different places added a node,
    // and a slower double-click added none.) Cytoscape still says what was
    // tapped: the second click adds a node only if it was a tap on the background.
    this.touchTaps = [null, null];
    this.touchAdded = -Infinity; // when a touch double tap last added a node
    cy.on("tapstart", () => { this.tapped = null; });
    cy.on("tap", (e) => {
      this.tapped = e.target === cy ? e.position : null;
      if (touch(e)) this.touchTaps = [this.touchTaps[1], e.renderedPosition];
    });
    this.box.addEventListener("dblclick", () => {
      const p = this.tapped;
      this.tapped = null;
      // a touch screen's double tap, if the browser also reports it as a double-click
      if (!p || !this.editable || performance.now() - this.touchAdded < TOUCH_ECHO_MS) return;
      addAt(p);
    });
    // A touch screen has no system double-click: there Cytoscape's double tap
    // counts, if its two taps were on one spot.
    cy.on("dbltap", (e) => {
      const [first, second] = this.touchTaps;
      if (!touch(e) || e.target !== cy || !this.editable || !first || !second
          || Math.hypot(first.x - second.x, first.y - second.y) > TOUCH_SLOP_PX) return;
      this.touchAdded = performance.now();
      addAt(e.position);
    });
    cy.on("dragfree", "node", (e) => {
      const n = e.target;
      if (!real(n.id()) || !this.editable) return;
      this.moves[n.id()] = [n.position("x"), n.position("y")];
      clearTimeout(this.moveTimer);
      this.moveTimer = setTimeout(() => this.flushMoves(), 30); // one step for a group drag
    });
    cy.on("tapstart", () => this.box.focus({ preventScroll: true }));
    cy.on("mouseover", "node", (e) => this.hover(e.target));
    cy.on("mouseout", "node", (e) => {
      if (e.target.id() !== HANDLE) this.info.textContent = this.status;
      this.hideHandleSoon();
    });
    const onHandle = (action) => (e) => {
      if (e.target.id() === HANDLE) action();
    };
    cy.on("grab", "node", onHandle(() => this.startEdge()));
    cy.on("drag", "node", onHandle(() => this.dragEdge()));
    cy.on("free", "node", onHandle(() => this.endEdge()));
    this.box.addEventListener("keydown", (e) => this.key(e));
    const button = (cls, action) => {
      const b = this.root.querySelector(cls);
      if (b) b.addEventListener("click", action);
    };
    button(".gc-fit", () => this.fit());
    button(".gc-in", () => this.zoomBy(1.25));
    button(".gc-out", () => this.zoomBy(0.8));
  }

  key(e) {
    if (e.target !== this.box) return;
    const mod = e.ctrlKey || e.metaKey;
    const k = e.key;
    if (mod && (k === "z" || k === "Z")) {
      this.push({ type: e.shiftKey ? "redo" : "undo" });
    } else if (mod && (k === "y" || k === "Y")) {
      this.push({ type: "redo" });
    } else if ((k === "Delete" || k === "Backspace") && this.editable) {
      const nodes = this.selectedIds();
      const edges = this.cy.edges(":selected").filter((x) => real(x.id()))
        .map((x) => [x.source().id(), x.target().id()]);
      if (!nodes.length && !edges.length) return;
      this.cy.elements(":selected").addClass("pending").style("opacity", 0.25);
      this.push({ type: "delete", nodes, edges });
    } else if (/^[0-9]$/.test(k) && !mod && this.editable) {
      this.digits += k; // "1", "2" typed quickly is label 12
      clearTimeout(this.digitTimer);
      this.digitTimer = setTimeout(() => this.sendLabel(), 500);
    } else if (k === "Enter" && this.digits) {
      this.sendLabel();
    } else if (k === "Escape") {
      this.cy.elements(":selected").unselect();
    } else if ((k === "f" || k === "F") && !mod) {
      this.fit();
    } else {
      return;
    }
    e.preventDefault();
    e.stopPropagation();
  }

  sendLabel() {
    clearTimeout(this.digitTimer);
    const label = parseInt(this.digits, 10);
    this.digits = "";
    const nodes = this.selectedIds();
    if (nodes.length && Number.isFinite(label)) this.push({ type: "label", nodes, label });
  }

  fit() {
    const nodes = this.cy.nodes().filter((n) => n.id() !== HANDLE);
    this.cy.fit(nodes, 30);
    if (this.cy.zoom() > 2.5) this.cy.zoom({ level: 2.5, renderedPosition: this.centre() });
  }

  centre() {
    return { x: this.box.clientWidth / 2, y: this.box.clientHeight / 2 };
  }

  zoomBy(factor) {
    this.cy.zoom({ level: this.cy.zoom() * factor, renderedPosition: this.centre() });
  }

  // ------------------------------------------------------ edge handle
  hover(node) {
    if (node.id() === HANDLE) {
      clearTimeout(this.hideTimer);
      return;
    }
    this.info.textContent = node.data("tip") || node.id();
    if (!this.editable || !real(node.id()) || this.edgeSource) return;
    clearTimeout(this.hideTimer);
    this.handleFor = node;
    const p = node.position();
    const r = node.width() / 2 + 6;
    let h = this.cy.getElementById(HANDLE);
    if (h.empty()) {
      h = this.cy.add({ group: "nodes", data: { id: HANDLE }, selectable: false, classes: "handle",
                        position: { x: p.x + r, y: p.y - r } });
    } else {
      h.position({ x: p.x + r, y: p.y - r });
    }
  }

  hideHandleSoon() {
    clearTimeout(this.hideTimer);
    this.hideTimer = setTimeout(() => {
      if (!this.edgeSource) this.cy.getElementById(HANDLE).remove();
    }, 900);
  }

  startEdge() {
    clearTimeout(this.hideTimer);
    if (!this.handleFor || this.handleFor.removed()) return;
    this.edgeSource = this.handleFor;
    this.cy.add({ group: "edges", classes: "ghost", data: { id: GHOST, source: this.edgeSource.id(),
                                           target: HANDLE } });
  }

  nodeAt(p) {
    let best = null;
    let bestD = Infinity;
    this.cy.nodes().forEach((n) => {
      if (!real(n.id())) return;
      const q = n.position();
      const d = Math.hypot(q.x - p.x, q.y - p.y);
      if (d <= n.width() / 2 + 6 && d < bestD) {
        best = n;
        bestD = d;
      }
    });
    return best;
  }

  dragEdge() {
    if (!this.edgeSource) return;
    const target = this.nodeAt(this.cy.getElementById(HANDLE).position());
    this.cy.nodes(".target").removeClass("target");
    if (target && target !== this.edgeSource) target.addClass("target");
  }

  endEdge() {
    const source = this.edgeSource;
    const h = this.cy.getElementById(HANDLE);
    const target = source ? this.nodeAt(h.position()) : null;
    this.edgeSource = null;
    this.cy.nodes(".target").removeClass("target");
    this.cy.getElementById(GHOST).remove();
    h.remove();
    if (!source || !target || target.same(source)) return;
    const pair = [source.id(), target.id()];
    if (this.cy.getElementById(edgeId(pair)).empty()) {
      this.cy.add({ group: "edges", classes: "pending",
                    data: { id: `${TEMP}e${this.seq + 1}`, source: pair[0], target: pair[1] } });
    }
    this.push({ type: "add_edge", source: pair[0], target: pair[1] });
  }

  // ------------------------------------------------------------ incoming
  update(data) {
    const cy = this.cy;
    this.updates = (this.updates || 0) + 1;
    this.editable = !!data.editable;
    this.followsSelection = !!data.follows_selection;
    this.size = data.size || 24;
    const ack = (data.acks || {})[this.client] || 0;
    if (ack > this.acked) this.acked = ack;
    this.queue = this.queue.filter((e) => e.seq > this.acked);
    if (!this.queue.length) clearTimeout(this.resendTimer);
    const settled = !this.queue.length && !this.selectPending && !this.edgeSource
      && !Object.keys(this.moves).length;
    const nodes = data.nodes || [];
    cy.batch(() => {
      if (settled) this.reconcile(nodes, data.edges || [], !!data.directed);
      for (const n of nodes) {
        const el = cy.getElementById(n.id);
        if (el.empty()) continue;
        // only what changed: setting data restyles the node (500 of them took
        // ~0.13 s a redraw on a 2-core machine even when nothing had changed)
        const now = el.data();
        const changed = {};
        for (const [k, v] of [["colour", n.colour], ["split", n.split], ["tip", n.tip],
                              ["size", this.size], ["label", n.label]]) {
          if (now[k] !== v) changed[k] = v;
        }
        if (Object.keys(changed).length) el.data(changed);
      }
    });
    if (settled) {
      const wanted = new Set(data.selected || []);
      this.applying = true;
      cy.nodes().forEach((n) => {
        if (wanted.has(n.id()) && !n.selected()) n.select();
        else if (!wanted.has(n.id()) && n.selected()) n.unselect();
      });
      this.applying = false;
      this.serverSelection = JSON.stringify([...wanted].sort());
      this.releaseRedraw(); // the answer is drawn: a view held since a click redraws now
    }
    if (data.fit !== this.fitToken) {
      this.fitToken = data.fit;
      this.fit();
    }
    this.status = data.editable
      ? "Double-click: add a node · drag the blue handle of a node onto another: edge · "
        + "shift-drag: box select · Delete · Ctrl+Z / Ctrl+Shift+Z · digits: label"
      : (data.reason || "");
    if (!this.edgeSource) this.info.textContent = this.status;
    this.mark();
  }

  reconcile(nodes, edges, directed) {
    // whole collections at once: removing or adding elements one by one costs a
    // busy page a fifth of a second when a selection swaps 500 shown nodes for 17
    const cy = this.cy;
    const want = new Map(nodes.map((n) => [n.id, n]));
    cy.remove(cy.nodes().filter((n) => n.id() !== HANDLE && !want.has(n.id())));
    const fresh = [];
    for (const n of nodes) {
      const el = cy.getElementById(n.id);
      if (el.empty()) {
        fresh.push({ group: "nodes", position: { x: n.x, y: n.y },
                     data: { id: n.id, label: n.label, colour: n.colour, split: n.split,
                             tip: n.tip, size: this.size } });
      } else if (!el.grabbed()) {
        const p = el.position();
        if (Math.abs(p.x - n.x) > 0.01 || Math.abs(p.y - n.y) > 0.01) {
          el.position({ x: n.x, y: n.y });
        }
      }
    }
    if (fresh.length) cy.add(fresh);
    const fast = !directed && edges.length > FAST_EDGES;
    const wantEdges = new Set(edges.map(edgeId));
    cy.remove(cy.edges().filter((e) => e.id() !== GHOST && !wantEdges.has(e.id())));
    const freshEdges = [];
    for (const pair of edges) {
      const id = edgeId(pair);
      if (cy.getElementById(id).empty()) {
        freshEdges.push({ group: "edges", data: { id, source: pair[0], target: pair[1] },
                          classes: fast ? "fast" : "" });
      }
    }
    if (freshEdges.length) cy.add(freshEdges);
    // only the edges that differ: a class set again on all of them restyles them all
    cy.edges(directed ? ":not(.directed)" : ".directed").toggleClass("directed", directed);
    cy.edges(fast ? ":not(.fast)" : ".fast").filter((e) => e.id() !== GHOST)
      .toggleClass("fast", fast);
  }

  mark() {
    // state for tests and screen readers: counts and the event queue
    const b = this.box;
    b.dataset.nodes = String(this.cy.nodes().filter((n) => real(n.id())).length);
    b.dataset.edges = String(this.cy.edges().filter((e) => real(e.id())).length);
    b.dataset.pending = String(this.queue.length);
    b.dataset.acked = String(this.acked);
    b.dataset.updates = String(this.updates || 0);
  }

  destroy() {
    clearTimeout(this.resendTimer);
    this.cy.destroy();
  }
}

function touch(e) {
  const ev = e.originalEvent;
  return !!ev && (ev.type.startsWith("touch") || ev.pointerType === "touch");
}

function real(id) {
  return !id.startsWith("\u241f");
}

// Cytoscape.js comes in its own component (canvas.py: sent once, then as a
// cached reference), whose module may finish loading after this one.
function whenCytoscape() {
  if (globalThis.cytoscape) return Promise.resolve(globalThis.cytoscape);
  return new Promise((resolve) => {
    const wait = () => (globalThis.cytoscape ? resolve(globalThis.cytoscape) : setTimeout(wait, 10));
    wait();
  });
}

export default function (component) {
  const { parentElement, setTriggerValue } = component;
  const [data] = component.data || [];  // canvas.py sends the payload as a list's one item
  if (!globalThis.cytoscape) {
    let cleanup = null;
    let gone = false;
    whenCytoscape().then(() => { if (!gone) cleanup = mount(parentElement, data, setTriggerValue); });
    return () => { gone = true; if (cleanup) cleanup(); };
  }
  return mount(parentElement, data, setTriggerValue);
}

function mount(parentElement, data, setTriggerValue) {
  let canvas = INSTANCES.get(parentElement);
  if (!canvas) {
    canvas = new GraphCanvas(parentElement);
    INSTANCES.set(parentElement, canvas);
  }
  canvas.send = setTriggerValue;
  canvas.update(data || {});
  return () => {
    // Streamlit also calls this when only the data changed; destroy only on unmount
    setTimeout(() => {
      if (!canvas.box.isConnected && INSTANCES.get(parentElement) === canvas) {
        canvas.destroy();
        INSTANCES.delete(parentElement);
      }
    }, 0);
  };
}
