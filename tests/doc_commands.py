"""The `lcp` command lines that README.md and docs/*.md show, as a shell would split them: read by
tests/unit/test_docs_commands.py (each resolves against the CLI) and tests/integration/test_docs_commands_run.py
(each block line runs).

A line in a fenced code block is split with ``shlex`` (quotes, ``\\`` line continuations, a quoted string spread
over lines; cut at the first ``|``, ``;``, ``&&`` or redirection, ``#`` starts a comment); a leading ``$ `` prompt
is dropped. A command in an inline code span of the prose (```lcp plan --model M```) is split the same way.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC_FILES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", flags=re.DOTALL | re.MULTILINE)
INLINE = re.compile(r"(?<!`)`(lcp [^`\n]+)`(?!`)")
SHELL_OPERATORS = {"|", "||", "&", "&&", ";", ">", ">>", "<", "2>", "2>&1"}


@dataclass(frozen=True)
class Example:
    """One `lcp` command line of a doc: its file's name, the line it starts on, its words after ``lcp``."""

    file: str
    line: int
    tokens: tuple[str, ...]
    inline: bool

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {shlex.join(self.tokens)}"

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def split_command(command: str) -> list[str] | None:
    """The words of one shell command line, or None while a quote is still open."""
    # `<` and `>` are not split off: `<name>` is a placeholder; a redirection is its own word (`> out.txt`)
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        tokens = list(lexer)
    except ValueError:  # no closing quotation: the string goes on over the next line
        return None
    for i, token in enumerate(tokens):
        if token in SHELL_OPERATORS or set(token) <= set(";&|"):
            return tokens[:i]
    return tokens


def block_commands(path: Path) -> list[Example]:
    """The `lcp` lines of ``path``'s fenced code blocks, in the order the page shows them."""
    text = path.read_text(encoding="utf-8")
    found = []
    for block in FENCE.finditer(text):
        first_line = text.count("\n", 0, block.start(1)) + 1
        lines = block.group(1).split("\n")
        i = 0
        while i < len(lines):
            stripped = lines[i].strip().removeprefix("$ ")
            if not re.match(r"lcp(\s|$)", stripped):
                i += 1
                continue
            start, command = i, stripped
            while True:
                if command.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    command = command[:-1] + " " + lines[i].strip()
                    continue
                tokens = split_command(command)
                if tokens is None and i + 1 < len(lines):
                    i += 1
                    command += "\n" + lines[i]
                    continue
                break
            assert tokens is not None, f"{path.name}:{first_line + start}: an unclosed quote in {command!r}"
            found.append(Example(path.name, first_line + start, tuple(tokens[1:]), inline=False))
            i += 1
    return found


def inline_commands(path: Path) -> list[Example]:
    """The `lcp ...` inline code spans of ``path``'s prose (outside code blocks)."""
    text = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), path.read_text(encoding="utf-8"))
    found = []
    for match in INLINE.finditer(text):
        tokens = split_command(match.group(1))
        assert tokens is not None, f"{path.name}: an unclosed quote in `{match.group(1)}`"
        found.append(Example(path.name, text.count("\n", 0, match.start()) + 1, tuple(tokens[1:]), inline=True))
    return found


def block_examples() -> list[Example]:
    """Every code-block `lcp` line of README.md and docs/*.md, page by page in order."""
    return [e for path in DOC_FILES for e in block_commands(path)]


def all_examples() -> list[Example]:
    """Every `lcp` command of README.md and docs/*.md: each page's code-block lines, then its inline spans."""
    return [e for path in DOC_FILES for e in (*block_commands(path), *inline_commands(path))]
