"""Segment reductions with a static number of segments.

Every function here takes ``num_segments`` as a Python ``int`` so that the output
shape is known while tracing. Empty segments always give ``0`` (never ``-inf`` or
``NaN``), which is what a node without incoming edges should receive.

``indices_are_sorted=True`` lets XLA use the sorted scatter path; :class:`Graph`
sorts its edges by target once on the host so that this holds for graph inputs.
"""

from __future__ import annotations

import operator

import jax
import jax.numpy as jnp

__all__ = [
    "AGGREGATIONS",
    "segment_count",
    "segment_max",
    "segment_mean",
    "segment_min",
    "segment_reduce",
    "segment_softmax",
    "segment_sum",
]


def _check_num_segments(num_segments) -> int:
    try:
        return operator.index(num_segments)
    except TypeError as err:  # a tracer, a float, None ...
        raise ValueError(
            "num_segments must be a static Python int (e.g. the number of target "
            f"nodes); got {type(num_segments).__name__}. Pass it explicitly, e.g. "
            "num_segments=x.shape[0]."
        ) from err


def segment_sum(data, segment_ids, num_segments: int, *, indices_are_sorted=False):
    """Sum of ``data`` rows that share a segment id. Shape ``[num_segments, ...]``."""
    num_segments = _check_num_segments(num_segments)
    return jax.ops.segment_sum(
        data, segment_ids, num_segments, indices_are_sorted=indices_are_sorted
    )


def segment_count(segment_ids, num_segments: int, *, dtype=jnp.float32,
                  indices_are_sorted=False):
    """Number of entries in each segment (the in-degree when ids are targets)."""
    ones = jnp.ones(segment_ids.shape[0], dtype=dtype)
    return segment_sum(ones, segment_ids, num_segments,
                       indices_are_sorted=indices_are_sorted)


def _expand_like(v, data):
    """Append trailing singleton axes so ``v`` ([S]) broadcasts against ``data``."""
    return v.reshape(v.shape + (1,) * (data.ndim - 1))


def segment_mean(data, segment_ids, num_segments: int, *, indices_are_sorted=False):
    """Mean of each segment; empty segments give 0."""
    total = segment_sum(data, segment_ids, num_segments,
                        indices_are_sorted=indices_are_sorted)
    count = segment_count(segment_ids, num_segments, dtype=total.dtype,
                          indices_are_sorted=indices_are_sorted)
    return total / _expand_like(jnp.maximum(count, 1), total)


def _fill_empty(out, segment_ids, num_segments, indices_are_sorted):
    # jax.ops.segment_max/min fill empty segments with -inf/+inf (or the integer
    # extremes). A message that really is +-inf stays; only empty segments turn to 0.
    count = segment_count(segment_ids, num_segments, dtype=jnp.int32,
                          indices_are_sorted=indices_are_sorted)
    return jnp.where(_expand_like(count > 0, out), out, jnp.zeros_like(out))


def segment_max(data, segment_ids, num_segments: int, *, indices_are_sorted=False):
    """Element-wise maximum of each segment; empty segments give 0."""
    num_segments = _check_num_segments(num_segments)
    out = jax.ops.segment_max(data, segment_ids, num_segments,
                              indices_are_sorted=indices_are_sorted)
    return _fill_empty(out, segment_ids, num_segments, indices_are_sorted)


def segment_min(data, segment_ids, num_segments: int, *, indices_are_sorted=False):
    """Element-wise minimum of each segment; empty segments give 0."""
    num_segments = _check_num_segments(num_segments)
    out = jax.ops.segment_min(data, segment_ids, num_segments,
                              indices_are_sorted=indices_are_sorted)
    return _fill_empty(out, segment_ids, num_segments, indices_are_sorted)


AGGREGATIONS = {
    "sum": segment_sum,
    "add": segment_sum,
    "mean": segment_mean,
    "max": segment_max,
    "min": segment_min,
}


def segment_reduce(data, segment_ids, num_segments: int, aggr: str = "sum", *,
                   indices_are_sorted=False):
    """Reduce ``data`` by segment with the aggregation named ``aggr``."""
    try:
        fn = AGGREGATIONS[aggr]
    except KeyError:
        raise ValueError(
            f"unknown aggregation {aggr!r}; choose one of {sorted(AGGREGATIONS)}"
        ) from None
    return fn(data, segment_ids, num_segments, indices_are_sorted=indices_are_sorted)


def segment_softmax(logits, segment_ids, num_segments: int, *, mask=None,
                    indices_are_sorted=False):
    """Softmax of ``logits`` ([E, ...]) over the entries of each segment.

    The per-segment maximum is subtracted first, so large logits cannot overflow.
    Entries where ``mask`` ([E], bool) is False get weight exactly 0 and do not
    take part in the normalisation; a segment with no (unmasked) entry sums to 0.
    """
    num_segments = _check_num_segments(num_segments)
    if mask is not None:
        mask = _expand_like(mask, logits)
        logits = jnp.where(mask, logits, -jnp.inf)
    seg_max = jax.ops.segment_max(logits, segment_ids, num_segments,
                                  indices_are_sorted=indices_are_sorted)
    # Empty (or fully masked) segments have max -inf; any finite shift works there.
    seg_max = jax.lax.stop_gradient(jnp.where(jnp.isfinite(seg_max), seg_max, 0.0))
    unnorm = jnp.exp(logits - seg_max[segment_ids])
    if mask is not None:
        unnorm = jnp.where(mask, unnorm, 0.0)
    denom = segment_sum(unnorm, segment_ids, num_segments,
                        indices_are_sorted=indices_are_sorted)[segment_ids]
    return unnorm / jnp.where(denom > 0, denom, 1.0)
