"""A fork-shaped tree of git repositories with fixed dates, for the "added in" tests.

``make_fork(tmp)`` builds ``tmp/fork`` (the outer repository) holding a nested repository
``cpu/`` (its own ``.git``, not tracked by the outer one) and a submodule ``third/kernels``
(from ``tmp/kernels-src``), plus a submodule ``third/unused`` that is left uninitialised.
Each history is written so that blame of today's read lines gives a later commit than the
one that introduced the switch.  ``EXPECTED`` says, for each switch, the subject of the
commit that first reads it and the repository (``""``: the outer one).
"""

from __future__ import annotations

from pathlib import Path

from tests.gitrepo import commit_files, git, sha_of

#: switch -> (subject of the commit that first reads it, repository path or "")
EXPECTED = {
    "TRACE_STEPS": ("core: trace each step", ""),
    "KV_DUMP_DIR": ("dump: kv dump directory", ""),
    "ENGINE_PROBE": ("envs: declare the probe switch", ""),
    "CPU_PROBE": ("cpu: probe the verify step", "cpu"),
    "KERNEL_TRACE": ("kernels: trace launches", "third/kernels"),
}

_CORE_0 = '''\
"""The engine core.  TRACE_STEPS will switch on a trace of each step."""
import os

# TODO: read TRACE_STEPS here once the trace exists
MESSAGE = "set TRACE_STEPS=1 to trace"


def step():
    return 1
'''
_CORE_1 = _CORE_0.replace("def step():\n    return 1\n", "TRACE = os.getenv('TRACE_STEPS')\n\n\ndef step():\n    return 1\n")
# the read line rewritten by a commit whose subject names the switch
_CORE_2 = _CORE_1.replace("TRACE = os.getenv('TRACE_STEPS')", "TRACE = os.getenv('TRACE_STEPS', '0') == '1'")
_DUMP = "import os\n\nDUMP_DIR = os.environ.get('KV_DUMP_DIR', '')\n"
_ENVS = "import os\n\nenvironment_variables = {\n    'ENGINE_PROBE': lambda: os.getenv('ENGINE_PROBE', '0'),\n}\n"
_PROBE_USER = "from vllm import envs\n\n\ndef run():\n    if envs.ENGINE_PROBE:\n        print('probe')\n"


def _reformat(text: str) -> str:
    """What a tree-wide formatter commit does here: single quotes become double quotes."""
    return text.replace("'", '"')


def _kernels(tmp: Path) -> Path:
    src = tmp / "kernels-src"
    src.mkdir()
    git(src, "init", "-q", "-b", "main")
    commit_files(src, "kernels: start", {"kern.py": "def launch():\n    return 0\n"}, day=2)
    commit_files(src, "kernels: trace launches",
                 {"kern.py": "import os\n\nTRACE = os.getenv('KERNEL_TRACE')\n\n\ndef launch():\n    return 0\n"}, day=3)
    commit_files(src, "kernels: reformat", {"kern.py": _reformat((src / "kern.py").read_text())}, day=9)
    return src


def _cpu(fork: Path) -> None:
    cpu = fork / "cpu"
    cpu.mkdir()
    git(cpu, "init", "-q", "-b", "main")
    commit_files(cpu, "cpu: start", {"verify.py": "def verify():\n    return True\n"}, day=1)
    commit_files(cpu, "cpu: probe the verify step",
                 {"verify.py": "import os\n\nPROBE = os.environ.get('CPU_PROBE')\n\n\ndef verify():\n    return True\n"}, day=4)
    commit_files(cpu, "cpu: CPU_PROBE read as a flag",
                 {"verify.py": (cpu / "verify.py").read_text().replace("os.environ.get('CPU_PROBE')",
                                                                         "os.environ.get('CPU_PROBE', '') == '1'")}, day=8)


def make_fork(tmp: Path) -> Path:
    """Build the fork and return its outer work tree."""
    src = _kernels(tmp)
    unused = tmp / "unused-src"
    unused.mkdir()
    git(unused, "init", "-q", "-b", "main")
    commit_files(unused, "unused: start", {"u.py": "X = 1\n"}, day=0)
    fork = tmp / "fork"
    fork.mkdir()
    git(fork, "init", "-q", "-b", "main")
    commit_files(fork, "init: runner and core", {
        "launch.sh": "#!/bin/sh\nexport TRACE_STEPS=1\nexport KV_DUMP_DIR=/tmp/kv\npython -m engine\n",
        "engine/core.py": _CORE_0,
        "engine/notes.py": '"""KV_DUMP_DIR: where the dump will go."""\n',
    }, day=0)
    commit_files(fork, "core: trace each step", {"engine/core.py": _CORE_1}, day=1)
    commit_files(fork, "dump: kv dump directory", {"engine/dump.py": _DUMP}, day=2)
    commit_files(fork, "envs: declare the probe switch", {"vllm/envs.py": _ENVS}, day=3)
    commit_files(fork, "core: TRACE_STEPS read as a flag", {"engine/core.py": _CORE_2}, day=4)
    (fork / "engine/kv").mkdir()
    git(fork, "mv", "engine/dump.py", "engine/kv/dump.py")
    commit_files(fork, "dump: move to engine/kv", {}, day=5)
    commit_files(fork, "probe: use it in the runner", {"engine/runner.py": _PROBE_USER}, day=6)
    for rel in ("engine/core.py", "engine/kv/dump.py", "vllm/envs.py", "engine/runner.py"):
        (fork / rel).write_text(_reformat((fork / rel).read_text()))
    commit_files(fork, "style: format the whole tree", {}, day=7)
    for name, source in (("kernels", src), ("unused", unused)):
        git(fork, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(source), f"third/{name}")
    commit_files(fork, "third: kernels and unused as submodules", {}, day=10)
    git(fork, "submodule", "deinit", "-q", "third/unused")
    _cpu(fork)
    return fork


