"""A fork server ("zygote"): scripts run in fresh processes without paying the imports.

Starting a Python process that imports NumPy, JAX, Numba and polykernel costs about
1.5 s of CPU on our 2-core test machine, and the docs pages and examples start about
45 such processes per run (each block of a page in a process of its own,
``docs_pages.py``; each script of examples/). The zygote imports those packages once
and forks one child per script. The child gets its own working directory,
environment, stdout and stderr files, stdin from ``/dev/null`` (or the text given),
``sys.argv`` and the script's folder as ``sys.path[0]``; it runs the script as
``__main__`` (``runpy``) and exits the way ``python SCRIPT`` does (an uncaught
exception: its traceback, exit 1). So each script still runs on its own, in a fresh
process with an empty namespace and no JAX backend or compiled program yet; all it
shares with the others is modules already imported.

Why forking is safe here (``_check_fork_safe``, before every fork; a failure is an
error, not a fallback): the zygote imports those packages and starts nothing: no
JAX backend (polykernel starts none at import), no Numba threading layer, one
thread. OpenBLAS's pool, started by NumPy's import, is shut down by OpenBLAS's own
``pthread_atfork`` handler at each fork and restarts lazily in a child that needs
it, so one empty fork is made at start, before counting.

What differs from a fresh ``python SCRIPT``: packages read some environment
variables at import, so a zygote serves one environment (``run_script`` starts
another for another environment; :func:`per_child` variables aside), and a script that
set such a variable in ``os.environ`` before importing the package would not be
heard (none of ours does); the children share the zygote's ``str`` hash seed
(``PYTHONHASHSEED``: a test that needs another sets it, and gets another zygote).
A warning those imports print goes to the zygote's log, not to the script's
stderr. ``run`` waits for its child; ``start`` returns at once, for children meant
to run at the same time (:class:`Child`, a ``subprocess.Popen`` of the zygote's).
The children share its memory layout too (libraries it loaded are at the same
addresses in each): a test of what loads in *another* process starts a real one.
The zygote freezes what it imported (``gc.freeze``): a child's collections skip it.
A zygote that imports Numba compiles one small function first (``_warm_numba``):
Numba's one-off set-up of its compiler is then not paid again by each child.

Two kinds of zygote (:data:`PRELOADS`): ``full`` for the docs pages and examples,
and ``jax`` (no Numba) for commands and child scripts that tests start one after
another: ``python -m polykernel.cli ...``, ``python -c CODE`` (:func:`run`), or at
once (:func:`start`: processes racing on one cache, a ``jax.distributed`` job).
Either serves requests whatever their ``POLYKERNEL_*``, ``WARP_*``, ``TRITON_*``,
``TEST_*`` (our child scripts' settings), ``CC``, ``CXX`` and ``PYTHONPATH``, a
``jax`` one whatever their ``NUMBA_*`` too (:func:`per_child`): no package it
imported reads them at import (``tests/docs/test_zygote.py`` traces that), and a
child's ``sys.path`` is rebuilt from its own ``PYTHONPATH`` as Python
would; but only a ``PYTHONPATH`` that starts Python with the zygote's own
``sitecustomize`` (the run's, or none): Python imports it at start-up. Not for
what a fresh interpreter itself is tested for: what importing a module imports or
starts, or an identity that must hold across hash seeds.

``python zygote.py KIND`` is the server (requests on stdin, replies on stdout, one
JSON line each); tests call ``run_script``, ``run`` or ``start``.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

#: What each kind of zygote imports before it forks: ``full``, what the docs blocks
#: and examples import; ``jax``, all but Numba (a child imports it under its own
#: ``NUMBA_*`` settings).
PRELOADS = {
    "full": ("numpy", "jax", "jax.numpy", "numba", "polykernel"),
    "jax": ("numpy", "jax", "jax.numpy", "polykernel"),
}
#: Variables no package reads at import: a child gets the request's value, and a
#: zygote serves requests that differ only in these (pytest sets the first per test).
PER_CHILD = frozenset({"PYTEST_CURRENT_TEST", "CC", "CXX"})
#: Beyond those, by kind: prefixes of variables its preload does not read at import
#: (pinned by a test that traces every read), and ``PYTHONPATH`` (see ``_path``).
_LAZY = {
    "full": ("POLYKERNEL_", "WARP_", "TRITON_", "TEST_"),
    "jax": ("POLYKERNEL_", "WARP_", "TRITON_", "TEST_", "NUMBA_"),
}


def per_child(name: str, kind: str) -> bool:
    """Whether a ``kind`` zygote gives each child its own value of variable ``name``."""
    return name in PER_CHILD or name == "PYTHONPATH" or name.startswith(_LAZY[kind])


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
    """Fork a child per request and reply its pid; return the request in the
    child, None at EOF. A ``reap`` request waits for that child and replies its exit
    status (the client asks once the child has exited: it watches it through a
    pidfd, and the children of several requests run at the same time)."""

    def reply(**entry: object) -> None:
        replies.write((json.dumps(entry) + "\n").encode())

    for line in requests:
        request = json.loads(line)
        if "reap" in request:
            _, status = os.waitpid(request["reap"], 0)
            reply(returncode=os.waitstatus_to_exitcode(status))
            continue
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
    return None


def _entries(pythonpath: str | None) -> list[str]:
    """``sys.path``'s entries from ``PYTHONPATH``, as Python's start-up makes them."""
    return [os.path.abspath(p) for p in (pythonpath or "").split(os.pathsep) if p]


def _site(pythonpath: str | None) -> str | None:
    """The ``sitecustomize`` module a Python started with ``pythonpath`` imports
    from one of its entries (None: none there; one elsewhere is every zygote's)."""
    for entry in _entries(pythonpath):
        for name in ("sitecustomize.py", os.path.join("sitecustomize", "__init__.py")):
            if os.path.isfile(os.path.join(entry, name)):
                return os.path.join(entry, name)
    return None


def _path(first: str, pythonpath: str | None) -> None:
    """``sys.path`` as ``python`` started with ``pythonpath`` makes it: ``first``
    (the script's folder, the working directory for ``-m``, ``""`` for ``-c``),
    those entries, then the rest as the zygote started (checked at its start)."""
    ours = _entries(os.environ.get("PYTHONPATH"))
    sys.path[: 1 + len(ours)] = [first, *_entries(pythonpath)]


def _become(request: dict) -> tuple[str, str]:
    """In the child: the request's directory, files, argv, environment and path;
    how to run it (``script``, ``module`` or ``code``) and what."""
    os.chdir(request["cwd"])  # first: a script's path may be relative to it
    argv = list(request["argv"])
    if argv[0] == "-m":
        how, what, argv = "module", argv[1], argv[1:]  # runpy sets argv[0]
        first = os.path.realpath(request["cwd"])
    elif argv[0] == "-c":
        how, what, argv = "code", argv[1], ["-c", *argv[2:]]
        first = ""
    else:
        how, what = "script", argv[0]
        first = os.path.dirname(os.path.realpath(argv[0]))
    _path(first, request["env"].get("PYTHONPATH"))
    os.environ.clear()
    os.environ.update(request["env"])
    for fd, path, flags in (
        (0, request.get("stdin") or os.devnull, os.O_RDONLY),
        (1, request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
        (2, request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
    ):
        if fd == 2 and path == request["stdout"]:
            os.dup2(1, 2)  # one file, one offset: as ``stderr=subprocess.STDOUT``
            continue
        opened = os.open(path, flags, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    sys.argv = argv
    sys.orig_argv = [sys.executable, *request["argv"]]
    # What a fresh process would not have: directory listings the import system
    # cached (a test may have written a module since), a temporary directory chosen
    # under the zygote's TMPDIR, and NumPy's global random state (drawn at its
    # import; `random` reseeds itself in a forked child).
    import importlib

    importlib.invalidate_caches()
    tempfile.tempdir = None
    sys.modules["numpy"].random.seed()
    return how, what


def _run(how: str, what: str) -> None:
    """Run the request as ``python`` does: a script or module under ``runpy``, code
    in the ``__main__`` module's namespace."""
    import runpy

    if how == "script":
        runpy.run_path(what, run_name="__main__")
    elif how == "module":
        runpy.run_module(what, run_name="__main__", alter_sys=True)
    else:  # a new __main__: the zygote's names are not the code's
        import builtins
        import types

        main = sys.modules["__main__"] = types.ModuleType("__main__")
        main.__builtins__ = builtins
        exec(compile(what, "<string>", "exec"), main.__dict__)


def _warm_numba() -> None:
    """Compile one small function, in memory: what Numba sets up at a process's
    first compile (its compiler pipeline, LLVM's target, typing of arrays: ~0.5 s of
    CPU) is then done once here instead of in every child that compiles a kernel.
    Starts no thread (a serial loop; ``_check_fork_safe`` counts them after), writes
    nothing (no ``cache=True``); a child's own kernels compile as in a fresh process."""
    import numba
    import numpy as np

    @numba.njit
    def dot(x, y):
        total = 0.0
        for i in range(x.shape[0]):
            total += x[i] * y[i]
        return total

    dot(np.ones(2), np.ones(2))


def _server() -> None:
    # The protocol gets private descriptors; 0 and 1 become /dev/null and the log,
    # so nothing a package prints can break it.
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(2, 1)
    import importlib

    for name in PRELOADS[sys.argv[1] if len(sys.argv) > 1 else "full"]:
        importlib.import_module(name)
    if "numba" in sys.modules:
        _warm_numba()
    # What was imported lives as long as any child: no child's collections
    # traverse it (or write to its pages, which the fork shares until then).
    gc.freeze()
    # OpenBLAS shuts its thread pool down at fork (see the module docstring).
    if (pid := os.fork()) == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    unsafe = _check_fork_safe()
    ours = _entries(os.environ.get("PYTHONPATH"))
    if unsafe is None and sys.path[1 : 1 + len(ours)] != ours:
        unsafe = f"sys.path does not start with PYTHONPATH's entries: {sys.path}"
    replies.write(
        (json.dumps({"ready": unsafe is None, "error": unsafe}) + "\n").encode()
    )
    if unsafe is not None:
        return
    request = _serve(requests, replies)
    if request is None:
        return  # the client closed our stdin: this zygote's work is done
    _run(*_become(request))


# -- the client ------------------------------------------------------------------


class Zygote:
    """One server process of one kind, serving one environment (but for the
    variables it gives each child, :func:`per_child`)."""

    def __init__(self, env: dict[str, str], kind: str = "full") -> None:
        self.env, self.kind = dict(env), kind
        # Its log is an unnamed file: nothing is left behind, and it is not the
        # descriptor pytest captures a test's stderr in when it starts.
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        self._proc = subprocess.Popen(
            [sys.executable, __file__, kind],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env={k: v for k, v in env.items() if k not in PER_CHILD},
            bufsize=0,
        )
        self._buffer = b""
        self._children: list[Child] = []  # started with start(), not yet reaped
        ready = self._read(timeout=300)
        if not ready.get("ready"):
            self.close()
            raise RuntimeError(f"the zygote cannot fork safely: {ready['error']}")

    def alive(self) -> bool:
        return self._proc.poll() is None

    def serves(self, env: dict[str, str]) -> bool:
        """Whether ``env`` is this zygote's but for the variables of each child, and
        its ``PYTHONPATH`` starts Python with the same ``sitecustomize`` (imported
        at start-up, before any request: the run's garbage-collection settings)."""
        same_site = _site(env.get("PYTHONPATH")) == _site(self.env.get("PYTHONPATH"))
        return same_site and self._imported(env) == self._imported(self.env)

    def _imported(self, env: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in env.items() if not per_child(k, self.kind)}

    def run(
        self,
        argv: list[str],
        env: dict[str, str],
        cwd: str | Path,
        timeout: float,
        input: str | None = None,
    ) -> subprocess.CompletedProcess:
        """Run ``python *argv`` in a forked child; like ``subprocess.run`` with
        ``capture_output=True, text=True``: :meth:`start`, then communicate."""
        child = self.start(argv, env, cwd, input)
        try:
            out, err = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            out, err = child.communicate(timeout=60)
            raise subprocess.TimeoutExpired(
                argv, timeout, out.encode(), err.encode()
            ) from None
        return subprocess.CompletedProcess(
            [sys.executable, *argv], child.returncode, out, err
        )

    def start(
        self,
        argv: list[str],
        env: dict[str, str],
        cwd: str | Path,
        input: str | None = None,
        stdout: str | Path | None = None,
        stderr: str | Path | int | None = None,
    ) -> Child:
        """Start ``python *argv`` in a forked child and return at once (children run
        at the same time); like ``subprocess.Popen``: ``stdout``/``stderr`` a file
        to write, ``None`` to capture (``Child.communicate`` reads them), or
        ``stderr=subprocess.STDOUT``."""
        assert self.serves(env)
        # A folder for what is captured or given (removed by communicate/cleanup);
        # none when the output goes to files of the caller's.
        tmp = None
        if stdout is None or stderr is None or input is not None:
            tmp = Path(tempfile.mkdtemp(prefix="polykernel-zygote-"))
        out = Path(stdout) if stdout is not None else Path(tmp, "stdout")
        if stderr == subprocess.STDOUT:
            err = out
        else:
            err = Path(tmp, "stderr") if stderr is None else Path(str(stderr))
        request = {"argv": argv, "cwd": str(cwd), "env": env}
        request |= {"stdout": str(out), "stderr": str(err)}
        if input is not None:
            (tmp / "stdin").write_text(input)
            request["stdin"] = str(tmp / "stdin")
        assert self._proc.stdin is not None
        self._proc.stdin.write((json.dumps(request) + "\n").encode())
        started = self._read(timeout=60)
        if "error" in started:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            raise RuntimeError(f"the zygote refused to fork: {started['error']}")
        child = Child(self, started["pid"], [sys.executable, *argv], out, err, tmp)
        self._children.append(child)
        return child

    def busy(self) -> bool:
        """Whether a child :meth:`start` started has not been reaped yet."""
        return bool(self._children)

    def _reap(self, child: Child) -> int:
        """The exit status of ``child``, which has exited (its pidfd said so)."""
        assert self._proc.stdin is not None
        self._proc.stdin.write((json.dumps({"reap": child.pid}) + "\n").encode())
        self._children.remove(child)
        return int(self._read(timeout=60)["returncode"])

    def close(self) -> None:
        for child in list(self._children):  # none outlives its zygote
            child.kill()
            child.wait(timeout=60)
            child.cleanup()
        if self._proc.poll() is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()  # EOF: the server returns
            try:
                self._proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
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


class Child:
    """A child :meth:`Zygote.start` started: what the tests use of
    ``subprocess.Popen``. Watched through a pidfd, not by its pid (it is the
    zygote's child, not ours): a signal goes to that process even after it has
    exited, never to another that got its pid; its exit status comes from the
    zygote, which reaps it when we ask (once the pidfd says it has exited)."""

    def __init__(
        self,
        zygote: Zygote,
        pid: int,
        args: list[str],
        out: Path,
        err: Path,
        tmp: Path | None,
    ) -> None:
        self.pid, self.args, self.returncode = pid, args, None
        self._zygote, self._out, self._err, self._tmp = zygote, out, err, tmp
        # Opened before we ask the zygote anything else: until then it reaps
        # nothing, so the pid is still this child's.
        self._pidfd: int | None = os.pidfd_open(pid)

    def poll(self) -> int | None:
        try:
            return self.wait(timeout=0)
        except subprocess.TimeoutExpired:
            return None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not self._exited(timeout):
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            self.returncode = self._zygote._reap(self)
            assert self._pidfd is not None
            os.close(self._pidfd)
            self._pidfd = None
        return self.returncode

    def communicate(
        self, input: None = None, timeout: float | None = None
    ) -> tuple[str, str]:
        """Wait for the exit; the captured stdout and stderr (stdin is given to
        :meth:`Zygote.start`, before the child runs)."""
        assert input is None, "give stdin to start(input=...)"
        self.wait(timeout)
        out = _text(self._out) if self._out.parent == self._tmp else ""
        err = _text(self._err) if self._err.parent == self._tmp else ""
        self.cleanup()
        return out, err

    def send_signal(self, sig: int) -> None:
        if self._pidfd is not None:  # one that has exited: nothing, as for Popen
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def cleanup(self) -> None:
        """Remove the captured output and stdin (after the exit)."""
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def _exited(self, timeout: float | None) -> bool:
        """Whether the child has exited within ``timeout`` (before it is reaped)."""
        return bool(select.select([self._pidfd], [], [], timeout)[0])


def _text(path: Path) -> str:
    # As subprocess's text mode reads it: locale encoding, universal newlines.
    return path.read_text() if path.exists() else ""


#: This test process's zygote of each kind (started on first use, and again when
#: a request's environment differs in what it imported under).
zygotes: dict[str, Zygote] = {}


def _zygote(kind: str, env: dict[str, str]) -> Zygote:
    found = zygotes.get(kind)
    if found is not None and not (found.alive() and found.serves(env)):
        if not found.busy():  # else its children keep it until they are done
            found.close()  # (closed at exit, as every zygote: atexit below)
        found = None
    if found is None:
        found = zygotes[kind] = Zygote(env, kind)
        atexit.register(found.close)
    return found


def run_script(
    script: str | Path,
    *args: str,
    env: dict[str, str],
    cwd: str | Path | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess:
    """``subprocess.run([python, script, *args], env=env, cwd=cwd,
    capture_output=True, text=True, timeout=timeout)`` in a child of this test
    process's ``full`` zygote (NumPy, JAX, Numba and polykernel imported)."""
    argv = [str(script), *map(str, args)]
    cwd = os.getcwd() if cwd is None else cwd
    return _zygote("full", env).run(argv, env, cwd, timeout)


def run(
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: str | Path | None = None,
    timeout: float = 600,
    input: str | None = None,
    kind: str = "jax",
) -> subprocess.CompletedProcess:
    """``subprocess.run([python, *argv], env=env, cwd=cwd, input=input,
    capture_output=True, text=True, timeout=timeout)`` in a child of this test
    process's ``kind`` zygote (:data:`PRELOADS`; ``jax``: NumPy, JAX and
    polykernel imported, not Numba).
    ``argv`` is ``[SCRIPT, ...]``, ``["-m", MODULE, ...]`` or ``["-c", CODE, ...]``.
    """
    argv = [str(a) for a in argv]
    cwd = os.getcwd() if cwd is None else cwd
    return _zygote(kind, env).run(argv, env, cwd, timeout, input)


def start(
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: str | Path | None = None,
    input: str | None = None,
    stdout: str | Path | None = None,
    stderr: str | Path | int | None = None,
    kind: str = "jax",
) -> Child:
    """``subprocess.Popen([python, *argv], env=env, cwd=cwd, ...)`` in a child of
    this test process's ``kind`` zygote, for children meant to run at the same time
    (processes racing on one cache, the members of a ``jax.distributed`` job):
    :meth:`Zygote.start`. ``input`` is the child's whole stdin."""
    argv = [str(a) for a in argv]
    cwd = os.getcwd() if cwd is None else cwd
    return _zygote(kind, env).start(argv, env, cwd, input, stdout, stderr)


if __name__ == "__main__":
    _server()
