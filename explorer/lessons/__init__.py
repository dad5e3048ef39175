"""Classroom lessons: one JIT pitfall each, measured live, and its fix.

Every lesson runs real code and reports what it saw, never a canned result:
the pitfall and the fix each return an :class:`Outcome` with a verdict, a
one-sentence summary built from the measurements, the evidence, and the few
lines of code that the column ran. Lessons that train a model carry the
explorer setup they use (``setup`` / ``fix_setup``), so the app can load the
same graph, model and mode into its panels; a run the app already trained can
be handed in and is only observed.

One module per lesson (its prose next to its code), named after its key;
:data:`ORDER` numbers them. Keys, numbers and titles are read without importing JAX
(:func:`key_of`, used by links; :func:`titles`, by the app's first page); the
lessons themselves load on first use of :data:`LESSONS` or :func:`find`.
Nothing here is shared between sessions: every call builds its own models.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
from pathlib import Path

__all__ = ["LESSONS", "ORDER", "Lesson", "Outcome", "find", "key_of", "titles"]

#: the lessons' keys (the URL's ``lesson=`` value), in their order; lesson
#: ``key`` lives in the module ``explorer.lessons.<key with _ for ->``
ORDER = ("frozen-params", "frozen-dropout", "frozen-batchnorm", "functional-loop",
         "overhead", "pool-size", "norm-batch-size", "dynamic-shapes", "gcn-cached",
         "retracing", "timing", "trace-side-effects", "python-if", "module-inside-jit",
         "closure-capture", "loop-of-tiny-jits", "timing-first-call", "unsynced-replicas")


def key_of(text: str) -> str | None:
    """The key of a lesson named by key (``frozen-params``) or number (``1``);
    ``None`` if there is none. Imports nothing."""
    text = str(text).strip().lower()
    if text in ORDER:
        return text
    if text.isdigit() and 1 <= int(text) <= len(ORDER):
        return ORDER[int(text) - 1]
    return None


def _module(key: str) -> str:
    """The name of lesson ``key``'s module, in this package."""
    return key.replace("-", "_")


@functools.cache
def titles() -> dict[str, str]:
    """``{key: title}`` of every lesson, in :data:`ORDER`, read from each
    module's ``LESSON = Lesson(title=...)`` without running the module: a lesson
    module imports JAX, Flax and optax, which the app's first page (the
    lesson picker) does without. A module without that statement, or whose
    title there is not one plain string, is a ``ValueError``
    (tests/app/test_lessons.py reads the titles both ways)."""
    out = {}
    here = Path(__file__).parent
    for key in ORDER:
        path = here / f"{_module(key)}.py"
        text = path.read_text(encoding="utf-8")
        start = text.find("\nLESSON = Lesson(")  # parsed from there: a tenth of the time
        found = [kw.value for node in ast.walk(ast.parse(text[max(start, 0):]))
                 if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Lesson"
                 for kw in node.keywords if kw.arg == "title"]
        if len(found) != 1 or not isinstance(found[0], ast.Constant):
            raise ValueError(f"{path.name}: its Lesson(title=...) is not one plain string")
        out[key] = found[0].value
    return out


@functools.cache
def _lessons() -> tuple:
    from explorer import lazy

    lazy.load()  # the lessons import JAX: the app's compilation cache first
    out = []
    for number, key in enumerate(ORDER, start=1):
        module = importlib.import_module(f"{__name__}.{_module(key)}")
        out.append(dataclasses.replace(module.LESSON, key=key, number=number))
    return tuple(out)


def find(text: str):
    """A :class:`Lesson` by key or number; ``None`` if unknown."""
    key = key_of(text)
    return None if key is None else _lessons()[ORDER.index(key)]


def __getattr__(name: str):
    if name == "LESSONS":  # the ordered lessons, loaded on first use
        return _lessons()
    if name in ("Lesson", "Outcome"):
        from explorer.lessons import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