def expected_sha(fork: Path, name: str) -> tuple[str, str]:
    """(short sha, repository) of the commit that first reads ``name``."""
    subject, repo = EXPECTED[name]
    where = fork / repo if repo else fork
    return sha_of(where, subject)[:9], repo


# -- the CompressSpec layout: an outer workspace whose .gitignore lists its engine checkout

#: the upstream engine: a registry of switches and a runner whose step reads one of them
_UP_ENVS = '''\
import os

environment_variables = {
    "VLLM_LOGGING_LEVEL": lambda: os.getenv("VLLM_LOGGING_LEVEL", "INFO"),
    "VLLM_SLOW_CHECKS": lambda: os.getenv("VLLM_SLOW_CHECKS", "0") == "1",
}
'''
_UP_RUNNER = '''\
import logging
import os

logger = logging.getLogger(__name__)


class GPUModelRunner:
    def execute_model(self, batch):
        if os.environ.get("VLLM_SLOW_CHECKS") == "1":
            self.check(batch)
        out = self.forward(batch)
        logger.debug("step done")
        return out

    def forward(self, batch):
        logger.info("forward %s", batch)
        return batch

    def check(self, batch):
        return batch
'''
_UP_UTILS = "def helper(x):\n    return x\n"


def _fork_runner(upstream: str) -> str:
    """The fork's edits of the runner: a switch of its own and a per-step log nothing gates."""
    return upstream.replace(
        "        out = self.forward(batch)\n",
        "        out = self.forward(batch)\n"
        "        logger.info(f\"[CS] step {len(batch)}\")\n"
        "        if os.environ.get(\"CS_STATE_DEBUG\") == \"1\":\n"
        "            print(\"[CS] state\", out)\n",
    )


_CPU_VERIFY = '''\
import os

MY_DEBUG = os.environ.get("MY_DEBUG", "0") == "1"


def verify(tokens):
    if MY_DEBUG:
        print("verify", tokens)
    return tokens
'''
#: the upstream commits of ``vllm/``, then the fork's (subject, files)
UPSTREAM_COMMITS = (
    ("upstream: engine", {"vllm/envs.py": _UP_ENVS, "vllm/worker/runner.py": _UP_RUNNER,
                          "vllm/version.py": '__version__ = "0.33.0"\n'}),
    ("upstream: utils", {"vllm/utils.py": _UP_UTILS}),
)
FORK_COMMITS = (
    ("cs: per-step state log and CS_STATE_DEBUG", {"vllm/worker/runner.py": _fork_runner(_UP_RUNNER)}),
    ("cs: a _diag copy of the utils", {"vllm/utils_diag.py": _UP_UTILS.replace("helper", "helper_diag")}),
)
#: the tag naming the upstream release the fork is based on
UPSTREAM_TAG = "v0.33.0"


def make_compressspec(tmp: Path) -> Path:
    """``tmp/ws``: an outer repository whose ``.gitignore`` lists ``vllm/``, a repository of
    upstream commits (tagged ``UPSTREAM_TAG``) then the fork's, and ``vllm_cpu/``, a
    submodule of the fork's own code.  Returns the outer work tree."""
    cpu_src = tmp / "vllm_cpu-src"
    cpu_src.mkdir()
    git(cpu_src, "init", "-q", "-b", "main")
    commit_files(cpu_src, "cpu: verify", {"vllm_cpu/verify.py": _CPU_VERIFY}, day=1)
    ws = tmp / "ws"
    ws.mkdir()
    git(ws, "init", "-q", "-b", "main")
    commit_files(ws, "ws: start", {".gitignore": "vllm/\n", "run.sh": "#!/bin/sh\nexport MY_DEBUG=1\npython -m vllm\n"}, day=0)
    git(ws, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(cpu_src), "vllm_cpu")
    commit_files(ws, "ws: vllm_cpu as a submodule", {}, day=2)
    engine = ws / "vllm"
    engine.mkdir()
    git(engine, "init", "-q", "-b", "main")
    day = 0
    for subject, files in UPSTREAM_COMMITS:
        commit_files(engine, subject, files, day=day)
        day += 1
    git(engine, "tag", UPSTREAM_TAG)
    for subject, files in FORK_COMMITS:
        day += 1
        commit_files(engine, subject, files, day=day)
    return ws
