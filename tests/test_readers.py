"""Readers join: the file names writers build, and the scripts that read them."""

from __future__ import annotations

from cs_audit.extract.scripts import file_refs, grep_patterns
from cs_audit.joins.readers import names_match
from cs_audit.testing import scan_files

WRITER = '''
import json, os
from pathlib import Path

DUMP = os.environ.get("ACCEPT_DUMP_DIR")
TRACE = os.environ.get("MY_TRACE") == "1"

def dump_accept(row):
    if DUMP:
        with open(os.path.join(DUMP, "accept_rate.jsonl"), "a") as f:
            f.write(json.dumps(row))

def dump_step(role, row):
    if DUMP:
        path = Path(DUMP) / f"step_{role}.jsonl"
        with open(path, "a") as f:
            f.write(json.dumps(row))

def emit(name, **row):
    if not TRACE:
        return
    with open(f"/tmp/trace/{name}.jsonl", "a") as f:
        f.write(json.dumps(row))

def recompact():
    emit("recompact_trace", n=1)
'''


def _readers(files: dict[str, str]) -> dict[str, list[tuple[str, int, str]]]:
    result = scan_files({"engine.py": WRITER, **files})
    return {s.name: list(s.readers) for s in result.switches if s.readers}


def test_literal_join_and_fstring_stems_are_matched_by_literal_and_glob_readers() -> None:
    readers = _readers({
        "analysis/accept.py": 'rows = open("runs/accept_rate.jsonl").readlines()\n',
        "analysis/cells.py": 'import glob\nfiles = glob.glob("out/step_*.jsonl")\n',
        "scripts/summ.sh": "jq '.n' \"$OUT\"/recompact_trace.jsonl | sort\n",
    })
    assert readers == {
        "ACCEPT_DUMP_DIR": [("analysis/accept.py", 1, "accept_rate.jsonl"), ("analysis/cells.py", 2, "step_*.jsonl")],
        "MY_TRACE": [("scripts/summ.sh", 1, "recompact_trace.jsonl")],
    }


def test_unrelated_names_and_bare_extensions_are_not_readers() -> None:
    readers = _readers({
        "analysis/other.py": 'open("metrics.jsonl"); glob.glob("*.jsonl")\n',
        "scripts/x.sh": "cat results/sched.jsonl\n",
    })
    assert readers == {}


def test_grep_of_a_gated_log_word_is_a_reader() -> None:
    src = '''
import logging, os
logger = logging.getLogger(__name__)
_STAT = os.environ.get("DIFF_STAT_ON") == "1"

def step():
    if _STAT:
        logger.info("diff_stat kept=%d", 3)
'''
    result = scan_files({"engine.py": src, "scripts/check.sh": "grep -c diff_stat gpu.log\ngrep -v xx a.log\n"})
    assert {s.name: s.readers for s in result.switches} == {"DIFF_STAT_ON": (("scripts/check.sh", 1, "grep diff_stat"),)}


def test_file_refs_and_grep_patterns_forms() -> None:
    text = 'a = "x/accept_rate.jsonl"\nb = f"{d}/step_*.jsonl"\nc = "notes.txt"\nd = ".hidden.json"\n'
    assert file_refs(text) == ((1, "accept_rate.jsonl"), (2, "step_*.jsonl"), (3, "notes.txt"))
    assert grep_patterns('grep -E "RECOMPACT" log | wc -l\nrg diff_stat .\ngrep -q ab x\n') == (
        (1, "RECOMPACT"), (2, "diff_stat"),
    )


def test_names_match_both_ways() -> None:
    assert names_match("step_{role}.jsonl", "step_*.jsonl")
    assert names_match("step_*.jsonl", "step_worker.jsonl")
    assert names_match("accept_rate.jsonl", "accept_rate.jsonl")
    assert not names_match("accept_rate.jsonl", "compact_ratio.jsonl")
    assert not names_match("step_{role}.jsonl", "sched.jsonl")


