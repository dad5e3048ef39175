"""Imported first by the explorer modules that import JAX at their top (the
engine's run, recipe, inputs and sharding): before JAX loads, :mod:`gnncore`
asks for its XLA flags and the callbacks of :func:`explorer.lazy.when_loaded`
run (the app's compilation cache, its collector paused while JAX loads)."""

from explorer import lazy

lazy.load()
