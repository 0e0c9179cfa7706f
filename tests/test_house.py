"""The house rules (issue 45), so that the house does not grow back quietly: train.py <= 600 lines and the loop
(grpo + rollout + train) <= 1,200; no file over 1,500 lines; module docstrings of at most 40 lines; no function with
more than 5 parameters that can be passed by position; no private name (`_x`) of one of our modules used in another;
a README of at most 3,000 words. Reads the source only (ast): no imports."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted([p.name for p in ROOT.glob("*.py")] + [str(p.relative_to(ROOT)) for p in ROOT.glob("examples/*/*.py")])
OUR_MODULES = {p.stem for p in ROOT.glob("*.py")}
MAX_DOCSTRING_LINES, MAX_POSITIONAL, MAX_FILE_LINES = 40, 5, 1500
# torch.autograd.Function.apply passes no keyword arguments to forward, so its parameters stay positional
POSITIONAL_BY_NECESSITY = {("lora.py", "_MergedLinear.forward")}


def parsed(name):
    return ast.parse((ROOT / name).read_text(encoding="utf-8"), filename=name)


def functions(tree, prefix=""):
    """(qualified name, node) of every function, methods as Class.method."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
            yield from functions(node, prefix + node.name + ".")
        elif isinstance(node, ast.ClassDef):
            yield from functions(node, prefix + node.name + ".")


def docstring_lines(tree):
    """Lines of the module docstring (None: there is none)."""
    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return first.end_lineno - first.lineno + 1
    return None


def long_signatures(tree, name):
    """Functions with more than MAX_POSITIONAL parameters that may be passed by position (self/cls/ctx aside)."""
    offenders = []
    for qualified, node in functions(tree):
        positional = [a.arg for a in node.args.posonlyargs + node.args.args]
        if positional and positional[0] in ("self", "cls", "ctx"):
            positional = positional[1:]
        if len(positional) > MAX_POSITIONAL and (name, qualified) not in POSITIONAL_BY_NECESSITY:
            offenders.append(f"{qualified} ({len(positional)} positional)")
    return offenders


def private_uses(tree):
    """Private names of our modules used here: `from module import _x` and `module._x`."""
    used = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in OUR_MODULES:
            used += [f"from {node.module} import {a.name}" for a in node.names if a.name.startswith("_")]
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in OUR_MODULES
              and node.attr.startswith("_") and not node.attr.startswith("__")):
            used.append(f"{node.value.id}.{node.attr} (line {node.lineno})")
    return used


@pytest.mark.parametrize("name", FILES)
def test_module_docstring_and_file_size(name):
    lines = docstring_lines(parsed(name))
    assert lines is not None, f"{name}: no module docstring"
    assert lines <= MAX_DOCSTRING_LINES, f"{name}: module docstring of {lines} lines (at most {MAX_DOCSTRING_LINES})"
    total = len((ROOT / name).read_text(encoding="utf-8").splitlines())
    assert total <= MAX_FILE_LINES, f"{name}: {total} lines (at most {MAX_FILE_LINES})"


@pytest.mark.parametrize("name", FILES)
def test_long_signatures_are_keyword_only(name):
    offenders = long_signatures(parsed(name), name)
    assert not offenders, f"{name}: put `*` after the {MAX_POSITIONAL}th parameter at most: {', '.join(offenders)}"


@pytest.mark.parametrize("name", FILES)
def test_no_private_name_across_modules(name):
    used = private_uses(parsed(name))
    assert not used, f"{name}: private names of another module: {', '.join(used)}"


def test_the_checks_catch_what_they_name():
    bad = ast.parse('"""' + "\n" * 41 + '"""\nfrom data import _private\n\n\n'
                    "class Engine:\n    def run(self, a, b, c, d, e, f):\n        return data._other\n\n\n"
                    "def fine(a, b, c, d, e, *, f):\n    return a\n")
    assert docstring_lines(bad) == 42
    assert long_signatures(bad, "x.py") == ["Engine.run (6 positional)"]
    assert private_uses(bad) == ["from data import _private", "data._other (line 48)"]


def lines(name):
    return len((ROOT / name).read_text(encoding="utf-8").splitlines())


def test_train_py_is_at_most_600_lines_and_the_loop_1200():
    assert lines("train.py") <= 600
    total = sum(lines(name) for name in ("grpo.py", "rollout.py", "train.py"))
    assert total <= 1200, f"grpo.py + rollout.py + train.py = {total} lines"


def test_readme_is_at_most_3000_words():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").split()) <= 3000
