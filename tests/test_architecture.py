"""The shape of flows/: a layer cake whose imports only go down, family files that only
declare, commands that load only what they use, and one source for each fact.

The floors, lowest first (a module may import its own floor's modules without a circle, and
any floor below):

0. the core: errors and the build folder (``flows``), ``options``, ``progress``, ``runs``,
   ``layout``, ``host``;
1. the declarations: ``declare``, the family files, ``registry``, ``config``;
2. the studies (``flows.studies``), which use only the core and the golden models;
3. the EDA flows (``flows.eda``);
4. what gathers them: ``work``, ``tile_tables``, ``bench``, ``report``, ``sweep``,
   ``docgen``;
5. the commands (``flows.commands``);
6. the command line (``flows.cli``).

Function-level imports count: an import inside a function is an arrow too.
"""

import ast
import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from flows import registry

ROOT = Path(__file__).resolve().parent.parent
FLOWS = ROOT / "flows"

FLOORS = [
    ("flows", "flows.options", "flows.progress", "flows.runs", "flows.layout", "flows.host"),
    ("flows.declare", "flows.families", "flows.registry", "flows.config"),
    ("flows.studies",),
    ("flows.eda",),
    ("flows.work", "flows.tile_tables", "flows.bench", "flows.report", "flows.sweep",
     "flows.docgen"),
    ("flows.commands",),
    ("flows.cli",),
]


def floor(module: str) -> int:
    best = None
    for k, prefixes in enumerate(FLOORS):
        for p in prefixes:
            if module == p or module.startswith(p + "."):
                if best is None or len(p) > best[1]:
                    best = (k, len(p))
    assert best is not None, f"{module} is on no floor"
    return best[0]


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(FLOWS.rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known) -> set[str]:
    """The flows modules ``name`` imports, at module or function level."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod
                       for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rsplit(".", 1)[0] if "." in t else ""
            if t and t.startswith("flows") and t != name:
                out.add(t)
    return out


GRAPH = {name: imports(name, path, modules()) for name, path in modules().items()}


def test_no_import_runs_back_up():
    up = [f"{a} (floor {floor(a)}) imports {b} (floor {floor(b)})"
          for a, targets in GRAPH.items() for b in targets
          if floor(b) > floor(a) and not (a == "flows" or b == "flows")]
    assert not up, "\n".join(up)


def test_no_import_circles():
    """Tarjan's strongly connected components: a component of two modules or more is a
    circle."""
    index, low, stack, on, circles, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in GRAPH.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for v in GRAPH:
        if v not in index:
            visit(v)
    # a package's __init__ re-exporting its submodules is not a circle of code
    circles = [c for c in circles
               if not all(m == c[0] or m.startswith(c[0] + ".") for m in c)]
    assert not circles, circles


def test_family_files_only_declare():
    for name, targets in GRAPH.items():
        if name.startswith("flows.families."):
            assert targets <= {"flows.declare"}, (name, targets)


def test_the_help_loads_no_training_engine_and_no_numba():
    code = ("import sys\nfrom flows.cli import build_parser, main\n"
            "for argv in (['--help'], ['area', '--help'], ['list']):\n"
            "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
            "heavy = [m for m in sys.modules if m.startswith(('numba', 'flows.studies.train',"
            " 'cocotb', 'matplotlib'))]\nprint(heavy)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]", proc.stdout


def test_modules_and_functions_stay_small():
    """No module passes 800 lines; at most 10 functions pass 80 lines."""
    long_modules = [f"{p.relative_to(ROOT)}: {n}" for p in FLOWS.rglob("*.py")
                    if (n := len(p.read_text().splitlines())) > 800]
    assert not long_modules, long_modules
    long_functions = []
    for p in FLOWS.rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > 80:
                    long_functions.append(f"{p.relative_to(ROOT)}:{node.name} {length}")
    assert len(long_functions) <= 10, long_functions


def test_generated_docs_are_current():
    from flows.docgen import regenerate

    assert regenerate(ROOT, check=True) == [], "run make docs"


@pytest.mark.parametrize("unit_name", sorted(registry.units()))
def test_every_field_is_described(unit_name):
    from flows.config import field_docs

    cls = registry.get(unit_name).config_class()
    docs = field_docs(cls)
    missing = [f.name for f in dataclasses.fields(cls) if f.init and not docs.get(f.name)]
    assert not missing, missing


@pytest.mark.parametrize("unit_name", sorted(registry.units()))
def test_the_preset_is_the_class_defaults(unit_name):
    """A preset writes the paper's configuration out with its sources: it must say what the
    class defaults say."""
    from flows.config import load_config

    unit = registry.get(unit_name)
    assert load_config(unit) == unit.config_class()()
