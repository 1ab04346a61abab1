"""What a backend's hooks return is checked by the core, for every backend.

- ``emit`` (in ``BackendKernel``): one JAX array per output of ``outs``, of its shape
  and dtype — on its own, under ``jit`` and inside a primitive;
- ``translate_error`` (in ``BackendKernel``): an exception or None; raising or junk
  keeps the kernel's own error in the message;
- ``usable`` and ``info_rows`` (in the backend table, ``polykernel info``):
  ``(bool, str)`` and rows of ``(str, str, bool, str)``; a broken one is a row saying
  which hook broke, the other rows and backends are kept.

Anything else is a ``BackendHookError`` (a ``TypeError``) naming the kernel, the
backend and the hook, with the hook's own exception chained.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import polykernel as pk
from polykernel.backends.rows import checked_info_rows, checked_usable

pytest_plugins = ("plugin_support",)  # its fixtures: isolated_table, entry_points

NAME = "pk_hook_test"
SPEC = jax.ShapeDtypeStruct((4,), jnp.float32)
X = jnp.arange(4, dtype=jnp.float32)


class HookKernel(pk.BackendKernel):
    """A plugin's kernel whose ``emit`` returns ``result(x)``."""

    backend = NAME

    def __init__(
        self,
        result: Callable[[Any], Any],
        outs: Any = SPEC,
        translate: Callable[[Exception], Any] | None = None,
    ) -> None:
        super().__init__("hook_kernel", "k", outs, platforms=("cpu",))
        self.result = result
        self.translate = translate

    def emit(self, platform, arrays, scalars, outs):
        return self.result(arrays[0])

    def translate_error(self, err):
        return None if self.translate is None else self.translate(err)


