"""A tree holding one call chain N functions deep, for measuring memory and report size (#44).

    python benchmarks/deep_chain.py OUT_DIR [--depth 8000] [--only-last]

Writes OUT_DIR/runner.py: ``ModelRunner.execute_model -> f0 -> f1 -> ... -> f{N-1}``, each
function logging with ``logger.info`` (``--only-last``: only the last one), so every function
is a hot site whose shortest chain from the root is as deep as the function's index. At 8,000
it is 518 KB, under the default ``max_file_bytes``.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def chain_source(depth: int, only_last: bool) -> str:
    lines = ["import logging", "", "logger = logging.getLogger(__name__)", "", ""]
    for i in range(depth):
        lines.append(f"def f{i}(x):")
        if not only_last or i == depth - 1:
            lines.append("    logger.info('step %d', x)")
        if i < depth - 1:
            lines.append(f"    return f{i + 1}(x)")
        lines.append("")
    lines += ["", "class ModelRunner:", "    def execute_model(self):", "        return f0(1)", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--depth", type=int, default=8000)
    parser.add_argument("--only-last", action="store_true")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "runner.py").write_text(chain_source(args.depth, args.only_last))


if __name__ == "__main__":
    main()
