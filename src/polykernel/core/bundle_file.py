"""The kernel bundle file: what it holds and how it is read and checked.

A bundle is one zip file::

    manifest.json          format, versions, machine, the program, the kernels
                           (target, backend, symbol, file, SHA-256, requirements,
                           the FFI API version each handler answers), the
                           libraries they need, the dispatch decisions
    program.jaxexport      Exported.serialize() of the program
    kernels/<target>.so    each kernel's handler library
    libs/<name>.so         libraries the kernels need (polykernel's runtime)

Every file's SHA-256 is in the manifest and is checked before anything is loaded.
Reading imports nothing beyond the standard library.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import BundleChecksumError, BundleFormatError

__all__ = ["FORMAT", "MANIFEST", "PROGRAM", "BundleFile", "read", "write"]

#: The bundle format this version writes and reads.
FORMAT = 1
MANIFEST = "manifest.json"
PROGRAM = "program.jaxexport"
_KIND = "polykernel-bundle"


@dataclass
class BundleFile:
    """A bundle read into memory: its manifest and its files, checksums verified."""

    path: str
    manifest: dict[str, Any]
    files: dict[str, bytes]

    def file(self, name: str) -> bytes:
        return self.files[name]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write(
    path: str | os.PathLike[str], manifest: dict, files: dict[str, bytes]
) -> Path:
    """Write the bundle atomically (a temporary file beside ``path``, renamed)."""
    target = Path(path)
    manifest = {
        "kind": _KIND,
        "format": FORMAT,
        **manifest,
        "files": {name: sha256(data) for name, data in sorted(files.items())},
    }
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, staged = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as raw, zipfile.ZipFile(
            raw, "w", zipfile.ZIP_DEFLATED
        ) as zf:
            zf.writestr(MANIFEST, json.dumps(manifest, indent=1, sort_keys=True))
            for name, data in sorted(files.items()):
                zf.writestr(name, data)
        os.replace(staged, target)
    except BaseException:
        Path(staged).unlink(missing_ok=True)
        raise
    return target


def read(path: str | os.PathLike[str]) -> BundleFile:
    """Read and verify a bundle.

    Raises:
        BundleFormatError: not a bundle, damaged, or a newer format.
        BundleChecksumError: a file differs from the SHA-256 recorded for it.
    """
    where = f"polykernel.load_bundle('{os.fspath(path)}')"
    try:
        with zipfile.ZipFile(path) as zf:
            names = set(zf.namelist())
            if MANIFEST not in names:
                raise BundleFormatError(
                    f"{where}: the file is a zip archive without {MANIFEST}, so it is "
                    f"not a polykernel bundle. Write bundles with pk.export_bundle."
                )
            manifest = json.loads(zf.read(MANIFEST))
            _check_manifest(where, manifest)
            recorded: dict[str, str] = manifest["files"]
            missing = sorted(set(recorded) - names)
            if missing:
                raise BundleFormatError(
                    f"{where}: the manifest lists {missing}, which the file lacks; "
                    f"the bundle is damaged (truncated?). Write it again."
                )
            files = {name: zf.read(name) for name in recorded}
    except (zipfile.BadZipFile, OSError, json.JSONDecodeError, KeyError) as err:
        if isinstance(err, FileNotFoundError):
            raise BundleFormatError(f"{where}: no such file.") from err
        raise BundleFormatError(
            f"{where}: cannot read it as a bundle ({type(err).__name__}: {err}); it "
            f"is damaged or not a bundle. Write it again with pk.export_bundle."
        ) from err
    for name, want in recorded.items():
        got = sha256(files[name])
        if got != want:
            raise BundleChecksumError(
                f"{where}: '{name}' has SHA-256 {got[:16]}…, the manifest records "
                f"{want[:16]}…: the file was changed or damaged after it was "
                f"written. Write the bundle again; do not edit it."
            )
    return BundleFile(os.fspath(path), manifest, files)


def _check_manifest(where: str, manifest: Any) -> None:
    if not isinstance(manifest, dict) or manifest.get("kind") != _KIND:
        raise BundleFormatError(
            f"{where}: its {MANIFEST} is not a polykernel bundle manifest. Write "
            f"bundles with pk.export_bundle."
        )
    version = manifest.get("format")
    if not isinstance(version, int) or version > FORMAT:
        raise BundleFormatError(
            f"{where}: bundle format {version!r}, written by polykernel "
            f"{manifest.get('polykernel', '?')}; this polykernel reads format "
            f"{FORMAT} and older. Upgrade polykernel, or write the bundle with this "
            f"version."
        )
    if not isinstance(manifest.get("files"), dict) or PROGRAM not in manifest["files"]:
        raise BundleFormatError(f"{where}: its manifest lists no {PROGRAM}.")
