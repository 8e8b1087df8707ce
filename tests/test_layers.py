"""The folders are the pipeline: every module imports only from the steps before its own
(lazy imports inside functions and imports for type checking count too), the
infrastructure beside the steps imports none of them, and no modules import each other
in a cycle.  Also: every package folder ships in the wheel."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "cs_audit"

#: (layer, module prefixes), in pipeline order; a module may import from lower layers and
#: from its own folder.  Infrastructure (layer 6) may import only the base (layers 0-5).
LAYERS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (0, ("cs_audit", "cs_audit.files", "cs_audit.pyast", "cs_audit.records")),
    (1, ("cs_audit.sources", "cs_audit.switches")),
    (2, ("cs_audit.model",)),
    (3, ("cs_audit.ruleset",)),
    (4, ("cs_audit.rule_shapes",)),
    (5, ("cs_audit.config",)),
    (6, ("cs_audit.pool", "cs_audit.git", "cs_audit.incremental")),
    (7, ("cs_audit.extract",)),
    (8, ("cs_audit.joins",)),
    (9, ("cs_audit.analysis",)),
    (10, ("cs_audit.api", "cs_audit.confirm")),
    (11, ("cs_audit.render",)),
    (12, ("cs_audit.ci",)),
    (13, ("cs_audit.fix",)),
    (14, ("cs_audit.cli", "cs_audit.testing")),
    (15, ("cs_audit.__main__",)),
)
INFRASTRUCTURE = 6


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str, path: Path) -> set[str]:
    """Every ``cs_audit`` module ``path`` imports, wherever the import statement stands."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    known = modules()
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from pkg import mod` imports the submodule when one exists
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        out.update(t for t in targets if t == "cs_audit" or t.startswith("cs_audit."))
    out.discard(name)
    return out


def layer_of(name: str) -> tuple[int, str]:
    best: tuple[int, str] | None = None
    for layer, prefixes in LAYERS:
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and (best is None or len(prefix) > len(best[1])):
                best = (layer, prefix)
    if best is None:
        raise AssertionError(f"{name}: in no layer of tests/test_layers.py (add its folder to LAYERS)")
    return best


def folder_of(name: str) -> str:
    return layer_of(name)[1]


def test_every_module_is_in_a_layer() -> None:
    for name in modules():
        layer_of(name)


def test_no_module_imports_from_a_later_step_or_infrastructure_from_a_step() -> None:
    wrong: list[str] = []
    for name, path in modules().items():
        layer, folder = layer_of(name)
        for target in sorted(imports_of(name, path)):
            if target == "cs_audit.rules":
                continue  # the rule data package
            their_layer, their_folder = layer_of(target)
            if their_folder == folder:
                continue
            if their_layer >= layer or (layer == INFRASTRUCTURE and their_layer >= INFRASTRUCTURE):
                wrong.append(f"{name} imports {target}")
    assert not wrong, "\n".join(wrong)


def test_no_import_cycles() -> None:
    graph = {name: imports_of(name, path) & set(modules()) for name, path in modules().items()}
    # a package's __init__ is imported by every module in it: only its own imports count
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt):], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_the_checker_sees_an_upward_import(tmp_path: Path) -> None:
    """The layer check itself: a lazy import of the CLI inside an extractor is caught."""
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from cs_audit.cli import main\n    from . import index\n")
    assert imports_of("cs_audit.extract.probe", probe) == {"cs_audit.cli", "cs_audit.extract.index"}
    assert layer_of("cs_audit.cli")[0] > layer_of("cs_audit.extract.probe")[0]


def test_every_package_folder_ships_in_the_wheel() -> None:
    config = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    folders = {module_name(p.parent / "__init__.py") for p in PACKAGE.rglob("__init__.py")}
    assert folders <= listed, f"add to [tool.setuptools] packages: {sorted(folders - listed)}"


def test_each_rule_lives_in_its_own_module_named_after_it() -> None:
    """``analysis/<rule_id with underscores>.py`` for every rule of rules/rules.yaml, each in
    the one registry (``analysis.rules.RULES``) with its check and its message."""
    from cs_audit.analysis.rules import RULES
    from cs_audit.ruleset import load_ruleset

    ids = set(load_ruleset().rules)
    by_id = {module.RULE: module for module in RULES}
    assert set(by_id) == ids and len(RULES) == len(ids)
    for rule, module in by_id.items():
        assert module.__name__ == "cs_audit.analysis." + rule.replace("-", "_")
        assert callable(module.check) and callable(module.message)
