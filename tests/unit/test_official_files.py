"""The authors' files (issue 30): pinned manifests verify against ../shared/official, the readers return the
shapes the protocols build on, and lc_pipeline.official reads .py files as data and refuses what it cannot trust.

The shared files are read in place (LCP_OFFICIAL), never copied; no test here reaches the network (LCP_OFFLINE).
Tests of the reading machinery use small files of our own in a temporary checkouts folder.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import string
from pathlib import Path

import pytest

from lc_pipeline.official import (
    OfficialFile,
    OfficialFileError,
    function_literals,
    official_path,
    read_official_json,
    read_official_text,
    read_python_literal,
)
from lc_pipeline.settings import DEFAULT_OFFICIAL_URL, Settings

REPO = Path(__file__).resolve().parents[2]
SHARED_OFFICIAL = REPO.parent / "shared" / "official"
needs_shared = pytest.mark.skipif(not SHARED_OFFICIAL.is_dir(),
                                  reason=f"the authors' files are not at {SHARED_OFFICIAL} (../shared/official)")
BENCHMARKS = ("longbench", "longbench_v2", "lveval", "loong", "helmet", "minilongbench")
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def manifest(name: str):
    return importlib.import_module(f"lc_pipeline.benchmarks.{name}.official_files")


def fields(template: str) -> list[str]:
    return [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]


@pytest.fixture
def shared_env(monkeypatch, tmp_path):
    """LCP_OFFICIAL at the shared checkouts, an empty cache, no network."""
    monkeypatch.setenv("LCP_OFFICIAL", str(SHARED_OFFICIAL))
    monkeypatch.setenv("LCP_LOCAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LCP_OFFLINE", "1")


@pytest.fixture
def own_checkouts(monkeypatch, tmp_path):
    """A checkouts folder for files of our own; returns ``write(path, text) -> OfficialFile`` (repo ours/tests)."""
    root = tmp_path / "official"
    monkeypatch.setenv("LCP_OFFICIAL", str(root))
    monkeypatch.setenv("LCP_LOCAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LCP_OFFLINE", "1")

    def write(path: str, text: str) -> OfficialFile:
        target = root / "ours+tests" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text.encode())
        return OfficialFile("ours/tests", COMMIT, path, hashlib.sha256(text.encode()).hexdigest())

    return write


# --- the manifests against the shared files --------------------------------------------------------------------


@needs_shared
@pytest.mark.parametrize("name", BENCHMARKS)
def test_every_manifest_entry_verifies_against_the_shared_checkout_at_its_commit(name, shared_env):
    files = manifest(name).FILES
    assert files and len({f.path for f in files}) == len(files)
    for file in files:
        assert file.commit == (SHARED_OFFICIAL / file.folder / "COMMIT").read_text().strip(), file
        path = official_path(file)
        assert path == SHARED_OFFICIAL / file.folder / file.path
        assert hashlib.sha256(path.read_bytes()).hexdigest() == file.sha256


@needs_shared
def test_every_shared_file_is_pinned_by_a_manifest():
    pinned = {f"{f.folder}/{f.path}" for name in BENCHMARKS for f in manifest(name).FILES}
    shared = {p.relative_to(SHARED_OFFICIAL).as_posix() for p in SHARED_OFFICIAL.rglob("*")
              if p.is_file() and p.name not in {"COMMIT", "README.md"}}
    assert shared == pinned


# --- the readers -----------------------------------------------------------------------------------------------

LONGBENCH_TASKS = {
    "narrativeqa", "qasper", "multifieldqa_en", "multifieldqa_zh", "hotpotqa", "2wikimqa", "musique", "dureader",
    "gov_report", "qmsum", "multi_news", "vcsum", "trec", "triviaqa", "samsum", "lsht", "passage_count",
    "passage_retrieval_en", "passage_retrieval_zh", "lcc", "repobench-p"}


@needs_shared
def test_longbench_readers(shared_env):
    lb = manifest("longbench")
    prompts, max_new = lb.dataset_prompts(), lb.dataset_max_new_tokens()
    assert set(prompts) == set(max_new) == LONGBENCH_TASKS
    record = {"context": "CONTEXT-MARK", "input": "INPUT-MARK", "answers": ["x"], "length": 3}
    for task, template in prompts.items():
        assert set(fields(template)) <= {"context", "input"} and "context" in fields(template), task
        assert "CONTEXT-MARK" in template.format(**record), task
    assert all(v > 0 for v in max_new.values())
    budgets = lb.model_max_lengths()
    assert budgets and all(v > 0 for v in budgets.values())


@needs_shared
def test_longbench_v2_prompt_templates(shared_env):
    v2 = manifest("longbench_v2")
    choices = ("$Q$", "$C_A$", "$C_B$", "$C_C$", "$C_D$")
    for name in v2.PROMPT_NAMES:
        text = v2.prompt_template(name)
        assert all(p in text for p in choices), name
        assert ("$DOC$" in text) == (name in {"0shot", "0shot_cot", "0shot_rag"}), name
        assert ("$COT$" in text) == (name == "0shot_cot_ans"), name
    with pytest.raises(OfficialFileError, match="no prompt '1shot'"):
        v2.prompt_template("1shot")
    assert all(v > 0 for v in v2.model_max_lengths().values())


@needs_shared
def test_lveval_config_tables_read_as_literals(shared_env):
    lv = manifest("lveval")
    prompts, max_new, selected = lv.dataset_prompts(), lv.dataset_max_new_tokens(), lv.datasets()
    assert len(selected) == 11 and set(prompts) == set(max_new) == set(selected)
    for name, template in prompts.items():
        assert set(fields(template)) == {"context", "input"}, name
    assert set(max_new.values()) <= {16, 64}
    assert lv.length_levels() == ["16k", "32k", "64k", "128k", "256k"]
    # DATASET_METRIC maps datasets to the authors' functions: refused, saying why.
    with pytest.raises(OfficialFileError, match=r"config.py.*'DATASET_METRIC'.*holding the name"):
        read_python_literal(lv.CONFIG, "DATASET_METRIC")


@needs_shared
def test_loong_judge_prompt_is_read_from_inside_its_function(shared_env):
    lo = manifest("loong")
    prompt = lo.judge_prompt()
    assert fields(prompt) == ["", "", ""]
    filled = prompt.format("QUESTION-MARK", "GOLD-MARK", "PREDICTED-MARK")
    assert filled.index("QUESTION-MARK") < filled.index("GOLD-MARK") < filled.index("PREDICTED-MARK")
    # At module level there is no such literal: the error says where 'prompt' is assigned instead.
    with pytest.raises(OfficialFileError, match=r"not assigned at module level.*function get_evaluate_prompts\(\)"):
        read_python_literal(lo.PROMPT, "prompt")


@needs_shared
def test_helmet_judge_prompts_demos_and_data_templates(shared_env):
    he = manifest("helmet")
    assert set(fields(he.longqa_judge_prompt())) == {"question", "correct_answers", "parsed_output"}
    summ = he.summ_judge_prompts()
    assert list(summ) == list(he.SUMM_JUDGE_PROMPTS)
    expected = {"fluency": {"text"}, "recall": {"keypoints", "summary"}, "precision": {"expert_summary", "summary"}}
    for name, prompt in summ.items():
        assert set(fields(prompt)) == expected[name.split("_")[0]], name
    for name in he.ALCE_DEMO_NAMES:
        demos = he.alce_demos(name)
        assert demos["demos"] and all({"question", "answer", "docs"} <= set(d) for d in demos["demos"]), name
    templates = he.data_templates("load_qa")
    names = [n for n, _, _ in templates]
    assert {"user_template", "system_template"} <= set(names)
    assert [line for _, line, _ in templates] == sorted(line for _, line, _ in templates)
    assert all(isinstance(v, str) for n, _, v in templates if n.endswith("_template"))


@needs_shared
def test_minilongbench_released_irt_parameters(shared_env):
    params = manifest("minilongbench").irt_parameters()
    assert len(params["disc"]) == len(params["diff"]) == len(params["item_ids"]) == 4750
    assert len(params["disc"][0]) == 10 and len(params["diff"][0]) == 1


# --- reading .py files as data (files of our own) --------------------------------------------------------------

SOURCE = '''import os

TABLE = {
    "a": "first part "
         "second part {context}",
    "b": ("parenthesised"),
}
ANNOTATED: dict[str, int] = {"x": 1, "y": -2}
NUMBERS = [1, 2, 3]
NUMBERS.append(4)
FSTRING = f"made {os.sep} at run time"
CALLED = open("x").read()
REFERS = {"a": os.path}
FIRST, SECOND = "a", "b"
TWICE = 1
TWICE = 2


def build(kind):
    local = """a local
