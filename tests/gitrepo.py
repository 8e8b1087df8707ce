"""Throwaway git repositories with fixed identities and dates, for tests.

Commit *i* (0-based) is authored and committed at 2026-01-01 + *i* days,
00:00 UTC, by ``Test <t@example.com>``, so the same commit list yields the
same shas on every machine and every run.  User and system git config are
ignored, and hooks and signing are off.
"""

from __future__ import annotations

import os
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

START = datetime(2026, 1, 1, tzinfo=UTC)
NAME = "Test"
EMAIL = "t@example.com"

Commit = tuple[str, dict[str, "str | None"]]


def git_env(when: datetime | None = None) -> dict[str, str]:
    """Environment for a deterministic, isolated git call."""
    env = dict(os.environ)
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_AUTHOR_NAME=NAME,
        GIT_AUTHOR_EMAIL=EMAIL,
        GIT_COMMITTER_NAME=NAME,
        GIT_COMMITTER_EMAIL=EMAIL,
        GIT_TERMINAL_PROMPT="0",
    )
    if when is not None:
        stamp = when.strftime("%Y-%m-%dT%H:%M:%S +0000")
        env.update(GIT_AUTHOR_DATE=stamp, GIT_COMMITTER_DATE=stamp)
    return env


def git(cwd: Path, *args: str, when: datetime | None = None) -> str:
    """Run git in ``cwd`` with hooks and signing off; return stdout."""
    done = subprocess.run(
        ["git", "-c", "core.hooksPath=/dev/null", "-c", "commit.gpgsign=false", *args],
        cwd=cwd,
        env=git_env(when),
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout


def make_repo(tmp_path: Path, commits: list[Commit], name: str = "repo") -> Path:
    """Create ``tmp_path/name`` and commit each ``(subject, {relpath: content|None})``.

    ``None`` deletes the file.  Returns the work tree path.
    """
    repo = tmp_path / name
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    for i, (subject, files) in enumerate(commits):
        commit_files(repo, subject, files, day=i)
    return repo


def init_repo(path: Path) -> Path:
    """An empty repository at ``path`` (made), on branch ``main``."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    return path


def commit_files(repo: Path, subject: str, files: dict[str, str | None], day: int) -> str:
    """Write (``None``: delete) ``files`` and commit them at START + ``day`` days; the new HEAD sha."""
    for rel, content in files.items():
        target = repo / rel
        if content is None:
            target.unlink()
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", subject, when=START + timedelta(days=day))
    return head(repo)


def head(repo: Path) -> str:
    """Full sha of HEAD."""
    return git(repo, "rev-parse", "HEAD").strip()


def sha_of(repo: Path, subject: str) -> str:
    """Full sha of the (newest) commit whose subject is exactly ``subject``."""
    for line in git(repo, "log", "--format=%H %s").splitlines():
        sha, _, subj = line.partition(" ")
        if subj == subject:
            return sha
    raise KeyError(subject)


#: a tiny engine module for gate/history tests: a hot step whose trace log sits behind an env switch
HOT_ENGINE = '''\
import logging
import os

logger = logging.getLogger(__name__)
_TRACE = os.environ.get("ENGINE_TRACE", "0") == "1"


class Runner:
    def execute_model(self, batch):
        out = self.forward(batch)
        if _TRACE:
            logger.debug("trace %s", out)
        return out

    def forward(self, batch):
        return batch
'''
