"""Mirror and verify: the model code in helpers/ is exactly what the notebooks teach.

A notebook cell whose first line is ``# saved in helpers/<module>.py`` contains only definitions;
each of them must appear, byte for byte, in that module, in notebook order, under the banner of
its notebook (``# ── NN · Title``). Every definition in such a module must come from a notebook,
and no notebook may import a piece that only a later notebook builds.

Uses only the standard library (ast, difflib, json) so it runs before anything else is trusted.
"""

from __future__ import annotations

import ast
import difflib
import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
MARKER = re.compile(r"^# saved in (helpers/[A-Za-z_]\w*\.py)\s*$")
BANNER = re.compile(r"^# ── (\d\d) · ")
DEFINITIONS = (ast.FunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)
MODEL_IMPORTS = {"numpy", "math", "__future__", "dataclasses", "typing"}


@dataclass
class Definition:
    name: str
    source: str
    notebook: str  # e.g. "01" (the notebook number), or "" for the module side
    where: str


def cell_sources(path: Path) -> list[str]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            src = cell["source"]
            out.append("".join(src) if isinstance(src, list) else src)
    return out


def node_name(node: ast.stmt) -> str:
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return node.name
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    names = [t.id for t in targets if isinstance(t, ast.Name)]
    if len(names) != 1:
        raise ValueError(f"unsupported assignment at line {node.lineno}: one plain name expected")
    return names[0]


def node_source(source: str, node: ast.stmt) -> str:
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return "\n".join(source.splitlines()[first - 1 : node.end_lineno])


def saved_definitions(notebooks: list[Path]) -> tuple[dict[str, list[Definition]], list[str]]:
    """Definitions from `# saved in` cells, per module, in notebook order; and problems found."""
    per_module: dict[str, list[Definition]] = {}
    problems: list[str] = []
    for path in notebooks:
        number = path.name[:2]
        for k, src in enumerate(cell_sources(path)):
            first_line = src.split("\n", 1)[0]
            match = MARKER.match(first_line)
            if not match:
                continue
            where = f"{path.name}, code cell {k + 1}"
            tree = ast.parse(src)
            for node in tree.body:
                if not isinstance(node, DEFINITIONS):
                    problems.append(
                        f"{where}: a saved cell holds only definitions, found "
                        f"{type(node).__name__} at line {node.lineno}; move it to the next cell"
                    )
                    continue
                per_module.setdefault(match.group(1), []).append(
                    Definition(node_name(node), node_source(src, node), number, where)
                )
    return per_module, problems


def module_definitions(path: Path) -> tuple[list[Definition], list[str]]:
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    lines = source.splitlines()
    defs, problems = [], []
    for i, node in enumerate(tree.body):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # module docstring
        if isinstance(node, ast.Assign) and node_name(node) == "__all__":
            continue
        if not isinstance(node, DEFINITIONS):
            problems.append(f"{path.name}:{node.lineno}: only definitions belong in this module")
            continue
        banner = ""
        for line in reversed(lines[: node.lineno - 1]):
            m = BANNER.match(line)
            if m:
                banner = m.group(1)
                break
        defs.append(Definition(node_name(node), node_source(source, node), banner,
                               f"{path.name}:{node.lineno}"))
    return defs, problems


def sync_problems(notebooks: list[Path], root: Path) -> list[str]:
    per_module, problems = saved_definitions(notebooks)
    for module, saved in per_module.items():
        path = root / module
        if not path.exists():
            problems.append(f"{saved[0].where}: saves into {module}, which does not exist")
            continue
        in_module, module_problems = module_definitions(path)
        problems += module_problems
        by_name = {d.name: d for d in in_module}
        seen: dict[str, Definition] = {}
        for d in saved:
            if d.name in seen:
                problems.append(f"{d.where}: {d.name} is already saved by {seen[d.name].where}")
                continue
            seen[d.name] = d
            if d.name not in by_name:
                problems.append(f"{d.where}: {d.name} is saved here but missing from {module}")
                continue
            m = by_name[d.name]
            if m.source != d.source:
                diff = "\n".join(difflib.unified_diff(
                    d.source.splitlines(), m.source.splitlines(),
                    fromfile=d.where, tofile=m.where, lineterm=""))
                problems.append(f"{d.name} differs between notebook and module:\n{diff}")
            if m.notebook != d.notebook:
                problems.append(
                    f"{m.where}: {d.name} (from notebook {d.notebook}) stands under the banner "
                    f"of notebook {m.notebook or '(none)'}; add '# ── {d.notebook} · ...'"
                )
        for m in in_module:
            if m.name not in seen:
                problems.append(f"{m.where}: {m.name} is in {module} but no notebook teaches it")
        order_nb = [d.name for d in saved if d.name in by_name]
        order_mod = [m.name for m in in_module if m.name in seen]
        if order_nb != order_mod:
            problems.append(f"{module} is not in notebook order:\n  notebooks: {order_nb}\n"
                            f"  module:    {order_mod}")
    problems += import_order_problems(notebooks, per_module)
    return problems


