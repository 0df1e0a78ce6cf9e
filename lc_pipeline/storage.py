"""Lake files on any fsspec URL: a local folder, ``s3://``, ``gs://``, ``memory://``.

Paths are ``pathlib.Path`` for local folders and ``upath.UPath`` (universal-pathlib, the
pathlib API over fsspec) for URLs, so code walks both with the same ``/``, ``glob``,
``exists`` and ``open``. Credentials are never configured here: s3fs / gcsfs read them from
the environment the way every AWS / Google client does (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_ENDPOINT_URL`` for MinIO or another S3-compatible server,
an instance role, ``GOOGLE_APPLICATION_CREDENTIALS``), so no secret reaches a config,
a table or a log.

Writes are atomic either way: locally a hidden temp file in the same folder, fsync'd, then
``os.replace``; on an object store one PUT, which the store makes visible whole or not at all.
Parquet goes through fsspec file objects (not polars' own cloud reader), so the IO manager,
the caches and DuckDB all read a bucket with one set of settings.

Pure logic: no Dagster import.
"""

from __future__ import annotations

import errno
import io
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # polars is imported where a frame is read or made: `lcp query` needs neither (issue 29)
    import duckdb
    import polars as pl

# The file of every lake partition: <table>/<dim>=<value>/.../data.parquet (resources/parquet_io.py, lake.py).
FILE_NAME = "data.parquet"