HEAD = r"hook_kernel 'k': backend 'pk_hook_test' hook HookKernel\.emit\(cpu\)"
# (what emit returns for x = float32[4] with outs=float32[4], the message after HEAD)
EMIT = {
    "two_for_one": (lambda x: [x, x], r"returned 2 value\(s\) for 1 output\(s\) "
                    r"\(outs=\[float32\[4\]\]\); it must return exactly one JAX "
                    r"array per output, in the order of outs\."),
    "none": (lambda x: None, r"returned NoneType None; it must return a list with "
             r"one JAX array per output of outs=\[float32\[4\]\] \(e\.g\. \[y\] "
             r"for one output\)\."),
    "empty": (lambda x: [], r"returned 0 value\(s\) for 1 output\(s\)"),
    "bare_array": (lambda x: x, r"returned float32\[4\]; it must return a list"),
    "string": (lambda x: "y", r"returned str 'y'; it must return a list"),
    "short": (lambda x: [x[:2]], r"returned float32\[2\] for output 0, declared "
              r"outs\[0\]=float32\[4\]; it must return an array of the declared "
              r"shape and dtype"),
    "int32": (lambda x: [x.astype(jnp.int32)], r"returned int32\[4\] for output 0"),
    "none_value": (lambda x: [None], r"returned NoneType None for output 0"),
    "object_array": (lambda x: [np.array(None, dtype=object)],
                     r"returned object\[\] for output 0"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(EMIT))
@pytest.mark.parametrize("how", ["eager", "jit"])
def test_emit_results_are_checked_on_a_standalone_kernel(case, how):
    result, message = EMIT[case]
    kernel = HookKernel(result)
    call = kernel if how == "eager" else jax.jit(kernel)
    with pytest.raises(pk.BackendHookError, match=f"^{HEAD} {message}"):
        call(X)


@pytest.mark.parametrize("case", list(EMIT))
def test_emit_results_are_checked_inside_a_primitive(isolated_table, case):
    result, message = EMIT[case]
    pk.register_backend(pk.Backend(name=NAME))
    op = pk.XLACustomKernel(f"test_hook_results.{case}")
    op.def_kernel(NAME, "cpu", lambda outs, **kw: HookKernel(result, outs[0]))
    with pytest.raises(pk.KernelCompilationError,
                       match=rf"the '{NAME}' kernel .* \(BackendHookError: "
                             rf"{HEAD} {message}") as info:  # fmt: skip
        op(X, outs=[SPEC])
    assert isinstance(info.value.__cause__, pk.BackendHookError)


def test_a_right_result_passes_for_several_outputs():
    outs = [SPEC, jax.ShapeDtypeStruct((2,), jnp.int32)]
    kernel = HookKernel(lambda x: (x * 2, x[:2].astype(jnp.int32)), outs)
    a, b = kernel(X)
    np.testing.assert_allclose(a, 2 * np.arange(4))
    assert b.dtype == jnp.int32 and b.shape == (2,)
    with pytest.raises(pk.BackendHookError, match=r"returned float32\[4\] for output "
                       r"1, declared outs\[1\]=int32\[2\]"):  # fmt: skip
        HookKernel(lambda x: [x, x], outs)(X)


def _failing(err: Exception) -> Callable[[Any], Any]:
    def emit(x: Any) -> Any:
        raise err

    return emit


KERNEL_ERROR = r"the kernel's error was RuntimeError: the kernel's real error"
TRANSLATE = r"hook_kernel 'k': backend 'pk_hook_test' hook HookKernel\.translate_error"


def _raise(err: Exception) -> Any:
    raise ValueError("the translator broke")


# (what translate_error does, the message after TRANSLATE, the chained exception)
TRANSLATE_CASES = {
    "raises": (_raise, rf"raised ValueError: the translator broke; {KERNEL_ERROR}\. "
               r"translate_error must return an exception to raise, or None\.",
               ValueError),
    "string": (lambda err: "failed", r"returned str 'failed'; it must return an "
               rf"Exception instance to raise, or None; {KERNEL_ERROR}\.",
               RuntimeError),
    "class": (lambda err: RuntimeError, r"returned type <class 'RuntimeError'>; it "
              rf"must return an Exception instance.*{KERNEL_ERROR}", RuntimeError),
    "number": (lambda err: 5, rf"returned int 5; .*{KERNEL_ERROR}", RuntimeError),
    "base_exception": (lambda err: KeyboardInterrupt(), r"returned KeyboardInterrupt "
                       rf"KeyboardInterrupt\(\); .*{KERNEL_ERROR}", RuntimeError),
}  # fmt: skip


@pytest.mark.parametrize("case", list(TRANSLATE_CASES))
def test_a_broken_translate_error_keeps_the_kernels_error(case):
    translate, message, cause = TRANSLATE_CASES[case]
    kernel = HookKernel(_failing(RuntimeError("the kernel's real error")),
                        translate=translate)  # fmt: skip
    with pytest.raises(pk.BackendHookError, match=f"^{TRANSLATE} {message}") as info:
        kernel(X)
    assert type(info.value.__cause__) is cause


def test_a_good_translate_error_is_raised_from_the_kernels_error():
    def real() -> Exception:
        return RuntimeError("the kernel's real error")

    kernel = HookKernel(_failing(real()),
                        translate=lambda err: pk.KernelExecutionError("translated"))
    with pytest.raises(pk.KernelExecutionError, match=r"^translated$") as info:
        kernel(X)
    assert isinstance(info.value.__cause__, RuntimeError)
    for same in (lambda err: None, lambda err: err):  # raised as it is
        with pytest.raises(RuntimeError, match=r"^the kernel's real error") as info:
            HookKernel(_failing(real()), translate=same)(X)
        assert type(info.value) is RuntimeError


# -- usable and info_rows: the backend table, polykernel info -------------------------
class Usable(pk.Backend):
    def usable(self, platform, gpu=False):
        return self.answer(platform)  # type: ignore[attr-defined]


def _probe_failed(platform: str) -> Any:
    raise RuntimeError("probe failed")


USABLE_HEAD = (r"backend 'pk_hook_usable' hook " + re.escape(__name__)
               + r"\.Usable\.usable\('cpu', gpu=False\)")  # fmt: skip
USABLE = {
    "raises": (_probe_failed, r"raised RuntimeError: probe failed; it must return "
               r"\(usable: bool, detail: str\), reporting what is missing as "
               r"\(False, reason\)\."),
    "none": (lambda p: None, r"returned NoneType None; expected a tuple \(usable: "
             r"bool, detail: str\)\."),
    "one_item": (lambda p: (True,), r"returned tuple \(True,\); expected a tuple"),
    "str_flag": (lambda p: ("yes", "ok"), r"returned tuple \('yes', 'ok'\)"),
    "list": (lambda p: [True, "ok"], r"returned list \[True, 'ok'\]"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(USABLE))
def test_a_broken_usable_is_a_row_of_polykernel_info(isolated_table, case):
    answer, message = USABLE[case]
    backend = Usable(name="pk_hook_usable", platforms=("cpu", "gpu"), summary="s")
    backend.answer = lambda p: (True, "fine") if p == "gpu" else answer(p)
    pk.register_backend(backend)
    with pytest.raises(pk.BackendHookError, match=f"^{USABLE_HEAD} {message}") as info:
        checked_usable(backend, "cpu", False)
    if case == "raises":
        assert isinstance(info.value.__cause__, RuntimeError)
    rows = [r for r in pk.backends.info_rows(gpu=False) if r[0] == "pk_hook_usable"]
    assert rows[1] == ("pk_hook_usable", "gpu", True, "fine")  # the other platform
    name, platform, usable, detail = rows[0]
    assert (name, platform, usable) == ("pk_hook_usable", "cpu", False)
    assert re.fullmatch(f"broken: {USABLE_HEAD} {message}.*", detail), detail
    assert {r[0] for r in pk.backends.info_rows(gpu=False)} >= {"numba", "jax_raw"}


class Rows(pk.Backend):
    def info_rows(self, gpu):
        return self.answer()  # type: ignore[attr-defined]


def _rows_failed() -> Any:
    raise RuntimeError("rows failed")


ROWS_HEAD = (r"backend 'pk_hook_rows' hook " + re.escape(__name__)
             + r"\.Rows\.info_rows\(gpu=False\)")
ROW = re.escape("(backend: str, platform: str, usable: bool, detail: str)")
ROWS = {
    "raises": (_rows_failed, rf"raised RuntimeError: rows failed; it must return a "
               rf"list of rows {ROW}\."),
    "none": (lambda: None, rf"returned NoneType None; expected a list of rows {ROW}\."),
    "string": (lambda: "rows", r"returned str 'rows'; expected a list of rows"),
    "short_row": (lambda: [("pk_hook_rows", "cpu", True)], r"returned, as row 0, "
                  rf"tuple \('pk_hook_rows', 'cpu', True\); expected {ROW}\."),
    "str_flag": (lambda: [("pk_hook_rows", "cpu", True, "ok"),
                          ("pk_hook_rows", "gpu", "no", "x")],
                 r"returned, as row 1, tuple \('pk_hook_rows', 'gpu', 'no', 'x'\)"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(ROWS))
def test_broken_info_rows_are_one_row_of_polykernel_info(isolated_table, case, no_gpu):
    answer, message = ROWS[case]
    backend = Rows(name="pk_hook_rows")
    backend.answer = answer
    pk.register_backend(backend)
    with pytest.raises(pk.BackendHookError, match=f"^{ROWS_HEAD} {message}") as info:
        checked_info_rows(backend, False)
    if case == "raises":
        assert isinstance(info.value.__cause__, RuntimeError)
    from polykernel.cli.info import gather_info

    rows = [r for r in gather_info()["backends"] if r["backend"] == "pk_hook_rows"]
    assert [(r["platform"], r["usable"]) for r in rows] == [("-", False)]
    assert re.fullmatch(f"broken: {ROWS_HEAD} {message}.*", rows[0]["detail"])
    assert any(r["backend"] == "jax_raw" for r in gather_info()["backends"])


def test_good_rows_pass_unchanged(isolated_table):
    backend = Rows(name="pk_hook_rows")
    backend.answer = lambda: [["pk_hook_rows", "cpu", True, "ok"]]
    assert checked_info_rows(backend, False) == [("pk_hook_rows", "cpu", True, "ok")]
