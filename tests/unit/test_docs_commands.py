"""Every `lcp` command the README and docs/ show (tests/doc_commands.py extracts them) resolves against the real CLI,
and every relative link there points to a file that exists (issue 32, acceptance 4: the front door stays true as the
CLI changes). tests/integration/test_docs_commands_run.py runs the code-block lines.

A command line in a code block is parsed the way a shell would split it (``shlex``: quotes, ``\\`` line
continuations, a query string spread over lines; cut at the first ``|``, ``;``, ``&&`` or redirection), then
given to click's ``make_context`` with resilient parsing off and without invoking anything: the command and
subcommand must exist, every option must be one the command accepts, values must convert and required
arguments must be there. A placeholder value (``$VAR``, ``<name>``) and a path the user supplies (a
``click.Path(exists=True)``) are accepted as they stand; everything else is checked as written. A command in
an inline code span of the prose (```lcp plan --model M```) is checked the same way except that missing
arguments are allowed there (prose names a command without spelling every argument).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import click
import pytest
from doc_commands import DOC_FILES, FENCE, Example, all_examples

from lc_pipeline.cli import main as lcp

PLACEHOLDER = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|<[^<>\s]+>|\.\.\.|…")
EXAMPLES = all_examples()


def _is_placeholder(value: str) -> bool:
    return bool(PLACEHOLDER.search(value))


def _lenient(command: click.Command, raw: dict[str, object]) -> click.Command:
    """The command with its parameters' types relaxed to text where the docs give a placeholder or the
    user's own path: the option names, arguments and every other value are checked as click checks them."""
    params = []
    for param in command.params:
        values = raw.get(param.name)
        values = values if isinstance(values, (list, tuple)) else [values]
        user_path = isinstance(param.type, click.Path) and param.type.exists or isinstance(param.type, click.File)
        if user_path or any(isinstance(v, str) and _is_placeholder(v) for v in values):
            param = copy.copy(param)
            param.type = click.STRING
            param.callback = None
        params.append(param)
    relaxed = copy.copy(command)
    relaxed.params = params
    return relaxed


def resolve(example: Example) -> list[str]:
    """Walk from ``lcp`` through its groups to the leaf command, building each context (options parsed and
    converted, arguments counted) without invoking anything; returns the command path."""
    names: list[str] = []

    def walk(command: click.Command, name: str, args: list[str], parent: click.Context | None) -> None:
        names.append(name)
        probe = click.Context(command, info_name=name, parent=parent)
        raw, rest, _ = command.make_parser(probe).parse_args(list(args))
        try:
            ctx = _lenient(command, raw).make_context(name, list(args), parent=parent,
                                                      resilient_parsing=example.inline)
        except click.exceptions.Exit as exc:  # --help: the command resolved and printed its help
            assert exc.exit_code == 0, f"{example}: exit {exc.exit_code}"
            return
        if isinstance(command, click.Group):
            if not rest:
                if example.inline:
                    return
                raise click.UsageError(f"{' '.join(names)} needs a subcommand", ctx=ctx)
            if _is_placeholder(rest[0]):  # `lcp --lake DIR <command>`: any command
                return
            sub_name, sub, sub_args = command.resolve_command(ctx, list(rest))
            assert sub is not None and sub_name is not None, f"{example}: no command {rest[0]!r}"
            walk(sub, sub_name, sub_args, ctx)

    walk(lcp, "lcp", list(example.tokens), None)
    return names


def test_the_docs_show_commands():
    files = {e.file for e in EXAMPLES if not e.inline}
    assert "README.md" in files, files
    assert len(EXAMPLES) >= 40, len(EXAMPLES)


@pytest.mark.parametrize("example", EXAMPLES, ids=str)
def test_each_lcp_command_resolves_against_the_cli(example):
    try:
        resolve(example)
    except click.ClickException as exc:
        pytest.fail(f"{example}\n  click: {exc.format_message()}")


LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def relative_links() -> list[tuple[str, str, Path]]:
    links = []
    for path in DOC_FILES:
        text = FENCE.sub("", path.read_text(encoding="utf-8"))
        for target in LINK.findall(text):
            if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue  # a URL or an anchor in the same page
            links.append((path.name, target, (path.parent / target.split("#")[0]).resolve()))
    return links


def anchors(path: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings: lower case, punctuation dropped, spaces to hyphens."""
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
            for heading in re.findall(r"^#{1,6} (.+)$", text, flags=re.MULTILINE)}


def test_every_relative_link_points_to_a_file():
    links = relative_links()
    assert any(name == "README.md" and target == "docs/index.md" for name, target, _ in links)
    broken = [f"{name}: ({target})" for name, target, resolved in links if not resolved.exists()]
    assert broken == [], broken


def test_every_anchor_names_a_heading():
    with_anchor = [(name, target, resolved) for name, target, resolved in relative_links()
                   if "#" in target and resolved.suffix == ".md"]
    assert with_anchor  # the README and the guides link sections, e.g. getting-started.md#tests
    broken = [f"{name}: ({target})" for name, target, resolved in with_anchor
              if target.split("#", 1)[1] not in anchors(resolved)]
    assert broken == [], broken
