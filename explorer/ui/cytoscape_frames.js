// Prepended to Cytoscape.js in its loader component (canvas.py), in the same module.
//
// Cytoscape's renderer asks for an animation frame on every frame, for as long as
// the page is open, and draws only when something asked for a redraw. On an idle
// page that loop alone kept Chromium's renderer and compositor busy: 0.15-0.25 of
// a core with nothing moving (a headless 2-core machine; a laptop's fan in class).
//
// The module-level `window` below is the only window Cytoscape sees when it picks
// its requestAnimationFrame (its element code reaches the page through
// cy.window(), the container's own window). Its frames run at the display's rate
// while the canvas is awake and are held otherwise, released IDLE_FRAME_MS later.
// Every redraw Cytoscape asks for wakes the gate (follow(cy) wraps the renderer's
// redraw; graph_canvas.js calls it), so a click or a drag is drawn on the next frame,
// and it stays awake AWAKE_MS after the last one (Cytoscape finishes its cached
// textures over the following frames). Anything that changes the view without a
// redraw request still gets its frame, IDLE_FRAME_MS late.

const IDLE_FRAME_MS = 250;
const AWAKE_MS = 1000;

const gcFrames = (() => {
  const held = new Set();
  // for tests: frames asked for, let through at once, released by a wake or by the timer
  const counts = { asked: 0, passed: 0, woken: 0, timed: 0 };
  let awakeUntil = 0;
  let timer = null;
  const release = (why) => {
    clearTimeout(timer);
    timer = null;
    counts[why] += held.size;
    const frames = [...held];
    held.clear();
    for (const frame of frames) globalThis.requestAnimationFrame(frame);
  };
  return {
    counts,
    settings: { idleFrameMs: IDLE_FRAME_MS, awakeMs: AWAKE_MS }, // for tests
    request(frame) {
      counts.asked += 1;
      if (performance.now() < awakeUntil) {
        counts.passed += 1;
        return globalThis.requestAnimationFrame(frame);
      }
      held.add(frame);
      if (timer === null) timer = setTimeout(() => release("timed"), IDLE_FRAME_MS);
      return 0;
    },
    wake() {
      awakeUntil = performance.now() + AWAKE_MS;
      if (held.size) release("woken");
    },
    follow(cy) {
      const renderer = cy.renderer();
      const redraw = renderer.redraw;
      const wake = this.wake;
      renderer.redraw = function (...args) {
        wake();
        return redraw.apply(this, args);
      };
      wake();
    },
  };
})();
globalThis.gcFrames = gcFrames;

// The page's window, except for requestAnimationFrame. A window method called on a
// proxy throws ("Illegal invocation"), so methods are bound to the real window;
// constructors (they have a prototype) come through as they are.
const window = new Proxy(globalThis, {
  get(target, name) {
    if (name === "requestAnimationFrame") return gcFrames.request;
    const value = Reflect.get(target, name);
    return typeof value === "function" && !("prototype" in value) ? value.bind(target) : value;
  },
});
