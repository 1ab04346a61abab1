"""The Pallas entries of `polykernel info` (cheap checks, no compiling)."""

from __future__ import annotations

import jax

from polykernel.cli.info import gather_info
from polykernel.cli.info_pallas import pallas_backend_rows, pallas_gpu_report


def test_report_says_cpu_interpret_and_cuda_lowering_check():
    report = pallas_gpu_report(gpu=False)
    assert report["backend"] == "pallas"
    assert report["installed"] == f"jax {jax.__version__} (Pallas is part of jax)"
    assert report["cpu_usable"] is True
    assert report["cpu_detail"].startswith("interpret mode")
    assert report["gpu_check"] is True  # jaxlib ships the Triton dialect
    assert report["gpu_check_detail"].startswith(
        "lowers for cuda with Pallas' Triton backend"
    )
    assert "Mosaic GPU" in report["gpu_check_detail"]
    assert report["gpu_usable"] is False
    assert report["gpu_detail"] == "no GPU visible to JAX"


def test_backend_rows_and_gather_info():
    rows = pallas_backend_rows(gpu=False)
    assert [(r[0], r[1], r[2]) for r in rows] == [
        ("pallas", "cpu", True),
        ("pallas", "gpu/tpu", False),
    ]
    info = gather_info()
    assert info["gpu_backends"][0] == pallas_gpu_report(gpu=False)
    table = {(r["backend"], r["platform"]): r["usable"] for r in info["backends"]}
    assert table[("pallas", "cpu")] is True


def test_text_output_has_the_pallas_gpu_backend_block(capsys):
    from polykernel.cli.info import _print_text

    _print_text(gather_info())
    out = capsys.readouterr().out
    assert "GPU backends (installed / usable on CPU here / GPU build check here)" in out
    assert f"  pallas      jax {jax.__version__} (Pallas is part of jax)" in out
    assert "on CPU:    yes, interpret mode" in out
    assert "GPU check: yes, lowers for cuda with Pallas' Triton backend" in out
    assert "GPU run:   no, no GPU visible to JAX" in out
