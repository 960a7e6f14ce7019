"""The Python signatures and calls the user guides show are the code's (issue 52: docs/adjunct-tables.md showed
``maintain`` without its required ``checkpoint``, and an ``enrich`` argument order that put ``on`` into
``checkpoint`` without an error).

Two things are read from every page of docs/ and the README, without Spark:

* **signature blocks**: a ``python`` code block whose first line is ``# lineagestore.<module>`` and whose body
  is only ``def name(...): ...`` stubs. Each stub must equal ``inspect.signature`` of the module's function:
  the same parameters in the same order, the same kinds (positional or keyword-only, ``*args``,
  ``**kwargs``) and the same defaults. docs/adjunct-tables.md has one, listing every public function of
  ``lineagestore.adjunct``.
* **calls**: every call of a ``lineagestore`` function in the pages' inline code and ``python`` blocks
  (``lineagestore.x.f(...)``, ``adjunct.f(...)``; on docs/adjunct-tables.md also its bare ``f(...)``) must bind
  to the function's signature: no unknown keyword, no missing required argument, not too many positional
  ones; and a positional argument written as a parameter's name (``enrich(events, path, on, ...)``) must be
  taken by that parameter, not silently by another one. A ``...`` positional argument stands for "the other
  arguments" (``enrich(..., bootstrap=q)``): then only what is written is checked.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
INLINE = re.compile(r"(?<!`)`([^`]+)`(?!`)")
SIGNATURE_HEADER = re.compile(r"#\s*(lineagestore(?:\.\w+)*)\s*$")
# what a name stands for in a page's prose and blocks, beside ``lineagestore`` itself
ALIASES = {"lineagestore": "lineagestore", "adjunct": "lineagestore.adjunct"}
# a page about one module calls its functions by their bare names in prose
PAGE_MODULE = {"adjunct-tables.md": "lineagestore.adjunct"}


def fenced_blocks(text: str) -> Iterator[tuple[str, str]]:
    for m in FENCE.finditer(text):
        yield m.group(1), m.group(2)


def prose(text: str) -> str:
    return FENCE.sub("", text)


def signature_blocks(text: str) -> Iterator[tuple[str, ast.Module]]:
    """(module name, parsed stubs) of each signature block of a page."""
    for lang, body in fenced_blocks(text):
        first = body.split("\n", 1)[0]
        header = SIGNATURE_HEADER.fullmatch(first.strip())
        if lang == "python" and header:
            yield header.group(1), ast.parse(body)


def resolve(dotted: list[str]) -> Any:
    """The object ``a.b.c`` names, importing submodules as needed; raises AttributeError if there is none."""
    obj: Any = importlib.import_module(dotted[0])
    for part in dotted[1:]:
        if hasattr(obj, part):
            obj = getattr(obj, part)
        elif inspect.ismodule(obj):
            try:
                obj = importlib.import_module(f"{obj.__name__}.{part}")
            except ModuleNotFoundError:
                raise AttributeError(f"{'.'.join(dotted)}: {obj.__name__} has no {part}") from None
        else:
            raise AttributeError(f"{'.'.join(dotted)}: {obj!r} has no {part}")
    return obj


def dotted_name(node: ast.expr) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def block_aliases(tree: ast.Module) -> dict[str, str]:
    """The names a block imports from lineagestore, as dotted targets."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "lineagestore":
                    out[a.asname or a.name.split(".")[0]] = a.name if a.asname else "lineagestore"
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "lineagestore":
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def documented_calls(page: Path) -> Iterator[tuple[str, str, ast.Call]]:
    """(where, dotted target, call) of every call of a lineagestore function the page shows."""
    text = page.read_text()
    sources = [("inline", span.replace("\n", " "), {}) for span in INLINE.findall(prose(text))]
    for lang, body in fenced_blocks(text):
        if lang == "python" and not any(True for _ in signature_blocks(f"```python\n{body}```\n")):
            sources.append(("python block", body, None))
    bare = PAGE_MODULE.get(page.name)
    for kind, source, names in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue  # shell commands, paths, Scala: not Python
        aliases = dict(ALIASES)
        if names is None:  # a block: what it imports; bare names only as imported
            aliases.update(block_aliases(tree))
        defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            dotted = dotted_name(node.func)
            if dotted is None or dotted[0] in defined:
                continue
            if dotted[0] in aliases:
                target = aliases[dotted[0]].split(".") + dotted[1:]
            elif (
                kind == "inline"
                and bare
                and len(dotted) == 1
                and hasattr(importlib.import_module(bare), dotted[0])
            ):
                target = bare.split(".") + dotted
            else:
                continue
            yield f"{page.relative_to(ROOT)} ({kind}: {ast.unparse(node)})", ".".join(target), node


