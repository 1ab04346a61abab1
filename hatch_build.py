"""Build hook: compile polykernel's runtime library into the package at install.

``pip install`` (a wheel, or ``-e`` into the checkout) runs it. The library is what
a machine's first Numba kernel would otherwise wait for (one C compile); built here,
an empty cache adopts it (``polykernel.native.runtime``). Its recipe is read from
``src/polykernel/native/runtime_recipe.py``, loaded by path: the build environment
has neither JAX nor polykernel. Without a C compiler, or when the compile fails,
the install goes on and the library is built at first use, as before.

``python hatch_build.py`` runs the same build into the checkout it sits in, with no
hatchling: what a suite run from the source tree without an install needs (the GPU
machines' ``make test-gpu``, which installs nothing).
"""

from __future__ import annotations

import importlib.util
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

try:
    from hatchling.builders.hooks.plugin.interface import BuildHookInterface
except ModuleNotFoundError:  # run as a script: the build alone, no hook
    BuildHookInterface = None

RECIPE = Path("src") / "polykernel" / "native" / "runtime_recipe.py"


def _recipe(root: Path) -> Any:
    spec = importlib.util.spec_from_file_location("_pk_runtime_recipe", root / RECIPE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _compiler() -> str | None:
    # The same search as polykernel.native.link.find_linker.
    for name in filter(None, (os.environ.get("CC"), "cc", "gcc", "clang")):
        found = shutil.which(name)
        if found:
            return os.path.abspath(found)
    return None


def build_runtime(root: Path) -> str | None:
    """Compile the runtime library into the package; None, or why it was not."""
    recipe = _recipe(root)
    compiler = _compiler()
    if compiler is None:
        return "no C compiler ($CC, cc, gcc, clang)"
    with tempfile.TemporaryDirectory(prefix="polykernel-runtime-") as tmp:
        src, out = os.path.join(tmp, "runtime.c"), os.path.join(tmp, "lib.so")
        Path(src).write_text(recipe.source())
        try:
            done = subprocess.run(
                recipe.command(compiler, src, out),
                capture_output=True, text=True, timeout=300,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as err:
            return f"{compiler} did not run: {err}"
        if done.returncode != 0:
            return f"{compiler} failed:\n{done.stderr[-2000:]}"
        # machine: as polykernel.ffi.artefact.machine() names it
        machine = f"{platform.machine().lower()}-{sys.platform}"
        recipe.write_shipped(Path(out).read_bytes(), machine)
    return None


def _say_not_built(why_not: str) -> None:
    print(f"polykernel: runtime library not built at install ({why_not}); "
          "it is built at first use.", file=sys.stderr)  # fmt: skip


if BuildHookInterface is not None:

    class RuntimeLibraryHook(BuildHookInterface):
        PLUGIN_NAME = "custom"

        def initialize(self, version: str, build_data: dict[str, Any]) -> None:
            if self.target_name != "wheel":
                return
            why_not = build_runtime(Path(self.root))
            if why_not is not None:
                _say_not_built(why_not)
                return
            build_data["artifacts"].append("src/polykernel/native/runtime/shipped/*")
            if version == "standard":  # machine code, no Python ABI: py3-none-<os>
                from packaging.tags import sys_tags

                build_data["pure_python"] = False
                build_data["tag"] = f"py3-none-{next(iter(sys_tags())).platform}"


if __name__ == "__main__":
    # As an install would: a failed build is said, not an error (first use builds it).
    root = Path(__file__).resolve().parent
    why_not = build_runtime(root)
    if why_not is None:
        print(
            "polykernel: runtime library built into", root / RECIPE.parent / "runtime"
        )
    else:
        _say_not_built(why_not)
