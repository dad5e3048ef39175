"""Rehearsing the lessons in a background process (explorer/lessons/rehearsal.py):
its order, that a real run waits for the lesson in progress and stops the
process while a lesson times something, that the process dies with the server,
that a finished rehearsal is not repeated, and that a lesson it rehearsed then
compiles nothing new in the server's own process."""

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import cache_misses
from streamlit.testing.v1 import AppTest

from explorer import compile_cache
from explorer.lessons import LESSONS, find, rehearsal

REPO = Path(__file__).resolve().parents[2]


def test_the_order_is_the_costly_lessons_first_then_the_rest_in_order():
    ordered = [lesson.key for lesson in rehearsal.order(LESSONS)]
    assert ordered[:len(rehearsal.FIRST)] == list(rehearsal.FIRST)
    rest = [lesson.key for lesson in LESSONS if lesson.key not in rehearsal.FIRST]
    assert ordered[len(rehearsal.FIRST):] == rest
    assert sorted(ordered) == sorted(lesson.key for lesson in LESSONS)  # each once


# A stand-in for the process: it says it rehearses frozen-params (0.6 s), then
# overhead (a long time), as `python -m explorer.lessons.rehearsal` would.
FAKE = textwrap.dedent("""
    import os, sys, time
    from explorer.lessons import rehearsal
    if not rehearsal._die_with_parent(int(os.environ[rehearsal._PARENT])):
        sys.exit(0)
    print("start frozen-params", flush=True)
    time.sleep(0.6)
    print("done frozen-params", flush=True)
    print("start overhead", flush=True)
    time.sleep(60)
""")


@pytest.fixture()
def fake(monkeypatch):
    monkeypatch.setattr(rehearsal.Rehearsal, "command", (sys.executable, "-c", FAKE))
    monkeypatch.setattr(rehearsal, "_mark", lambda cache, keys: cache / "never-there")
    r = rehearsal.Rehearsal()
    yield r
    r.stop()


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _until(condition, timeout_s=20.0):
    end = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < end:
        time.sleep(0.02)
    return condition()


def test_a_real_run_waits_for_its_lesson_in_progress(fake):
    assert _until(lambda: fake.current == "frozen-params")
    with fake.real_run(find("frozen-params")):  # not a timing lesson: no stop
        assert "frozen-params" in fake.done and fake.current != "frozen-params"
        assert _state(fake.proc.pid) != "T"
    with fake.real_run(find("pool-size")):  # not being rehearsed: at once
        pass


def test_a_timing_lesson_stops_the_process_while_it_measures(fake):
    timing = find("timing")
    assert timing.measure is not None
    assert _until(lambda: fake.current == "overhead")
    with fake.real_run(timing):
        assert _until(lambda: _state(fake.proc.pid) == "T")
        with fake.real_run(timing):  # two sessions measuring: one stop, one resume
            pass
        assert _state(fake.proc.pid) == "T"
    assert _until(lambda: _state(fake.proc.pid) != "T")
    assert fake.running


DIES = textwrap.dedent("""
    import signal, sys, time
    from explorer.lessons import rehearsal
    rehearsal.Rehearsal.command = (sys.executable, "-c", sys.argv[1])
    rehearsal._mark = lambda cache, keys: cache / "never-there"
    r = rehearsal.Rehearsal()
    while r.current is None:  # it has asked to die with us
        time.sleep(0.01)
    print(r.proc.pid, flush=True)
    r.proc.send_signal(signal.SIGSTOP)  # even a stopped one
""")


