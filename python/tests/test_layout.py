"""The Python package's layering and its map: every module of python/lineagestore belongs to a part, imports
only the parts below it (docs/architecture.md, "The Python package"), and is named in that section. Imports
inside functions count as much as those at the top: a lazy import is still a dependency."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python" / "lineagestore"
ARCHITECTURE = ROOT / "docs" / "architecture.md"

# The part of each top-level name of the package (the first component after "lineagestore.").
PART_OF = {
    "_version": "leaf",
    "_units": "leaf",
    "_extras": "leaf",
    "_options_support": "leaf",
    "_options_generated": "leaf",
    "jvm": "jvm",
    "_session": "session",
    "checkpoint": "checkpoint",
    "cli": "cli",
    "adjunct": "library",
    "sinks": "library",
    "realtime": "library",
    "demo": "demo",
    "checkpoint_jvm": "compat",
    "repartition": "compat",
    "migrate": "compat",
    "testing": "testing",
}

# What each part may import of lineagestore. "api" is the package itself (lineagestore/__init__.py:
# configure, PROVIDER_CLASS, ...). Read bottom-up: leaf <- jvm <- session <- api <- checkpoint <- cli.
ALLOWED = {
    "leaf": {"leaf"},
    "jvm": {"leaf", "jvm"},  # the JVM bridge imports nothing above it
    "session": {"leaf", "jvm", "session"},
    "api": {"leaf", "jvm", "session"},
    "checkpoint": {"leaf", "jvm", "session", "checkpoint"},
    "library": {"leaf", "jvm", "session", "api"},
    "cli": {"leaf", "jvm", "session", "api", "checkpoint", "cli"},
    "demo": {"leaf", "jvm", "session", "api", "checkpoint"},
    "compat": {"jvm", "checkpoint"},  # the old module names re-export their new homes, nothing else
    # test helpers use the public API (and the JVM bridge's jar versions), never the command line's modules
    "testing": {"leaf", "jvm", "session", "api", "testing"},
}
# packages whose __init__ is public API: testing may import their names, not their modules
PUBLIC_PACKAGES = {"lineagestore.cli", "lineagestore.checkpoint", "lineagestore.jvm"}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _part(module: str) -> str:
    if module == "lineagestore":
        return "api"
    top = module.split(".")[1]
    assert top in PART_OF, (
        f"lineagestore.{top} belongs to no part: add it to PART_OF and to docs/architecture.md"
    )
    return PART_OF[top]


def _imports(module: str, path: Path) -> set[str]:
    """The lineagestore modules ``module`` imports (``from X import name`` counts as X.name when that is a
    module, else as X)."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for a in node.names:
                found.add(f"{source}.{a.name}" if f"{source}.{a.name}" in MODULES else source)
    return {m for m in found if m == "lineagestore" or m.startswith("lineagestore.")}


def test_every_module_imports_only_what_its_part_may():
    wrong = []
    for module, path in MODULES.items():
        part = _part(module)
        for imported in _imports(module, path):
            target = _part(imported)
            if target in ALLOWED[part]:
                continue
            if part == "testing" and imported in PUBLIC_PACKAGES:
                continue
            wrong.append(f"{module} ({part}) imports {imported} ({target})")
    assert not wrong, "imports against the layering of docs/architecture.md:\n" + "\n".join(wrong)


def test_nothing_outside_testing_imports_the_test_helpers():
    # the pytest plugin (lineagestore.testing.plugin) is loaded by pytest's entry point, not imported by us
    users = [
        f"{module} imports {imported}"
        for module, path in MODULES.items()
        if _part(module) != "testing"
        for imported in _imports(module, path)
        if _part(imported) == "testing"
    ]
    assert not users, users


def test_the_layering_rules_catch_a_wrong_import(tmp_path):
    # the checks above must be able to fail: the JVM bridge importing the command line is refused
    assert "cli" not in ALLOWED["jvm"] and _part("lineagestore.cli.gc") == "cli"
    assert "checkpoint" not in ALLOWED["testing"] and "lineagestore.checkpoint.model" not in PUBLIC_PACKAGES
    fake = tmp_path / "x.py"
    fake.write_text("def f():\n    from lineagestore.cli.render import Page\n    from . import start\n")
    assert _imports("lineagestore.jvm.x", fake) == {"lineagestore.cli.render", "lineagestore.jvm.start"}


def test_every_module_is_named_in_architecture_md():
    text = ARCHITECTURE.read_text()
    start = text.index("\n## The Python package")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end > 0 else len(text)]
    missing = [
        str(path.relative_to(PACKAGE))
        for path in MODULES.values()
        if f"`{path.relative_to(PACKAGE).as_posix()}`" not in section
    ]
    assert not missing, f"modules not named in docs/architecture.md, 'The Python package': {missing}"
