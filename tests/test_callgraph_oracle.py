"""A runtime oracle for the static call graph (``cs-audit callgraph --format pycg``).

Each program under ``fixtures/callgraph_oracle/`` is a small, deterministic, stdlib-only
package shaped like a serving engine (see the README there for the shapes each one covers).
The test runs each program in a subprocess under ``sys.setprofile`` and records every
(caller, callee) pair of a Python ``call`` event whose two frames both run code from a file
of that program. Then it asks ``python -m cs_audit callgraph <program> --format pycg`` for
the static graph of the same tree and checks:

- **recall 1.0**: every observed edge is a static edge. An edge that ran is an edge the
  audit's reachability (hot paths, gates) must see; a missing one means code the audit calls
  cold that really runs per step.
- **precision >= 0.8** among the functions that ran: of the static edges whose caller was
  observed to run and whose callee is a function of the tree, at least 80% were observed.
  The programs run every call site they contain, so an edge beyond the observed ones is an
  over-approximation (a class-hierarchy guess, a name match), not a branch that did not run.
  Import edges (a module as the callee) are left out of this count: the tracer cannot see
  an import as a call, because importlib's own frames sit between the importer and the
  imported module's code.

Both sides name a function ``module.qualname``: the module's dotted path relative to the
program folder (``pkg/a.py`` is ``pkg.a``, ``pkg/__init__.py`` is ``pkg``) and
``co_qualname`` with every ``.<locals>`` removed; module-level code is the module's name.
Observed edges are never filtered to suit a static tool. They include what the interpreter
really does: a call of a method decorated with a ``functools.wraps`` wrapper goes to
``mod.deco.wrapper``, which calls the method; calling a ``functools.partial`` or a bound
method handed over as a callback is a call from the frame that made it (the C layer in
between has no frame); instantiating a class is a call of the ``__init__`` the MRO finds.

What the tracer does about ``setprofile``:

- ``c_call`` / ``c_return`` events are ignored; a Python function called from C code
  (``functools.partial``, ``type.__call__`` running ``__init__``, a property's getter)
  reports the nearest Python frame as its ``f_back``, which is the caller a reader names.
- A class body and a comprehension or generator expression (separate code objects in
  3.11; comprehensions are inlined from 3.12) are not functions: they are not callees, and
  the calls they make are the calls of the function or module that lexically holds them.
- A generator's frame gets a ``call`` event at every resume; only the first (the start)
  counts, and the fixtures consume each generator in the function that created it.
- Module code starts under importlib's frames, so an import is no edge (see above), but
  the module does count as having run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parent.parent
ORACLE = PROJECT / "fixtures" / "callgraph_oracle"
PROGRAMS = sorted(p.name for p in ORACLE.iterdir() if (p / "main.py").is_file())
MIN_PRECISION = 0.8

#: run as ``python -B -c TRACER <program dir> <out.json>`` with the program dir as cwd
TRACER = r'''
import json, os, runpy, sys

ROOT = os.path.realpath(sys.argv[1])
OUT = sys.argv[2]
CO_OPTIMIZED = 0x0001
GENERATOR = 0x0020 | 0x0080 | 0x0200  # CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR
COMPREHENSIONS = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"})

names = {}      # code object -> (name, folded) or None when the code is not from the program
started = set() # generator frames already started (held, so their ids are never reused)
ran = set()
edges = set()


def _module(path):
    parts = os.path.relpath(path, ROOT)[: -len(".py")].split(os.sep)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _enclosing(module, qualname):
    """The function (or module) that lexically holds a class body or comprehension."""
    while True:
        head, sep, _ = qualname.rpartition(".<locals>.")
        if not sep:
            return module
        if head.rpartition(".")[2] not in COMPREHENSIONS:
            return module + "." + head.replace(".<locals>", "")
        qualname = head


def _scope(code):
    try:
        return names[code]
    except KeyError:
        pass
    path = os.path.realpath(code.co_filename)
    entry = None
    if path.startswith(ROOT + os.sep) and path.endswith(".py"):
        module = _module(path)
        if code.co_name == "<module>":
            entry = (module, False)
        elif code.co_name in COMPREHENSIONS or not code.co_flags & CO_OPTIMIZED:  # class bodies are not optimized
            entry = (_enclosing(module, code.co_qualname), True)
        else:
            entry = (module + "." + code.co_qualname.replace(".<locals>", ""), False)
    names[code] = entry
    return entry


def _profile(frame, event, arg):
    if event != "call":
        return
    callee = _scope(frame.f_code)
    if callee is None:
        return
    name, folded = callee
    ran.add(name)
    if folded:
        return
    if frame.f_code.co_flags & GENERATOR:
        if frame in started:
            return
        started.add(frame)
    back = frame.f_back
    caller = _scope(back.f_code) if back is not None else None
    if caller is not None:
        edges.add((caller[0], name))


sys.path.insert(0, ROOT)
sys.argv = [os.path.join(ROOT, "main.py")]
sys.setprofile(_profile)
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
finally:
    sys.setprofile(None)
    with open(OUT, "w", encoding="utf-8") as fh:
        json.dump({"ran": sorted(ran), "edges": sorted(edges)}, fh)
'''

#: per program, edges the tracer must observe: one or more per shape the program is
#: written to cover, so the tracer half is checked even before ``callgraph`` exists
SHAPES: dict[str, list[tuple[str, str]]] = {
    "engine_core": [
        ("main", "main.main"),  # module code calls main()
        ("minivllm.engine.EngineCore.step", "minivllm.scheduler.Scheduler.schedule"),  # self.scheduler = Scheduler(cfg)
        ("minivllm.engine.EngineCore.__init__", "minivllm.scheduler.Scheduler.__init__"),  # instantiation
        ("minivllm.engine.EngineCore.step", "minivllm.spec.SpecDecoder.propose"),  # X(cfg) if cfg.flag else None
        ("minivllm.engine.EngineCore.step", "minivllm.runner.ModelRunner.execute"),  # runner: "ModelRunner" (TYPE_CHECKING)
        ("minivllm.scheduler.Scheduler.update", "minivllm.request.Req.advance"),  # reqs: list[Req]; for r in reqs
        ("minivllm.scheduler.Scheduler.update", "minivllm.request.Req.finished"),  # a property, also in a listcomp
        ("minivllm.runner.ModelRunner._sample", "minivllm.request.Req.num_tokens"),  # req: "Req"
        ("minivllm.request.Batch.token_count", "minivllm.request.Req.num_tokens"),  # inside a genexpr
        ("minivllm.spec.SpecDecoder.propose", "minivllm.spec.SpecDecoder._draft"),  # inside a dictcomp
        ("minivllm.engine.EngineCore.add_request", "minivllm.request.Req.from_prompt"),  # classmethod
        ("minivllm.request.Req.from_prompt", "minivllm.request.Req.make_id"),  # staticmethod
        ("minivllm.request.Req.from_prompt", "minivllm.request.Req.__init__"),  # cls(...)
        ("minivllm.spec.SpecDecoder.__init__", "minivllm.config.EngineConfig.spec_len"),  # method of a dataclass
    ],
    "engine_mixins": [
        ("mixsched.engine.EngineCore.__init__", "mixsched.scheduler.Scheduler.from_config"),  # classmethod factory
        ("mixsched.engine.EngineCore.step", "mixsched.scheduler.Scheduler.step"),  # attribute set from it
        ("mixsched.scheduler.Scheduler.from_config", "mixsched.scheduler.Scheduler.__init__"),  # cls(...)
        ("mixsched.scheduler.Scheduler.__init__", "mixsched.base.SchedulerBase.__init__"),  # super().__init__ past 3 mixins
        ("mixsched.base.SchedulerBase.__init__", "mixsched.prefill.PrefillMixin.reset"),  # self.reset() via the MRO
        ("mixsched.prefill.PrefillMixin.reset", "mixsched.decode.DecodeMixin.reset"),  # super().reset() chain
        ("mixsched.decode.DecodeMixin.reset", "mixsched.preempt.PreemptMixin.reset"),
        ("mixsched.preempt.PreemptMixin.reset", "mixsched.base.SchedulerBase.reset"),
        ("mixsched.scheduler.Scheduler.step", "mixsched.base.SchedulerBase.schedule"),  # inherited
        ("mixsched.scheduler.Scheduler.step", "mixsched.prefill.PrefillMixin.schedule_prefill"),  # from a mixin
        ("mixsched.base.SchedulerBase.schedule", "mixsched.scheduler.Scheduler._pick"),  # base calls an override
        ("mixsched.scheduler.Scheduler._pick", "mixsched.base.SchedulerBase._pick"),  # super()._pick
        ("mixsched.prefill.PrefillMixin.schedule_prefill", "mixsched.base.SchedulerBase._note"),  # mixin self. to a sibling base
        ("mixsched.preempt.PreemptMixin.maybe_preempt", "mixsched.base.SchedulerBase._over_budget"),
        ("mixsched.scheduler.Scheduler.step", "mixsched.executor.Executor.execute"),  # class-level `executor: Executor`
        ("mixsched.scheduler.Scheduler.step", "mixsched.outputs.StepStats.record"),  # a dataclass field
        ("mixsched.scheduler.Scheduler.__init__", "mixsched.policy.make_policy"),
        ("mixsched.scheduler.Scheduler._pick", "mixsched.policy.Policy.order"),  # make_policy() -> "Policy"
        ("mixsched.policy.Policy.order", "mixsched.policy.Policy.key"),
        ("mixsched.policy.Policy.order", "mixsched.policy.PriorityPolicy.key"),  # the override
    ],
    "engine_model": [
        ("minimodel.runner.ModelRunner.execute_model._postprocess", "minimodel.fake_nn.Module.__call__"),  # self.sampler(...)
        ("minimodel.fake_nn.Module.__call__", "minimodel.sampler.Sampler.forward"),  # self.forward in the base
        ("minimodel.runner.ModelRunner.execute_model._postprocess", "minimodel.sampler.LogitsProcessor.__call__"),  # plain
        ("minimodel.model.TinyModel.forward", "minimodel.fake_nn.Module.__call__"),  # for layer in self.layers
        ("minimodel.fake_nn.Module.__call__", "minimodel.layers.DecoderLayer.forward"),
        ("minimodel.fake_nn.Module.__call__", "minimodel.model.TinyModel.forward"),  # through graph_runner.replay
        ("minimodel.runner.ModelRunner._forward", "minimodel.cuda_graph.GraphRunner.replay"),  # = self.capture.runner
        ("minimodel.runner.ModelRunner.__init__", "minimodel.sampler.make_sampler"),  # make_sampler() -> "Sampler"
        ("minimodel.sampler.make_sampler", "minimodel.fake_nn.Module.__init__"),  # an inherited __init__
        ("minimodel.layers.Linear.__init__", "minimodel.fake_nn.Module.__init__"),  # super().__init__()
        ("minimodel.model.TinyModel.__init__", "minimodel.layers.DecoderLayer.__init__"),  # inside a listcomp
        ("minimodel.runner", "minimodel.timing.timed"),  # the decorator applied in a class body at import
        ("main.main", "minimodel.timing.timed.wrapper"),  # calling the decorated method
        ("minimodel.timing.timed.wrapper", "minimodel.runner.ModelRunner.execute_model"),
        ("minimodel.timing.timed.wrapper", "minimodel.timing._record"),
        ("minimodel.runner.ModelRunner.execute_model", "minimodel.runner.ModelRunner.execute_model._postprocess"),  # nested
    ],
    "engine_runtime": [
        ("main.main", "minirt.runtime.init_runtime"),
        ("minirt.runtime.init_runtime", "minirt.runtime.Runtime.__init__"),
        ("minirt.runtime.on_step", "minirt.runtime.Runtime.tick"),  # _runtime: Optional[Runtime] = None
        ("minirt.engine.AsyncEngine.step", "minirt.runtime.Runtime.tick"),  # get_runtime() -> Runtime
        ("minirt.router.RequestRouter.dispatch", "minirt.router.RequestRouter._gen"),  # self._handlers[kind](req)
        ("minirt.router.RequestRouter.dispatch", "minirt.util.retry.deco.wrapper"),  # ... into a decorated method
        ("minirt.util.retry.deco.wrapper", "minirt.router.RequestRouter._abort"),
        ("minirt.util.retry.deco.wrapper", "minirt.util._log"),
        ("minirt.router", "minirt.util.retry"),  # @retry(times=2) at import
        ("minirt.router", "minirt.util.retry.deco"),
        ("minirt.output.OutputProcessor.process", "minirt.engine.AsyncEngine._finish"),  # a callback argument
        ("minirt.engine.AsyncEngine.step", "minirt.output.OutputProcessor.emit"),  # a functools.partial
        ("minirt.engine.AsyncEngine.step", "minirt.engine.AsyncEngine._ready"),  # a generator, started once
        ("minirt.engine.AsyncEngine._ready", "minirt.request.Req.ready"),
        ("minirt.engine.AsyncEngine.submit", "minirt.request.Req.new"),  # classmethod
        ("minirt.request.Req.new", "minirt.request.Req.parse_kind"),  # staticmethod through the class name
        ("minirt.request.Req.new", "minirt.request.Req.__init__"),  # cls(...)
    ],
}

#: a tree for the tracer itself: each line of the expected edges below is one rule of the
#: naming in the module docstring
PROBE = {
    "pkg/__init__.py": "",
    "pkg/a.py": """\
