"""Derivative checks: JVP vs finite differences, transpose, ``grad`` vs ``jvp``.

Each runs per floating input ``i`` on ``f_i(x) = kernel(..., x at position i, ...)``
with the other inputs fixed, and compares floating outputs only.

* ``jvp_vs_fd``: ``jvp(f_i)(x; t)`` against ``(f_i(x + h t) - f_i(x - h t)) / 2h``
  with ``h = eps ** (1/3)`` of the dtype, scaled by ``max(1, |x|)``. Passes when
  ``max |jvp - fd| <= rtol * max |fd| + 10 eps max |f| / h`` (the second term is
  the rounding error of the difference quotient).
* ``transpose``: for inputs the kernel is linear in, the dot-product test
  ``<ct, J t> = <J^T ct, t>`` with ``J^T`` from ``jax.linear_transpose``.
* ``grad_vs_jvp``: ``<grad L, t> = jvp(L)(t)`` for ``L(x) = sum_k <w_k, f_k(x)>``.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from .. import _jax_compat as jc
from ..benchmark.tolerance import Comparison, dot_rtol, fd_rtol, fd_step
from .report import CheckResult
from .subject import Subject, error_text

__all__ = ["check_grad", "check_jvp", "check_transpose", "linear_inputs"]


class _Input:
    """The kernel as a function of input ``i`` (floating outputs only).

    Under ``jit`` the other inputs are passed as arguments: captured arrays would
    become constants that XLA may spend seconds constant-folding.
    """

    def __init__(self, subject: Subject, backend: str, i: int) -> None:
        self._fn = subject.function(backend)
        self._floats = subject.float_outputs()
        self.i = i
        self.others = [a for j, a in enumerate(subject.args) if j != i]

    def apply(self, x: Any, others: list[Any]) -> list[Any]:
        args = list(others)
        args.insert(self.i, x)
        out = self._fn(*args)
        return [out[k] for k in self._floats]

    def __call__(self, x: Any) -> list[Any]:
        return self.apply(x, self.others)

    def jvp(self, x: Any, t: Any) -> list[Any]:
        """Tangents of the outputs along ``t``, computed under ``jit``."""

        def tangents(x: Any, t: Any, others: list[Any]) -> list[Any]:
            return jax.jvp(lambda v: self.apply(v, others), (x,), (t,))[1]

        return jax.jit(tangents)(x, t, self.others)

    def transpose(self, x: Any, cts: list[Any]) -> Any:
        """``J^T cts`` from ``jax.linear_transpose``, under ``jit``."""
        spec = jax.ShapeDtypeStruct(x.shape, x.dtype)

        def transposed(cts: list[Any], others: list[Any]) -> Any:
            return jax.linear_transpose(lambda v: self.apply(v, others), spec)(cts)[0]

        return jax.jit(transposed)(cts, self.others)


def _run(fn, *args):
    return [np.asarray(o) for o in fn(*args)]


def check_jvp(subject: Subject, backend: str) -> list[CheckResult]:
    """JVP of each floating input against central finite differences."""
    results = []
    for i in subject.float_inputs():
        x = subject.args[i]
        t = subject.random_like(x, salt=100 + i)
        f = _Input(subject, backend, i)
        case = f"input {i}"
        try:
            with jax.default_device(subject.device):
                tangents = f.jvp(x, t)
                step = fd_step(x.dtype) * max(1.0, float(np.max(np.abs(x), initial=0)))
                plus = _run(f, x + step * t)
                minus = _run(f, x - step * t)
                center = _run(f, x)
        except Exception as err:
            results.append(
                subject.failed("jvp_vs_fd", backend, case, detail=error_text(err))
            )
            continue
        results.append(
            _judge_fd(
                subject, backend, case, x.dtype, step, tangents, plus, minus, center
            )
        )
    return results


def _judge_fd(subject, backend, case, dtype, step, tangents, plus, minus, center):
    eps = float(jax.numpy.finfo(dtype).eps)
    worst, failure = 0.0, ""
    rel_worst = 0.0
    for k, (jt, p, m, c) in enumerate(zip(tangents, plus, minus, center, strict=True)):
        with np.errstate(invalid="ignore", over="ignore"):
            fd = (p.astype(np.float64) - m.astype(np.float64)) / (2 * step)
            diff = np.abs(np.asarray(jt, np.float64) - fd)
        both_nan = np.isnan(fd) & np.isnan(np.asarray(jt, np.float64))
        diff = np.where(both_nan, 0.0, np.where(np.isnan(diff), np.inf, diff))
        scale = float(np.max(np.abs(fd), initial=0.0))
        bound = (
            fd_rtol(dtype) * scale
            + 10 * eps * float(np.max(np.abs(c), initial=0)) / step
        )
        largest = float(np.max(diff, initial=0.0))
        worst, rel_worst = max(worst, largest), max(rel_worst, largest / (scale or 1.0))
        if not failure and (largest > bound or not np.isfinite(largest)):
            at = tuple(int(j) for j in np.unravel_index(np.argmax(diff), diff.shape))
            failure = (
                f"output {k}: max |jvp - fd| = {largest:.3g} > {bound:.3g} at {at} "
                f"(jvp {np.asarray(jt)[at]}, fd {fd[at]:.6g})"
            )
    comparison = Comparison(not failure, worst, rel_worst, failure)
    label = f"rtol={fd_rtol(dtype):g} h={step:.1e}"
    return subject.judged("jvp_vs_fd", backend, comparison, case, label)


def linear_inputs(subject: Subject, backend: str) -> tuple[list[int], str]:
    """Inputs whose transpose the primitive needs, and how they were found.

    ``subject.linear_argnums`` wins when given. With a JVP rule they are the operand
    positions where tangents reach the primitive itself in the linearized program
    (a tangent rule written with ``jnp`` needs no transpose of the primitive).
    Without one, a floating input counts when ``f(2x) = 2 f(x)`` and
    ``f(x + y) = f(x) + f(y)`` hold for random ``y``.
    """
    if subject.linear_argnums is not None:
        return list(subject.linear_argnums), "linear_argnums"
    prim = subject.kernel.primitive
    if jc.has_jvp_rule(prim):
        found: set[int] = set()
        for i in subject.float_inputs():
            f = _Input(subject, backend, i)
            x = subject.args[i]
            with jax.default_device(subject.device):
                _, linear_fn = jax.linearize(f, x)
                found |= jc.linear_operand_positions(linear_fn, x, prim)
        return sorted(found), "tangents reaching the primitive in its JVP"
    linear = []
    for i in subject.float_inputs():
        f = _Input(subject, backend, i)
        x = subject.args[i]
        y = subject.random_like(x, salt=200 + i)
        with jax.default_device(subject.device):
            fx, fy, f2x, fxy = _run(f, x), _run(f, y), _run(f, 2 * x), _run(f, x + y)
        sums = [a + b for a, b in zip(fx, fy, strict=True)]
        if fx and _close(f2x, [2 * a for a in fx]) and _close(fxy, sums):
            linear.append(i)
    return linear, "numeric linearity test"


def _close(got: list[np.ndarray], want: list[np.ndarray]) -> bool:
    from ..benchmark.tolerance import compare_outputs, tolerance_for

    tols = []
    for g in got:
        base = tolerance_for(g.dtype)
        tols.append(type(base)(10 * base.rtol, 10 * base.atol))
    return compare_outputs(got, want, tols).ok


def _dot(a: Any, b: Any) -> complex:
    return complex(np.sum(np.asarray(a, np.complex128) * np.asarray(b, np.complex128)))


def _norm(a: Any) -> float:
    return float(np.linalg.norm(np.asarray(a, np.complex128).ravel()))


def check_transpose(
    subject: Subject, backend: str, linear: list[int]
) -> list[CheckResult]:
    """Dot-product test ``<ct, J t> = <J^T ct, t>`` for each linear input."""
    results = []
    for i in linear:
        x = subject.args[i]
        f = _Input(subject, backend, i)
        t = subject.random_like(x, salt=300 + i)
        case = f"input {i}"
        try:
            with jax.default_device(subject.device):
                jt = _run(f, t)
                cts = [subject.random_like(o, salt=400 + k) for k, o in enumerate(jt)]
                jtct = f.transpose(x, cts)
        except Exception as err:
            results.append(
                subject.failed("transpose", backend, case, detail=error_text(err))
            )
            continue
        lhs = sum(_dot(c, j) for c, j in zip(cts, jt, strict=True))
        rhs = _dot(jtct, t)
        scale = sum(_norm(c) * _norm(j) for c, j in zip(cts, jt, strict=True))
        scale += _norm(jtct) * _norm(t)
        results.append(
            _judge_dot(
                subject,
                "transpose",
                backend,
                case,
                x.dtype,
                lhs,
                rhs,
                scale,
                "<ct, J t>",
                "<J^T ct, t>",
            )
        )
    return results


def _judge_dot(subject, check, backend, case, dtype, lhs, rhs, scale, lname, rname):
    diff = abs(lhs - rhs)
    rel = diff / scale if scale else diff
    ok = rel <= dot_rtol(dtype)
    detail = "" if ok else f"{lname} = {_real(lhs):.8g} but {rname} = {_real(rhs):.8g}"
    comparison = Comparison(ok, diff, rel, detail)
    return subject.judged(check, backend, comparison, case, f"rtol={dot_rtol(dtype):g}")


def _real(z: complex) -> Any:
    return z.real if z.imag == 0 else z


def _loss(f: _Input, weights: list[Any]):
    def loss(v: Any, others: list[Any], weights: list[Any]) -> Any:
        outs = f.apply(v, others)
        return sum(
            jax.numpy.sum(w * o).real for w, o in zip(weights, outs, strict=True)
        )

    return loss


def _jvp_of_loss(f: _Input, x: Any, t: Any, weights: list[Any]) -> Any:
    loss = _loss(f, weights)

    def along(x: Any, t: Any, others: list[Any], weights: list[Any]) -> Any:
        return jax.jvp(lambda v: loss(v, others, weights), (x,), (t,))[1]

    return jax.jit(along)(x, t, f.others, weights)


def _grad_of_loss(f: _Input, x: Any, weights: list[Any]) -> np.ndarray:
    loss = _loss(f, weights)
    return np.asarray(jax.jit(jax.grad(loss))(x, f.others, weights))


def check_grad(subject: Subject, backend: str) -> list[CheckResult]:
    """``<grad L, t>`` equals the JVP of ``L`` along ``t``, per floating input."""
    results = []
    for i in subject.float_inputs():
        x = subject.args[i]
        case = f"input {i}"
        if np.iscomplexobj(np.zeros((), x.dtype)):
            results.append(
                subject.skipped("grad_vs_jvp", backend, "complex input", case)
            )
            continue
        f = _Input(subject, backend, i)
        t = subject.random_like(x, salt=600 + i)
        with jax.default_device(subject.device):
            weights = [
                subject.random_like(o, 500 + k) for k, o in enumerate(_run(f, x))
            ]
            try:
                along = _jvp_of_loss(f, x, t, weights)
            except Exception as err:
                results.append(
                    subject.failed("grad_vs_jvp", backend, case, detail=error_text(err))
                )
                continue
            try:
                grad = _grad_of_loss(f, x, weights)
            except Exception as err:
                reason = f"reverse mode unavailable: {error_text(err, 160)}"
                results.append(subject.skipped("grad_vs_jvp", backend, reason, case))
                continue
        lhs, rhs = _dot(grad, t), complex(np.asarray(along))
        scale = _norm(grad) * _norm(t) + abs(rhs)
        results.append(
            _judge_dot(
                subject,
                "grad_vs_jvp",
                backend,
                case,
                x.dtype,
                lhs,
                rhs,
                scale,
                "<grad, t>",
                "jvp(t)",
            )
        )
    return results
