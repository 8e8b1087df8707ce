"""Eager formatting through a local (#19, "Syncs, formatting and output paths"): a message
built in a local that only a gated or disabled emitter reads is flagged where it is built,
with that statement's own gates, frequency and path kind, naming the emitter.

The snippet is an engine file whose hot root (``execute_model``, per step) holds the cases;
each finding is annotated on the line above it (``# expect:``) and each near miss ``# ok:``.
"""

from __future__ import annotations

from cs_audit.testing import check_annotations, scan_files

HEAD = '''
import json
import logging
import os

logger = logging.getLogger(__name__)
DEBUG = os.getenv("TOY_DEBUG", "0") == "1"


def trace_level():
    return int(os.getenv("TOY_TRACE_LEVEL", "0"))


def ttrace(level, text):
    # ok: env-read-hot
    if trace_level() < level:
        return
    # ok: default-on-emitter
    logger.info("[trace] %s", text)
'''

FLAGGED = '''
class Runner:
    def execute_model(self, batch, x):
        for i, req in enumerate(batch):
            # expect: eager-format
            msg = f"step {i} {x.shape}"
            if DEBUG:
                # ok: eager-format, default-on-emitter
                logger.info(msg)
        # expect: eager-format
        text = "a" + str(len(batch))
        # ok: eager-format
        logger.debug(text)
        # expect: eager-format
        line = "batch {} of {}".format(len(batch), x)
        # expect: env-read-hot
        ttrace(2, line)
        # expect: eager-format
        shown = "rows %d" % len(batch)
        if DEBUG:
            # ok: default-on-emitter
            print(shown)
        # expect: eager-format
        blob = json.dumps({"n": len(batch)})
        logger.debug(blob)
        logger.debug(blob)
        try:
            self.run(batch)
        except ValueError as exc:
            # expect: eager-format(error)
            why = f"run failed on {len(batch)}: {exc}"
            logger.debug(why)
            raise
'''


def test_a_message_built_for_a_gated_or_disabled_emitter_is_flagged_where_it_is_built() -> None:
    assert check_annotations({"engine/runner.py": HEAD + FLAGGED}) == []


SILENT = '''
class Runner:
    def execute_model(self, batch, x):
        # expect: eager-format
        contrast = f"only a debug record reads this {x}"
        logger.debug(contrast)
        # ok: eager-format
        returned = f"returned {x}"
        logger.debug(returned)
        # ok: eager-format
        stored = f"stored {x}"
        self.last = stored
        logger.debug(stored)
        # ok: eager-format
        passed = f"passed {x}"
        self.record(passed)
        if DEBUG:
            logger.info(passed)
        # ok: eager-format
        tested = f"tested {x}"
        if tested:
            logger.debug(tested)
        if DEBUG:
            # ok: eager-format
            same_gate = f"same gate {x}"
            # ok: default-on-emitter
            logger.info(same_gate)
        if logger.isEnabledFor(logging.DEBUG):
            # ok: eager-format
            same_level = f"same level {x}"
            logger.debug(same_level)
        # ok: eager-format
        anyway = f"anyway {x}"
        # expect: default-on-emitter
        logger.info(anyway)
        # ok: eager-format
        both = f"both {x}"
        logger.debug(both)
        # expect: default-on-emitter
        logger.warning(both)
        # ok: eager-format
        nested = f"nested {x}"
        logger.debug(nested)
        self.later(lambda: nested)
        # ok: eager-format
        literal = "no formatting"
        logger.debug(literal)
        # expect: eager-format
        logger.debug(f"inline {x}")
        return returned

    def record(self, text):
        pass

    def later(self, fn):
        pass
'''


def test_a_message_local_read_otherwise_built_under_its_gate_or_emitted_anyway_is_silent() -> None:
    assert check_annotations({"engine/runner.py": HEAD + SILENT}) == []


def test_a_message_local_finding_names_its_local_and_emitter_and_its_sync() -> None:
    body = '''
class Runner:
    def execute_model(self, loss):
        msg = f"loss {loss.item()}"
        logger.debug(msg)
        host = loss.cpu()
        quiet = f"loss {host.item()}"
        logger.debug(quiet)
'''
    result = scan_files({"engine/runner.py": HEAD + body})
    found = [f for f in result.findings if f.rule == "eager-format" and f.function == "Runner.execute_model"]
    assert [(f.code, f.gpu_sync, f.frequency, f.switch) for f in found] == [
        ('msg = f"loss {loss.item()}"', True, "step", None),
        ('quiet = f"loss {host.item()}"', False, "step", None),
    ]
    assert [f.eager_kinds for f in found] == [("f-string", "call:item"), ("f-string",)]
    assert "`msg`" in found[0].message and "`logger.debug`" in found[0].message
