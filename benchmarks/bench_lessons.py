"""Every lesson in a real browser, the way a teacher steps through them: the
issue-16 target of at most 3 s to open a lesson and at most 3 s for its fix.

The app server (``streamlit run streamlit_app.py``) is started here on a free
port, and one Chromium page goes through the lessons in order:

1. the page opens on ``?lesson=<first>`` (the app's first lesson: the server's
   first session imports JAX and the app, so this one is reported, not held to
   the target);
2. for every lesson: *open* is the time from the click on *Next lesson* (for
   the first, from the page load) until the lesson's card shows its number and
   its pitfall's verdict and the app has finished its script run; *fix* is the
   time from the click on *Apply the fix* until *Show the pitfall again* (only
   drawn with both columns) is there and the app is idle again.

Every click is a ``page.mouse.click`` at the button's centre; every wait is
polled in the page every 20 ms and bounded by a timeout (then the value is
reported as missing). Each ``--rounds`` round is a fresh server. The app's
compilation cache (``explorer/compile_cache.py``) starts empty in a directory
of this run's own (a new install); later rounds keep it (a restarted server),
unless ``--cache cold`` empties it before every round or ``--cache off`` turns
it off (every compile cold, no rehearsals). ``--read S`` waits S seconds on
each lesson before its fix and before *Next* (a class reading it; default 0:
click as soon as the answer is drawn). Nothing is downloaded: Chromium is
``/usr/bin/chromium`` (``$EXPLORER_CHROMIUM``).

Usage (from the repository root)::

    python -m benchmarks.bench_lessons [--rounds N] [--only k1,k2] [--cache keep|cold|off]
                                       [--read S] [--json PATH] [--shots DIR]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.common import (
    CHROMIUM,
    CHROMIUM_ARGS,
    AppServer,
    load_average,
    machine_info,
    playwright_or_exit,
    print_table,
    versions,
)
from explorer.lessons import ORDER

TARGET_S = 3.0
WIDTH, HEIGHT = 1400, 1000
LOAD_MS = 240_000  # the first session: imports JAX and the app
ANSWER_MS = 120_000
POLL_MS = 20

IDLE_JS = """() => { const app = document.querySelector('[data-testid="stApp"]');
    return !!app && app.getAttribute('data-test-script-state') === 'notRunning'; }"""
# the card shows lesson N and a verdict banner, no spinner, and the app is idle
OPENED_JS = """(n) => { const card = document.querySelector('.st-key-l_card');
    if (!card || !card.innerText.includes(`Lesson ${n}:`)) return false;
    if (!card.querySelector('[data-testid="stAlert"]')) return false;
    if (!document.querySelector('.st-key-l_fix button')) return false;
    if (document.querySelector('[data-testid="stSpinner"]')) return false;
    return (""" + IDLE_JS + """)(); }"""
FIXED_JS = """() => { if (!document.querySelector('.st-key-l_again button')) return false;
    if (document.querySelector('[data-testid="stSpinner"]')) return false;
    return (""" + IDLE_JS + """)(); }"""
# the button under (x, y) is the one of ``selector``, enabled
HIT_JS = """([sel, x, y]) => { const b = document.querySelector(sel);
    const at = document.elementFromPoint(x, y);
    return !!b && !b.disabled && !!at && b.contains(at); }"""
VERDICTS_JS = """() => [...document.querySelectorAll('.st-key-l_card [data-testid="stAlert"]')]
    .map(e => { const m = e.querySelector('[data-testid="stMarkdownContainer"]');
                return (m ? m.innerText : e.innerText).split('\\n')[0].trim().slice(0, 60); })"""


class Walk:
    """One page through the lessons ``keys`` on one server."""

    def __init__(self, page, shots: Path | None, number: int, read_s: float):
        from playwright.sync_api import TimeoutError as PlaywrightTimeout
        self.page, self.shots, self.number, self.read_s = page, shots, number, read_s
        self.timeout_error = PlaywrightTimeout

    def wait(self, js: str, arg=None, timeout_ms: int = ANSWER_MS) -> bool:
        try:
            self.page.wait_for_function(js, arg=arg, timeout=timeout_ms, polling=POLL_MS)
            return True
        except self.timeout_error:
            return False

    def click(self, selector: str) -> bool:
        """A mouse click at the centre of ``selector``, once the button is in
        view, enabled and the topmost element there (scrolling and layout
        settle outside the timed part)."""
        locator = self.page.locator(selector)
        for _ in range(50):
            try:
                # to the middle of the window: at its top edge, Streamlit's fixed
                # header bar covers it
                locator.evaluate("(e) => e.scrollIntoView({block: 'center'})",
                                 timeout=ANSWER_MS)
                box = locator.bounding_box(timeout=ANSWER_MS)
            except self.timeout_error:
                return False
            if box is not None:
                x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
                if self.page.evaluate(HIT_JS, [selector, x, y]):
                    self.page.mouse.click(x, y)
                    return True
            time.sleep(0.1)
        return False

    def shoot(self, name: str) -> None:
        if self.shots is None:
            return
        self.shots.mkdir(parents=True, exist_ok=True)
        try:
            self.page.screenshot(path=str(self.shots / f"round{self.number}_{name}.png"),
                                 timeout=30_000, animations="disabled")
        except Exception:  # a screenshot is a nicety, never a failure
            pass

    def lesson(self, number: int, key: str, url: str | None) -> dict:
        row: dict = {"number": number, "key": key}
        if url is not None:  # the first lesson: from the page load
            start = time.perf_counter()
            self.page.goto(url, timeout=LOAD_MS, wait_until="commit")
            ok = self.wait(OPENED_JS, number, LOAD_MS)
        else:
            self.wait(IDLE_JS)
            if not self.click(".st-key-l_next button"):
                row["problem"] = "no Next lesson button"
                return row
            start = time.perf_counter()
            ok = self.wait(OPENED_JS, number)
        if not ok:
            row["problem"] = "the lesson did not open"
            self.shoot(f"{number:02d}_{key}_open_timeout")
            return row
        row["open_s"] = time.perf_counter() - start
        row["pitfall"] = (self.page.evaluate(VERDICTS_JS) or ["?"])[0]
        time.sleep(self.read_s)
        if not self.click(".st-key-l_fix button"):
            row["problem"] = "no Apply the fix button"
            return row
        start = time.perf_counter()
        if not self.wait(FIXED_JS):
            row["problem"] = "the fix did not finish"
            self.shoot(f"{number:02d}_{key}_fix_timeout")
            return row
        row["fix_s"] = time.perf_counter() - start
        verdicts = self.page.evaluate(VERDICTS_JS)
        row["fix"] = verdicts[-1] if verdicts else "?"
        self.shoot(f"{number:02d}_{key}")
        time.sleep(self.read_s)
        return row


def run_round(browser, base_url: str, keys: list[str], number: int,
              shots: Path | None, read_s: float) -> list[dict]:
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    try:
        page = context.new_page()
        walk = Walk(page, shots, number, read_s)
        rows = []
        for i, key in enumerate(keys):
            lesson_no = ORDER.index(key) + 1
            if i > 0 and lesson_no != rows[-1]["number"] + 1:  # --only with a gap: open by link
                url = f"{base_url}/?lesson={key}"
            else:
                url = f"{base_url}/?lesson={key}" if i == 0 else None
            row = walk.lesson(lesson_no, key, url)
            row["first"] = i == 0
            rows.append(row)
            print(f"  {lesson_no:2d} {key:20s} open {fmt(row.get('open_s'))} s, fix "
                  f"{fmt(row.get('fix_s'))} s  {row.get('pitfall', '')} | {row.get('fix', '')}"
                  + (f"  PROBLEM: {row['problem']}" if "problem" in row else ""), flush=True)
        return rows
    finally:
        context.close()


def fmt(v) -> str:
    return "-" if v is None else f"{v:.2f}"


def verdict(values: list[float]) -> str:
    if not values:
        return "-"
    return "PASS" if max(values) <= TARGET_S else "MISS"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1,
                        help="fresh servers, one after the other (default 1)")
    parser.add_argument("--only", default="", help="comma-separated lesson keys, in order")
    parser.add_argument("--cache", choices=("keep", "cold", "off"), default="keep",
                        help="the compilation cache: empty at the start and kept across "
                             "rounds (keep), emptied before every round (cold), or off")
    parser.add_argument("--read", type=float, default=0.0,
                        help="seconds spent reading each lesson before its fix and before "
                             "Next (default 0)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument("--shots", type=Path, default=None, help="save a screenshot per lesson")
    args = parser.parse_args()
    keys = [k for k in args.only.split(",") if k] or list(ORDER)
    unknown = [k for k in keys if k not in ORDER]
    if unknown:
        raise SystemExit(f"unknown lesson keys {unknown}; choose from {list(ORDER)}")
    sync_playwright = playwright_or_exit()
    info = machine_info()
    vers = versions(["streamlit", "playwright", "jax", "jaxlib", "flax"])
    date = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    print(f"date {date}")
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['memory']}; python "
          f"{info['python']}; load average {load_average()}")
    wall = time.perf_counter()
    rounds: list[list[dict]] = []
    tracebacks: list[str] = []
    cache = Path(tempfile.mkdtemp(prefix="bench-lessons-jax-cache-"))
    os.environ["EXPLORER_COMPILATION_CACHE"] = "off" if args.cache == "off" else str(cache)
    os.environ.pop("EXPLORER_REHEARSE", None)  # the app's default
    print(f"compilation cache: {args.cache} ({os.environ['EXPLORER_COMPILATION_CACHE']}); "
          f"reading time per lesson {args.read:g} s")
    for n in range(1, args.rounds + 1):
        if args.cache == "cold":
            shutil.rmtree(cache, ignore_errors=True)
            cache.mkdir()
        server = AppServer(name="bench_lessons")
        try:
            server.wait_healthy()
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
                try:
                    vers["chromium"] = browser.version
                    if n == 1:
                        print("versions: " + ", ".join(f"{k} {v}" for k, v in vers.items()))
                    print(f"round {n}: a fresh server, one page through {len(keys)} lesson(s)",
                          flush=True)
                    rounds.append(run_round(browser, server.url, keys, n, args.shots,
                                            args.read))
                finally:
                    browser.close()
        finally:
            tracebacks += server.tracebacks()
            server.stop()

    print(f"\nSeconds per lesson (target <= {TARGET_S:g} s to open and <= {TARGET_S:g} s for "
          "the fix, after the app's first lesson; * = the app's first lesson, not held to it)")
    table = []
    for i, key in enumerate(keys):
        rows = [r[i] for r in rounds]
        opens = [r["open_s"] for r in rows if "open_s" in r]
        fixes = [r["fix_s"] for r in rows if "fix_s" in r]
        first = rows[0].get("first", False)
        table.append([f"{rows[0]['number']}{'*' if first else ''}", key,
                      " / ".join(fmt(r.get("open_s")) for r in rows),
                      " / ".join(fmt(r.get("fix_s")) for r in rows),
                      "-" if first else verdict(opens + fixes),
                      rows[0].get("pitfall", rows[0].get("problem", "")),
                      rows[0].get("fix", "")])
    print_table(["#", "lesson", "open s", "fix s", "result", "pitfall verdict",
                 "fix verdict"], table)
    held = [row for row in table if row[4] in ("PASS", "MISS")]
    misses = [row[1] for row in held if row[4] == "MISS"]
    all_opens = [r["open_s"] for rows in rounds for r in rows
                 if "open_s" in r and not r.get("first")]
    all_fixes = [r["fix_s"] for rows in rounds for r in rows
                 if "fix_s" in r and not r.get("first")]
    if all_opens and all_fixes:
        print(f"\nafter the first lesson: open median {statistics.median(all_opens):.2f} s, "
              f"max {max(all_opens):.2f} s; fix median {statistics.median(all_fixes):.2f} s, "
              f"max {max(all_fixes):.2f} s; {len(held) - len(misses)} of {len(held)} lessons "
              f"within {TARGET_S:g} s" + (f" (over: {', '.join(misses)})" if misses else ""))
    shutil.rmtree(cache, ignore_errors=True)
    if tracebacks:
        print(f"\nserver log: {len(tracebacks)} traceback(s): "
              f"{[t.splitlines()[-1][:200] for t in tracebacks[:5]]}")
    print(f"total wall time {time.perf_counter() - wall:.0f} s; load average now "
          f"{load_average()}")
    if args.json:
        args.json.write_text(json.dumps({"date": date, "machine": info, "versions": vers,
                                         "rounds": rounds, "tracebacks": tracebacks},
                                        indent=1, default=str))
        print(f"results written to {args.json}")


if __name__ == "__main__":
    main()
