"""Rehearsing lessons in the background, so the next ones open without compiling.

While a class reads a lesson, a thread runs what comes next headless (the
fix of this lesson, then every later lesson's two sides, in order:
:meth:`Lesson.rehearse`) and throws the results away. What it compiles lands
in the persistent compilation cache (``explorer.compile_cache``), so when the
teacher clicks, the lesson reads its programs back instead of compiling them.
Nothing is shown from a rehearsal: every number on screen comes from the real
run. Each side is rehearsed once per server process (and after that the cache
on disk holds it for the next server run too).

A real run first waits for the rehearsal of its own side if one is planned
(its programs are then in the cache), then pauses the rehearsal until it is
done: no new side starts, and a lesson that times something also waits for
the side in progress, so its measurement never has background work beside it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterable

from explorer import compile_cache

__all__ = ["ENV", "Rehearsal", "plan", "wanted"]

ENV = "EXPLORER_REHEARSE"  # "0": no rehearsals (the test suite's default)
log = logging.getLogger("explorer")


def wanted() -> bool:
    """Whether to rehearse: only with the compilation cache on (nothing would
    be kept for the real run otherwise) and unless ``$EXPLORER_REHEARSE`` is 0."""
    return compile_cache.enabled() is not None and os.environ.get(ENV, "1").strip() != "0"


def plan(lessons, key: str, shown: Iterable[str]) -> list[tuple]:
    """What to rehearse while lesson ``key`` shows the sides ``shown``:
    ``[(lesson, sides)]``, this lesson's fix first (unless shown, or read from
    the lesson's one measurement), then every later lesson's two sides, the
    next one first."""
    keys = [lesson.key for lesson in lessons]
    at = keys.index(key)
    lesson, jobs = lessons[at], []
    if "fix" not in shown and lesson.measure is None:
        jobs.append((lesson, ("fix",)))
    jobs += [(later, ("pitfall", "fix")) for later in lessons[at + 1:]]
    return jobs


class Rehearsal:
    """One background thread working through ``jobs`` (``[(lesson, sides)]``),
    skipping the sides already rehearsed in this process (``done``: a set of
    ``(key, side)`` shared by every session, with its ``lock``; it holds no
    session data)."""

    def __init__(self, jobs, done: set, lock: threading.Lock):
        self.events: dict[tuple[str, str], threading.Event] = {}
        self._go = threading.Event()  # cleared while a real run works
        self._go.set()
        self._idle = threading.Event()  # set while no side is being rehearsed
        self._idle.set()
        todo = []
        with lock:
            for lesson, sides in jobs:
                fresh = tuple(s for s in sides if (lesson.key, s) not in done)
                if fresh:
                    done.update((lesson.key, s) for s in fresh)
                    todo.append((lesson, fresh))
                    for s in fresh:
                        self.events[lesson.key, s] = threading.Event()
        self.thread = None
        if todo:
            self.thread = threading.Thread(target=self._work, args=(todo,), daemon=True,
                                           name="lesson-rehearsal")
            self.thread.start()

    def _work(self, todo) -> None:
        for lesson, sides in todo:
            self._go.wait()
            self._idle.clear()
            try:
                lesson.rehearse(sides)
            except Exception:  # the real run reports any failure; a rehearsal only warms
                log.debug("rehearsing lesson %s %s failed", lesson.key, sides, exc_info=True)
            finally:
                for s in sides:
                    self.events[lesson.key, s].set()
                self._idle.set()

    @contextlib.contextmanager
    def real_run(self, lesson, side: str, timeout_s: float = 120.0):
        """Around ``lesson``'s real ``side``: wait for its rehearsal if one is
        planned, then hold the rehearsal until the block ends (no new side
        starts; a lesson that times something also waits for the side in
        progress, so nothing runs beside its measurement)."""
        if self.thread is None or not self.thread.is_alive():
            yield
            return
        event = self.events.get((lesson.key, side))
        if event is not None:
            event.wait(timeout_s)
        self._go.clear()
        if lesson.measure is not None:
            self._idle.wait(timeout_s)
        try:
            yield
        finally:
            self._go.set()

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()
