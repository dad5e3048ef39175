"""Rehearsing the next lesson in the background (explorer/lessons/rehearsal.py):
what is planned, that each side is rehearsed once per process, that a real
run waits for its own rehearsal, and that the lesson then compiles nothing new."""

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from explorer import compile_cache
from explorer.lessons import LESSONS, rehearsal

REPO = Path(__file__).resolve().parents[2]


def _keys(jobs):
    return [(lesson.key, sides) for lesson, sides in jobs]


def test_the_plan_is_this_lessons_fix_then_every_later_lesson():
    later = [(lesson.key, ("pitfall", "fix")) for lesson in LESSONS[1:]]
    assert _keys(rehearsal.plan(LESSONS, "frozen-params", ["pitfall"])) == [
        ("frozen-params", ("fix",))] + later
    assert _keys(rehearsal.plan(LESSONS, "frozen-params", ["pitfall", "fix"])) == later
    # a timing lesson's fix reads the pitfall's one measurement: nothing to rehearse
    assert _keys(rehearsal.plan(LESSONS, "overhead", ["pitfall"]))[0] == (
        "pool-size", ("pitfall", "fix"))
    last = LESSONS[-1].key
    assert rehearsal.plan(LESSONS, last, ["pitfall", "fix"]) == []


class _Slow:
    """A stand-in lesson whose rehearsal takes a while and is logged."""

    def __init__(self, key, log, measure=None, seconds=0.3):
        self.key, self.measure, self.seconds, self.log = key, measure, seconds, log

    def rehearse(self, sides):
        self.log.append(("start", self.key, sides))
        time.sleep(self.seconds)
        self.log.append(("end", self.key, sides))


def test_each_side_is_rehearsed_once_per_process_and_waited_for():
    done, lock, log = set(), threading.Lock(), []
    a, b = _Slow("a", log), _Slow("b", log)
    first = rehearsal.Rehearsal([(a, ("fix",)), (b, ("pitfall", "fix"))], done, lock)
    start = time.perf_counter()
    with first.real_run(b, "pitfall"):  # waits for a's rehearsal, then b's
        assert time.perf_counter() - start >= 0.5
        assert ("end", "b", ("pitfall", "fix")) in log
    first.thread.join(5)
    again = rehearsal.Rehearsal([(a, ("fix", "pitfall")), (b, ("fix",))], done, lock)
    again.thread.join(5)
    assert [e for e in log if e[0] == "start"] == [
        ("start", "a", ("fix",)), ("start", "b", ("pitfall", "fix")), ("start", "a", ("pitfall",))]
    nothing = rehearsal.Rehearsal([(b, ("pitfall",))], done, lock)
    assert nothing.thread is None and not nothing.running
    with nothing.real_run(b, "pitfall"):  # returns at once
        pass


def test_a_real_run_holds_the_rehearsal_and_a_timing_lesson_runs_alone():
    done, lock, log = set(), threading.Lock(), []
    jobs = [(_Slow(k, log, seconds=0.2), ("pitfall",)) for k in "abcd"]
    r = rehearsal.Rehearsal(jobs, done, lock)
    time.sleep(0.05)  # "a" is in progress
    timed = _Slow("timed", log, measure=object())
    with r.real_run(timed, "pitfall"):  # not planned, but it times something
        log.append(("real", "timed"))
        time.sleep(0.3)
        log.append(("real done", "timed"))
    r.thread.join(5)
    at = log.index(("real", "timed"))
    assert log[at - 1] == ("end", "a", ("pitfall",))  # the side in progress finished first
    assert log[at + 1] == ("real done", "timed")  # nothing started beside it
    assert [e[1] for e in log if e[0] == "start"] == list("abcd")  # then it went on


def test_a_rehearsal_never_fails_the_app():
    class Broken(_Slow):
        def rehearse(self, sides):
            raise RuntimeError("boom")

    broken = Broken("x", [])
    r = rehearsal.Rehearsal([(broken, ("fix",))], set(), threading.Lock())
    r.thread.join(5)
    with r.real_run(broken, "fix"):  # its event is set even so
        pass


def _cache_files() -> set[str]:
    return {p.name for p in compile_cache.enabled().iterdir()}


def test_the_next_lesson_opens_with_its_programs_already_compiled(monkeypatch):
    monkeypatch.setenv(rehearsal.ENV, "1")
    assert rehearsal.wanted()  # the suite turns the compilation cache on (conftest)
    at = AppTest.from_file(str(REPO / "streamlit_app.py"), default_timeout=300)
    # the last two lessons: opening the last rehearses nothing more, so every file
    # the cache gains after the rehearsal would be the real run's own compile
    at.query_params["lesson"] = "loop-of-tiny-jits"
    at.run()
    assert not at.exception, at.exception
    ahead = at.session_state["l_rehearsal"]
    ahead.thread.join(300)
    assert set(ahead.events) <= {("timing-first-call", "pitfall"),
                                 ("timing-first-call", "fix")}  # those not rehearsed yet
    at.session_state["workspace"].run.warm_up().join()  # the page's own metrics compile
    before = _cache_files()
    at.button(key="l_next").click().run()
    at.button(key="l_fix").click().run()
    assert not at.exception, at.exception
    results = at.session_state["lesson_results"]
    assert results["key"] == "timing-first-call" and results["fix"].good
    assert _cache_files() == before, "a rehearsed lesson still compiled something new"
    # and it says so: its first call read the program back rather than compiling it
    assert "compiled program back from the compilation cache" in results["pitfall"].summary
    assert results["pitfall"].rows[0]["note"] == "trace + cache read + run"
    assert at.session_state["l_rehearsal"].thread is None  # nothing left to rehearse


# In a fresh process with an empty cache: the rehearsal compiles, then the page's
# own path (the lesson panel's setup, its metrics, the steps) reads everything back.
EXPLORER_PATH = """
import os, threading
from explorer import compile_cache
cache = compile_cache.enable()
from explorer.lessons import find
from explorer.workspace import Workspace
lesson = find("frozen-params")
thread = threading.Thread(target=lesson.rehearse, args=(("fix",),))
thread.start()
thread.join()
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
    assert int(written) >= 2  # the rehearsal compiled the step and the metrics
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
