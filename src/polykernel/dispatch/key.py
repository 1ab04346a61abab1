"""The key a call is looked up by: the device, the call's signature, its shape bucket.

The *signature* is the input dtypes and ranks and the categorical static keywords
(bools, strings, None and tuples of them); the shape *bucket* is, per input
dimension, ``ceil(log2(size))`` — or what the primitive's own function
(``op.def_tune_key``) returns, checked here: a tuple of ints, nothing else. A
call's launch parameters are never part of its key: they are what an entry decides.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import KernelTypeError
from ..settings.host import host_cpu
from .records import Key

__all__ = ["default_bucket", "device_identity", "make_key", "signature"]

#: A bucket longer than this is refused (it is a key, not data).
MAX_BUCKET = 64


def device_identity(platform: str) -> tuple[str, str]:
    """``(device kind, family)`` of the device a lowering for ``platform`` targets.

    CPU: the model with its core count, and the instruction set; GPU: the device
    kind and ``sm_<compute capability>``.

    Example:
        >>> from polykernel.dispatch import device_identity
        >>> device, family = device_identity("cpu")
        >>> "cores" in device
        True
    """
    if platform == "cpu":
        cpu = host_cpu()
        return f"{cpu.model} ({os.cpu_count()} cores)", cpu.family
    import jax

    try:
        device = jax.local_devices(backend=platform)[0]
    except RuntimeError:
        return "unknown", "unknown"
    capability = getattr(device, "compute_capability", None)
    family = (
        f"sm_{str(capability).replace('.', '')}" if capability else device.device_kind
    )
    return device.device_kind, family


def _categorical(value: Any) -> bool:
    if isinstance(value, bool | str) or value is None:
        return True
    if isinstance(value, tuple) and value:
        return all(_categorical(v) for v in value)
    return False


def signature(avals: Sequence[Any], params: Mapping[str, Any]) -> str:
    """Input dtypes and ranks and the categorical statics, as one canonical string."""
    ins = [f"{np.dtype(a.dtype).name}[{len(a.shape)}]" for a in avals]
    statics = {k: v for k, v in sorted(params.items()) if _categorical(v)}
    return json.dumps({"in": ins, "static": statics}, sort_keys=True)


def default_bucket(avals: Sequence[Any]) -> tuple[int, ...]:
    """Per input dimension, ``ceil(log2(size))`` (0 for sizes 0 and 1)."""
    return tuple(
        max(0, math.ceil(math.log2(d))) if d > 1 else 0 for a in avals for d in a.shape
    )


def checked_bucket(primitive: str, raw: Any) -> tuple[int, ...]:
    """What a ``def_tune_key`` function returned, as a tuple of ints.

    Raises:
        KernelTypeError: anything but a tuple or list of (NumPy or Python) ints —
            a string, None, a bool, a float (NaN and inf included) — or more than
            :data:`MAX_BUCKET` of them.
    """
    where = f"XLACustomKernel '{primitive}': the def_tune_key function returned"
    fix = "return a tuple of ints, e.g. (ins[0].shape[0] // 64,)"
    if not isinstance(raw, tuple | list):
        raise KernelTypeError(f"{where} {type(raw).__name__} {raw!r:.60}; {fix}.")
    if len(raw) > MAX_BUCKET:
        raise KernelTypeError(
            f"{where} {len(raw)} values (at most {MAX_BUCKET}); {fix}."
        )
    for item in raw:
        if isinstance(item, bool | np.bool_) or not isinstance(item, int | np.integer):
            raise KernelTypeError(
                f"{where} {raw!r:.60}, holding {type(item).__name__} {item!r}; {fix}."
            )
    return tuple(int(b) for b in raw)


def make_key(
    primitive: str,
    platform: str,
    avals: Sequence[Any],
    outs: Sequence[Any],
    params: Mapping[str, Any],
    bucketer: Callable[..., Any] | None = None,
    tuned_names: Collection[str] = (),
    device: tuple[str, str] | None = None,
) -> Key:
    """The key a call with input ``avals`` and static ``params`` looks up (the
    keywords in ``tuned_names``, launch parameters, are not part of it) on
    ``device`` (``(kind, family)``; default: this process's, see
    :func:`device_identity`; in a ``jax.distributed`` job, the job's)."""
    statics = {k: v for k, v in params.items() if k not in tuned_names}
    kind, family = device_identity(platform) if device is None else device
    if bucketer is None:
        bucket = default_bucket(avals)
    else:
        raw = bucketer(ins=tuple(avals), outs=tuple(outs), **statics)
        bucket = checked_bucket(primitive, raw)
    return Key(primitive, platform, kind, family, signature(avals, statics), bucket)
