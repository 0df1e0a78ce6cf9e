"""Fetching the authors' files when online (issue 30, acceptance 3): a loopback HTTP server stands in for the
repository host, serving ../shared/official as ``/<owner>/<repo>/<commit>/<path>`` (only at the folder's pinned
commit). With LCP_OFFICIAL unset: every pinned file is fetched once into the cache and read from there after;
a served file with one changed byte is refused naming the file, and nothing of it is cached; offline with no
checkout and no cached copy, the read fails naming what to provide.
"""

from __future__ import annotations

import hashlib
import importlib
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from lc_pipeline.official import OfficialFileError, official_path, read_official_bytes

REPO = Path(__file__).resolve().parents[2]
SHARED_OFFICIAL = REPO.parent / "shared" / "official"
BENCHMARKS = ("longbench", "longbench_v2", "lveval", "loong", "helmet", "minilongbench")

pytestmark = pytest.mark.skipif(not SHARED_OFFICIAL.is_dir(),
                                reason=f"the authors' files are not at {SHARED_OFFICIAL} (../shared/official)")


def all_files():
    return [f for name in BENCHMARKS
            for f in importlib.import_module(f"lc_pipeline.benchmarks.{name}.official_files").FILES]


class RepositoryHost(BaseHTTPRequestHandler):
    """``GET /<owner>/<repo>/<commit>/<path>`` -> ``<root>/<owner>+<repo>/<path>`` when ``commit`` is the folder's."""

    root: Path
    requests: list[str]
    tampered: set[str]  # request paths served with their first byte changed

    def do_GET(self) -> None:  # http.server calls it by this name
        self.requests.append(self.path)
        owner, repo, commit, rel = (urllib.parse.unquote(self.path).lstrip("/").split("/", 3) + ["", "", "", ""])[:4]
        checkout = self.root / f"{owner}+{repo}"
        target = checkout / rel
        if (not rel or ".." in rel.split("/") or not (checkout / "COMMIT").is_file()
                or (checkout / "COMMIT").read_text().strip() != commit or not target.is_file()):
            self.send_error(404)
            return
        body = target.read_bytes()
        if self.path in self.tampered:
            body = bytes([body[0] ^ 1]) + body[1:]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:  # keep the test output clean
        pass


@pytest.fixture
def host(monkeypatch, tmp_path):
    """The loopback host on a free port, LCP_OFFICIAL_URL pointed at it, no checkout, an empty cache, online."""
    handler = type("Host", (RepositoryHost,), {"root": SHARED_OFFICIAL, "requests": [], "tampered": set()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    for var in ("LCP_OFFICIAL", "LCP_OFFLINE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE",
                "http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    monkeypatch.setenv("LCP_OFFICIAL_URL", f"http://127.0.0.1:{server.server_address[1]}/")
    monkeypatch.setenv("LCP_LOCAL_CACHE", str(tmp_path / "cache"))
    try:
        yield handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_every_pinned_file_is_fetched_once_into_the_cache(host, tmp_path):
    files = all_files()
    for file in files:
        data = read_official_bytes(file)
        assert data == (SHARED_OFFICIAL / file.folder / file.path).read_bytes()
        assert official_path(file) == tmp_path / "cache" / "official" / file.folder / file.commit / file.path
    assert len(host.requests) == len(files)  # one request per file, none for the second read above
    assert all(r.split("/")[3] == f.commit for r, f in zip(host.requests, files, strict=True))

    # The readers, later, read the cache: no request at all.
    from lc_pipeline.benchmarks.helmet import official_files as helmet
    from lc_pipeline.benchmarks.longbench import official_files as longbench

    assert len(longbench.dataset_prompts()) == 21 and len(helmet.summ_judge_prompts()) == 6
    assert len(host.requests) == len(files)
    # Once cached, offline reads work.
    with pytest.MonkeyPatch.context() as m:
        m.setenv("LCP_OFFLINE", "1")
        assert read_official_bytes(files[0]) == (SHARED_OFFICIAL / files[0].folder / files[0].path).read_bytes()


def test_a_changed_byte_is_refused_naming_the_file_and_nothing_is_cached(host, tmp_path):
    from lc_pipeline.benchmarks.longbench.official_files import DATASET2PROMPT

    url_path = f"/{DATASET2PROMPT.repo}/{DATASET2PROMPT.commit}/{DATASET2PROMPT.path}"
    host.tampered.add(url_path)
    changed = bytearray((SHARED_OFFICIAL / DATASET2PROMPT.folder / DATASET2PROMPT.path).read_bytes())
    changed[0] ^= 1
    with pytest.raises(OfficialFileError) as err:
        official_path(DATASET2PROMPT)
    message = str(err.value)
    for part in (DATASET2PROMPT.path, DATASET2PROMPT.commit, DATASET2PROMPT.sha256,
                 hashlib.sha256(bytes(changed)).hexdigest(), "refused"):
        assert part in message
    cached = tmp_path / "cache" / "official" / DATASET2PROMPT.folder / DATASET2PROMPT.commit / DATASET2PROMPT.path
    assert not [f for f in (tmp_path / "cache").rglob("*") if f.is_file()]  # nothing cached, no temp file left

    host.tampered.clear()  # the host serves the right bytes again: fetched, verified, cached
    assert official_path(DATASET2PROMPT) == cached and len(host.requests) == 2


@pytest.mark.parametrize("switch", ["LCP_OFFLINE", "HF_HUB_OFFLINE"])
def test_offline_without_a_checkout_names_what_to_provide(host, monkeypatch, switch):
    from lc_pipeline.benchmarks.lveval.official_files import CONFIG

    monkeypatch.setenv(switch, "1")
    with pytest.raises(OfficialFileError) as err:
        official_path(CONFIG)
    message = str(err.value)
    assert f"{switch} is set" in message
    assert f"LCP_OFFICIAL=<dir> holding infinigence+LVEval/config.py at commit {CONFIG.commit}" in message
    assert "or run with network" in message
    assert host.requests == []  # offline means no request


def test_a_failed_fetch_names_what_to_provide(host, monkeypatch):
    from lc_pipeline.benchmarks.loong.official_files import PROMPT
    from lc_pipeline.official import OfficialFile

    elsewhere = OfficialFile(PROMPT.repo, "f" * 40, PROMPT.path, PROMPT.sha256)  # a commit the host does not have
    with pytest.raises(OfficialFileError, match=r"fetching http://127\.0\.0\.1:\d+/MozerWang/Loong/f{40}/src/utils/"
                                                r"prompt\.py failed \(HTTP Error 404.*LCP_OFFICIAL=<dir>"):
        official_path(elsewhere)
