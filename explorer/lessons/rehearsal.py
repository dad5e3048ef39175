"""Rehearsing the lessons in a background process, so they open without compiling.

When a lesson is first opened on a server, one low-priority child process
(``python -m explorer.lessons.rehearsal``) runs every lesson's two sides
headless (:meth:`Lesson.rehearse`) and throws the results away. What it
compiles lands in the persistent compilation cache (``explorer.compile_cache``),
so when the teacher clicks, the lesson reads its programs back instead of
compiling them. Nothing is shown from a rehearsal: every number on screen comes
from the real run.

Why a process and not a thread: tracing is Python, and a rehearsal thread
took the GIL from the real run beside it, so it had to wait while a class
clicked through the lessons and never got ahead of them. A process uses the
other core (at ``nice`` 19, so it yields to the server and the browser), and
it gets ahead from the first second.

Its order: :data:`FIRST` (the lessons that compile most), then the rest in
lesson order. When it has rehearsed everything it leaves a mark in the cache
directory for this code and these versions (:func:`fingerprint`), so a
restarted server starts no rehearsal at all; a changed file starts a new one.

A real run waits for the rehearsal of its own lesson if that is the one in
progress (its programs are about to be in the cache), and a lesson that times
something stops the process (``SIGSTOP``) until its measurement is done, so
nothing runs beside it. If the server dies, so does the process
(``PR_SET_PDEATHSIG``, also when it is stopped).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from explorer import compile_cache

__all__ = ["ENV", "FIRST", "Rehearsal", "fingerprint", "order", "wanted"]

ENV = "EXPLORER_REHEARSE"  # "0": no rehearsals (the test suite's default)
#: rehearsed before the others: the lessons that compile most (cold, on a 2-core
#: machine: 5.7 and 5.9 s of rehearsal, and lesson 18's three programs with its
#: dataset, 4 s to open cold in the browser; the others compile in at most 4.3 s,
#: most under 1 s), which a class clicking straight through reaches before an
#: in-order rehearsal would
FIRST = ("overhead", "retracing", "unsynced-replicas")
_PARENT = "EXPLORER_REHEARSAL_PARENT"  # the server's pid, checked by the child
_ROOT = Path(__file__).resolve().parents[2]
log = logging.getLogger("explorer")


def wanted() -> bool:
    """Whether to rehearse: only with the compilation cache on (nothing would
    be kept for the real run otherwise) and unless ``$EXPLORER_REHEARSE`` is 0."""
    return compile_cache.enabled() is not None and os.environ.get(ENV, "1").strip() != "0"


def order(lessons) -> list:
    """The lessons in the order the process rehearses them: :data:`FIRST`,
    then the others in lesson order."""
    first = [lesson for key in FIRST for lesson in lessons if lesson.key == key]
    return first + [lesson for lesson in lessons if lesson.key not in FIRST]


def fingerprint() -> str:
    """What a finished rehearsal is valid for: the source of ``explorer`` and
    ``gnncore``, the JAX / Flax versions and the settings that change what XLA
    builds (``XLA_FLAGS``, ``JAX_*``)."""
    import flax
    import jax

    digest = hashlib.sha256()
    for package in ("explorer", "gnncore"):
        for path in sorted((_ROOT / package).rglob("*.py")):
            digest.update(str(path.relative_to(_ROOT)).encode())
            digest.update(path.read_bytes())
    settings = sorted((k, v) for k, v in os.environ.items()
                      if k == "XLA_FLAGS" or k.startswith("JAX_"))
    digest.update(repr((jax.__version__, flax.__version__, settings)).encode())
    return digest.hexdigest()[:16]


def _mark(cache: Path, keys) -> Path:
    """The file that says this code rehearsed ``keys`` into ``cache``."""
    which = hashlib.sha256(" ".join(keys).encode()).hexdigest()[:8]
    return cache / f"explorer-rehearsed-{fingerprint()}-{which}"


class Rehearsal:
    """The rehearsal process of one server (shared by its sessions; it holds
    no session data). ``keys``: the lessons to rehearse (default: all)."""

    command = (sys.executable, "-m", "explorer.lessons.rehearsal")  # + the keys

    def __init__(self, keys=None):
        from explorer.lessons import LESSONS

        self.keys = [lesson.key for lesson in order(LESSONS)
                     if keys is None or lesson.key in keys]
        self.current: str | None = None  # the lesson the process is on
        self.done: set[str] = set()
        self.failed: dict[str, str] = {}
        self.proc: subprocess.Popen | None = None
        self._cond = threading.Condition()
        self._holds = 0  # timing lessons measuring now (the process is stopped)
        self.thread = None
        cache = compile_cache.enabled()
        if cache is None or _mark(cache, self.keys).exists():
            return  # nothing to keep it in, or already rehearsed by this code
        started = threading.Event()
        # the thread that starts the child is the one it watches (PDEATHSIG fires
        # when that thread ends), so it stays until the child ends: it reads its lines
        self.thread = threading.Thread(target=self._watch, args=(started,), daemon=True,
                                       name="lesson-rehearsal")
        self.thread.start()
        started.wait(30)

    def _watch(self, started: threading.Event) -> None:
        env = dict(os.environ, **{_PARENT: str(os.getpid())})
        try:
            self.proc = subprocess.Popen(
                [*self.command, *self.keys],
                cwd=_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, text=True)
        except OSError:
            log.warning("the lesson rehearsal could not start", exc_info=True)
            return
        finally:
            started.set()
        for line in self.proc.stdout:
            word, _, rest = line.strip().partition(" ")
            key, _, why = rest.partition(" ")
            with self._cond:
                if word == "start":
                    self.current = key
                elif word in ("done", "failed"):
                    self.current = None
                    self.done.add(key)
                    if word == "failed":
                        self.failed[key] = why
                self._cond.notify_all()
        self.proc.wait()
        with self._cond:
            self.current = None
            self._cond.notify_all()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _signal(self, sig) -> None:
        with contextlib.suppress(ProcessLookupError, AttributeError):
            self.proc.send_signal(sig)

    @contextlib.contextmanager
    def real_run(self, lesson, side: str = "pitfall", timeout_s: float = 60.0):
        """Around ``lesson``'s real run: wait if the process is rehearsing this
        very lesson (its programs are about to be in the cache); if the lesson
        times something, stop the process until the block ends, so nothing
        runs beside its measurement."""
        if not self.running:
            yield
            return
        with self._cond:
            self._cond.wait_for(lambda: self.current != lesson.key or not self.running,
                                timeout_s)
            timing = lesson.measure is not None
            if timing:
                self._holds += 1
                if self._holds == 1:
                    self._signal(signal.SIGSTOP)
        try:
            yield
        finally:
            if timing:
                with self._cond:
                    self._holds -= 1
                    if self._holds == 0:
                        self._signal(signal.SIGCONT)

    def stop(self) -> None:
        """End the process (a test's clean-up; the server's end ends it anyway)."""
        if self.running:
            self._signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(10)


def _die_with_parent(parent: int) -> bool:
    """Ask Linux to kill this process when the server's thread that started it
    ends (even while stopped); False if the server is gone already."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    return os.getppid() == parent


def main(argv: list[str] | None = None) -> int:
    """The process: rehearse the lessons named (default: all, in :func:`order`),
    one line per lesson on stdout (``start KEY``, ``done KEY`` or ``failed KEY
    WHY``), then leave the mark if none failed."""
    keys = sys.argv[1:] if argv is None else argv
    parent = os.environ.get(_PARENT)
    if parent and not _die_with_parent(int(parent)):
        return 0
    with contextlib.suppress(OSError):
        os.nice(19)
    cache = compile_cache.enable()
    if cache is None:
        return 0
    from explorer.lessons import LESSONS

    lessons = [lesson for lesson in order(LESSONS) if not keys or lesson.key in keys]
    failed = 0
    for lesson in lessons:
        print("start", lesson.key, flush=True)
        try:
            lesson.rehearse(("pitfall", "fix"))
        except Exception as err:  # the real run reports any failure; this only warms
            failed += 1
            print("failed", lesson.key, f"{type(err).__name__}: {err}".replace("\n", " "),
                  flush=True)
            continue
        print("done", lesson.key, flush=True)
    if not failed:  # else the next server tries again
        _mark(cache, [lesson.key for lesson in lessons]).touch()
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    sys.exit(main())
