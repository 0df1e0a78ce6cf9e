"""The benchmark authors' own files (prompts, judge prompts, budget tables), read at run time, verified by sha256.

A benchmark package pins every file of the authors it reads as an :class:`OfficialFile` (repository, commit,
path, sha256) in its ``official_files.py``; only those pins live in this repository, never the files' content.
:func:`official_path` finds a pinned file, in this order:

1. ``$LCP_OFFICIAL/<owner>+<repo>/<path>``: a folder of the user's checkouts (``../shared/official`` has this
   layout);
2. ``<LCP_LOCAL_CACHE>/official/<owner>+<repo>/<commit>/<path>``: fetched before;
3. online: ``<LCP_OFFICIAL_URL>/<owner>/<repo>/<commit>/<path>`` (default host raw.githubusercontent.com),
   fetched once into that cache (temp file + rename).

Every file, whichever way it came, must hash to its pinned sha256; one that does not is refused with both
digests and the commit it should be at. Offline (``LCP_OFFLINE``, ``HF_HUB_OFFLINE`` or ``HF_DATASETS_OFFLINE``
set to 1/true/yes/on, or the fetch failing) with no checkout and no cached copy, the error says what to
provide. Nothing falls back silently to anything else.

The authors' ``.py`` files are data here: :func:`read_python_literal` and :func:`function_literals` parse them
with :mod:`ast` and evaluate assigned literals with :func:`ast.literal_eval`; nothing of theirs is imported or
run.
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from lc_pipeline import storage
from lc_pipeline.settings import Settings, first_switched_on

__all__ = [
    "FETCH_TIMEOUT_S",
    "OFFLINE_VARS",
    "OfficialFile",
    "OfficialFileError",
    "function_literals",
    "mapping_of",
    "official_path",
    "read_official_bytes",
    "read_official_json",
    "read_official_text",
    "read_python_literal",
]

FETCH_TIMEOUT_S = 30.0
OFFLINE_VARS = ("LCP_OFFLINE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")  # the project's Hub switches, and ours
_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+")
_HEX = {40: re.compile(r"[0-9a-f]{40}"), 64: re.compile(r"[0-9a-f]{64}")}
_MUTATORS = {"update", "append", "extend", "insert", "pop", "popitem", "clear", "setdefault", "remove",
             "__setitem__", "__delitem__", "add", "discard", "sort", "reverse"}


class OfficialFileError(RuntimeError):
    """An authors' file is missing, does not match its pin, or does not hold what was asked for."""


@dataclass(frozen=True)
class OfficialFile:
    """One file of a benchmark's public repository at a pinned commit, with the sha256 of its bytes."""

    repo: str  # "owner/name" as GitHub spells it
    commit: str  # 40 lowercase hex digits
    path: str  # POSIX path inside the repository
    sha256: str  # 64 lowercase hex digits

    def __post_init__(self) -> None:
        where = f"official file {self.repo}:{self.path}"
        if not _REPO.fullmatch(self.repo) or self.repo.split("/")[1] in {".", ".."}:
            raise OfficialFileError(f"{where}: repo {self.repo!r} is not 'owner/name'")
        for field, width in (("commit", 40), ("sha256", 64)):
            value = getattr(self, field)
            if not _HEX[width].fullmatch(value):
                raise OfficialFileError(f"{where}: {field} {value!r} is not {width} lowercase hex digits")
        p = PurePosixPath(self.path)
        if (not self.path or "\\" in self.path or p.is_absolute() or str(p) != self.path
                or any(part in {".", ".."} for part in p.parts)):
            raise OfficialFileError(f"{where}: path {self.path!r} must be a relative path inside the repository "
                                    "(no '.' or '..' parts, not absolute, '/'-separated)")

    @property
    def folder(self) -> str:
        """The repository's folder name in a checkouts folder or the cache: ``owner+name``."""
        return self.repo.replace("/", "+")

    def url(self, base: str) -> str:
        """Where the file is fetched from: ``<base>/<owner>/<repo>/<commit>/<path>``."""
        return f"{base.rstrip('/')}/{urllib.parse.quote(f'{self.repo}/{self.commit}/{self.path}')}"

    def __str__(self) -> str:
        return f"{self.repo}:{self.path}@{self.commit[:12]}"


def _offline_var() -> str | None:
    return first_switched_on(OFFLINE_VARS)


