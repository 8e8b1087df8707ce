"""An API added to the rule data alone is found: in the shipped YAML, in ``cs-audit.yaml``
or in ``[tool.cs-audit]``, keyed like the shipped files; a malformed table is one clear error."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cs_audit.api import run_audit
from cs_audit.config import load_config
from cs_audit.extract.index import snippet_literals
from cs_audit.ruleset import RuleDataError, extend_rule_texts, load_ruleset, read_rule_texts
from cs_audit.testing import write_tree

ENGINE = {
    "eng/model_runner.py": """
        import mylib


        class GPUModelRunner:
            def execute_model(self, batch):
                mylib.store(batch, "/tmp/out.bin")
                flag = mylib.env_flag("ENG_TRACE")
                return batch, flag
    """,
}


def _findings(root: Path, rs=None) -> set[tuple[int, str]]:
    config = load_config(str(root), jobs=1, history=False, cache=False)
    from cs_audit.api import prepare_ruleset

    result = run_audit(config, prepare_ruleset(config, rs))
    assert not result.errors
    return {(f.line, f.rule) for f in result.findings}


def test_without_the_addition_the_call_is_not_an_emitter(tmp_path: Path) -> None:
    assert _findings(write_tree(tmp_path, ENGINE)) == set()


def test_a_dump_added_to_the_shipped_yaml_is_found(tmp_path: Path) -> None:
    texts = read_rule_texts()
    data = yaml.safe_load(texts["emitters.yaml"])
    data["dumps"]["mylib.store"] = "dump"
    texts["emitters.yaml"] = yaml.safe_dump(data)
    found = _findings(write_tree(tmp_path, ENGINE), load_ruleset(texts))
    assert (6, "default-on-emitter") in found and (6, "hardcoded-output-path") in found


def test_a_dump_added_in_cs_audit_yaml_is_found(tmp_path: Path) -> None:
    root = write_tree(tmp_path, {**ENGINE, "cs-audit.yaml": "emitters:\n  dumps:\n    mylib.store: dump\n"})
    assert (6, "default-on-emitter") in _findings(root)


def test_tables_in_pyproject_extend_emitters_and_env_apis(tmp_path: Path) -> None:
    root = write_tree(tmp_path, {**ENGINE, "pyproject.toml": """
        [tool.cs-audit.emitters.dumps]
        "mylib.store" = "dump"

        [tool.cs-audit.env_apis.calls]
        "mylib.env_flag" = {via = "mylib.env_flag"}
    """})
    found = _findings(root)
    assert (6, "default-on-emitter") in found and (7, "env-read-hot") in found


def test_the_pre_filter_takes_its_literals_from_the_rules() -> None:
    shipped = load_ruleset()
    texts = extend_rule_texts(read_rule_texts(), {"emitters": {"dumps": {"mylib.store": "dump"}}}, "test")
    extended = load_ruleset(texts)
    assert ("store(", True) in snippet_literals(extended.api_literals)
    assert ("store(", True) not in snippet_literals(shipped.api_literals)


@pytest.mark.parametrize(("table", "message"), [
    ({"emitters": {"dumps": ["mylib.store"]}}, "emitters.dumps: expected a table"),
    ({"emitters": {"dumpz": {}}}, "emitters: unknown keys ['dumpz']"),
    ({"rules": {}}, "rules: not a rule table"),
    ({"gpu_syncs": {"methods": "item"}}, "gpu_syncs.methods: expected a list"),
])
def test_a_malformed_table_names_its_key(table: dict, message: str) -> None:
    with pytest.raises(RuleDataError, match=message.replace("[", r"\[").replace("]", r"\]")):
        extend_rule_texts(read_rule_texts(), table, "cs-audit.yaml")


def test_a_malformed_table_fails_the_scan_with_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = write_tree(tmp_path, {**ENGINE, "cs-audit.yaml": "emitters:\n  dumps: [mylib.store]\n"})
    proc = subprocess.run([sys.executable, "-m", "cs_audit", "scan", str(root), "--no-history", "--no-cache", "-f", "json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == "cs-audit: configuration error: cs-audit.yaml: emitters.dumps: expected a table, like the shipped value\n"


def test_an_unknown_config_key_still_fails(tmp_path: Path) -> None:
    from cs_audit.config import ConfigError

    write_tree(tmp_path, {"cs-audit.yaml": "emitterz: {}\n"})
    with pytest.raises(ConfigError, match="unknown keys"):
        load_config(str(tmp_path))
