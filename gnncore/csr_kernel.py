"""The CSR sparse-dense product ``A @ rhs`` that :mod:`gnncore.sparse` builds on.

On CPU it is one call of jaxlib's native CSR kernel, the same kernel that
``jax.experimental.sparse.BCSR @ rhs`` lowers to there. Going to it directly
keeps ``jax.experimental.sparse`` out of the process: importing that package
brings ``scipy.sparse`` (and through it ``numpy.f2py``), 0.25-0.3 s paid by the
first trace of any aggregation, in every process (``benchmarks/RESULTS.md``,
"the CSR kernel without jax.experimental.sparse").

Everything else goes through ``BCSR`` as before, imported only then: other
platforms (its cuSPARSE lowering), operands the native kernel does not take
(other dtypes, an index dtype other than the pointers'), ``vmap``, and
differentiating the product itself (gnncore's layers differentiate through
their own ``custom_vjp`` instead, whose backward pass is more products).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

__all__ = ["csr_matmul", "csr_primitive"]

_TARGET = "cpu_csr_sparse_dense_ffi"  # registered by jaxlib's cpu_sparse module
_VALUE_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))


def _with_bcsr(values, cols, indptr, rhs, *, shape):
    """The product as ``jax.experimental.sparse`` computes it."""
    from jax.experimental import sparse as jsparse

    return jsparse.BCSR((values, cols, indptr), shape=shape, indices_sorted=True) @ rhs


#: the product as one primitive (its name shows in a jaxpr where a layer uses it)
csr_primitive = Primitive("gnncore_csr_matmul")


@functools.cache
def _compiled(shape):
    return jax.jit(functools.partial(csr_primitive.bind, shape=shape))


def _abstract(values, cols, indptr, rhs, *, shape):
    return jax.core.ShapedArray((shape[0], rhs.shape[1]), rhs.dtype)


def _cpu_lowering(ctx, values, cols, indptr, rhs, *, shape):
    # the kernel's operands: values, the row pointers, the column indices, rhs
    return jax.ffi.ffi_lowering(_TARGET)(ctx, values, indptr, cols, rhs)


def _batched(args, dims, *, shape):
    return jax.vmap(functools.partial(_with_bcsr, shape=shape), in_axes=dims)(*args), 0


def _jvp(primals, tangents, *, shape):
    tangents = tuple(ad.instantiate_zeros(t) for t in tangents)
    return jax.jvp(functools.partial(_with_bcsr, shape=shape), tuple(primals), tangents)


csr_primitive.def_impl(lambda *args, shape: _compiled(shape)(*args))
csr_primitive.def_abstract_eval(_abstract)
mlir.register_lowering(csr_primitive, mlir.lower_fun(_with_bcsr, multiple_results=False))
mlir.register_lowering(csr_primitive, _cpu_lowering, platform="cpu")
batching.primitive_batchers[csr_primitive] = _batched
ad.primitive_jvps[csr_primitive] = _jvp


@functools.cache
def _kernel_registered() -> bool:
    """Register jaxlib's CPU CSR kernel with XLA (what importing
    ``jax.experimental.sparse`` does; doing it twice is harmless). False when
    this jaxlib does not have it."""
    try:
        from jaxlib import cpu_sparse
    except ImportError:  # pragma: no cover - a jaxlib without the module
        return False
    for name, fn, version in cpu_sparse.registrations().get("cpu", []):
        if name == _TARGET:
            jax.ffi.register_ffi_target(_TARGET, fn, platform="cpu", api_version=version)
            return True
    return False  # pragma: no cover - a jaxlib that renamed it


#: (columns of ``rhs`` a padded row is a multiple of, pad only below this width),
#: by dtype. jaxlib's kernel runs 2-5x faster on a narrow ``rhs`` whose rows are a
#: whole number of its vectors, so a narrower one gets zero columns; its own sums
#: are the same bit for bit. Timed on Cora's shape (2708 rows, 10556 non-zeros),
#: median us, as is -> padded (``benchmarks/RESULTS.md``):
#: float32: 1 column 153 -> 42, 7: 251 -> 46, 15: 229 -> 55, 23: 189 -> 72, but 63
#: columns 213 -> 268; float64: 1: 109 -> 34, 3: 132 -> 35, 7: 102 -> 46, but 15
#: columns 109 -> 118-131 and 31: 118 -> 196-251.
_PADDING = {np.dtype(np.float32): (8, 32), np.dtype(np.float64): (4, 8)}


def csr_matmul(values, cols, indptr, shape: tuple[int, int], rhs):
    """``A @ rhs`` for the CSR matrix ``A`` of static ``shape`` with non-zeros
    ``values`` ``[nnz]``, column indices ``cols`` ``[nnz]`` (sorted within each
    row) and row pointers ``indptr`` ``[rows + 1]``; ``rhs`` ``[cols, K]``."""
    native = (rhs.ndim == 2 and values.dtype == rhs.dtype
              and np.dtype(values.dtype) in _VALUE_DTYPES
              and cols.dtype == indptr.dtype and np.dtype(cols.dtype) in _INDEX_DTYPES
              and _kernel_registered())
    if not native:
        return _with_bcsr(values, cols, indptr, rhs, shape=shape)
    width = rhs.shape[1]
    multiple, below = _PADDING[np.dtype(rhs.dtype)]
    pad = -width % multiple if width < below else 0
    if pad:  # zero columns: the product's own columns are the same sums
        rhs = jnp.pad(rhs, ((0, 0), (0, pad)))
    out = csr_primitive.bind(values, cols, indptr, rhs, shape=tuple(shape))
    return out[:, :width] if pad else out
