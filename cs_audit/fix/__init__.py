"""``cs-audit fix``: libcst transforms that apply the audit's own proposals.

The driver scans the tree, turns each selected rule's findings (and, for eager-format, the
eager log calls the extraction saw) into ``Target``s per file, runs each rule's transform
over the file's syntax tree, and gives back per file the new bytes and the notes on what was
left alone and why.  Writing is ``source.write_atomic``; nothing here prints.
"""

from cs_audit.fix.base import DEFAULT_RULES, FIXABLE, FileFix, FixPlan, Note, Target, Transform
from cs_audit.fix.run import apply, fix_tree, plan_files, write

__all__ = ["DEFAULT_RULES", "FIXABLE", "FileFix", "FixPlan", "Note", "Target", "Transform", "apply", "fix_tree", "plan_files", "write"]
