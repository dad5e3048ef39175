"""Rehearsing lessons in the background, so the next one opens without compiling.

While a class reads a lesson, a thread runs what comes next headless (the
fix of this lesson, then the next lesson's two sides: :meth:`Lesson.rehearse`)
and throws the results away. What it compiles lands in the persistent
compilation cache (``explorer.compile_cache``), so when the teacher clicks,
the lesson reads its programs back instead of compiling them. Nothing is
shown from a rehearsal: every number on screen comes from the real run.

A real run never overlaps its own rehearsal: it waits for the rehearsal of
the same side to finish (its programs are then in the cache), and a lesson
that times something waits for the whole rehearsal, so that no background
work runs during its measurement.
"""

from __future__ import annotations

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
    the lesson's one measurement), then the next lesson's two sides."""
    keys = [lesson.key for lesson in lessons]
    at = keys.index(key)
    lesson, jobs = lessons[at], []
    if "fix" not in shown and lesson.measure is None:
        jobs.append((lesson, ("fix",)))
    if at + 1 < len(lessons):
        jobs.append((lessons[at + 1], ("pitfall", "fix")))
    return jobs


class Rehearsal:
    """One background thread working through ``jobs`` (``[(lesson, sides)]``),
    skipping those already rehearsed in this process (``done``: a set of
    ``(key, side)`` shared by every session, with its ``lock``; it holds no
    session data)."""

    def __init__(self, jobs, done: set, lock: threading.Lock):
        self.events: dict[tuple[str, str], threading.Event] = {}
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
            try:
                lesson.rehearse(sides)
            except Exception:  # the real run reports any failure; a rehearsal only warms
                log.debug("rehearsing lesson %s %s failed", lesson.key, sides, exc_info=True)
            finally:
                for s in sides:
                    self.events[lesson.key, s].set()

    def wait_for(self, lesson, side: str, timeout_s: float = 120.0) -> None:
        """Before ``lesson``'s ``side`` runs for real: wait for its rehearsal if
        one is planned (all of the rehearsal if the lesson times something)."""
        if self.thread is None:
            return
        if lesson.measure is not None:
            self.thread.join(timeout_s)
            return
        event = self.events.get((lesson.key, side))
        if event is not None:
            event.wait(timeout_s)

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()
