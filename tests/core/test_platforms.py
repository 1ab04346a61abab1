"""The three platform vocabularies and the conversions between them."""

from __future__ import annotations

import pytest

from polykernel.platforms import (
    PLATFORMS,
    LoweringPlatform,
    Platform,
    XlaPlatform,
    lowering_platforms,
    platform_of,
    xla_platform,
)


def test_each_vocabulary_is_a_named_type_whose_members_are_their_strings():
    assert PLATFORMS == ("cpu", "gpu", "tpu")
    assert Platform.GPU == "gpu" and f"{Platform.GPU}" == "gpu"
    assert [p.value for p in LoweringPlatform] == ["cpu", "cuda", "rocm", "tpu"]
    assert [p.value for p in XlaPlatform] == ["cpu", "CUDA", "ROCM"]


@pytest.mark.parametrize(
    ("ours", "lowerings"),
    [("cpu", ["cpu"]), ("gpu", ["cuda", "rocm"]), ("tpu", ["tpu"])],
)
def test_our_platform_covers_jax_lowering_platforms(ours, lowerings):
    assert [p.value for p in lowering_platforms(ours)] == lowerings
    assert all(platform_of(low) == ours for low in lowerings)


@pytest.mark.parametrize(
    ("spelling", "ours", "xla"),
    [
        ("cpu", "cpu", "cpu"),
        ("host", "cpu", "cpu"),
        ("gpu", "gpu", "CUDA"),
        ("cuda", "gpu", "CUDA"),
        ("CUDA", "gpu", "CUDA"),
        ("rocm", "gpu", "ROCM"),
        ("ROCM", "gpu", "ROCM"),
        ("tpu", "tpu", None),
        ("metal", None, None),
    ],
)
def test_every_spelling_converts_to_ours_and_to_xlas(spelling, ours, xla):
    assert platform_of(spelling) == ours
    assert xla_platform(spelling) == xla


def test_unknown_or_non_string_names_convert_to_none_and_bad_ours_raise():
    assert platform_of(3) is None and xla_platform(None) is None
    with pytest.raises(ValueError):
        lowering_platforms("cuda")
