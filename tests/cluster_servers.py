"""Real servers for the cluster tests (tests/integration/test_cluster.py), each on 127.0.0.1 only,
started and stopped by the caller's fixture: Debian's PostgreSQL server (the Dagster instance),
moto's S3-compatible server (the lake) and Debian's redis-server (the Celery broker and result
backend). Each is a context manager that yields what a client needs and leaves nothing behind.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import free_port

SERVER_START_S = 60


def postgres_bin() -> Path | None:
    """Debian keeps the server binaries out of PATH, in /usr/lib/postgresql/<version>/bin."""
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(Path(p).parts[-3]))
    return Path(versions[-1]).parent if versions else None


def as_server_user() -> tuple[list[str], str | None]:
    """PostgreSQL refuses to run as root: as root, run its binaries as `postgres` (or `nobody`)."""
    if os.geteuid() != 0:
        return [], None
    if shutil.which("runuser") is None:
        pytest.skip("running as root without runuser: cannot start PostgreSQL as an unprivileged user")
    for user in ("postgres", "nobody"):
        try:
            pwd.getpwnam(user)
        except KeyError:
            continue
        return ["runuser", "-u", user, "--"], user
    pytest.skip("running as root and neither a 'postgres' nor a 'nobody' user exists to run PostgreSQL")


@contextmanager
def postgres_server(db_name: str = "lcp_dagster") -> Iterator[dict[str, str]]:
    """A throw-away PostgreSQL cluster on a loopback port, password-authenticated, with one empty
    database; yields the ``DAGSTER_PG_*`` variables deploy/*/dagster.yaml read."""
    bindir = postgres_bin()
    prefix, user = as_server_user()
    root = Path(tempfile.mkdtemp(prefix="lcp-pg-"))
    password = secrets.token_hex(16)
    (root / "pwfile").write_text(password + "\n")
    if user is not None:
        account = pwd.getpwnam(user)
        for p in (root, root / "pwfile"):
            os.chown(p, account.pw_uid, account.pw_gid)
    port = free_port()
    data, log = root / "data", root / "server.log"

    def run(*cmd: str) -> None:
        out = subprocess.run([*prefix, *cmd], capture_output=True, text=True, timeout=120, check=False)
        if out.returncode != 0:
            server_log = log.read_text() if log.exists() else ""
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stdout}\n{out.stderr}\n{server_log}")

    run(str(bindir / "initdb"), "-D", str(data), "-U", "dagster", f"--pwfile={root / 'pwfile'}",
        "-A", "scram-sha-256", "--no-sync", "-E", "UTF8")
    options = f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off -c full_page_writes=off"
    run(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w", "-t", "60", "start")
    try:
        env = {"DAGSTER_PG_HOST": "127.0.0.1", "DAGSTER_PG_PORT": str(port), "DAGSTER_PG_USER": "dagster",
               "DAGSTER_PG_PASSWORD": password, "DAGSTER_PG_DB": db_name}
        create_database(env, db_name)
        yield env
    finally:
        subprocess.run([*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
                       capture_output=True, timeout=120, check=False)
        shutil.rmtree(root, ignore_errors=True)


def create_database(pg_env: dict[str, str], db_name: str) -> None:
    import psycopg2

    admin = psycopg2.connect(host=pg_env["DAGSTER_PG_HOST"], port=int(pg_env["DAGSTER_PG_PORT"]),
                             user=pg_env["DAGSTER_PG_USER"], password=pg_env["DAGSTER_PG_PASSWORD"], dbname="postgres")
    try:
        admin.autocommit = True  # CREATE DATABASE cannot run in a transaction
        admin.cursor().execute(f'CREATE DATABASE "{db_name}"')
    finally:
        admin.close()


@contextmanager
def s3_server(bucket: str) -> Iterator[tuple[dict[str, str], object]]:
    """moto's S3-compatible HTTP server on a loopback port, with one empty bucket; yields the
    ``AWS_*`` variables s3fs reads and a boto3 client."""
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)  # binds in process: port 0
    server.start()
    try:
        host, port = server.get_host_and_port()
        env = {"AWS_ACCESS_KEY_ID": "lcp-test-key", "AWS_SECRET_ACCESS_KEY": "lcp-test-secret",
               "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": f"http://{host}:{port}"}
        client = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                              aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"], region_name="us-east-1")
        client.create_bucket(Bucket=bucket)
        yield env, client
    finally:
        server.stop()


def redis_server_bin() -> str | None:
    return shutil.which("redis-server") or (
        "/usr/bin/redis-server" if os.access("/usr/bin/redis-server", os.X_OK) else None)


@contextmanager
def redis_server() -> Iterator[str]:
    """Debian's redis-server on a loopback port, nothing persisted (``--save ''``, no AOF), in a
    folder of its own; yields its ``redis://`` URL (no database number)."""
    import redis

    binary = redis_server_bin()
    if binary is None:
        pytest.skip("redis-server not found (apt-get install redis-server; .ci/run does)")
    root = Path(tempfile.mkdtemp(prefix="lcp-redis-"))
    port = free_port()
    log = root / "server.log"
    proc = subprocess.Popen(
        [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
         "--dir", str(root), "--logfile", str(log), "--daemonize", "no", "--protected-mode", "yes"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"redis://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            try:
                if redis.Redis.from_url(url, socket_timeout=1).ping():
                    break
            except redis.exceptions.ConnectionError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start on port {port}:\n"
                                   f"{log.read_text() if log.exists() else ''}")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        shutil.rmtree(root, ignore_errors=True)
