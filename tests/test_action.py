"""The GitHub Action (action.yml) run as a runner runs it: its shell steps in order, with
``cs-audit`` on PATH, and actions/cache played by a folder per key, on two pushes of one pull
request, each on a fresh machine (#45, "The GitHub Action runs two full audits per PR")."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from cs_audit import __version__
from tests.gitrepo import commit_files, git, git_env, make_repo

WORKTREE = Path(__file__).resolve().parents[1]
ENGINE = ("import os\n\n\nclass Runner:\n    def execute_model(self, batch):\n"
          "        return os.environ.get(\"MY_DBG\")\n")
#: ``cs-audit`` that counts each tree it analyses (not served whole from its cache) in $CSA_TEST_LOG
SHIM = f"""import os, sys
sys.path.insert(0, {str(WORKTREE)!r})
import cs_audit.api as api
analyse = api._analyse_tree
def counted(*args, **kwargs):
    with open(os.environ["CSA_TEST_LOG"], "a") as log:
        log.write("analysed\\n")
    return analyse(*args, **kwargs)
api._analyse_tree = counted
from cs_audit.cli import main
main()
"""


class Runner:
    """One job on a fresh machine: ``caches`` (key -> folder) is what outlives it."""

    def __init__(self, machine: Path, work: Path, caches: dict[str, Path], store: Path) -> None:
        self.machine, self.work, self.caches, self.store = machine, work, caches, store
        self.outputs: dict[str, dict[str, str]] = {}
        self.failed = False
        self.said: list[str] = []
        home, temp, tools = machine / "home", machine / "temp", machine / "bin"
        for folder in (home, temp, tools):
            folder.mkdir(parents=True)
        (tools / "shim.py").write_text(SHIM)
        (tools / "cs-audit").write_text(f'#!/bin/sh\nexec "{sys.executable}" "{tools / "shim.py"}" "$@"\n')
        (tools / "cs-audit").chmod(0o755)
        self.log = machine / "analysed.log"
        self.log.write_text("")
        env = {k: v for k, v in git_env().items() if not k.startswith(("XDG_", "CS_AUDIT", "PYTHON"))}
        self.env = {**env, "HOME": str(home), "PATH": f"{tools}{os.pathsep}{env['PATH']}",
                    "GITHUB_BASE_REF": "main", "CSA_TEST_LOG": str(self.log)}
        self.context = {"runner.temp": str(temp), "github.action_path": str(WORKTREE)}

    def value(self, name: str, inputs: dict[str, str]) -> str:
        if name.startswith("inputs."):
            return inputs[name[len("inputs."):]]
        if name.startswith("steps."):
            step, _, output = name[len("steps."):].partition(".outputs.")
            return self.outputs.get(step, {}).get(output, "")
        return self.context[name]

    def expand(self, text: str, inputs: dict[str, str]) -> str:
        return re.sub(r"\$\{\{\s*(.+?)\s*\}\}", lambda m: self.value(m.group(1), inputs), text)

    def runs(self, condition: str | None, inputs: dict[str, str]) -> bool:
        """The step's `if:` (the terms this action uses); without one, only while nothing failed."""
        if condition is None:
            return not self.failed
        verdict = True
        for term in (t.strip() for t in condition.split("&&")):
            if term == "always()":
                continue
            compared = re.fullmatch(r"(\S+) (==|!=) '([^']*)'", term)
            assert compared, f"the harness knows no `if:` term {term!r}"
            name, op, literal = compared.groups()
            verdict = verdict and ((self.value(name, inputs) == literal) == (op == "=="))
        return verdict and ("always()" in condition or not self.failed)

    def step(self, step: dict, inputs: dict[str, str]) -> None:
        uses = step.get("uses", "")
        args = {k: self.expand(str(v), inputs) for k, v in (step.get("with") or {}).items()}
        if uses.startswith("actions/setup-python"):
            return
        if uses.startswith("actions/cache/restore"):
            key, prefixes = args["key"], args.get("restore-keys", "").split()
            found = key if key in self.caches else next(
                (k for k in reversed(list(self.caches)) for p in prefixes if k.startswith(p)), None)
            if found is not None:
                shutil.copytree(self.caches[found], args["path"], symlinks=True)
            self.outputs[step["id"]] = {"cache-hit": "true" if found == key else "false"}
            return
        if uses.startswith("actions/cache/save"):
            kept = self.store / f"{len(self.caches)}"
            shutil.copytree(args["path"], kept, symlinks=True)
            self.caches[args["key"]] = kept
            return
        assert not uses, f"the harness cannot run {uses}"
        script = self.expand(step["run"], inputs)
        if "pip install" in script:
            return  # cs-audit is the worktree's, on PATH
        output = self.machine / f"output-{len(self.outputs)}"
        output.write_text("")
        env = {**self.env, **{k: self.expand(str(v), inputs) for k, v in (step.get("env") or {}).items()},
               "GITHUB_OUTPUT": str(output)}
        done = subprocess.run(["bash", "-eo", "pipefail", "-c", script], cwd=self.work, env=env,
                              capture_output=True, text=True, timeout=300)
        self.failed = self.failed or done.returncode != 0
        self.said.append(done.stdout + done.stderr)
        self.outputs[step.get("id", f"#{len(self.outputs)}")] = dict(
            line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)

    def run(self) -> int:
        action = yaml.safe_load((WORKTREE / "action.yml").read_text())
        inputs = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()}
        for step in action["runs"]["steps"]:
            if self.runs(step.get("if"), inputs):
                self.step(step, inputs)
        return len(self.log.read_text().splitlines())


def test_the_action_audits_the_base_once_per_base_commit(tmp_path: Path) -> None:
    upstream = make_repo(tmp_path, [("engine", {"engine/__init__.py": "", "engine/runner.py": ENGINE})], "upstream")
    base = git(upstream, "rev-parse", "HEAD").strip()
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(upstream), str(work))
    git(work, "checkout", "-q", "-b", "feature")
    # the pull request adds a hot env read: a new gating finding, so the check audits the base
    pr = ENGINE.replace("        return", "        batch = os.environ.get(\"MY_DBG2\") or batch\n        return")
    commit_files(work, "more", {"engine/runner.py": pr}, day=1)
    caches: dict[str, Path] = {}
    first = Runner(tmp_path / "push1", work, caches, tmp_path / "caches")
    assert (first.run(), first.failed) == (2, True), first.said  # the head, then the base; the gate fails on the new read
    assert list(caches) == [f"cs-audit-{__version__}-{base}"]
    # the next push, on a fresh machine: its head is audited, the base's audit comes from the cache
    commit_files(work, "again", {"engine/extra.py": "X = 1\n"}, day=2)
    second = Runner(tmp_path / "push2", work, caches, tmp_path / "caches")
    assert (second.run(), second.failed) == (1, True), second.said
    assert second.outputs["cache"] == {"cache-hit": "true"}