def _inside(root: Path, file: OfficialFile) -> Path:
    """``root/<file.path>``, refused when it resolves outside ``root`` (a symlink out of the checkout)."""
    root = Path(root).resolve()
    target = (root / file.path).resolve()
    if not target.is_relative_to(root):
        raise OfficialFileError(f"{file}: {root / file.path} resolves to {target}, outside {root}")
    return target


def _verify(file: OfficialFile, data: bytes, where: str, hint: str) -> None:
    digest = hashlib.sha256(data).hexdigest()
    if digest != file.sha256:
        raise OfficialFileError(
            f"{where}: sha256 {digest} is not the pinned {file.sha256} of {file.repo} {file.path} at commit "
            f"{file.commit}; {hint}")


def _missing(file: OfficialFile, looked: list[str], url: str, reason: str) -> OfficialFileError:
    return OfficialFileError(
        f"{file.repo} {file.path} at commit {file.commit} is not available: {reason}. Looked in: "
        f"{'; '.join(looked)}. Provide it: set LCP_OFFICIAL=<dir> holding {file.folder}/{file.path} at commit "
        f"{file.commit} (git clone https://github.com/{file.repo} <dir>/{file.folder} && "
        f"git -C <dir>/{file.folder} checkout {file.commit}), or run with network so that {url} is fetched")


def _locate(file: OfficialFile, settings: Settings | None) -> tuple[Path, bytes]:
    """Where ``file`` is (checkout, cache, or fetched into the cache) and its verified bytes."""
    s = settings or Settings.from_env()
    looked = []
    if s.official_dir is not None:
        checkout = Path(s.official_dir) / file.folder
        local = _inside(checkout, file)
        if local.is_file():
            data = local.read_bytes()
            _verify(file, data, str(local),
                    f"check out that commit in {checkout} (git -C {checkout} checkout {file.commit})")
            return local, data
        looked.append(f"{local} (LCP_OFFICIAL): absent")
    else:
        looked.append("LCP_OFFICIAL: not set")
    cached = _inside(Path(s.local_cache_dir) / "official" / file.folder / file.commit, file)
    if cached.is_file():
        data = cached.read_bytes()
        _verify(file, data, str(cached), "the cached copy is damaged: delete it to fetch it again")
        return cached, data
    looked.append(f"{cached} (cache): absent")
    url = file.url(s.official_url)
    offline = _offline_var()
    if offline:
        raise _missing(file, looked, url, f"{offline} is set, so {url} was not fetched")
    try:
        with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_S) as response:
            data = response.read()
    except (urllib.error.URLError, OSError, ValueError) as e:  # HTTPError and timeouts included
        raise _missing(file, looked, url, f"fetching {url} failed ({e})") from e
    _verify(file, data, url, "the server sent other bytes than the pinned file: refused, nothing cached")
    with storage.replacing(cached) as tmp:  # temp file + rename: a concurrent reader sees all of it or nothing
        tmp.write_bytes(data)
    return cached, data


def official_path(file: OfficialFile, *, settings: Settings | None = None) -> Path:
    """A verified local path holding ``file``'s pinned bytes: the user's checkout, the cache, or fetched into it."""
    return _locate(file, settings)[0]


def read_official_bytes(file: OfficialFile, *, settings: Settings | None = None) -> bytes:
    """``file``'s bytes, verified against its pinned sha256 (read once: what was verified is what is returned)."""
    return _locate(file, settings)[1]


def read_official_text(file: OfficialFile, *, settings: Settings | None = None) -> str:
    """``file`` as UTF-8 text, newlines translated as Python's ``open(path).read()`` does (the authors' reading)."""
    data = read_official_bytes(file, settings=settings)
    try:
        return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8").read()
    except UnicodeDecodeError as e:
        raise OfficialFileError(f"{file}: not UTF-8 text ({e})") from e


def read_official_json(file: OfficialFile, *, settings: Settings | None = None) -> Any:
    """``file`` parsed as JSON."""
    text = read_official_text(file, settings=settings)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise OfficialFileError(f"{file}: not JSON ({e})") from e


def mapping_of(file: OfficialFile, value: Any, value_type: type | tuple[type, ...], what: str) -> dict:
    """``value`` checked to be a dict of str keys to ``value_type`` values; the error names the file and the key."""
    if not isinstance(value, dict):
        raise OfficialFileError(f"{file}: {what} is a {type(value).__name__}, expected a mapping")
    for key, v in value.items():
        if not isinstance(key, str) or not isinstance(v, value_type) or isinstance(v, bool):
            raise OfficialFileError(f"{file}: {what}[{key!r}] is a {type(v).__name__}, expected "
                                    f"{getattr(value_type, '__name__', value_type)}")
    return value