def test_a_script_that_hands_a_file_to_another_program_is_no_reader_and_readers_count_once() -> None:
    files = {
        # hands the file on to a program (which may or may not be in the tree): not a reader here
        "scripts/run.sh": "python tools/analyze.py --in \"$OUT\"/recompact_trace.jsonl\n"
                          "CUDA_VISIBLE_DEVICES=0 nohup ./post.sh step_a.jsonl &\n",
        # reads it itself, on two lines and through `<`: one reading script each
        "scripts/summ.sh": "jq '.n' \"$OUT\"/recompact_trace.jsonl | sort\nwc -l recompact_trace.jsonl\n",
        "scripts/feed.sh": "python tools/sum.py < \"$OUT\"/recompact_trace.jsonl\n",
    }
    readers = _readers(files)
    assert sorted({p for p, _, _ in readers["MY_TRACE"]}) == ["scripts/feed.sh", "scripts/summ.sh"]
    assert "ACCEPT_DUMP_DIR" not in readers  # step_a.jsonl only handed on
    result = scan_files({"engine.py": WRITER, **files})
    trace = next(s for s in result.switches if s.name == "MY_TRACE")
    assert len(trace.readers) == 3 and trace.reading_scripts == 2
    assert "2 script(s) read its output" in trace.reasons


# The file name a writer opens, through an instance attribute set elsewhere in its class, a
# module constant and a parameter's default (or the literal a caller passes for it).
NAMED = '''
import json, os
from pathlib import Path

ROWS_FILE = "accept_rows.csv"
_KV_PATH = os.path.join("/tmp/kv", "kv_dump.jsonl")
DUMP = os.environ.get("ACCEPT_DUMP_DIR")
TRACE = os.environ.get("MY_TRACE") == "1"


class Recorder:
    def __init__(self, out):
        self.accept_path = Path(out) / "accept.jsonl"

    def record(self, row):
        if DUMP:
            with open(self.accept_path, "a") as f:
                f.write(json.dumps(row))


def rows(row):
    if DUMP:
        with open(os.path.join(DUMP, ROWS_FILE), "a") as f:
            f.write(row)


def dump_kv(x):
    if TRACE:
        with open(_KV_PATH, "a") as f:
            f.write(json.dumps(x))


def dump(x, path="/tmp/trace.jsonl"):
    if TRACE:
        with open(path, "a") as f:
            f.write(json.dumps(x))


def step(x):
    dump(x, "/tmp/trace/step_trace.jsonl")
'''


def test_writer_file_names_through_attributes_constants_and_parameter_defaults() -> None:
    result = scan_files({
        "engine.py": NAMED,
        "tools/accept.py": 'import pandas as pd\nrows = open("runs/accept.jsonl").readlines()\ndf = pd.read_csv("accept_rows.csv")\n',
        "tools/kv.py": 'import json\nrows = [json.loads(x) for x in open("/tmp/kv/kv_dump.jsonl")]\n',
        "scripts/trace.sh": "jq . /tmp/trace.jsonl\nwc -l /tmp/trace/step_trace.jsonl\n",
        "tools/other.py": 'rows = open("/tmp/metrics.jsonl").readlines()\n',  # written by nobody here
    })
    readers = {s.name: [(p, n) for p, _, n in s.readers] for s in result.switches if s.readers}
    assert readers == {
        "ACCEPT_DUMP_DIR": [("tools/accept.py", "accept.jsonl"), ("tools/accept.py", "accept_rows.csv")],
        "MY_TRACE": [("scripts/trace.sh", "trace.jsonl"), ("scripts/trace.sh", "step_trace.jsonl"),
                     ("tools/kv.py", "kv_dump.jsonl")],
    }
    assert {s.name: s.reading_scripts for s in result.switches} == {"ACCEPT_DUMP_DIR": 1, "MY_TRACE": 2}


def test_a_python_script_that_hands_a_file_to_another_program_is_no_reader() -> None:
    readers = _readers({
        # the name goes only into other programs' command lines
        "tools/plot.py": 'import subprocess\nsubprocess.run(["python", "plot.py", "runs/accept_rate.jsonl"])\n',
        "tools/show.py": 'import os\n\ndef show(d):\n    p = os.path.join(d, "accept_rate.jsonl")\n'
                         '    os.system(f"cat {p} | head")\n',
        "tools/cmd.py": 'from subprocess import check_call as cc\ncmd = "python sum.py --in out/recompact_trace.jsonl"\n'
                        'cc(cmd, shell=True)\n',
        # hands it on and reads it itself; reads it through pathlib
        "tools/both.py": 'import subprocess\np = "out/recompact_trace.jsonl"\nsubprocess.run(["gzip", "-k", p])\n'
                         'rows = open(p).read()\n',
        "tools/path.py": 'from pathlib import Path\nrows = Path("out/step_a.jsonl").read_text()\n',
    })
    assert readers == {
        "ACCEPT_DUMP_DIR": [("tools/path.py", 2, "step_a.jsonl")],
        "MY_TRACE": [("tools/both.py", 2, "recompact_trace.jsonl")],
    }
