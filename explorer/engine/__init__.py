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

from explorer.engine.compiles import SharedCompiles
from explorer.engine.inputs import EvalTargets, StepInputs
from explorer.engine.recipe import build_model, build_optimizer
from explorer.engine.run import Run, StepRecord, TrainingStopped
from explorer.engine.steppers import STEPPERS, Stepper, stepper_for
from explorer.engine.tasks import GraphTask, NodeTask, Task, task_for

__all__ = ["STEPPERS", "EvalTargets", "GraphTask", "NodeTask", "Run", "SharedCompiles",
           "StepInputs", "StepRecord", "Stepper", "Task", "TrainingStopped", "build_model",
           "build_optimizer", "stepper_for", "task_for"]
