"""``python -m cs_audit``: run as the ``cs-audit`` command."""

import os
import sys

# `python -m` puts the current directory first on sys.path: run inside a scanned tree, its
# `ast.py` or `yaml.py` would be imported in place of the real one
if sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from cs_audit.cli import main  # noqa: E402  (after the path is cleaned)

main()