def is_ellipsis(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is Ellipsis


def call_problem(sig: inspect.Signature, call: ast.Call) -> str | None:
    """Why ``call`` does not fit ``sig`` (None: it fits)."""
    params = sig.parameters
    positional = call.args
    partial = any(is_ellipsis(a) or isinstance(a, ast.Starred) for a in positional)
    if partial:
        cut = next(i for i, a in enumerate(positional) if is_ellipsis(a) or isinstance(a, ast.Starred))
        positional = positional[:cut]
    holders = [object() for _ in positional]
    keywords = {}
    for kw in call.keywords:
        if kw.arg is None:  # **settings: any keywords
            if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
                return "passes **keywords, which the function does not take"
            partial = True
        else:
            keywords[kw.arg] = object()
    try:
        bound = (sig.bind_partial if partial else sig.bind)(*holders, **keywords)
    except TypeError as e:
        return str(e)
    taken_by = {id(v): name for name, v in bound.arguments.items() if not isinstance(v, tuple | dict)}
    for arg, holder in zip(positional, holders, strict=True):
        if isinstance(arg, ast.Name) and arg.id in params and taken_by.get(id(holder)) != arg.id:
            return (
                f"the positional argument {arg.id!r} is taken by parameter {taken_by.get(id(holder), '*args')!r}, "
                f"not by the parameter {arg.id!r}"
            )
    return None


def test_every_documented_call_binds_to_the_real_signature():
    problems, checked = [], 0
    for page in PAGES:
        for where, target, call in documented_calls(page):
            try:
                fn = resolve(target.split("."))
            except AttributeError as e:
                problems.append(f"{where}: names {target}, which does not exist ({e})")
                continue
            if not callable(fn):
                continue
            checked += 1
            problem = call_problem(inspect.signature(fn), call)
            if problem:
                problems.append(f"{where}: does not fit {target}{inspect.signature(fn)}: {problem}")
    assert not problems, "\n".join(problems)
    assert checked >= 20, f"only {checked} documented calls found: is the page parsing still right?"


def stub_signature(stub: ast.FunctionDef) -> list[tuple[str, str, Any]]:
    """(name, kind, default) of each parameter of a documented stub, as ``inspect`` names kinds."""
    a = stub.args
    out: list[tuple[str, str, Any]] = []
    positional = a.posonlyargs + a.args
    defaults = [inspect.Parameter.empty] * (len(positional) - len(a.defaults)) + [
        ast.literal_eval(d) for d in a.defaults
    ]
    for i, (p, d) in enumerate(zip(positional, defaults, strict=True)):
        kind = "POSITIONAL_ONLY" if i < len(a.posonlyargs) else "POSITIONAL_OR_KEYWORD"
        out.append((p.arg, kind, d))
    if a.vararg:
        out.append((a.vararg.arg, "VAR_POSITIONAL", inspect.Parameter.empty))
    for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        out.append((p.arg, "KEYWORD_ONLY", inspect.Parameter.empty if d is None else ast.literal_eval(d)))
    if a.kwarg:
        out.append((a.kwarg.arg, "VAR_KEYWORD", inspect.Parameter.empty))
    return out


def real_signature(fn: Any) -> list[tuple[str, str, Any]]:
    return [(p.name, p.kind.name, p.default) for p in inspect.signature(fn).parameters.values()]


def all_signature_stubs() -> list[tuple[str, str, ast.FunctionDef]]:
    out = []
    for page in PAGES:
        for module, tree in signature_blocks(page.read_text()):
            for node in tree.body:
                assert isinstance(node, ast.FunctionDef), (
                    f"{page.relative_to(ROOT)}: the signature block of {module} holds only `def f(...): ...` "
                    f"stubs, not {ast.unparse(node)}"
                )
                out.append((f"{page.relative_to(ROOT)}", module, node))
    return out


@pytest.mark.parametrize(
    "page,module,stub",
    all_signature_stubs(),
    ids=lambda x: x.name if isinstance(x, ast.FunctionDef) else None,
)
def test_signature_block_is_the_code(page, module, stub):
    fn = getattr(importlib.import_module(module), stub.name, None)
    assert fn is not None, f"{page} documents {module}.{stub.name}, which does not exist"
    documented, real = stub_signature(stub), real_signature(fn)
    assert documented == real, (
        f"{page}: {module}.{stub.name} is documented as ({ast.unparse(stub.args)}) but is {inspect.signature(fn)}"
    )


def test_adjunct_page_documents_every_public_function():
    import lineagestore.adjunct as module

    public = {
        name
        for name, obj in vars(module).items()
        if inspect.isfunction(obj) and obj.__module__ == module.__name__ and not name.startswith("_")
    }
    documented = {stub.name for page, m, stub in all_signature_stubs() if m == module.__name__}
    assert public <= documented, f"docs/adjunct-tables.md has no signature of {sorted(public - documented)}"