def test_the_process_dies_with_the_server():
    code = "from explorer import compile_cache; compile_cache.enable()\n" + DIES
    out = subprocess.run([sys.executable, "-c", code, FAKE], cwd=REPO, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    pid = int(out.stdout.split()[0])
    assert _until(lambda: not Path(f"/proc/{pid}").exists() or _state(pid) == "Z")


def test_a_failed_lesson_leaves_no_mark_and_is_said(monkeypatch, capsys):
    from explorer.lessons.base import Lesson

    def broken(self, sides):
        raise RuntimeError("boom")

    monkeypatch.setattr(Lesson, "rehearse", broken)
    # main() lowers its own process's priority (it is the background process).
    # Called here, in the test worker, it must not lower the worker's priority,
    # nor that of every process the worker starts after it.
    niced = []
    monkeypatch.setattr(os, "nice", niced.append)
    assert rehearsal.main(["closure-capture"]) == 0
    assert niced == [19]
    assert capsys.readouterr().out.splitlines() == [
        "start closure-capture", "failed closure-capture RuntimeError: boom"]
    assert not rehearsal._mark(compile_cache.enabled(), ["closure-capture"]).exists()


def test_the_fingerprint_follows_the_settings(monkeypatch):
    before = rehearsal.fingerprint()
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
    assert rehearsal.fingerprint() != before


def test_a_lesson_the_process_rehearsed_opens_with_its_programs_compiled():
    assert not rehearsal.wanted()  # the suite's default: the page starts no process itself
    at = AppTest.from_file(str(REPO / "streamlit_app.py"), default_timeout=300)
    at.query_params["lesson"] = "loop-of-tiny-jits"  # the lesson before the one tested
    at.run()
    assert not at.exception, at.exception
    at.session_state["workspace"].run.warm_up().join()  # the page's own metrics compile
    ahead = rehearsal.Rehearsal(keys=["timing-first-call"])  # the real process
    ahead.thread.join(300)
    assert ahead.done == {"timing-first-call"} and not ahead.failed, ahead.failed
    assert rehearsal.Rehearsal(keys=["timing-first-call"]).thread is None  # marked: once
    clicks = [lambda: at.button(key="l_next").click().run(),
              lambda: at.button(key="l_fix").click().run()]
    assert [cache_misses(click) for click in clicks] == [0, 0], \
        "a rehearsed lesson still compiled something new"
    assert not at.exception, at.exception
    results = at.session_state["lesson_results"]
    assert results["key"] == "timing-first-call" and results["fix"].good
    # and it says so: its first call read the program back rather than compiling it
    assert "compiled program back from the compilation cache" in results["pitfall"].summary
    assert results["pitfall"].rows[0]["note"] == "trace + cache read + run"


# In a fresh server process with an empty cache: the rehearsal process compiles,
# then the page's own path (the lesson panel's setup, its metrics, the steps)
# reads everything back.
EXPLORER_PATH = """
import os
from explorer import compile_cache
cache = compile_cache.enable()
from explorer.lessons import find, rehearsal
from explorer.workspace import Workspace
lesson = find("frozen-params")
ahead = rehearsal.Rehearsal(keys=[lesson.key])
ahead.thread.join()
assert ahead.done == {lesson.key} and not ahead.failed, ahead.failed
before = set(os.listdir(cache))
ws = Workspace()
ws.load_setup(lesson.fix_setup)
ws.run.warm_up().join()
for _ in range(lesson.steps):
    ws.step()
print(len(before), sorted(set(os.listdir(cache)) - before), lesson.outcome("fix", ws.run).verdict)
"""


def test_a_rehearsed_lesson_that_trains_in_the_explorer_compiles_nothing_new(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != compile_cache.ENV}
    env.update(JAX_PLATFORMS="cpu", **{compile_cache.ENV: str(tmp_path / "cache")})
    out = subprocess.run([sys.executable, "-c", EXPLORER_PATH], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    written, new, verdict = out.stdout.strip().splitlines()[-1].split(" ", 2)
    assert int(written) >= 3  # the process compiled the steps and the metrics (+ its mark)
    assert new.startswith("[]"), f"the explorer built programs its rehearsal did not: {new}"
    assert verdict.endswith("TRAINING")


@pytest.mark.parametrize("key", [lesson.key for lesson in LESSONS if lesson.measure])
def test_a_timing_lessons_rehearsal_runs_one_round(monkeypatch, key):
    # a rehearsal swallows its errors (the real run reports them), so check here
    # that each timing lesson measures in one round and both sides read it
    from explorer.lessons import common

    monkeypatch.setattr(common, "LARGE_NODES", 6000)
    lesson = next(lesson for lesson in LESSONS if lesson.key == key)
    measured = lesson.measure(lesson, rounds=1)
    memo = {"measured": measured}
    assert lesson.outcome("pitfall", None, memo).verdict
    assert lesson.outcome("fix", None, memo).verdict
    assert memo["measured"] is measured  # read, not measured again
