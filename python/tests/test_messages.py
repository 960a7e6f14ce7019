"""Every message the package prints names only commands an installed package has.

A message (any string in the package's code but a docstring, and the docstring of a module that prints its
own ``__doc__`` as usage) must not send a user to a script of the source checkout (``dev/...``,
``.ci/...``, ``integration-tests/...``), which the wheel does not carry; a ``python -m <module>`` it names
must be importable, and a `lineagestore-...` command it names in backticks must be a console script of
pyproject.toml.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "python" / "lineagestore"
REPO_ONLY = re.compile(r"(?<![\w./-])(?:dev|\.ci|integration-tests)/[\w.-]+")
PYTHON_M = re.compile(r"python -m ([A-Za-z_][\w.]*)")
CONSOLE_SCRIPT = re.compile(r"`(lineagestore(?:-[a-z]+)*)(?=[ `])")
WHOLE_DOC_USED = re.compile(r"__doc__(?!\.splitlines\(\)\[0\])")  # not only its first line


def messages(source: str) -> list[str]:
    """The strings of ``source`` a user can see: all but docstrings, and the module docstring too when the
    module uses all of its ``__doc__`` (a usage text)."""
    tree = ast.parse(source)
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                if not (isinstance(node, ast.Module) and WHOLE_DOC_USED.search(source)):
                    docstrings.add(id(body[0].value))
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def runnable(module: str) -> bool:
    """``python -m module`` finds it: this package's by its file (importing nothing), others by name."""
    module = module.rstrip(".")
    if module.split(".")[0] == "lineagestore":
        path = PACKAGE.parent.joinpath(*module.split("."))
        return path.with_suffix(".py").is_file() or (path / "__main__.py").is_file()
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def problems(source: str, console_scripts: set[str]) -> list[str]:
    found = []
    for text in messages(source):
        found += [f"names the repository's {m!r}" for m in REPO_ONLY.findall(text)]
        found += [
            f"names `python -m {m}`, which does not import" for m in PYTHON_M.findall(text) if not runnable(m)
        ]
        found += [
            f"names `{m}`, which is no console script of pyproject.toml"
            for m in CONSOLE_SCRIPT.findall(text)
            if m not in console_scripts
        ]
    return found


def console_scripts() -> set[str]:
    return set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"])


def test_the_check_finds_a_repository_script_and_a_missing_command():
    bad = '''
def build():
    """Docstrings may mention dev/test."""
    raise RuntimeError(f"no MinIO at {1}; run dev/s3server.sh or `lineagestore-nothing prepare`")
'''
    assert problems(bad, {"lineagestore"}) == [
        "names the repository's 'dev/s3server.sh'",
        "names `lineagestore-nothing`, which is no console script of pyproject.toml",
    ]
    assert problems("print(__doc__)\n", set()) == []
    assert problems('"""usage: python -m lineagestore.no_such_module"""\nprint(__doc__)\n', set()) == [
        "names `python -m lineagestore.no_such_module`, which does not import"
    ]
    assert problems('x = "see /dev/null and run `lineagestore inspect`"\n', {"lineagestore"}) == []


def test_package_messages_name_only_installed_commands():
    scripts = console_scripts()
    found = [
        f"{path.relative_to(REPO)}: {problem}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for problem in problems(path.read_text(), scripts)
    ]
    assert not found, "\n".join(found)
