"""A fork server ("zygote"): scripts run in fresh processes without paying the imports.

Starting a Python process that imports NumPy, JAX, Numba and polykernel costs about
1.5 s of CPU on our 2-core test machine, and the docs pages and examples start
about 45 such processes per run (each block of a page in a process of its own,
``docs_pages.py``; each script of examples/). The zygote imports those packages
once and forks one child per script. The child gets its own working directory,
environment, stdout and stderr files, stdin from ``/dev/null``, ``sys.argv`` and
the script's folder as ``sys.path[0]``; it runs the script as ``__main__``
(``runpy``) and exits the way ``python SCRIPT`` does (an uncaught exception: its
traceback, exit 1). So each script still runs on its own, in a fresh process with
an empty namespace and no JAX backend or compiled program yet; all it shares with
the others is modules already imported.

Why forking is safe here (``_check_fork_safe``, before every fork; a failure is an
error, not a fallback): the zygote imports those packages and starts nothing: no
JAX backend (polykernel starts none at import), no Numba threading layer, one
thread. OpenBLAS's pool, started by NumPy's import, is shut down by OpenBLAS's own
``pthread_atfork`` handler at each fork and restarts lazily in a child that needs
it, so one empty fork is made at start, before counting.

What differs from a fresh ``python SCRIPT``: packages read some environment
variables at import, so a zygote serves one environment (``run_script`` starts
another for another environment; ``PER_CHILD`` variables aside), and a script that
set such a variable in ``os.environ`` before importing the package would not be
heard (none of ours does); the children share the zygote's ``str`` hash seed
(``PYTHONHASHSEED``: a test that needs another sets it, and gets another zygote).
A warning those imports print goes to the zygote's log, not to the script's
stderr. The zygote runs one child at a time: not for scripts meant to run at once.

``python zygote.py`` is the server (requests on stdin, replies on stdout, one JSON
line each); tests call ``run_script``.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

#: What the zygote imports before it forks: what the docs blocks and examples import.
PRELOAD = ("numpy", "jax", "jax.numpy", "numba", "polykernel")
#: Variables no package reads at import: a child gets the request's value, and a
#: zygote serves requests that differ only in these (pytest sets the first per test).
PER_CHILD = frozenset({"PYTEST_CURRENT_TEST"})


# -- the server ------------------------------------------------------------------


def _check_fork_safe() -> str | None:
    """Why forking now would be unsafe, or None."""
    import threading

    tasks = Path("/proc/self/task")
    threads = len(os.listdir(tasks)) if tasks.is_dir() else threading.active_count()
    if threads != 1 or threading.active_count() != 1:
        return f"the zygote has {threads} threads; fork needs one"
    from jax._src import xla_bridge

    if xla_bridge.backends_are_initialized():
        return "a JAX backend was started before fork"
    parallel = sys.modules.get("numba.np.ufunc.parallel")
    if getattr(parallel, "_is_initialized", False):
        return "Numba's threading layer was started before fork"
    return None


def _serve(requests, replies) -> dict | None:
    """Fork a child per request; return the request in the child, None at EOF."""

    def reply(**entry: object) -> None:
        replies.write((json.dumps(entry) + "\n").encode())

    for line in requests:
        request = json.loads(line)
        if (unsafe := _check_fork_safe()) is not None:
            reply(error=unsafe)
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            requests.close()
            replies.close()
            return request
        reply(pid=pid)
        _, status = os.waitpid(pid, 0)
        reply(returncode=os.waitstatus_to_exitcode(status))
    return None


def _become(request: dict) -> str:
    """In the child: the script's directory, files, argv and path; its path."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for fd, path, flags in (
        (0, os.devnull, os.O_RDONLY),
        (1, request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
        (2, request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
    ):
        opened = os.open(path, flags, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    script = request["argv"][0]
    sys.argv = list(request["argv"])
    sys.orig_argv = [sys.executable, *sys.argv]
    sys.path[0] = os.path.dirname(os.path.realpath(script))  # as `python SCRIPT`
    # What a fresh process would not have: directory listings the import system
    # cached (a test may have written a module since), and NumPy's global random
    # state (drawn at its import; `random` reseeds itself in a forked child).
    import importlib

    importlib.invalidate_caches()
    sys.modules["numpy"].random.seed()
    return script


def _server() -> None:
    # The protocol gets private descriptors; 0 and 1 become /dev/null and the log,
    # so nothing a package prints can break it.
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(2, 1)
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    # OpenBLAS shuts its thread pool down at fork (see the module docstring).
    if (pid := os.fork()) == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    unsafe = _check_fork_safe()
    replies.write(
        (json.dumps({"ready": unsafe is None, "error": unsafe}) + "\n").encode()
    )
    if unsafe is not None:
        return
    request = _serve(requests, replies)
    if request is None:
        return  # the client closed our stdin: this zygote's work is done
    import runpy

    runpy.run_path(_become(request), run_name="__main__")


# -- the client ------------------------------------------------------------------


class Zygote:
    """One server process, serving one environment, one script at a time."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = dict(env)
        # Its log is an unnamed file: nothing is left behind, and it is not the
        # descriptor pytest captures a test's stderr in when it starts.
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        self._proc = subprocess.Popen(
            [sys.executable, __file__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=_imported(self.env),
            bufsize=0,
        )
        self._buffer = b""
        ready = self._read(timeout=300)
        if not ready.get("ready"):
            self.close()
            raise RuntimeError(f"the zygote cannot fork safely: {ready['error']}")

    def alive(self) -> bool:
        return self._proc.poll() is None

    def serves(self, env: dict[str, str]) -> bool:
        """Whether ``env`` is this zygote's but for ``PER_CHILD`` variables."""
        return _imported(env) == _imported(self.env)

    def run(
        self, argv: list[str], env: dict[str, str], cwd: str | Path, timeout: float
    ) -> subprocess.CompletedProcess:
        """Run ``python *argv`` in a forked child; like ``subprocess.run`` with
        ``capture_output=True, text=True``."""
        assert self.serves(env)
        with tempfile.TemporaryDirectory(prefix="polykernel-zygote-") as tmp:
            out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
            request = {"argv": argv, "cwd": str(cwd), "env": env}
            request |= {"stdout": str(out), "stderr": str(err)}
            assert self._proc.stdin is not None
            self._proc.stdin.write((json.dumps(request) + "\n").encode())
            started = self._read(timeout=60)
            if "error" in started:
                raise RuntimeError(f"the zygote refused to fork: {started['error']}")
            try:
                ended = self._read(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.kill(started["pid"], signal.SIGKILL)
                self._read(timeout=60)
                raise subprocess.TimeoutExpired(
                    argv, timeout, _text(out).encode(), _text(err).encode()
                ) from None
            return subprocess.CompletedProcess(
                [sys.executable, *argv], ended["returncode"], _text(out), _text(err)
            )

    def close(self) -> None:
        if self._proc.poll() is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()  # EOF: the server returns
            try:
                self._proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._log.close()

    def _read(self, timeout: float) -> dict:
        """The server's next reply line (our own buffer: ``select`` cannot see what
        a buffered reader already holds)."""
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buffer:
            if not select.select([fd], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(["zygote"], timeout)
            chunk = os.read(fd, 65536)
            if not chunk:
                self._log.seek(0)
                log = self._log.read().decode(errors="replace")[-4000:]
                raise RuntimeError(f"the zygote exited; its log:\n{log}")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return json.loads(line)


def _imported(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in PER_CHILD}


def _text(path: Path) -> str:
    # As subprocess's text mode reads it: locale encoding, universal newlines.
    return path.read_text() if path.exists() else ""


_current: Zygote | None = None


def run_script(
    script: str | Path,
    *args: str,
    env: dict[str, str],
    cwd: str | Path | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess:
    """``subprocess.run([python, script, *args], env=env, cwd=cwd,
    capture_output=True, text=True, timeout=timeout)`` in a child of this test
    process's zygote (started on first use, and again when ``env`` changes)."""
    global _current
    if _current is not None and not (_current.alive() and _current.serves(env)):
        _current.close()
        _current = None
    if _current is None:
        _current = Zygote(env)
        atexit.register(_current.close)
    argv = [str(script), *map(str, args)]
    return _current.run(argv, env, os.getcwd() if cwd is None else cwd, timeout)


if __name__ == "__main__":
    _server()
