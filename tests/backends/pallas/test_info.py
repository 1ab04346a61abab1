"""The Pallas rows of `polykernel info` (cheap checks, no compiling)."""

from __future__ import annotations

import jax

from polykernel.backends.pallas.info import pallas_gpu_report, pallas_rows
from polykernel.cli.info import _print_text, gather_info


def test_report_says_cpu_interpret_and_cuda_lowering_check():
    report = pallas_gpu_report(gpu=False)
    assert report["installed"] == f"jax {jax.__version__}"
    assert report["cpu_usable"] is True
    assert report["cpu_detail"].startswith("interpret mode")
    assert report["gpu_check"] is True  # jaxlib ships the Triton dialect
    assert report["gpu_check_detail"].startswith("lowers for cuda here")
    assert "Mosaic GPU" in report["gpu_check_detail"]
    assert report["gpu_usable"] is False
    assert report["gpu_detail"] == "no GPU visible to JAX"


def test_rows_in_gather_info_and_text(no_gpu):
    gpu_row, cpu_row = pallas_rows(gpu=False)
    assert gpu_row[:3] == ("pallas", "gpu", False)
    assert gpu_row[3].startswith(
        f"jax {jax.__version__}; no GPU visible to JAX; lowers for cuda here"
    )
    assert cpu_row[:3] == ("pallas", "cpu", True)
    table = {(r["backend"], r["platform"]): r for r in gather_info()["backends"]}
    assert table[("pallas", "cpu")]["usable"] is True
    assert table[("pallas", "gpu")]["detail"] == gpu_row[3]


def test_text_output_has_both_pallas_rows(capsys, no_gpu):
    _print_text(gather_info())
    out = capsys.readouterr().out
    assert f"  pallas      cpu          yes  jax {jax.__version__}; interpret" in out
    assert f"  pallas      gpu          no   jax {jax.__version__}; no GPU" in out
