"""What one ``load_*`` call asks for, checked: :class:`LoadRequest`.

The public loaders keep the reference's signatures (positional order, keywords and
defaults). Internally their keyword arguments travel as a typed
:class:`LoadKeywords` (one field per keyword, the public defaults) and are resolved,
before any work, into a :class:`LoadRequest`: the joined source, the merged
:class:`~polykernel.native.compiler.CompileOptions` and the registration flags. A
wrong type is a ``TypeError`` and a wrong value a ``ValueError`` naming the argument
(both also polykernel errors).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import KernelRegistrationError, KernelTypeError
from ...native.compiler import CompileOptions
from ...platforms import LoweringPlatform
from .argspec import check_module_name
from .keywords import CPP_KEYWORDS, CUDA_KEYWORDS, check_common, merge_options

__all__ = ["Functions", "LoadKeywords", "LoadRequest", "keywords_for"]

Functions = Mapping[str, Sequence[str]] | Iterable[str] | str | None


@dataclass(frozen=True)
class LoadKeywords:
    """The keyword arguments of ``load_cpp_inline``/``load_cuda_inline``, as given.

    Defaults are the public ones. Fields only the CUDA loader takes
    (:data:`CUDA_ONLY`) and the C++ loader's ``extra_cflags`` are refused for the
    other platform by :func:`keywords_for`.
    """

    extra_cflags: Sequence[str] | str | None = None
    extra_cuda_cflags: Sequence[str] | str | None = None
    extra_ldflags: Sequence[str] | str | None = None
    extra_include_paths: Sequence[str] | str | None = None
    build_directory: str | os.PathLike | None = None
    verbose: bool = False
    compute_capability: str | Sequence[str] | None = None
    force_rebuild: bool = False
    replace: bool = False
    auto_register: bool = True
    target_prefix: str | None = None
    optimization_level: int = 3
    use_fast_math: bool = False
    allow_cuda_graph: bool = True
    options: CompileOptions | None = None
    vmap_method: str = "sequential"


#: Keywords only ``load_cuda_*`` takes (``extra_cflags`` is ``load_cpp_*``'s only).
CUDA_ONLY = frozenset(
    {
        "extra_cuda_cflags",
        "compute_capability",
        "optimization_level",
        "use_fast_math",
        "allow_cuda_graph",
    }
)
_FIELDS = tuple(f.name for f in dataclasses.fields(LoadKeywords))


def _allowed(platform: LoweringPlatform) -> tuple[str, ...]:
    if platform == LoweringPlatform.CUDA:
        return tuple(k for k in _FIELDS if k != "extra_cflags")
    return tuple(k for k in _FIELDS if k not in CUDA_ONLY)


def keywords_for(
    func: str, platform: LoweringPlatform, given: Mapping[str, Any]
) -> LoadKeywords:
    """``given`` (the ``**kwargs`` of a file or directory loader) as keywords.

    Raises:
        KernelTypeError: a keyword the platform's inline loader does not take.
    """
    allowed = _allowed(platform)
    inline = (
        "load_cuda_inline" if platform == LoweringPlatform.CUDA else "load_cpp_inline"
    )
    for key in given:
        if key not in allowed:
            raise KernelTypeError(
                f"{func}() got an unexpected keyword argument {key!r}; it accepts "
                f"name= and the keywords of {inline}: {', '.join(allowed)}."
            )
    return LoadKeywords(**given)


@dataclass(frozen=True)
class LoadRequest:
    """A checked load: what to compile and how to register it.

    Attributes:
        func: the public function called (for messages).
        platform: ``cpu`` (C++ with the host compiler) or ``cuda`` (nvcc).
        name: the module name.
        source: the whole source text.
        functions: the ``functions`` argument (specs resolved later).
        options: the compiler options, keywords folded in.
        keywords: the loader's keywords, checked (``vmap_method``, ``replace``,
            ``auto_register``, ``verbose``...).
        path: the source file, named in compiler messages (None: inline).
    """

    func: str
    platform: LoweringPlatform
    name: str
    source: str
    functions: Functions
    options: CompileOptions
    keywords: LoadKeywords = LoadKeywords()
    path: str | None = None

    @property
    def prefix(self) -> str:
        """Prefix of the documented target names ``"<prefix>.<function>"``."""
        return self.keywords.target_prefix or self.name

    @property
    def build_directory(self) -> str | None:
        """Where to build and keep the files (None: a temporary directory)."""
        directory = self.keywords.build_directory
        return None if directory is None else os.fspath(directory)

    @classmethod
    def resolve(
        cls,
        func: str,
        platform: LoweringPlatform,
        name: object,
        sources: object,
        functions: Functions,
        keywords: LoadKeywords,
        path: str | os.PathLike | None = None,
        include_dir: str | os.PathLike | None = None,
    ) -> LoadRequest:
        """Check every argument, fold the keywords into options.

        ``include_dir`` (the sources' own directory) goes first on the include path.

        Raises:
            KernelTypeError, KernelRegistrationError: a bad argument, named.
        """
        name = check_module_name(name)
        source = _join(func, platform, sources)
        _check_build_directory(func, keywords.build_directory)
        given = {k: getattr(keywords, k) for k in _allowed(platform)}
        check_common(func, given)
        table = CUDA_KEYWORDS if platform == LoweringPlatform.CUDA else CPP_KEYWORDS
        options = merge_options(func, keywords.options, table, given)
        if include_dir is not None:
            includes = (str(Path(include_dir).resolve()), *options.include_paths)
            options = dataclasses.replace(options, include_paths=includes)
        where = None if path is None else str(path)
        return cls(func, platform, name, source, functions, options, keywords, where)


def _check_build_directory(func: str, directory: object) -> None:
    if directory is None or not isinstance(directory, str | os.PathLike):
        return  # None, or a bad type that check_common reports
    path = Path(directory)
    if path.exists() and not path.is_dir():
        raise KernelRegistrationError(
            f"{func}: build_directory '{path}' exists and is not a directory; pass a "
            f"directory (it is created if missing) or None for a temporary one."
        )


def _join(func: str, platform: LoweringPlatform, sources: object) -> str:
    if isinstance(sources, str):
        return sources
    if isinstance(sources, list | tuple) and all(isinstance(s, str) for s in sources):
        return "\n".join(sources)
    argument = "cuda_sources" if platform == LoweringPlatform.CUDA else "cpp_sources"
    raise KernelTypeError(
        f"{func}: {argument} must be the source text (a str) or a list of str, got "
        f"{type(sources).__name__} {sources!r:.60}."
    )
