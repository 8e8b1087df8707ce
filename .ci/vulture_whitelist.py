"""Names in cs_audit/ that vulture, reading only that package, takes for unused.

Never imported: ``.ci/run`` hands this file to vulture beside cs_audit/, and an attribute
read here counts as a use of every definition of that name.  Typer commands and the
visitor methods libcst and ``ast`` call by name are left out on vulture's command line.
"""
# ruff: noqa: B018  (each line is a bare attribute read, which is the point)

from collections import defaultdict

from cs_audit import testing
from cs_audit.extract import python
from cs_audit.fix import duplicate_helper, eager_format, env_read_hot, gate_helpers, per_call_open, redundant_flush
from cs_audit.git import blame
from cs_audit.joins import callgraph, values

# the fixes' worked examples, each run by tests/test_fix.py
duplicate_helper.CASES
eager_format.CASES
eager_format.DECLINED
env_read_hot.CASES
env_read_hot.DECLINED
gate_helpers.CASES
gate_helpers.CASE_HELPER
per_call_open.CASES
per_call_open.DECLINED
redundant_flush.CASES

# entry points the tests drive directly
testing.findings_of
testing.expected_findings
testing.check_annotations
python.extract_python
blame.NoHistory.blame_lines
callgraph.Resolver.tables_digest
values.Types.replays

# set for the runtime, which reads them without naming them: a defaultdict stops
# inventing entries, and pickle finds the reduce hook
defaultdict.default_factory
object.__reduce__
