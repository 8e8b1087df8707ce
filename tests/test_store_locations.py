"""A location the code writes and reads back is its own store, whatever step of path joins
lies between the value and the write or the read: left alone by §4.1, not mapped under the
debug output root."""

from __future__ import annotations

from cs_audit.render.markdown import render_markdown
from cs_audit.ruleset import load_ruleset
from cs_audit.testing import scan_files

STORES = '''
import json
import os
from pathlib import Path

import numpy as np
import torch


def allocate_table(shape, table_dir=None):
    # a file-backed table: created once, mapped back in every boot
    table_dir = os.path.expanduser(table_dir or os.environ.get("ENG_TABLE_FILE_DIR", "/tmp/t"))
    os.makedirs(table_dir, exist_ok=True)
    path = os.path.join(table_dir, table_name(shape))
    if not os.path.exists(path):
        with open(path, "wb") as f:
            f.truncate(64)
    return torch.from_file(path, shared=True, size=64)


class Spill:
    def __init__(self):
        self.root = os.environ.get("ENG_SPILL_DIR", "/tmp/spill")
        self.index = os.path.join(self.root, "blocks")

    def put(self, key, block):
        np.save(os.path.join(self.index, key), block)

    def get(self, key):
        return np.load(os.path.join(self.index, key))


def rank_file(x):
    # the value only picks a file under the location: it names no place
    rank = os.environ.get("ENG_RANK", "0")
    path = os.path.join("/tmp/ranks", f"rank{rank}.json")
    with open(path, "w") as f:
        f.write(x)
    return open(path).read()


def run_and_check(run):
    # a test's artifacts: it writes its log there and reads what the program it ran wrote
    art = Path(os.environ.get("ENG_ARTIFACT_DIR", "/tmp/art"))
    art.mkdir(parents=True, exist_ok=True)
    log = art / "run.log"
    perf = art / "perf.json"
    log.write_text(run())
    return json.loads(perf.read_text())


def model_config():
    # a model folder: only read, a file joined under it
    model = os.environ.get("ENG_TEST_MODEL", "/models/m")
    config_path = Path(model) / "transformer" / "config.json"
    return json.loads(config_path.read_text())


def dump_shard(rank, x):
    # only written: debug output
    out = os.environ.get("ENG_SHARD_DIR", "/tmp/shards")
    os.makedirs(out, exist_ok=True)
    target = os.path.join(out, f"shard_{rank}")
    torch.save(x, target + ".pt")
'''


def test_a_location_written_and_read_back_through_further_joins_is_a_store() -> None:
    result = scan_files({"engine.py": STORES})
    got = {s.name: s for s in result.switches}
    assert got["ENG_TABLE_FILE_DIR"].category == "input-path"
    assert any("from_file" in r for r in got["ENG_TABLE_FILE_DIR"].reasons)
    assert got["ENG_SPILL_DIR"].category == "input-path"
    assert got["ENG_SHARD_DIR"].category == "output-path"
    assert got["ENG_RANK"].category not in ("input-path", "output-path")
    assert got["ENG_ARTIFACT_DIR"].category == "output-path"
    assert got["ENG_TEST_MODEL"].category == "input-path"
    assert any("engine.py:61 makedirs()" in r for r in got["ENG_SHARD_DIR"].reasons)
    assert any("engine.py:26 save()" in r for r in got["ENG_SPILL_DIR"].reasons)


def test_section_4_1_leaves_stores_alone_and_maps_what_is_only_written() -> None:
    result = scan_files({"engine.py": STORES})
    text = render_markdown(result, load_ruleset())
    section = text[text.index("### 4.1"):text.index("### 4.2")]
    mapped, left = section.split("Left alone", 1)
    assert "`ENG_SHARD_DIR`" in mapped and "`ENG_ARTIFACT_DIR`" in mapped
    for name in ("ENG_TABLE_FILE_DIR", "ENG_SPILL_DIR", "ENG_TEST_MODEL"):
        assert f"`{name}`" not in mapped and f"`{name}`" in left
