"""Code a test's child process runs to see what Numba compiles in it.

``COUNT_COMPILES`` defines ``compiled``: the name of each Python function Numba's
dispatchers compiled after it ran, by any dispatcher (polykernel compiles a kernel
through a private copy of the user's, so the user's ``signatures`` stay empty).
"""

COUNT_COMPILES = """
from numba.core import event

compiled = []


class Compiles(event.Listener):
    def on_start(self, ev):
        compiled.append(ev.data["dispatcher"].py_func.__name__)

    def on_end(self, ev):
        pass


event.register("numba:compile", Compiles())
"""

#: The line of a child's code that :func:`counting_compiles` replaces.
MARKER = "# COUNT_COMPILES"


def counting_compiles(code: str) -> str:
    """``code`` (dedented) with its :data:`MARKER` line replaced by
    :data:`COUNT_COMPILES`."""
    lines = code.splitlines(keepends=True)
    (at,) = [i for i, line in enumerate(lines) if line.startswith(MARKER)]
    return "".join(lines[:at]) + COUNT_COMPILES + "".join(lines[at + 1 :])
