"""``check_kernel``: run every check family on every backend of every platform."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import jax
import numpy as np

from .. import _jax_compat as jc
from ..backends import reference_backends
from ..contract.outs import as_array, normalize_outs
from ..platforms import platform_of
from .autodiff import check_grad, check_jvp, check_transpose, linear_inputs
from .batching import check_vmap
from .forward import (
    check_abstract_eval,
    check_determinism,
    check_jit_vs_eager,
    check_reference,
)
from .options import check_options, linear_argnums_of, resolve_kernel, wanted_checks
from .report import CheckReport, CheckResult, KernelCheckError
from .subject import Subject, error_text

if TYPE_CHECKING:
    from ..core.primitive import XLACustomKernel
    from ..types import Outs

__all__ = ["CHECKS", "check_kernel", "present_platforms"]

#: Every check, in the order they run for each backend.
CHECKS = (
    "abstract_eval",
    "backend_vs_reference",
    "jit_vs_eager",
    "determinism",
    "vmap_vs_loop",
    "jvp_vs_fd",
    "transpose",
    "grad_vs_jvp",
)


def present_platforms() -> dict[str, Any]:
    """Our platform name -> the first JAX device of it, for devices present."""
    found: dict[str, Any] = {}
    for device in jc.all_devices():
        found.setdefault(platform_of(device.platform) or device.platform, device)
    return found


def _reference_outputs(subject, reference, backends, outputs) -> tuple[Any, str]:
    """(reference outputs, label) on one platform.

    Without a usable reference the outputs are ``None`` and the label is the reason;
    it starts with ``"!"`` when the reference the caller chose failed (a failure of
    every comparison, not a skip).
    """
    if callable(reference):
        try:
            with jax.default_device(subject.device):
                result = reference(*subject.args, **subject.kwargs)
        except Exception as err:
            return None, f"!the reference function raised {error_text(err)}"
        return [np.asarray(r) for r in jax.tree.leaves(result)], "reference function"
    name = reference
    if name is None:
        registered = subject.kernel.available_backends(subject.platform)
        references = reference_backends()
        name = next((b for b in registered if b in references), None)
    if name is None:  # no reference: compare backends with the first one
        name = next((b for b in backends if outputs.get(b) is not None), None)
        if name is None:
            return None, "no backend ran"
    if name not in outputs and name not in subject.kernel.available_backends(
        subject.platform
    ):
        return _reference_elsewhere(subject, name)
    if name not in outputs:
        try:
            outputs[name] = subject.eager(name)
        except Exception as err:
            return None, f"!reference backend '{name}' failed: {error_text(err)}"
    if outputs[name] is None:
        return None, f"reference backend '{name}' failed to run"
    return outputs[name], name


def _reference_elsewhere(subject, name: str) -> tuple[Any, str]:
    """The reference backend ``name`` run on another platform present here, for a
    platform it is not registered on (``jax_raw`` registered for the CPU only, the
    GPU's kernels compared with it): the outputs are numbers, wherever computed.
    The label names that platform."""
    for platform, device in present_platforms().items():
        if platform == subject.platform:
            continue
        if name not in subject.kernel.available_backends(platform):
            continue
        args = tuple(jax.device_put(np.asarray(a), device) for a in subject.args)
        there = dataclasses.replace(
            subject, platform=platform, device=device, args=args
        )
        try:
            return there.eager(name), f"{name} ({platform})"
        except Exception as err:
            return None, (
                f"!reference backend '{name}' failed on {platform}: {error_text(err)}"
            )
    return None, (
        f"!reference backend '{name}' is registered on no platform present here "
        f"(this one: {subject.platform}; present: {sorted(present_platforms())})"
    )


def _backend_checks(subject, backend, eager, reference, wanted) -> list[CheckResult]:
    out: list[CheckResult] = []
    prim = subject.kernel.primitive
    if "abstract_eval" in wanted:
        out.append(check_abstract_eval(subject, backend, eager))
    if "backend_vs_reference" in wanted:
        if reference[0] is None and reference[1].startswith("!"):
            reason = reference[1][1:]
            out.append(subject.failed("backend_vs_reference", backend, detail=reason))
        elif reference[0] is None:
            out.append(subject.skipped("backend_vs_reference", backend, reference[1]))
        elif reference[1] == backend:
            out.append(
                subject.skipped("backend_vs_reference", backend, "is the reference")
            )
        else:
            out.append(check_reference(subject, backend, eager, *reference))
    if "jit_vs_eager" in wanted:
        out.append(check_jit_vs_eager(subject, backend, eager))
    if "determinism" in wanted:
        out.append(check_determinism(subject, backend))
    if "vmap_vs_loop" in wanted:
        out += check_vmap(subject, backend)
    out += _derivative_checks(subject, backend, prim, wanted)
    return out


def _derivative_checks(subject, backend, prim, wanted) -> list[CheckResult]:
    out: list[CheckResult] = []
    no_float = not subject.float_inputs() or not subject.float_outputs()
    why = "no floating input or output" if no_float else ""
    has_jvp = jc.has_jvp_rule(prim)
    for check, available, fn, missing in (
        ("jvp_vs_fd", has_jvp, check_jvp, "no JVP rule (def_jvp_rule2 / def_jvp_rule)"),
        ("grad_vs_jvp", has_jvp, check_grad, "no JVP rule"),
    ):
        if check not in wanted:
            continue
        reason = why or ("" if available else missing)
        out += (
            [subject.skipped(check, backend, reason)]
            if reason
            else fn(subject, backend)
        )
    if "transpose" in wanted:
        out += _transpose_checks(subject, backend, prim, why)
    return out


def _transpose_checks(subject, backend, prim, why) -> list[CheckResult]:
    if why or not jc.has_transpose_rule(prim):
        reason = why or "no transpose rule (def_transpose_rule)"
        return [subject.skipped("transpose", backend, reason)]
    try:
        linear, how = linear_inputs(subject, backend)
    except Exception as err:
        return [subject.failed("transpose", backend, detail=error_text(err))]
    if not linear:
        return [subject.skipped("transpose", backend, f"no linear input ({how})")]
    return check_transpose(subject, backend, linear)


def check_kernel(
    kernel: XLACustomKernel | str,
    *args: Any,
    outs: Outs,
    reference: str | Callable[..., Any] | None = None,
    backends: Sequence[str] | None = None,
    atol: float | None = None,
    rtol: float | None = None,
    raise_on_failure: bool = True,
    linear_argnums: Sequence[int] | None = None,
    checks: Sequence[str] | None = None,
    **kwargs: Any,
) -> CheckReport:
    """Check a primitive the way ``torch.library.opcheck`` checks a custom op.

    On every platform present (with a kernel registered), for every backend: the
    abstract evaluation matches real outputs; outputs agree with the reference;
    ``jit`` agrees with eager; two runs are bit-identical; ``vmap`` agrees with a
    loop for every ``in_axes`` pattern; where a JVP rule exists, the JVP agrees with
    central finite differences and ``grad`` with ``jvp``; where a transpose rule
    exists, the dot-product test holds for every input the kernel is linear in.

    Args:
        kernel: An ``XLACustomKernel`` (or the name it is registered under).
        *args: Inputs, as for a call of ``kernel``.
        outs: The ``outs`` of the call.
        reference: A backend name, or ``reference(*args, **kwargs)`` returning
            outputs like ``outs``. Default: ``jax_raw`` when registered, else the
            first backend (the backends are compared with each other). A named
            backend not registered on a platform runs on another platform present
            where it is (``jax_raw`` on the CPU for GPU kernels; the row's case
            says ``vs jax_raw (cpu)``).
        backends: Only these backends (default: every registered one).
        atol: Replaces the per-dtype absolute float tolerance of output
            comparisons (defaults: float64 1e-10, float32 1e-5, float16 2e-3,
            bfloat16 2e-2; integers and booleans exact).
        rtol: Replaces the per-dtype relative float tolerance, likewise.
        raise_on_failure: Raise :class:`KernelCheckError` when a check fails.
        linear_argnums: Inputs the kernel is linear in, for the transpose test
            (default: floating inputs that pass a numeric linearity test).
        checks: Run only these checks (names in ``CHECKS``).
        **kwargs: Static parameters of the call.

    Returns:
        A :class:`CheckReport`; ``print(report)`` shows the table.

    Raises:
        KernelCheckError: (an ``AssertionError``) a check failed and
            ``raise_on_failure`` is true.

    Example:
        >>> import jax, jax.numpy as jnp, polykernel as pk
        >>> from polykernel.testing import check_kernel
        >>> op = pk.XLACustomKernel("doc.check_kernel")
        >>> op.def_jax_raw_kernel(lambda outs, **kw: lambda x: 2 * x)
        >>> spec = jax.ShapeDtypeStruct((4,), jnp.float32)
        >>> check_kernel(op, jnp.ones(4), outs=spec).ok
        True
    """
    kernel = resolve_kernel(kernel)
    wanted = wanted_checks(checks, CHECKS)
    check_options(kernel, reference, backends, atol, rtol, kwargs)
    # Bad `outs` or inputs are the caller's error: raise now, not a failed report.
    normalize_outs(f"XLACustomKernel '{kernel.name}'", outs)
    for i, a in enumerate(args):
        as_array(f"check_kernel('{kernel.name}')", i, a)
    results: list[CheckResult] = []
    ran_somewhere = False
    for platform, device in present_platforms().items():
        chosen = [
            b
            for b in kernel.available_backends(platform)
            if backends is None or b in backends
        ]
        if not chosen:
            continue
        ran_somewhere = True
        arrays = tuple(jax.device_put(np.asarray(a), device) for a in args)
        subject = Subject(
            kernel,
            arrays,
            outs,
            dict(kwargs),
            platform,
            device,
            rtol,
            atol,
            linear_argnums_of(kernel, linear_argnums, arrays),
        )
        results += _check_platform(subject, chosen, reference, wanted)
    if not ran_somewhere:
        from ..errors import KernelNotAvailableError

        raise KernelNotAvailableError(
            f"check_kernel('{kernel.name}'): no selected backend is registered on a "
            f"platform present here (devices: {sorted(present_platforms())}; backends: "
            f"{ {p: kernel.available_backends(p) for p in ('cpu', 'gpu', 'tpu')} }, "
            f"selected: {backends}). Run where a device of the kernel's platform is "
            f"visible, or register a kernel for one of the platforms present."
        )
    report = CheckReport(kernel.name, results)
    if raise_on_failure and not report.ok:
        raise KernelCheckError(report)
    return report


def _check_platform(subject, backends, reference, wanted) -> list[CheckResult]:
    results: list[CheckResult] = []
    outputs: dict[str, Any] = {}
    for backend in backends:
        try:
            outputs[backend] = subject.eager(backend)
        except Exception as err:
            outputs[backend] = None
            results.append(subject.failed("run", backend, detail=error_text(err)))
    ref: tuple[Any, str] = (None, "none")
    if "backend_vs_reference" in wanted:
        ref = _reference_outputs(subject, reference, backends, outputs)
    for backend in backends:
        if outputs[backend] is None:
            results.append(subject.skipped("all", backend, "the backend failed to run"))
            continue
        results += _backend_checks(subject, backend, outputs[backend], ref, wanted)
    return results