# --- Python files read as data ----------------------------------------------------------------------------------


def _parse(file: OfficialFile, settings: Settings | None) -> ast.Module:
    text = read_official_text(file, settings=settings)
    try:
        return ast.parse(text, filename=str(file))
    except SyntaxError as e:
        raise OfficialFileError(f"{file}: does not parse as Python ({e})") from e


def _blocks(st: ast.stmt) -> list[list[ast.stmt]]:
    """The statement lists inside a compound statement (if/for/while/with/try/match), not a function or class."""
    if isinstance(st, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return []
    blocks = [getattr(st, field, None) or [] for field in ("body", "orelse", "finalbody")]
    blocks += [h.body for h in getattr(st, "handlers", None) or []]
    blocks += [case.body for case in getattr(st, "cases", None) or []]
    return [b for b in blocks if b]


def _statements(body: list[ast.stmt], *, nested: bool) -> list[ast.stmt]:
    """The statements of a scope in source order; with ``nested``, also those inside its if/for/while/with/try
    blocks (never inside nested functions or classes)."""
    out = []
    for st in body:
        out.append(st)
        if nested:
            for block in _blocks(st):
                out += _statements(block, nested=True)
    return out


def _assigned(st: ast.stmt, name: str) -> ast.expr | None | bool:
    """The value ``st`` assigns to ``name``; True when it binds ``name`` some other way (unpacking); None if not."""
    if isinstance(st, ast.Assign):
        for target in st.targets:
            if isinstance(target, ast.Name) and target.id == name:
                return st.value
            if isinstance(target, ast.Tuple | ast.List) and any(
                    isinstance(e, ast.Name) and e.id == name for e in ast.walk(target)):
                return True
    if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.target.id == name:
        return st.value if st.value is not None else None
    return None


def _mutation(st: ast.stmt, name: str) -> bool:
    """Whether ``st`` changes ``name`` in place (``name[k] = v``, ``name += x``, ``name.update(...)``)."""
    def base_is_name(node: ast.AST) -> bool:
        while isinstance(node, ast.Subscript | ast.Attribute):
            node = node.value
        return isinstance(node, ast.Name) and node.id == name

    if isinstance(st, ast.AugAssign):
        return base_is_name(st.target)
    if isinstance(st, ast.Assign | ast.AnnAssign):
        targets = st.targets if isinstance(st, ast.Assign) else [st.target]
        return any(isinstance(t, ast.Subscript | ast.Attribute) and base_is_name(t) for t in targets)
    if isinstance(st, ast.Delete):
        return any(isinstance(t, ast.Subscript | ast.Attribute) and base_is_name(t) for t in st.targets)
    if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
        func = st.value.func
        return isinstance(func, ast.Attribute) and func.attr in _MUTATORS and base_is_name(func.value)
    return False


_LITERAL_NODES = (ast.Constant, ast.Dict, ast.List, ast.Tuple, ast.Set, ast.UnaryOp, ast.BinOp, ast.Load,
                  ast.USub, ast.UAdd, ast.Add, ast.Sub)


def _not_literal(value: ast.expr) -> str:
    """What makes ``value`` not a literal, in words."""
    def kind(node: ast.AST) -> str:
        if isinstance(node, ast.JoinedStr):
            return "an f-string (its text is made when the file runs)"
        if isinstance(node, ast.Call):
            return f"a call to {ast.unparse(node.func)}() (its value is made when the file runs)"
        if isinstance(node, ast.Name | ast.Attribute):
            return f"the name {ast.unparse(node)!r} (a variable or function, not a literal)"
        return f"the {type(node).__name__} expression {ast.unparse(node)[:80]!r}"

    if not isinstance(value, _LITERAL_NODES):
        return kind(value)
    bad = next((n for n in ast.walk(value) if not isinstance(n, _LITERAL_NODES)), None)
    if bad is not None:
        container = {ast.Dict: "a dict holding", ast.List: "a list holding", ast.Tuple: "a tuple holding",
                     ast.Set: "a set holding"}.get(type(value), "an expression using")
        return f"{container} {kind(bad)} at line {bad.lineno}"
    return f"the {type(value).__name__} expression {ast.unparse(value)[:80]!r}, which ast.literal_eval rejects"


def _scopes(tree: ast.Module) -> list[tuple[str, ast.stmt]]:
    """Every statement with the scope it sits in, in words ("function load_qa()", "an if block at module level")."""
    out: list[tuple[str, ast.stmt]] = []

    def visit(body: list[ast.stmt], scope: str) -> None:
        for st in body:
            out.append((scope, st))
            if isinstance(st, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(st.body, f"function {st.name}()")
            elif isinstance(st, ast.ClassDef):
                visit(st.body, f"class {st.name}")
            else:
                inner = scope if scope != "module level" else f"a module-level {type(st).__name__.lower()} block"
                for block in _blocks(st):
                    visit(block, inner)

    visit(tree.body, "module level")
    return out


def _function(tree: ast.Module, file: OfficialFile, function: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    found = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == function]
    if not found:
        names = sorted({n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)})
        raise OfficialFileError(f"{file}: no function {function}() (functions: {', '.join(names) or 'none'})")
    if len(found) > 1:
        raise OfficialFileError(f"{file}: {len(found)} functions named {function}() (lines "
                                f"{', '.join(str(n.lineno) for n in found)}): cannot tell which one")
    return found[0]


def read_python_literal(file: OfficialFile, name: str, *, function: str | None = None,
                        settings: Settings | None = None) -> Any:
    """The literal value assigned to ``name`` in the Python file ``file``, parsed, never imported or run.

    Without ``function``: a module-level ``name = <literal>`` (or ``name: T = <literal>``). With ``function``:
    the assignment to ``name`` inside that function (its branches included). Implicitly concatenated and
    parenthesised strings are one literal. Refused, naming the file and ``name``: no such assignment (the
    error says where ``name`` is assigned instead, e.g. inside a function), several assignments with different
    values, a value that is not a literal (an f-string, a call, a name), or a value changed in place afterwards.
    """
    tree = _parse(file, settings)
    if function is None:
        scope, where = _statements(tree.body, nested=False), "at module level"
    else:
        scope, where = _statements(_function(tree, file, function).body, nested=True), f"in function {function}()"
    hits = [(st, v) for st in scope if (v := _assigned(st, name)) is not None]
    if not hits:
        elsewhere = [f"{sc} (line {st.lineno})" for sc, st in _scopes(tree) if _assigned(st, name) is not None]
        if elsewhere:
            raise OfficialFileError(f"{file}: {name!r} is not assigned {where}; it is assigned in "
                                    f"{'; '.join(elsewhere)} (pass function=<name> to read it inside a function)")
        raise OfficialFileError(f"{file}: no assignment to {name!r} {where}")
    values = []
    for st, value in hits:
        if value is True:
            raise OfficialFileError(f"{file}: {name!r} {where} is bound by unpacking at line {st.lineno}, "
                                    "not assigned a literal")
        try:
            values.append((st.lineno, ast.literal_eval(value)))
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise OfficialFileError(f"{file}: {name!r} {where} (line {st.lineno}) is {_not_literal(value)}, "
                                    "not a literal that can be read without running the file") from None
    if any(v != values[0][1] for _, v in values[1:]):
        raise OfficialFileError(f"{file}: {name!r} is assigned {len(values)} different values {where} (lines "
                                f"{', '.join(str(line) for line, _ in values)}); use function_literals() to read "
                                "them all with their lines")
    changed = [st.lineno for st in scope if st.lineno > values[0][0] and _mutation(st, name)]
    if changed:
        raise OfficialFileError(f"{file}: {name!r} {where} is changed after its assignment (line "
                                f"{', '.join(map(str, changed))}): its value depends on running the file")
    return values[0][1]


def function_literals(file: OfficialFile, function: str, *,
                      settings: Settings | None = None) -> list[tuple[str, int, Any]]:
    """Every ``name = <literal>`` inside ``function`` of ``file`` (branches included, nested functions not), as
    ``(name, line, value)`` in source order: for files that set templates per branch of a loader.
    Assignments of non-literal values are left out."""
    tree = _parse(file, settings)
    out = []
    for st in _statements(_function(tree, file, function).body, nested=True):
        targets = st.targets if isinstance(st, ast.Assign) else [st.target] if isinstance(st, ast.AnnAssign) else []
        if getattr(st, "value", None) is None:
            continue
        for target in targets:
            if isinstance(target, ast.Name):
                try:
                    out.append((target.id, st.lineno, ast.literal_eval(st.value)))
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    pass
    return sorted(out, key=lambda t: t[1])
