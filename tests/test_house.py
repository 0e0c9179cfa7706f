"""The house's sizes (issue 45), so that it does not grow back quietly: lines per file, module docstrings,
positional parameters, private names across modules, README words. Reads the source only (ast): no imports."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MODULES = sorted(ROOT.glob("*.py"))
PENDING = pytest.mark.xfail(strict=False, reason="lands with the rest of issue 45")


def lines(name):
    return len((ROOT / name).read_text().splitlines())


def tree(path):
    return ast.parse(path.read_text(), filename=str(path))


def test_train_py_is_at_most_600_lines():
    assert lines("train.py") <= 600


def test_the_training_loop_is_at_most_1200_lines():
    total = sum(lines(name) for name in ("grpo.py", "rollout.py", "train.py"))
    assert total <= 1200, f"grpo.py + rollout.py + train.py = {total} lines"


def test_no_root_module_is_over_1500_lines():
    assert not [(p.name, lines(p.name)) for p in MODULES if lines(p.name) > 1500]


@PENDING
def test_module_docstrings_are_at_most_40_lines():
    long = [(p.name, len(doc.splitlines())) for p in MODULES
            if (doc := ast.get_docstring(tree(p), clean=False)) and len(doc.splitlines()) > 40]
    assert not long


def positional_offenders(path):
    """Functions of `path` with more than 5 positional parameters (self / cls not counted)."""
    found = []
    for node in ast.walk(tree(path)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names = [a.arg for a in node.args.posonlyargs + node.args.args]
            if names and names[0] in ("self", "cls"):
                names = names[1:]
            if len(names) > 5:
                found.append(f"{path.name}:{node.lineno} {node.name} ({len(names)})")
    return found


def test_the_training_loop_takes_at_most_5_positional_parameters():
    """grpo.py, rollout.py, train.py and preflight.py (the rest of the root follows with issue 45)."""
    files = [ROOT / name for name in ("grpo.py", "rollout.py", "train.py", "preflight.py")]
    assert not [f for path in files for f in positional_offenders(path)]


@PENDING
def test_no_root_function_takes_more_than_5_positional_parameters():
    assert not [f for path in MODULES for f in positional_offenders(path)]


@PENDING
def test_no_private_name_is_imported_from_another_root_module():
    local = {p.stem for p in MODULES}
    found = []
    for path in MODULES:
        for node in ast.walk(tree(path)):
            if isinstance(node, ast.ImportFrom) and node.module in local and node.module != path.stem:
                found += [f"{path.name}: {a.name} from {node.module}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    assert not found


@PENDING
def test_readme_is_at_most_3000_words():
    assert len((ROOT / "README.md").read_text().split()) <= 3000


def test_the_checks_see_what_they_count(tmp_path):
    """The offenders' finder counts positional parameters only, without self, and flags six."""
    path = tmp_path / "m.py"
    path.write_text("class C:\n    def f(self, a, b, c, d, e):\n        pass\n"
                    "def g(a, b, c, d, e, *, f=1):\n    pass\n"
                    "def h(a, b, c, d, e, f):\n    pass\n"
                    "def k(a, /, b, c, d, e, f):\n    pass\n")
    assert [f.split()[1] for f in positional_offenders(path)] == ["h", "k"]