@functools.cache
def cell_imports(src: str) -> tuple[dict, dict, frozenset]:
    """What a cell imports, parsed once: ({module: names from-imported}, {alias: module},
    {(name, attribute)} for every `name.attribute` it uses)."""
    try:
        tree = ast.parse(src)
    except SyntaxError:  # IPython magics such as %matplotlib
        tree = ast.parse("\n".join(ln for ln in src.splitlines() if not ln.lstrip().startswith("%")))
    froms, aliases, attributes = {}, {}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            froms.setdefault(node.module, set()).update(a.name for a in node.names)
            if node.module == "helpers":
                aliases.update({a.asname or a.name: f"helpers.{a.name}" for a in node.names})
        elif isinstance(node, ast.Import):
            aliases.update({a.asname: a.name for a in node.names if a.asname})
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            attributes.add((node.value.id, node.attr))
    return froms, aliases, frozenset(attributes)


def imported_names(src: str, module: str) -> set[str]:
    """Names a cell uses from `helpers.<module>` (from-imports and `alias.name` attributes)."""
    dotted = "helpers." + module.removeprefix("helpers/").removesuffix(".py")
    froms, aliases, attributes = cell_imports(src)
    mine = {alias for alias, target in aliases.items() if target == dotted}
    return set(froms.get(dotted, ())) | {attr for name, attr in attributes if name in mine}


def import_order_problems(notebooks, per_module) -> list[str]:
    problems = []
    for module, saved in per_module.items():
        built_in = {}
        for d in saved:
            built_in.setdefault(d.name, d.notebook)
        for path in notebooks:
            number = path.name[:2]
            for k, src in enumerate(cell_sources(path)):
                for name in sorted(imported_names(src, module)):
                    if name in built_in and built_in[name] > number:
                        problems.append(
                            f"{path.name}, code cell {k + 1}: imports {name}, which notebook "
                            f"{built_in[name]} builds later"
                        )
    return problems


# ── the real repository ──────────────────────────────────────────────────────────────────────


def test_notebooks_exist():
    assert NOTEBOOKS, "no notebooks found in notebooks/"


def test_helpers_mirror_the_notebooks():
    problems = sync_problems(NOTEBOOKS, ROOT)
    assert not problems, "\n\n".join(problems)


MODEL_FILES = {"transformer.py": {"helpers.module", "helpers.validation"}, "module.py": set(),
               "validation.py": set(),
               "decoding.py": {"helpers.module", "helpers.validation", "helpers.transformer"},
               "modern.py": {"helpers.module", "helpers.validation", "helpers.transformer",
                             "helpers.training", "helpers.decoding"}}


@pytest.mark.parametrize("name", sorted(MODEL_FILES))
def test_model_files_are_numpy_only(name):
    """The model, its module protocol, its input checks and its decoding need NumPy and the
    standard library only, and import nothing else from helpers."""
    tree = ast.parse((ROOT / "helpers" / name).read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module or "")
    allowed = MODEL_FILES[name]
    outside = {m for m in imported if m not in allowed and m.split(".")[0] not in MODEL_IMPORTS}
    assert not outside, f"{name} imports {outside}"


# ── the checker itself can fail ──────────────────────────────────────────────────────────────