LISTING_CACHE_PROTOCOLS = {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss"}  # fsspec filesystems with a DirCache


def is_url(location: str | os.PathLike) -> bool:
    """``s3://b/x`` -> True; ``/data/lake``, ``data_lake``, ``file:///x`` -> False."""
    text = str(location)
    return "://" in text and not text.startswith("file://")


def lake_path(location: str | os.PathLike) -> Path:
    """A local ``Path`` or, for a URL, a ``UPath`` on its fsspec filesystem.

    Anything that already is a UPath (e.g. ``Settings.lake_dir`` for a bucket) is kept, so
    its filesystem (and cached connection) is reused."""
    if _is_plain_local(location):  # without importing upath, which imports fsspec (issue 29: `lcp query`)
        return location if isinstance(location, Path) else Path(location.removeprefix("file://"))
    from upath import UPath

    if isinstance(location, UPath):
        return location if is_url(str(location)) else Path(location.path)
    if isinstance(location, Path):
        return location
    text = str(location)
    if text.startswith("file://"):
        return Path(text[len("file://"):])
    if is_url(text):
        protocol = text.split("://", 1)[0]
        # Other processes (step workers on other machines) write the lake: a listing cached by this
        # process would hide their files for its whole life (e.g. a webserver or `lcp` session).
        options = {"use_listings_cache": False} if protocol in LISTING_CACHE_PROTOCOLS else {}
        return UPath(text.rstrip("/"), **options)
    return Path(text)


def _is_plain_local(location: object) -> bool:
    """A local path given as text or as a pathlib ``Path`` (not a ``UPath``)."""
    if isinstance(location, str):
        return not is_url(location)
    return isinstance(location, Path) and type(location).__module__ == "pathlib"


def is_local(path: str | os.PathLike) -> bool:
    if _is_plain_local(path):
        return True
    from upath import UPath

    if isinstance(path, UPath):
        return path.protocol in ("", "file", "local")
    return isinstance(path, Path) or not is_url(str(path))


def url(path: str | os.PathLike) -> str:
    """The string a person (or DuckDB) uses for ``path``: ``s3://b/lake/t`` or ``/abs/lake/t``."""
    p = lake_path(path)
    return str(p) if not is_local(p) else str(Path(p).resolve())


@contextmanager
def replacing(path: str | os.PathLike) -> Iterator[Path]:
    """A temp file beside local ``path`` to write; on success it is fsynced and renamed onto
    ``path``, on error removed: a reader or a killed writer never sees half a file."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.parent / f".{p.name}.{uuid.uuid4().hex}.tmp"
    try:
        yield tmp
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())  # durable before it becomes visible
        os.replace(tmp, p)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> None:
    """``data`` at ``path``, all or nothing (see :func:`replacing`)."""
    p = lake_path(path)
    if not is_local(p):
        p.fs.pipe_file(p.path, data)  # one PUT: the object store's own atomic unit
        return
    with replacing(p) as tmp:
        tmp.write_bytes(data)


def write_parquet(df: pl.DataFrame, path: str | os.PathLike) -> None:
    """``df`` as one zstd Parquet file at ``path``, atomically (see :func:`write_bytes_atomic`)."""
    p = lake_path(path)
    if is_local(p):
        # Local: stream to the temp file (no second copy of a large partition in memory).
        with replacing(p) as tmp:
            df.write_parquet(tmp, compression="zstd", statistics=True)
        return
    buf = io.BytesIO()
    df.write_parquet(buf, compression="zstd", statistics=True)
    write_bytes_atomic(p, buf.getvalue())


ZSTD_LEVEL = 3  # polars' default; pyarrow's own (1) makes instance files ~2x larger


@dataclass(frozen=True)
class StagedParquet:
    """A complete Parquet file on local disk, waiting to become a lake file (:func:`publish_parquet`).

    What an asset returns instead of a DataFrame when its table is too large to hold: the IO
    manager publishes the file as it is, without reading it back."""

    path: Path
    rows: int
    schema: pl.Schema


class ParquetStager:
    """Frames written as the row groups of one local Parquet file, then closed as a :class:`StagedParquet`.

    ``directory`` is local scratch space (a temp dir): the file is not a lake file until it is
    published, so a reader or a killed run never sees part of it. Every frame must have the
    schema of the first (or of ``schema``); each :meth:`write` is one row group, so a group's
    rows share zstd's dictionary (a level's contexts share many filler documents).
    """

    def __init__(self, directory: str | os.PathLike, schema: pl.Schema | None = None) -> None:
        self.path = Path(directory) / f".staged-{uuid.uuid4().hex}.parquet"
        self.schema = schema
        self.rows = 0
        self._writer = None

    def write(self, df: pl.DataFrame) -> None:
        import pyarrow.parquet as pq

        if self.schema is not None and df.schema != self.schema:
            ours, theirs = dict(self.schema), dict(df.schema)
            diff = {c: f"{ours.get(c)} in the file, {theirs.get(c)} in the frame"
                    for c in [*ours, *(c for c in theirs if c not in ours)] if ours.get(c) != theirs.get(c)}
            raise ValueError(f"staged Parquet file: a frame does not match the file's columns: "
                             f"{diff or 'same columns in another order'}")
        self.schema = df.schema
        table = df.to_arrow()
        if self._writer is None:
            self._writer = pq.ParquetWriter(self.path, table.schema, compression="zstd",
                                            compression_level=ZSTD_LEVEL)
        self._writer.write_table(table)  # one row group (pyarrow's row-group cap is 1Mi rows)
        self.rows += df.height

    def finish(self) -> StagedParquet:
        """Close the file (an empty table when nothing was written) and sync it to disk."""
        if self._writer is None:
            if self.schema is None:
                raise ValueError(f"{self.path.name}: nothing written and no schema given")
            import polars as pl

            self.write(pl.DataFrame(schema=self.schema))
        self._writer.close()
        with open(self.path, "rb") as fh:
            os.fsync(fh.fileno())
        return StagedParquet(self.path, self.rows, self.schema)

    def discard(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self.path.unlink(missing_ok=True)

    def __enter__(self) -> ParquetStager:
        return self

    def __exit__(self, exc_type, *_) -> None:
        if exc_type is not None:
            self.discard()


def publish_parquet(staged: StagedParquet, path: str | os.PathLike) -> None:
    """Make a staged file the file at ``path``, atomically; the staged file is moved or copied.

    Locally a rename when both are on one filesystem, else a copy to a hidden temp file beside
    ``path`` and a rename; on an object store one upload (multipart uploads too become visible
    whole or not at all)."""
    p = lake_path(path)
    if not is_local(p):
        p.fs.put_file(str(staged.path), p.path)
        return
    p.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(staged.path, p)
        return
    except OSError as exc:
        if exc.errno != errno.EXDEV:  # only "another filesystem" is solved by copying
            raise
    with replacing(p) as tmp:
        shutil.copyfile(staged.path, tmp)


def read_parquet(path: str | os.PathLike, **kwargs) -> pl.DataFrame:
    import polars as pl

    p = lake_path(path)
    if is_local(p):
        return pl.read_parquet(p, **kwargs)
    with p.open("rb") as fh:
        return pl.read_parquet(fh, **kwargs)


def read_bytes(path: str | os.PathLike) -> bytes:
    return lake_path(path).read_bytes()


def remove_tree(path: str | os.PathLike) -> None:
    """Delete a folder (or prefix) and everything under it; nothing there is fine."""
    p = lake_path(path)
    if is_local(p):
        shutil.rmtree(p, ignore_errors=True)
        return
    if p.fs.exists(p.path):
        p.fs.rm(p.path, recursive=True)


def upload_tree(local_dir: Path, target: str | os.PathLike) -> None:
    """Copy the files of a local folder to ``target`` (a URL), one PUT per file, after removing
    what was there, so ``target`` never mixes two versions' files for long."""
    p = lake_path(target)
    remove_tree(p)
    for f in sorted(Path(local_dir).rglob("*")):
        if f.is_file():
            write_bytes_atomic(p.joinpath(*f.relative_to(local_dir).parts), f.read_bytes())


def download_tree(source: str | os.PathLike, local_dir: Path) -> None:
    """Copy every file under ``source`` (a URL) into ``local_dir``."""
    p = lake_path(source)
    for f in p.rglob("*"):
        if f.is_file():
            dest = Path(local_dir).joinpath(*f.relative_to(p).parts)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(f.read_bytes())


def register_filesystem(con: duckdb.DuckDBPyConnection, path: str | os.PathLike) -> None:
    """Let DuckDB read ``path``'s URLs through the same fsspec filesystem the pipeline writes with.

    DuckDB's own S3 reader (the httpfs extension) is downloaded from DuckDB's extension site at
    first use; reading through fsspec needs no download and no second credentials setup."""
    p = lake_path(path)
    if is_local(p):
        return
    if any(name == p.fs.protocol or name in (p.fs.protocol or ()) for name in con.list_filesystems()):
        return
    con.register_filesystem(p.fs)
