"""`lcp run` is the verb that builds and evaluates a config; `lcp demo`, its earlier name, does the same (with a note
on stderr that it is now `lcp run`)."""

from __future__ import annotations

from click.testing import CliRunner

from lc_pipeline.cli import main


def test_run_and_demo_take_the_same_options():
    run, demo = main.get_command(None, "run"), main.get_command(None, "demo")
    assert [p.opts for p in run.params] == [p.opts for p in demo.params] == [["--lake"], ["--config"], ["--model"],
                                                                             ["--tasks"], ["--limit"]]
    assert demo.hidden and not run.hidden


def test_both_verbs_refuse_an_unknown_config_with_the_same_one_line_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / ".dagster"))
    errors = []
    for verb in ("run", "demo"):
        result = CliRunner().invoke(main, [verb, "--config", "no-such-config"])
        assert result.exit_code == 1, result.output
        assert "Traceback" not in result.output and result.stdout == ""
        errors.append(result.stderr)
    note = "note: 'lcp demo' is now 'lcp run'; the old name goes in the next release.\n"
    assert errors[0].startswith("Error: ") and errors[1] == note + errors[0]


def test_lake_is_one_option_of_lcp_itself(tmp_path, monkeypatch):
    """`lcp --lake DIR <command>`: the lake for every command (issue 32: --config was on 10 commands, the lake on
    none); the same as LCP_LAKE."""
    monkeypatch.setenv("LCP_LAKE", str(tmp_path / "from-the-environment"))  # restored after the test
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["--lake", str(tmp_path / "elsewhere"), "results", "query", "select 1"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert str(tmp_path / "elsewhere") in result.output  # the lake it looked in: --lake wins over LCP_LAKE
    assert "from-the-environment" not in result.output
    empty = CliRunner().invoke(main, ["--lake", " ", "results", "query", "select 1"])
    assert empty.exit_code == 2 and "--lake" in empty.output
