"""Rule data: shipped as package data, validated on load, documented in the README."""

from __future__ import annotations

from pathlib import Path

import pytest

from cs_audit.render.markdown import cell, code
from cs_audit.ruleset import RuleDataError, load_ruleset, read_rule_texts

CONTRACT_IDS = {
    "env-read-hot", "default-on-emitter", "eager-format", "sync-in-debug", "duplicate-helper",
    "per-call-open", "redundant-flush", "hardcoded-output-path", "own-timestamp",
}


def test_every_contract_rule_is_documented_with_examples() -> None:
    rs = load_ruleset()
    assert set(rs.rules) == CONTRACT_IDS
    for spec in rs.rules.values():
        assert spec.summary and spec.why and spec.example.strip() and spec.ok.strip() and spec.fix


def test_costs_come_from_the_measured_table() -> None:
    rs = load_ruleset()
    assert rs.costs_us["log_emitted"] == 15.68  # H200 host, shared/measured-costs.md
    assert rs.costs_us["open_per_event"] == 19.47
    assert rs.sync_added_us["layer"] == 1074
    assert "measured-costs.md" in rs.cost_source


def test_unknown_keys_and_duplicate_ids_are_rejected() -> None:
    texts = read_rule_texts()
    with pytest.raises(RuleDataError, match="unknown keys"):
        load_ruleset({**texts, "costs.yaml": texts["costs.yaml"] + "\nsurprise: 1\n"})
    rules = texts["rules.yaml"]
    first = rules[rules.index("  - id: env-read-hot"):rules.index("  - id: default-on-emitter")]
    with pytest.raises(RuleDataError, match="duplicate id"):
        load_ruleset({**texts, "rules.yaml": rules + first})


def test_readme_rule_table_matches_the_rule_data() -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    for spec in load_ruleset().rules.values():
        assert f"| `{spec.id}` | {spec.severity} | {spec.summary} |" in readme, spec.id


def test_markdown_cells_cannot_break_tables() -> None:
    assert cell("a|b") == "a\\|b"
    assert "\n" not in cell("line1\nline2")
    assert cell("@alice") == "@\u200balice"
    assert cell("x\u202ey") == "x\\\\u202ey"  # visible escape, its backslash escaped for markdown
    assert code("a`b|c") == "``a`b\\|c``"
