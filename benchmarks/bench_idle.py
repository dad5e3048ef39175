"""What an open page of the app costs the machine: the CPU (in cores) of the
server and of each kind of Chromium process, over a window of seconds.

Per round, one server and one browser; two browser contexts, one after the
other, on the default page (karate club):

- *held*: the app as it is. The graph canvas holds Cytoscape's animation
  frames while it has nothing to draw (``explorer/ui/cytoscape_frames.js``);
- *unheld* (the peer): the same page with the canvas kept awake from the page
  (``gcFrames.wake()`` every 0.5 s), so that Cytoscape's renderer gets a frame
  60 times a second, as the library does on its own.

Each is measured idle (the page drawn and the script done, nothing clicked)
and, unless ``--no-play``, while training plays at full speed. The CPU comes
from ``/proc/<pid>/stat`` of the server process and of every Chromium process
under this one (Linux only).

Usage (from the repository root)::

    python -m benchmarks.bench_idle [--rounds N] [--seconds S] [--no-play]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

from benchmarks.common import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_ARGS,
    PAINT_MS,
    AppServer,
    load_average,
    machine_info,
    playwright_or_exit,
    print_table,
    versions,
    wait_idle,
)

VIEWPORT = {"width": 1500, "height": 1400}
TICK = os.sysconf("SC_CLK_TCK")
KINDS = ("server", "renderer", "gpu-process", "browser", "other chromium")
KEEP_AWAKE_JS = "() => { setInterval(() => globalThis.gcFrames.wake(), 500); }"


def _stat(pid: int) -> tuple[int, float] | None:
    """``(parent pid, CPU seconds)`` of a live process, or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) "
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK


def _kind(pid: int) -> str:
    try:  # Chromium rewrites its children's command lines as one space-separated string
        args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").split()
    except OSError:
        return ""
    if not args or b"chromium" not in args[0]:
        return ""
    for arg in args:
        if arg.startswith(b"--type="):
            kind = arg[7:].decode()
            return kind if kind in KINDS else "other chromium"
    return "browser"


def cpu_by_kind(server_pid: int) -> dict[str, float]:
    """CPU seconds so far of the server and of each kind of Chromium process
    descended from this process."""
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None:
                stats[int(entry)] = stat
    me, out = os.getpid(), dict.fromkeys(KINDS, 0.0)
    for pid, (_, cpu) in stats.items():
        if pid == server_pid:
            out["server"] += cpu
            continue
        parent, seen = stats[pid][0], 0
        while parent not in (me, 0, 1) and parent in stats and seen < 64:
            parent, seen = stats[parent][0], seen + 1
        kind = _kind(pid) if parent == me else ""
        if kind:
            out[kind] += cpu
    return out


def window(server_pid: int, seconds: float) -> dict[str, float]:
    """Cores used by each kind over ``seconds`` (processes that start or end
    inside the window count from their start or up to their end)."""
    before, start = cpu_by_kind(server_pid), time.perf_counter()
    time.sleep(seconds)
    after, took = cpu_by_kind(server_pid), time.perf_counter() - start
    return {k: max(after[k] - before[k], 0.0) / took for k in KINDS}


def measure(browser, server: AppServer, held: bool, seconds: float, play: bool) -> dict:
    context = browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        page.goto(server.url + "/?epochs=1000000", timeout=PAINT_MS)
        page.locator(".gc-box canvas").first.wait_for(timeout=PAINT_MS)
        wait_idle(page, PAINT_MS)
        if not held:
            page.evaluate(KEEP_AWAKE_JS)
        time.sleep(2.0)  # past the canvas's last redraw and its second awake
        out = {"idle": window(server.proc.pid, seconds)}
        if play:
            page.locator(".st-key-t_play button").click()
            page.get_by_text("training…").first.wait_for(timeout=PAINT_MS)
            time.sleep(2.0)
            out["playing"] = window(server.proc.pid, seconds)
            page.locator(".st-key-t_pause button").click()
        return out
    finally:
        context.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each window")
    parser.add_argument("--no-play", action="store_true", help="measure idle pages only")
    args = parser.parse_args()
    sync_playwright = playwright_or_exit()
    info = machine_info()
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['memory']}; "
          f"python {info['python']}; load average {load_average()}")
    vers = versions(["streamlit", "playwright"])
    results: dict[tuple[str, str], list[dict]] = {}
    rows = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        vers["chromium"] = browser.version
        print("versions: " + ", ".join(f"{k} {v}" for k, v in vers.items()), flush=True)
        server = AppServer(name="bench_idle")
        try:
            server.wait_healthy()
            for r in range(1, args.rounds + 1):
                order = (True, False) if r % 2 else (False, True)  # alternate who goes first
                for held in order:
                    got = measure(browser, server, held, args.seconds, not args.no_play)
                    name = "held" if held else "unheld"
                    for state, cores in got.items():
                        results.setdefault((state, name), []).append(cores)
                        total = sum(cores.values())
                        rows.append([r, state, name] + [f"{cores[k]:.3f}" for k in KINDS]
                                    + [f"{total:.3f}"])
                        print(f"  round {r} {state} {name}: total {total:.3f} cores; "
                              f"load {load_average()}", flush=True)
        finally:
            server.stop()
            browser.close()
    print(f"\nCores used over {args.seconds:g} s windows (karate club, the default page; "
          "held: the app as it is; unheld: Cytoscape's frames kept running)")
    print_table(["round", "page", "canvas frames"] + list(KINDS) + ["total"], rows)
    summary = []
    for state in ("idle", "playing"):
        if (state, "held") not in results:
            continue
        med = {name: statistics.median(sum(c.values()) for c in results[(state, name)])
               for name in ("held", "unheld")}
        renderer = {name: statistics.median(c["renderer"] for c in results[(state, name)])
                    for name in ("held", "unheld")}
        summary.append([state, f"{med['held']:.3f}", f"{med['unheld']:.3f}",
                        f"{med['held'] / med['unheld']:.2f}",
                        f"{renderer['held']:.3f}", f"{renderer['unheld']:.3f}"])
    print(f"\nMedians over {args.rounds} rounds")
    print_table(["page", "total held", "total unheld", "held / unheld", "renderer held",
                 "renderer unheld"], summary)
    print(f"\nload average now {load_average()}")


if __name__ == "__main__":
    main()
