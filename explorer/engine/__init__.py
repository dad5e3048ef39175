"""The engine: a configured run trained step by step under one of the JIT modes.

- :mod:`explorer.engine.recipe`: the model a config describes, its optimizer,
  the loss, the training step and the evaluation (what exported scripts copy).
- :mod:`explorer.engine.inputs`: :class:`StepInputs`, what a step reads.
- :mod:`explorer.engine.tasks`: :class:`NodeTask` and :class:`GraphTask`, what
  is classified.
- :mod:`explorer.engine.steppers`: one :class:`Stepper` per JIT mode, in the one
  table :data:`STEPPERS`.
- :mod:`explorer.engine.run`: :class:`Run`, the loop, history, NaN guard and audit.
- :mod:`explorer.engine.compiles`: trace counting, and :class:`SharedCompiles`,
  compiled steps shared by runs with the same shapes (the app's sessions).
"""

from __future__ import annotations

import importlib

#: module -> the names this package hands out, each imported on first use: the
#: app's first page reads the modes, tasks and optimizers without loading JAX
#: (explorer/lazy.py); a run, a step or a task's data loads it
_MODULES = {
    "explorer.engine.compiles": ("SharedCompiles",),
    "explorer.engine.inputs": ("EvalTargets", "StepInputs"),
    "explorer.engine.recipe": ("build_model", "build_optimizer"),
    "explorer.engine.run": ("Run", "StepRecord", "TrainingStopped"),
    "explorer.engine.steppers": ("STEPPERS", "Stepper", "stepper_for"),
    "explorer.engine.tasks": ("GraphTask", "NodeTask", "Task", "task_for"),
}
_WHERE = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name: str):
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'explorer.engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value


__all__ = sorted(_WHERE)
