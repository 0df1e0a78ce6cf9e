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

import io
import os
import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:
    import duckdb

LISTING_CACHE_PROTOCOLS = {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss"}  # fsspec filesystems with a DirCache


def is_url(location: str | os.PathLike) -> bool:
    """``s3://b/x`` -> True; ``/data/lake``, ``data_lake``, ``file:///x`` -> False."""
    text = str(location)
    return "://" in text and not text.startswith("file://")


def lake_path(location: str | os.PathLike) -> Path:
    """A local ``Path`` or, for a URL, a ``UPath`` on its fsspec filesystem.

    Anything that already is a UPath (e.g. ``Settings.lake_dir`` for a bucket) is kept, so
    its filesystem (and cached connection) is reused."""
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


def is_local(path: str | os.PathLike) -> bool:
    from upath import UPath

    if isinstance(path, UPath):
        return path.protocol in ("", "file", "local")
    return isinstance(path, Path) or not is_url(str(path))


def url(path: str | os.PathLike) -> str:
    """The string a person (or DuckDB) uses for ``path``: ``s3://b/lake/t`` or ``/abs/lake/t``."""
    p = lake_path(path)
    return str(p) if not is_local(p) else str(Path(p).resolve())


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> None:
    """``data`` at ``path``, all or nothing: a reader or a killed writer never sees half of it."""
    p = lake_path(path)
    if not is_local(p):
        p.fs.pipe_file(p.path, data)  # one PUT: the object store's own atomic unit
        return
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.parent / f".{p.name}.{uuid.uuid4().hex}.tmp"
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())  # durable before it becomes visible
        os.replace(tmp, p)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_parquet(df: pl.DataFrame, path: str | os.PathLike) -> None:
    """``df`` as one zstd Parquet file at ``path``, atomically (see :func:`write_bytes_atomic`)."""
    p = lake_path(path)
    if is_local(p):
        # Local: stream to the temp file (no second copy of a large partition in memory).
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.parent / f".{p.name}.{uuid.uuid4().hex}.tmp"
        try:
            df.write_parquet(tmp, compression="zstd", statistics=True)
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, p)
        finally:
            if tmp.exists():
                tmp.unlink()
        return
    buf = io.BytesIO()
    df.write_parquet(buf, compression="zstd", statistics=True)
    write_bytes_atomic(p, buf.getvalue())


def read_parquet(path: str | os.PathLike, **kwargs) -> pl.DataFrame:
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
