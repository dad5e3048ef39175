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
    "segment_std",
    "segment_sum",
    "segment_var",
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


def _as_float(data):
    data = jnp.asarray(data)
    if not jnp.issubdtype(data.dtype, jnp.inexact):
        data = data.astype(jnp.result_type(float))
    return data


def _var_and_count(data, segment_ids, num_segments, mask, indices_are_sorted):
    """Two-pass population variance and the number of (unmasked) entries per segment."""
    num_segments = _check_num_segments(num_segments)
    data = _as_float(data)
    kw = dict(indices_are_sorted=indices_are_sorted)
    if mask is None:
        count = segment_count(segment_ids, num_segments, dtype=data.dtype, **kw)
        keep = None
    else:
        mask = jnp.asarray(mask, dtype=bool)
        count = segment_sum(mask.astype(data.dtype), segment_ids, num_segments, **kw)
        keep = _expand_like(mask, data)
        # jnp.where, not a product: a masked-out inf/NaN must not leak in (0 * inf).
        data = jnp.where(keep, data, jnp.zeros_like(data))
    denom = _expand_like(jnp.maximum(count, 1), data)
    mean = segment_sum(data, segment_ids, num_segments, **kw) / denom
    # Second pass on the centred data: never negative, no E[x^2] - E[x]^2
    # cancellation, and the gradient 2 (x - mean) / n is finite everywhere.
    sq = jnp.square(data - mean[segment_ids])
    if keep is not None:
        sq = jnp.where(keep, sq, jnp.zeros_like(sq))
    return segment_sum(sq, segment_ids, num_segments, **kw) / denom, count


def segment_var(data, segment_ids, num_segments: int, *, mask=None,
                indices_are_sorted=False):
    """Population variance (divide by ``n``, not ``n - 1``) of each segment.

    Computed in two passes, ``mean((x - mean(x))**2)``, so it is never negative
    and keeps its precision when the variance is small next to the mean.
    Entries where ``mask`` ([E], bool) is False are left out. Empty (or fully
    masked) segments give 0, single-entry segments give 0; the gradient is
    finite in every case. Integer data is promoted to the default float type.
    """
    var, _ = _var_and_count(data, segment_ids, num_segments, mask, indices_are_sorted)
    return var


def segment_std(data, segment_ids, num_segments: int, *, mask=None,
                indices_are_sorted=False, eps: float = 1e-5):
    """Standard deviation of each segment, as PyG's ``StdAggregation``:
    ``sqrt(relu(var) + eps)`` with ``eps = 1e-5``.

    The ``eps`` keeps the gradient finite where the variance is 0, at the cost
    of a floor: a non-empty segment with zero spread (e.g. a single entry)
    gives ``sqrt(1e-5) ~ 0.00316``, not 0. Empty (or fully masked) segments
    give exactly 0 (gradient 0). ``mask`` as in :func:`segment_var`. (Recent PyG
    versions instead clamp the variance at ``eps`` and zero the result there;
    the two agree wherever the variance exceeds ``eps``.)
    """
    var, count = _var_and_count(data, segment_ids, num_segments, mask, indices_are_sorted)
    std = jnp.sqrt(jax.nn.relu(var) + eps)
    return jnp.where(_expand_like(count > 0, std), std, jnp.zeros_like(std))


AGGREGATIONS = {
    "sum": segment_sum,
    "add": segment_sum,
    "mean": segment_mean,
    "max": segment_max,
    "min": segment_min,
    "var": segment_var,
    "std": segment_std,
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