import dataclasses
import functools


def helper(x):
    return x


def deco(fn):
    return fn


@dataclasses.dataclass
class Data:
    n: int = 0


class C:
    v = helper(1)

    @deco
    def m(self):
        return [helper(i) for i in [0, 1]] + [[helper(j) for j in [i]] for i in [2]]


def gen():
    yield helper(0)
    yield helper(1)


def make():
    return gen()


def consume(g):
    return list(g)


def outer():
    class Local:
        w = helper(2)

    def inner():
        return helper(3)

    return functools.partial(inner)()
""",
    "main.py": """\
from pkg import a


def main():
    a.C().m()
    a.Data(1)
    g = a.make()
    next(g)
    a.consume(g)
    a.outer()


main()
""",
}
PROBE_EDGES = {
    ("main", "main.main"),
    ("pkg.a", "pkg.a.helper"),  # a class body's calls are its module's
    ("pkg.a", "pkg.a.deco"),
    ("main.main", "pkg.a.C.m"),  # C() runs no __init__ of the tree; a.Data(1) runs one from <string>
    ("pkg.a.C.m", "pkg.a.helper"),  # from inside (nested) list comprehensions
    ("main.main", "pkg.a.make"),
    ("main.main", "pkg.a.gen"),  # the first next() starts the generator; consume's resumes are not calls
    ("pkg.a.gen", "pkg.a.helper"),
    ("main.main", "pkg.a.consume"),
    ("main.main", "pkg.a.outer"),
    ("pkg.a.outer", "pkg.a.helper"),  # the body of a class local to outer
    ("pkg.a.outer", "pkg.a.outer.inner"),  # through functools.partial: no frame in between
    ("pkg.a.outer.inner", "pkg.a.helper"),
}


def _environ() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSTARTUP")}
    env.update(PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1")
    return env


def _copy(name: str, tmp_path: Path) -> Path:
    return shutil.copytree(ORACLE / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))


def _observe(program: Path) -> tuple[set[str], set[tuple[str, str]]]:
    """The functions that ran and the in-program edges of one run of ``program/main.py``."""
    out = program.parent / f"{program.name}.observed.json"
    proc = subprocess.run([sys.executable, "-B", "-c", TRACER, str(program), str(out)], cwd=program,
                          capture_output=True, text=True, timeout=60, env=_environ())
    assert proc.returncode == 0, f"{program.name}/main.py failed under the tracer:\n{proc.stderr}"
    data = json.loads(out.read_text(encoding="utf-8"))
    return set(data["ran"]), {(a, b) for a, b in data["edges"]}


def _modules(program: Path) -> set[str]:
    names = set()
    for path in program.rglob("*.py"):
        parts = list(path.relative_to(program).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.add(".".join(parts))
    return names


@cache
def _callgraph_missing() -> str | None:
    """Why the static half cannot run, or None when ``callgraph`` exists."""
    proc = subprocess.run([sys.executable, "-m", "cs_audit", "callgraph", "--help"], cwd=PROJECT,
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        return f"`python -m cs_audit callgraph --help` exits {proc.returncode}: the callgraph command does not exist yet"
    return None


def _static(program: Path) -> dict[str, list[str]]:
    proc = subprocess.run([sys.executable, "-m", "cs_audit", "callgraph", str(program), "--format", "pycg"],
                          cwd=program.parent, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"cs_audit callgraph {program.name} exited {proc.returncode}:\n{proc.stderr}"
    graph = json.loads(proc.stdout)
    assert isinstance(graph, dict) and all(isinstance(v, list) for v in graph.values()), "not a pycg-shaped object"
    return graph


@pytest.mark.parametrize("name", PROGRAMS)
def test_the_tracer_sees_every_shape_the_program_is_written_for(name: str, tmp_path: Path) -> None:
    program = _copy(name, tmp_path)
    ran, edges = _observe(program)
    missing = [edge for edge in SHAPES[name] if edge not in edges]
    assert not missing, "expected edges not observed:\n" + "\n".join(f"  {a} -> {b}" for a, b in missing)
    assert {a for a, _ in edges} | {b for _, b in edges} <= ran
    assert not any("<" in n for n in ran), sorted(n for n in ran if "<" in n)  # no <locals>, <listcomp>, <module>
    assert _observe(program) == (ran, edges), "the program is not deterministic"


def test_the_tracer_names_calls_as_the_docstring_says(tmp_path: Path) -> None:
    program = tmp_path / "probe"
    for rel, text in PROBE.items():
        (program / rel).parent.mkdir(parents=True, exist_ok=True)
        (program / rel).write_text(text, encoding="utf-8")
    ran, edges = _observe(program)
    assert edges == PROBE_EDGES
    assert ran == {"main", "main.main", "pkg", "pkg.a", "pkg.a.helper", "pkg.a.deco", "pkg.a.C.m", "pkg.a.make",
                   "pkg.a.gen", "pkg.a.consume", "pkg.a.outer", "pkg.a.outer.inner"}


def test_every_program_has_its_shapes_listed() -> None:
    assert len(PROGRAMS) >= 3 and sorted(SHAPES) == PROGRAMS


#: observed edges the static graph does not have yet, each with the reason: the test fails
#: when one of them appears (update the list) and when any other edge is missing
KNOWN_GAPS: dict[str, dict[tuple[str, str], str]] = {}


@pytest.mark.parametrize("name", PROGRAMS)
def test_the_static_graph_has_every_edge_that_ran(name: str, tmp_path: Path) -> None:
    reason = _callgraph_missing()
    if reason is not None:
        pytest.skip(reason)
    program = _copy(name, tmp_path)
    ran, observed = _observe(program)
    graph = _static(program)
    static = {(caller, callee) for caller, callees in graph.items() for callee in callees}

    unknown = sorted({n for edge in observed for n in edge} - set(graph))
    gaps = KNOWN_GAPS.get(name, {})
    closed = sorted(set(gaps) & static)
    assert not closed, f"{name}: known gaps now in the static graph, drop them from KNOWN_GAPS: {closed}"
    assert set(gaps) <= observed, f"{name}: KNOWN_GAPS lists edges that did not run: {sorted(set(gaps) - observed)}"
    missing = sorted(observed - static - set(gaps))
    assert not missing, (
        f"{name}: {len(missing)} of {len(observed)} observed edges are not in the static graph:\n"
        + "\n".join(f"  {a} -> {b}" for a, b in missing)
        + (f"\nfunctions that ran but are no key of the static graph: {unknown}" if unknown else "")
    )

    functions = set(graph) - _modules(program)
    judged = {(a, b) for a, b in static if a in ran and b in functions}
    extra = sorted(judged - observed)
    precision = (len(judged) - len(extra)) / len(judged) if judged else 1.0
    line = (f"{name}: {len(observed)} observed edges, all but the {len(gaps)} known gaps in the static graph; {len(judged)} static edges from "
            f"functions that ran, {len(extra)} beyond the observed ones: precision {precision:.2f}")
    print(line)
    assert precision >= MIN_PRECISION, line + "\n" + "\n".join(f"  {a} -> {b}" for a, b in extra)
