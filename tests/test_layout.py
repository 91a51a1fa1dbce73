"""The package layout reads as the data flow: imports only go from a later stage to an
earlier one, and no module grows past 400 lines (docs/architecture.md)."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "jaxsvr"

# rank of each folder (and of the top-level modules): an import may only go to an equal or
# lower rank
RANKS = {
    **dict.fromkeys(("errors", "files", "runtime"), 0),
    "nlp": 1,
    "annotations": 2,
    "relevance": 3,
    "inputs": 4,
    "sampling": 5,
    **dict.fromkeys(("models", "losses"), 6),
    "objectives": 7,
    "configs": 8,
    "evaluation": 9,
    "checkpoints": 10,
    "train": 11,
    "runs": 12,
    "analysis": 13,
    # the `python -m` commands
    **dict.fromkeys(("main", "evaluate", "retrieve", "submit", "features", "plot", "__init__"), 14),
}
MODULES = sorted(PACKAGE.rglob("*.py"))


def _stage(module: str) -> str:
    """'jaxsvr.inputs.text' -> 'inputs'; 'jaxsvr' -> '__init__'."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "jaxsvr":  # from jaxsvr import train, ...
                out += [(node.lineno, f"jaxsvr.{a.name}") for a in node.names]
            elif node.module.startswith("jaxsvr."):
                out.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("jaxsvr.")]
    return out


def _name(path: Path) -> str:
    return ".".join(("jaxsvr", *path.relative_to(PACKAGE).with_suffix("").parts))


def test_every_module_has_a_stage():
    stages = {_stage(_name(p)) for p in MODULES}
    assert stages <= set(RANKS), f"give these a rank: {sorted(stages - set(RANKS))}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_go_to_earlier_stages(path):
    own = _stage(_name(path))
    upward = [
        f"line {line}: {target} ({_stage(target)}, rank {RANKS[_stage(target)]})"
        for line, target in _imports(path)
        if RANKS[_stage(target)] > RANKS[own]
    ]
    assert not upward, f"{own} (rank {RANKS[own]}) imports a later stage: {upward}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_stay_under_400_lines(path):
    assert len(path.read_text().splitlines()) < 400