def write_notebook(path: Path, cells: list[str]) -> Path:
    nb = {"cells": [{"cell_type": "code", "source": c, "metadata": {}, "outputs": [],
                     "execution_count": None} for c in cells],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


@pytest.fixture
def tiny(tmp_path):
    (tmp_path / "helpers").mkdir()
    module = tmp_path / "helpers" / "m.py"
    module.write_text('"""doc"""\nimport numpy as np\n\n# ── 01 · One\n\n\ndef f(x):\n    return x\n\n'
                      "\n# ── 02 · Two\n\n\ndef g(x):\n    return f(x) + 1\n", encoding="utf-8")
    nb1 = write_notebook(tmp_path / "01_a.ipynb", ["# saved in helpers/m.py\ndef f(x):\n    return x"])
    nb2 = write_notebook(tmp_path / "02_b.ipynb", ["from helpers.m import f",
                                                   "# saved in helpers/m.py\ndef g(x):\n    return f(x) + 1"])
    return tmp_path, module, [nb1, nb2]


def test_checker_accepts_a_faithful_mirror(tiny):
    root, _, nbs = tiny
    assert sync_problems(nbs, root) == []


def test_checker_reports_a_changed_definition_with_a_diff(tiny):
    root, module, nbs = tiny
    module.write_text(module.read_text().replace("return x", "return 2 * x"))
    problems = sync_problems(nbs, root)
    assert any("f differs" in p and "+    return 2 * x" in p for p in problems), problems


def test_checker_reports_an_untaught_public_name(tiny):
    root, module, nbs = tiny
    module.write_text(module.read_text() + "\n\ndef extra():\n    pass\n")
    assert any("extra is in" in p for p in sync_problems(nbs, root))


def test_checker_reports_wrong_order_and_banner(tiny):
    root, module, nbs = tiny
    src = module.read_text()
    module.write_text(src.replace("# ── 02 · Two", "# ── 01 · One again"))
    assert any("banner of notebook 01" in p for p in sync_problems(nbs, root))


def test_checker_reports_an_import_from_a_later_notebook(tiny):
    root, _, nbs = tiny
    write_notebook(nbs[0], ["import helpers.m as hm\nhm.g(1)",
                            "# saved in helpers/m.py\ndef f(x):\n    return x"])
    assert any("imports g, which notebook 02 builds later" in p for p in sync_problems(nbs, root))


def test_checker_reports_code_in_a_saved_cell(tiny):
    root, _, nbs = tiny
    write_notebook(nbs[0], ["# saved in helpers/m.py\ndef f(x):\n    return x\n\nprint(f(1))"])
    assert any("holds only definitions" in p for p in sync_problems(nbs, root))


# ── the layout of helpers/ ───────────────────────────────────────────────────────────────────

LAYERS = {  # a module may import only modules of a lower layer (README, "Layout")
    "helpers.language": -2, "helpers.checks.sentences": -1,
    "helpers.module": 0, "helpers.validation": 0, "helpers.report": 0, "helpers.plots": 0,
    "helpers.diagrams": 0,
    "helpers.transformer": 1, "helpers.mask_formats": 1,
    "helpers.training": 2, "helpers.decoding": 2,
    "helpers.modern": 3, "helpers.translation": 3, "helpers.rnn": 4, "helpers.recent": 4,
    "helpers.data": 5, "helpers.reversal": 5,
    "helpers.analysis": 6, "helpers.lm": 6,
    "helpers.checks.core": 0, "helpers.checks.wire": 0, "helpers.checks.zygote": 0,
    "helpers.checks.child": 1,
    **{f"helpers.checks.{m}": 7 for m in ("attention", "heads", "positions", "masks", "blocks",
                                           "decoder", "training", "cost", "modern", "lm",
                                           "translation")},
    "helpers.checks": 8, "helpers.checks.__main__": 9, "helpers.checks.worker": 9,
    "helpers.widgets.explorer": 6,
    **{f"helpers.widgets.{m}": 7 for m in ("attention", "positions", "masks", "blocks",
                                            "decoder", "training", "cost", "modern", "lm",
                                            "translation")},
    "helpers.widgets": 8,
}


def helpers_modules():
    for path in sorted((ROOT / "helpers").rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        if name != "helpers":
            yield name, path


def test_every_helpers_module_has_a_layer():
    assert {name for name, _ in helpers_modules()} == set(LAYERS)


@pytest.mark.parametrize("name, path", list(helpers_modules()), ids=lambda v: str(v))
def test_imports_point_only_downward(name, path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):  # function bodies too: no import hides inside a function
        if isinstance(node, ast.ImportFrom) and node.level:  # from .x import y: resolve it
            package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            imported.add(f"{base}.{node.module}" if node.module else base)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("helpers"):
            imported.add(node.module)
        elif isinstance(node, ast.Import):
            imported |= {a.name for a in node.names if a.name.startswith("helpers")}
    upward = {m for m in imported if LAYERS.get(m, 99) >= LAYERS[name]}
    assert not upward, f"{name} (layer {LAYERS[name]}) imports {upward}"


@pytest.mark.parametrize("name, path", list(helpers_modules()), ids=lambda v: str(v))
def test_no_helpers_module_is_over_800_lines(name, path):
    n = len(path.read_text(encoding="utf-8").splitlines())
    assert n <= 800, f"{name}: {n} lines; split it by topic"
