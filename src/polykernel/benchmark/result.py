"""``BenchmarkResult``: the records of a benchmark run and what to do with them.

This class sits on top of the benchmark package: queries, tables, files and plots
live in modules that take records and a name, and it hands its records to them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..errors import BenchmarkTypeError, BenchmarkValueError, BenchmarkWriteError
from .chart import plot_chart
from .defaults import KernelSet, save_defaults
from .io import (
    load_pickle,
    load_records,
    records_to_dict,
    resolve_format,
    save_pickle,
    save_records,
)
from .layouts import format_rows
from .machine import checked_environment, merge_environments
from .options import PrintOptions, reject_unknown
from .plot import plot_png
from .ranking import Mismatch, best_backends, fastest, fastest_per_config, mismatches
from .record import BenchmarkRecord
from .table import TABLE_WIDTH, format_table

__all__ = ["BenchmarkResult", "Mismatch"]


def _checked(records: Iterable[Any], where: str) -> list[BenchmarkRecord]:
    out = list(records)
    for i, rec in enumerate(out):
        if not isinstance(rec, BenchmarkRecord):
            raise BenchmarkTypeError(
                f"{where}: record {i} is a {type(rec).__name__} ({rec!r}); every "
                "record must be a BenchmarkRecord."
            )
    return out


class BenchmarkResult:
    """All records of one run (one primitive, or several merged by the CLI).

    ``print(result)`` shows the configs x backends comparison table;
    :meth:`print` with the reference's keywords shows its row tables.

    Example:
        >>> from polykernel import BenchmarkResult, BenchmarkRecord
        >>> r = BenchmarkResult([
        ...     BenchmarkRecord("cpu", "a", "n=1", 2.0, 0.1, 1.9, None, True, None,
        ...                     {}, {}),
        ...     BenchmarkRecord("cpu", "b", "n=1", 1.0, 0.1, 0.9, None, True, None,
        ...                     {}, {})])
        >>> r.fastest("n=1").backend
        'b'
    """

    def __init__(
        self,
        records: Iterable[BenchmarkRecord],
        primitive_name: str = "",
        environment: dict[str, Any] | None = None,
    ) -> None:
        self._records = _checked(records, "BenchmarkResult")
        self.primitive_name = primitive_name
        self.environment = environment
        #: ``(primitive, platform) -> KernelSet``: what this process's runs measured.
        self.kernels: dict[tuple[str, str], KernelSet] = {}
        for rec in self._records:
            if not rec.primitive:
                rec.primitive = primitive_name

    @property
    def environment(self) -> dict[str, Any] | None:
        """What the run measured on, ``{"machine": ..., "load": ...}``
        (:mod:`~polykernel.benchmark.machine`); None when not recorded."""
        return self.__dict__.get("_environment")  # absent in older pickles

    @environment.setter
    def environment(self, value: dict[str, Any] | None) -> None:
        self._environment = checked_environment(value)

    @property
    def records(self) -> list[BenchmarkRecord]:
        """A new list of the records (changing the list leaves the result intact)."""
        return list(self._records)

    @classmethod
    def combine(cls, results: Iterable[BenchmarkResult]) -> BenchmarkResult:
        """Merge several results (e.g. of many primitives) into one."""
        if isinstance(results, BenchmarkResult) or not isinstance(results, Iterable):
            raise BenchmarkTypeError(
                "BenchmarkResult.combine: results must be an iterable of "
                f"BenchmarkResult (got {type(results).__name__})."
            )
        results = list(results)
        for i, r in enumerate(results):
            if not isinstance(r, BenchmarkResult):
                raise BenchmarkTypeError(
                    f"BenchmarkResult.combine: results[{i}] is a "
                    f"{type(r).__name__}, not a BenchmarkResult."
                )
        names = {r.primitive_name for r in results}
        name = names.pop() if len(names) == 1 else ""
        env = merge_environments(r.environment for r in results)
        merged = cls([rec for r in results for rec in r._records], name, env)
        for r in results:
            merged.kernels.update(getattr(r, "kernels", {}))
        return merged

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[BenchmarkRecord]:
        return iter(list(self._records))

    def __str__(self) -> str:
        return self.table()

    # Like the reference, the interactive display is the table itself.
    __repr__ = __str__

    # -- queries ---------------------------------------------------------------
    @property
    def mismatches(self) -> list[Mismatch]:
        """Every (config, backend) whose output disagreed with the reference."""
        return mismatches(self._records)

    @property
    def failures(self) -> list[BenchmarkRecord]:
        """Records of runs that raised (``success=False``)."""
        return [r for r in self._records if not r.success]

    @property
    def noisy(self) -> list[BenchmarkRecord]:
        """Successful records whose spread (IQR / median) exceeds their noise bound
        (10 % unless the run set another)."""
        return [r for r in self._records if r.success and r.noisy]

    def fastest(self, label: str | None = None) -> BenchmarkRecord | None:
        """The fastest successful record, overall or for one config ``label``.

        Ranks by the median when every candidate has one, else by the mean (records
        built the reference way); ``None`` when no successful record qualifies.
        """
        return fastest(self._records, label)

    def fastest_per_config(self) -> dict[tuple[str, str], BenchmarkRecord]:
        """Return ``{(primitive, label): fastest record}`` for every config."""
        return fastest_per_config(self._records)

    def best_backends(self) -> dict[str, dict[str, str]]:
        """One default backend per (primitive, platform), by the tuner's rule."""
        defaults = {g: k.default for g, k in getattr(self, "kernels", {}).items()}
        return best_backends(self._records, defaults)

    # -- tables ----------------------------------------------------------------
    def table(
        self,
        sort_by: str | list[str] | None = None,
        group_by: str | list[str] | None = None,
        compare_by: Any = None,
        highlight_best: bool = True,
        order_by: list[str] | None = None,
        speedup_vs: str | None = None,
        vary_by: str | list[str] | None = None,
        *,
        baseline: str | None = None,
        width: int | None = TABLE_WIDTH,
        **unknown: Any,
    ) -> str:
        """The text :meth:`print` prints (same keywords)."""
        reject_unknown("BenchmarkResult.table", unknown)
        opts = PrintOptions.given(
            "BenchmarkResult.table",
            sort_by,
            group_by,
            compare_by,
            highlight_best,
            order_by,
            speedup_vs,
            vary_by,
            baseline,
        )
        return self._text(opts, width)

    def _text(self, opts: PrintOptions, width: int | None = TABLE_WIDTH) -> str:
        if opts.wants_rows:
            return format_rows(self._records, self.primitive_name, opts)
        return format_table(
            self._records,
            self.primitive_name,
            opts.baseline,
            bool(opts.highlight_best),
            width=width,
        )

    def print(
        self,
        sort_by: str | list[str] | None = None,
        group_by: str | list[str] | None = None,
        compare_by: Any = None,
        highlight_best: bool = True,
        order_by: list[str] | None = None,
        speedup_vs: str | None = None,
        vary_by: str | list[str] | None = None,
        *,
        baseline: str | None = None,
        width: int | None = TABLE_WIDTH,
        **unknown: Any,
    ) -> None:
        """Print a table of the records.

        Without keywords: the configs x backends table (speed-up vs ``baseline``),
        split to fit in ``width`` columns (100; ``None``: no limit).
        With any of the reference's keywords, its one-row-per-record table:

        - ``sort_by``: column(s) to sort by, ascending (unknown values last).
        - ``group_by``: column(s); the fastest row per group is marked ``*``
          (when ``highlight_best``).
        - ``compare_by``: an expression such as ``"backend == 'numba'"`` (only
          column names, constants, comparisons, ``and``/``or``/``not``, ``in``;
          never executed as code) or a callable ``row -> bool``, selecting the
          baseline rows. A ``speedup`` column compares each row with the baseline
          of its config; a single selected row is the baseline of every row.
        - ``order_by``: columns; rows grouped by all but the last, best marked.
          Overrides ``sort_by``, ``group_by`` and ``vary_by``.
        - ``vary_by``: column(s) that vary inside a group; all other describing
          columns form the group.
        - ``speedup_vs``: a backend (the last ``order_by``/``vary_by`` column's
          value): adds ``vs_<name>`` = its time / the row's time, per group; in
          the flat table per config.

        Times rank by the median when every record has one, else by the mean.

        Raises:
            TypeError: an unknown keyword (all are named) or a wrong argument type.
            ValueError: an unknown column, a refused ``compare_by`` expression,
                a baseline that selects nothing.

        Example:
            >>> from polykernel import BenchmarkRecord, BenchmarkResult
            >>> result = BenchmarkResult([
            ...     BenchmarkRecord("cpu", "a", "n=1", 2.0, 0.1, 1.9, None, True, None,
            ...                     {}, {}),
            ...     BenchmarkRecord("cpu", "numba", "n=1", 1.0, 0.1, 0.9, None, True,
            ...                     None, {}, {})])
            >>> result.print(group_by="label", compare_by="backend == 'numba'")
            BenchmarkResult
            platform | backend | label | mean_ms | std_ms | min_ms | speedup | best
            ---------+---------+-------+---------+--------+--------+---------+-----
            cpu      | a       | n=1   | 2       | 0.1    | 1.9    | 0.50x   |
            cpu      | numba   | n=1   | 1       | 0.1    | 0.9    | 1.00x   | *
            <BLANKLINE>
            * fastest in its group (by mean_ms)
            speed-up = baseline mean_ms / row mean_ms (> 1: faster)
        """
        reject_unknown("BenchmarkResult.print", unknown)
        opts = PrintOptions.given(
            "BenchmarkResult.print",
            sort_by,
            group_by,
            compare_by,
            highlight_best,
            order_by,
            speedup_vs,
            vary_by,
            baseline,
        )
        print(self._text(opts, width))

    # -- files -----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: ``primitive_name``, ``records`` (dicts), format tag,
        then ``machine`` and ``load`` when the run recorded them."""
        return records_to_dict(self._records, self.primitive_name, self.environment)

    def save(self, path: str | Path, format: str | None = None) -> Path:
        """Write the result to ``path`` as ``'json'``, ``'csv'`` or ``'pkl'``.

        Without ``format`` the suffix decides (``.csv``, ``.pkl``), else JSON. The
        file is replaced atomically; parent directories are created. Pickle files
        run code when loaded: share and load them only between trusted parties.

        Raises:
            ValueError: ``format`` is not one of ``'json'``, ``'csv'``, ``'pkl'``.
            OSError: ``path`` cannot be written (the message names it).
        """
        if not isinstance(path, str | os.PathLike):
            raise BenchmarkTypeError(
                "BenchmarkResult.save: path must be a str or os.PathLike (got "
                f"{type(path).__name__}: {path!r})."
            )
        path = Path(path)
        fmt = resolve_format(path, format, "BenchmarkResult.save")
        try:
            if fmt == "pkl":
                save_pickle(self, path)
            else:
                save_records(
                    self._records, self.primitive_name, path, fmt, self.environment
                )
        except OSError as err:
            raise BenchmarkWriteError(
                err.errno,
                f"BenchmarkResult.save: cannot write '{path}' "
                f"({err.strerror or err}); choose a writable path",
            ) from err
        return path

    @classmethod
    def load(cls, path: str | Path, format: str | None = None) -> BenchmarkResult:
        """Read a result written by :meth:`save` (format from the suffix, else JSON).

        Every record is checked; a damaged file raises ``ValueError`` naming the
        file, the record (or CSV line) and the field. Unpickling a ``.pkl`` file
        can run arbitrary code: only load pickle files from a trusted source.

        Raises:
            FileNotFoundError: ``path`` does not exist.
            ValueError: unknown format, or the file is not a valid result.
        """
        where = "BenchmarkResult.load"
        if not isinstance(path, str | os.PathLike):
            raise BenchmarkTypeError(
                f"{where}: path must be a str or os.PathLike (got "
                f"{type(path).__name__}: {path!r})."
            )
        path = Path(path)
        fmt = resolve_format(path, format, where)
        if fmt != "pkl":
            records, name, environment = load_records(path, fmt, where)
            return cls(records, primitive_name=name, environment=environment)
        obj = load_pickle(path, where)
        if not isinstance(obj, cls):
            raise BenchmarkValueError(
                f"{where}: '{path}' holds a {type(obj).__name__}, not a "
                "BenchmarkResult."
            )
        try:
            _checked(obj.__dict__.get("_records", ()), f"{where}: '{path}'")
        except TypeError as err:  # a damaged file is a bad value, not a bad call
            raise BenchmarkValueError(str(err)) from err
        return obj

    def plot(
        self,
        ax: Any = None,
        x: str | None = None,
        y: str = "mean_ms",
        hue: str | None = None,
        style: str | None = None,
        kind: str = "line",
        show: bool = False,
        *,
        path: str | os.PathLike | None = None,
        **kwargs: Any,
    ) -> Any:
        """Draw the results; return the matplotlib Figure, or the path written.

        The reference's form draws ``y`` over ``x`` (default ``'label'``) with one
        series per ``hue`` value, as ``kind`` ``'line'``, ``'bar'`` or
        ``'scatter'``, into ``ax`` or a new figure, and returns the figure. Our
        form ``plot("bench.png", y="median_ms")`` (or ``path=``) writes a PNG bar
        chart, one group per config and one bar per backend, and returns the path;
        with chart keywords as well, that chart is saved to the path instead.
        matplotlib is optional: without it this raises an ImportError naming the
        ``plot`` extra.
        """
        if isinstance(ax, str | os.PathLike):
            if path is not None:
                raise BenchmarkTypeError(
                    "BenchmarkResult.plot: give the file path once."
                )
            ax, path = None, ax
        chart = (ax, x, hue, style, show) != (None,) * 4 + (False,)
        if path is not None and not (chart or kind != "line" or kwargs):
            return plot_png(
                self._records, self.primitive_name, Path(path), y, self.environment
            )
        recs, name = self._records, self.primitive_name
        fig = plot_chart(recs, name, ax, x, y, hue, style, kind, show, **kwargs)
        if path is None:
            return fig
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path)
        return Path(path)

    def save_defaults(self) -> dict[str, dict[str, str]]:
        """Save each primitive's fastest backend per platform as a saved default
        (:mod:`polykernel.benchmark.defaults`); return ``{primitive: {platform:
        backend}}``."""
        machine = (self.environment or {}).get("machine", {})
        return save_defaults(self._records, getattr(self, "kernels", {}), machine)
