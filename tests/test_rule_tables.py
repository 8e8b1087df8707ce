"""An API added to the rule data alone is found: in the shipped YAML, in ``cs-audit.yaml``
or in ``[tool.cs-audit]``, keyed like the shipped files; a malformed table is one clear error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from cs_audit.api import run_audit
from cs_audit.cli import app
from cs_audit.config import load_config
from cs_audit.extract.tokens import snippet_literals
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
    assert proc.stderr == "cs-audit: configuration error: cs-audit.yaml: emitters.dumps must be a table like {'mylib.store' = 'dump'}, not a list\n"


def test_an_unknown_config_key_still_fails(tmp_path: Path) -> None:
    from cs_audit.config import ConfigError

    write_tree(tmp_path, {"cs-audit.yaml": "emitterz: {}\n"})
    with pytest.raises(ConfigError, match="unknown keys"):
        load_config(str(tmp_path))


#: (file, its text, the error after "configuration error: "): a value of the wrong shape in a
#: rule table was taken as it was, or failed later without naming its key
WRONG_SHAPES = [
    ("cs-audit.yaml", "emitters:\n  print: [5]\n",
     "cs-audit.yaml: emitters.print[0] must be a name (a non-empty string), not a number"),
    ("cs-audit.yaml", "emitters:\n  dumps: {mylib.store: 5}\n",
     "cs-audit.yaml: emitters.dumps['mylib.store'] must be one of dump, print, stdwrite, write, not a number"),
    ("cs-audit.yaml", 'emitters:\n  debug_name_pattern: "(dbg"\n',
     "cs-audit.yaml: emitters.debug_name_pattern is not a regular expression: missing ), unterminated subpattern at position 0"),
    ("cs-audit.yaml", "env_apis:\n  registries: [{id: mine}]\n",
     "cs-audit.yaml: env_apis.registries[0] is missing access, object: it must be a table like "
     "{id = 'my-envs', object = 'mylib.envs', access = 'attribute'}"),
    ("cs-audit.yaml", 'defaults:\n  model_paths: "models/"\n',
     "cs-audit.yaml: defaults.model_paths must be a regular expression with a group (?P<model>...) or empty"),
    ("pyproject.toml", "[tool.cs-audit.hot_paths]\nroots = [{name = 5}]\n",
     'pyproject.toml [tool.cs-audit]: hot_paths.roots[0].name must be a function name, like "execute_model", not a number'),
    ("pyproject.toml", '[tool.cs-audit.costs.frequencies.step]\nmultiplier = "16"\n',
     "pyproject.toml [tool.cs-audit]: costs.frequencies['step'].multiplier must be a number, not a string"),
    # a project's own frequency: declared whole, hot, and named right where it is used
    ("pyproject.toml", '[tool.cs-audit.costs.frequencies.tick]\nrank = 1.5\nmultiplier = 4\n',
     "pyproject.toml [tool.cs-audit]: costs.frequencies['tick'] is missing words: it must be a table like "
     "{rank = 2, multiplier = 4, words = 'every scheduler tick'}"),
    ("pyproject.toml", '[tool.cs-audit.costs.frequencies.tick]\nrank = 0\nmultiplier = 4\nwords = "every tick"\n',
     "pyproject.toml [tool.cs-audit]: costs.frequencies['tick'].rank must be above 0 (only once and unknown are off the hot paths)"),
    ("pyproject.toml", '[tool.cs-audit]\nhot_roots = [{name = "tick", frequency = "tik"}]\n'
     '[tool.cs-audit.costs.frequencies.tick]\nrank = 1.5\nmultiplier = 4\nwords = "every tick"\n',
     "pyproject.toml [tool.cs-audit]: hot_roots[0].frequency must be one of step, request, round, layer, once, unknown, tick "
     "(costs.frequencies), not 'tik'"),
    ("pyproject.toml", '[tool.cs-audit]\nhot_roots = [{name = "tick", process = 5}]\n',
     "pyproject.toml [tool.cs-audit]: hot_roots[0].process must be a string, not a number"),
    ("cs-audit.toml", "[gpu_syncs]\nto_cpu = 5\n", "{root}/cs-audit.toml: gpu_syncs.to_cpu must be true or false, not a number"),
]


@pytest.mark.parametrize(("name", "text", "error"), WRONG_SHAPES, ids=[e.split(": ", 2)[1].split(" ")[0] for _, _, e in WRONG_SHAPES])
def test_a_rule_table_value_of_the_wrong_shape_is_one_line_naming_its_key(tmp_path: Path, name: str, text: str, error: str) -> None:
    root = write_tree(tmp_path / "tree", {**ENGINE, name: text})
    config = ["--config", str(root / name)] if name == "cs-audit.toml" else []  # looked for only when named
    for command in (["scan", str(root), "-f", "json", "--no-cache", "--no-history", "-j", "1"], ["config", str(root)]):
        result = CliRunner().invoke(app, [*command, *config])
        assert (result.exit_code, result.stdout) == (2, ""), (command, result.output)
        assert result.stderr == f"cs-audit: configuration error: {error.replace('{root}', str(root))}\n", command


def test_the_shipped_tables_restated_by_a_project_are_accepted(tmp_path: Path) -> None:
    from cs_audit.ruleset import EXTENSIBLE

    texts = read_rule_texts()
    shipped = {stem: yaml.safe_load(texts[f"{stem}.yaml"]) for stem in EXTENSIBLE}
    root = write_tree(tmp_path / "tree", {**ENGINE, "cs-audit.yaml": yaml.safe_dump(shipped)})
    result = CliRunner().invoke(app, ["scan", str(root), "-f", "json", "--no-cache", "--no-history", "-j", "1"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["findings"] == []


@pytest.mark.parametrize(("text", "error"), [
    ("defaults:\n  platform: zz\n",
     "cs-audit.yaml: defaults.platform must be one of cpu, cuda, hpu, mps, musa, npu, rocm, tpu, xpu (defaults.platforms)"),
    # each pattern compiles; joined into one, the group is named twice
    ('gpu_syncs:\n  device_apis: ["(?P<a>cuda)", "(?P<a>npu)"]\n', "cs-audit.yaml: malformed rule data: error: redefinition of group name 'a'"),
])
def test_rule_tables_the_rules_refuse_together_are_a_configuration_error_of_a_past_commit(tmp_path: Path, text: str, error: str) -> None:
    try:
        from tests.gitrepo import make_repo
    except ImportError:  # run from tests/
        from gitrepo import make_repo  # type: ignore[no-redef]

    repo = make_repo(tmp_path, [("c", {"a.py": "import os\nX = os.getenv('A')\n", "cs-audit.yaml": text})])
    result = CliRunner().invoke(app, ["report", str(repo), "--rev", "HEAD", "-o", str(tmp_path / "r.md"), "-j", "1"])
    assert result.exit_code == 2, result.output
    assert f": configuration error: {error}" in result.stderr and "internal error" not in result.stderr