template"""
    if kind:
        branch = "one"
    else:
        branch = "two"
    same = "s"
    if kind:
        same = "s"
    not_literal = kind + "x"
    return local, branch, same, not_literal


if __name__ == "__main__":
    MAIN_ONLY = "main"
'''


def test_module_literals_implicit_concatenation_parentheses_and_annotations(own_checkouts):
    file = own_checkouts("pkg/config.py", SOURCE)
    assert read_python_literal(file, "TABLE") == {"a": "first part second part {context}", "b": "parenthesised"}
    assert read_python_literal(file, "ANNOTATED") == {"x": 1, "y": -2}


@pytest.mark.parametrize(("name", "message"), [
    ("FSTRING", r"'FSTRING' at module level \(line 11\) is an f-string"),
    ("CALLED", r"'CALLED' .* is a call to open\('x'\)\.read\(\)"),
    ("REFERS", r"'REFERS' .* is a dict holding the name 'os.path'"),
    ("FIRST", r"'FIRST' .* bound by unpacking at line 14"),
    ("TWICE", r"'TWICE' is assigned 2 different values at module level \(lines 15, 16\)"),
    ("NUMBERS", r"'NUMBERS' .* changed after its assignment \(line 10\)"),
    ("local", r"'local' is not assigned at module level; it is assigned in function build\(\) \(line 20\)"),
    ("MAIN_ONLY", r"'MAIN_ONLY' is not assigned at module level; it is assigned in a module-level if block"),
    ("ABSENT", r"no assignment to 'ABSENT' at module level"),
])
def test_what_cannot_be_read_as_a_literal_is_refused_naming_file_and_name(own_checkouts, name, message):
    file = own_checkouts("pkg/config.py", SOURCE)
    with pytest.raises(OfficialFileError, match=message) as err:
        read_python_literal(file, name)
    assert "ours/tests:pkg/config.py" in str(err.value)


def test_literals_inside_a_function(own_checkouts):
    file = own_checkouts("pkg/config.py", SOURCE)
    assert read_python_literal(file, "local", function="build") == "a local\ntemplate"
    assert read_python_literal(file, "same", function="build") == "s"  # assigned twice, same value
    with pytest.raises(OfficialFileError, match=r"'branch' is assigned 2 different values in function build\(\)"):
        read_python_literal(file, "branch", function="build")
    with pytest.raises(OfficialFileError,
                       match=r"'not_literal' in function build\(\) \(line 29\) is an expression using the name 'kind'"):
        read_python_literal(file, "not_literal", function="build")
    with pytest.raises(OfficialFileError, match=r"no function missing\(\) \(functions: build\)"):
        read_python_literal(file, "local", function="missing")
    assert function_literals(file, "build") == [
        ("local", 20, "a local\ntemplate"), ("branch", 23, "one"), ("branch", 25, "two"), ("same", 26, "s"),
        ("same", 28, "s")]


def test_text_json_and_python_errors_name_the_file(own_checkouts):
    text = own_checkouts("t.txt", "line one\r\nline two\n")
    assert read_official_text(text) == "line one\nline two\n"  # as open(path).read() gives it
    bad_json = own_checkouts("bad.json", "{not json")
    with pytest.raises(OfficialFileError, match=r"ours/tests:bad.json@0123456789ab: not JSON"):
        read_official_json(bad_json)
    bad_py = own_checkouts("bad.py", "X = (\n")
    with pytest.raises(OfficialFileError, match=r"ours/tests:bad.py@0123456789ab: does not parse as Python"):
        read_python_literal(bad_py, "X")


# --- pins, paths, checkouts --------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "a/../../b", "./a", "a//b", "a/", "", "a\\b"])
def test_a_manifest_path_must_stay_inside_the_repository(path):
    with pytest.raises(OfficialFileError, match="must be a relative path inside the repository"):
        OfficialFile("ours/tests", COMMIT, path, "0" * 64)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"repo": "no-slash"}, "is not 'owner/name'"), ({"repo": "a/.."}, "is not 'owner/name'"),
    ({"commit": "abc"}, "commit 'abc' is not 40"), ({"sha256": "A" * 64}, "sha256 .* is not 64 lowercase")])
def test_a_pin_is_checked_when_made(kwargs, message):
    with pytest.raises(OfficialFileError, match=message):
        OfficialFile(**{"repo": "ours/tests", "commit": COMMIT, "path": "f.txt", "sha256": "0" * 64, **kwargs})


def test_a_checkout_at_another_commit_is_refused_with_both_digests(own_checkouts, tmp_path):
    file = own_checkouts("cfg/table.json", '{"a": 1}')
    local = tmp_path / "official" / "ours+tests" / "cfg" / "table.json"
    local.write_text('{"a": 2}')
    with pytest.raises(OfficialFileError) as err:
        official_path(file)
    message = str(err.value)
    for part in (str(local), file.sha256, hashlib.sha256(b'{"a": 2}').hexdigest(), f"checkout {COMMIT}"):
        assert part in message


def test_a_symlink_out_of_the_checkout_is_refused(own_checkouts, tmp_path):
    file = own_checkouts("cfg/table.json", '{"a": 1}')
    outside = tmp_path / "elsewhere.json"
    outside.write_text('{"a": 1}')
    local = tmp_path / "official" / "ours+tests" / "cfg" / "table.json"
    local.unlink()
    local.symlink_to(outside)
    with pytest.raises(OfficialFileError, match="outside"):
        official_path(file)


def test_offline_without_checkout_or_cache_names_what_to_provide(own_checkouts, monkeypatch):
    monkeypatch.delenv("LCP_OFFICIAL")
    file = OfficialFile("ours/tests", COMMIT, "cfg/absent.json", "0" * 64)
    with pytest.raises(OfficialFileError) as err:
        official_path(file)
    message = str(err.value)
    assert "LCP_OFFLINE is set" in message and "LCP_OFFICIAL: not set" in message
    assert f"LCP_OFFICIAL=<dir> holding ours+tests/cfg/absent.json at commit {COMMIT}" in message


def test_settings_official_dir_and_url(monkeypatch, tmp_path):
    monkeypatch.delenv("LCP_OFFICIAL", raising=False)
    monkeypatch.delenv("LCP_OFFICIAL_URL", raising=False)
    s = Settings.from_env(tmp_path)
    assert s.official_dir is None and s.official_url == DEFAULT_OFFICIAL_URL
    monkeypatch.setenv("LCP_OFFICIAL", "checkouts")
    monkeypatch.setenv("LCP_OFFICIAL_URL", "http://127.0.0.1:9/raw/")
    s = Settings.from_env(tmp_path)
    assert s.official_dir == tmp_path.resolve() / "checkouts" and s.official_url == "http://127.0.0.1:9/raw"


@needs_shared
def test_readers_take_the_runs_settings(monkeypatch, tmp_path):
    monkeypatch.delenv("LCP_OFFICIAL", raising=False)
    monkeypatch.setenv("LCP_OFFLINE", "1")
    monkeypatch.setenv("LCP_LOCAL_CACHE", str(tmp_path / "cache"))
    with pytest.raises(OfficialFileError, match="LCP_OFFICIAL: not set"):
        manifest("loong").judge_prompt()
    settings = dataclasses.replace(Settings.from_env(tmp_path), official_dir=SHARED_OFFICIAL)
    assert fields(manifest("loong").judge_prompt(settings=settings)) == ["", "", ""]
    assert len(manifest("lveval").datasets(settings=settings)) == 11
