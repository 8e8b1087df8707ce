"""The typed call graph through its public results: ``cs-audit callgraph`` (edges and how
each was found), ``cs-audit why`` and the findings' ``hot_path``.  Each case has a call the
graph must resolve and one it must leave alone."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from cs_audit.cli import app
from cs_audit.testing import write_tree

runner = CliRunner()


def _graph(root: Path) -> dict:
    result = runner.invoke(app, ["callgraph", str(root), "--format", "json", "--no-cache", "-j", "1"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _edges(root: Path) -> set[tuple[str, str, str]]:
    return {(e["caller"], e["callee"], e["how"]) for e in _graph(root)["edges"]}


def _report(root: Path) -> dict:
    return json.loads(runner.invoke(app, ["scan", str(root), "-f", "json", "--no-cache", "--no-history", "-j", "1"]).stdout)


def test_an_attribute_built_in_init_is_typed_across_files(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", {
        "eng/__init__.py": "",
        "eng/sched.py": """
            class Scheduler:
                def schedule(self):
                    return 1

            class Other:
                def schedule(self):
                    return 2
        """,
        "eng/core.py": """
            from eng.sched import Scheduler

            class EngineCore:
                def __init__(self, cfg):
                    self.scheduler = Scheduler() if cfg else None

                def step(self):
                    return self.scheduler.schedule()
        """,
    })
    edges = _edges(root)
    assert ("eng.core.EngineCore.step", "eng.sched.Scheduler.schedule", "attribute") in edges
    assert not any(callee == "eng.sched.Other.schedule" for _, callee, _ in edges)  # another class's method of that name


def test_an_attribute_holding_an_untyped_object_is_not_resolved_by_name(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", {
        "m.py": """
            class Wrapper:
                def __init__(self, inner):
                    self.helper = inner

                def forward(self, x):
                    return self.helper(x)

            class Builder:
                def helper(self, block):
                    return Wrapper(block)
        """,
    })
    assert not any(callee == "m.Builder.helper" for _, callee, _ in _edges(root))


def test_imports_under_the_package_name_resolve_when_the_root_is_the_package(tmp_path: Path) -> None:
    files = {
        "__init__.py": "",
        "srt/__init__.py": "",
        "srt/util.py": "def helper():\n    return 1\n",
        "srt/loop.py": "from enginepkg.srt.util import helper\n\n\ndef step():\n    return helper()\n",
    }
    package = write_tree(tmp_path / "enginepkg", files)
    assert ("srt.loop.step", "srt.util.helper", "module") in _edges(package)
    other = write_tree(tmp_path / "elsewhere", files)  # the same files under another name: an outside import
    assert not any(callee == "srt.util.helper" for _, callee, _ in _edges(other))


def test_a_call_on_a_base_class_receiver_fans_out_to_overrides_up_to_the_cap(tmp_path: Path) -> None:
    def tree(subclasses: int) -> dict[str, str]:
        body = "class Base:\n    def run(self):\n        return 0\n\n    def step(self):\n        return self.run()\n"
        for i in range(subclasses):
            body += f"\n\nclass Sub{i}(Base):\n    def run(self):\n        return {i}\n"
        return {"m.py": body}

    few = _edges(write_tree(tmp_path / "few", tree(2)))
    assert {("m.Base.step", f"m.Sub{i}.run", "override") for i in range(2)} <= few
    many = _edges(write_tree(tmp_path / "many", tree(12)))
    assert ("m.Base.step", "m.Base.run", "self") in many
    assert not any(how == "override" for _, _, how in many)  # past the cap: the base's own method only


def test_callgraph_formats(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", {
        "runner.py": """
            class ModelRunner:
                def execute_model(self):
                    return self._prepare()

                def _prepare(self):
                    def inner():
                        return 1
                    return inner()
        """,
    })
    graph = _graph(root)
    assert graph["hot_roots"]["matched"] == ["runner.ModelRunner.execute_model"]
    assert {f["id"]: f["frequency"] for f in graph["functions"]}["runner.ModelRunner._prepare"] == "step"
    pycg = json.loads(runner.invoke(app, ["callgraph", str(root), "-f", "pycg", "--no-cache"]).stdout)
    assert pycg["runner.ModelRunner._prepare"] == ["runner.ModelRunner._prepare.inner"]  # no `<locals>`
    assert pycg["runner"] == [] and pycg["runner.ModelRunner._prepare.inner"] == []
    dot = runner.invoke(app, ["callgraph", str(root), "-f", "dot", "--no-cache"]).stdout
    assert dot.startswith("digraph") and '"runner.ModelRunner.execute_model" -> "runner.ModelRunner._prepare"' in dot
    bad = runner.invoke(app, ["callgraph", str(root), "-f", "svg"])
    assert bad.exit_code == 2 and "unknown format" in bad.output


_WHY_TREE = {
    "pyproject.toml": "",
    "runner.py": """
        import logging, os

        logger = logging.getLogger(__name__)

        class ModelRunner:
            def execute_model(self, batch):
                return self._prepare(batch)

            def _prepare(self, batch):
                logger.info("prepare %s", batch)
                if os.getenv("RUNNER_TRACE"):
                    self._trace(batch)

            def _trace(self, batch):
                logger.info("trace %s", batch)

        def startup():
            logger.info("loaded")
    """,
}


def test_why_prints_the_chain_and_how_each_call_was_resolved(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", _WHY_TREE)
    hot = runner.invoke(app, ["why", f"{root / 'runner.py'}:10", "--no-cache"])
    assert hot.exit_code == 0, hot.output
    assert "runner.py:10 is in runner.ModelRunner._prepare: hot (step) by default" in hot.stdout
    assert "hot root: step" in hot.stdout and "-> runner.ModelRunner._prepare  (called at runner.py:7" in hot.stdout
    assert ", self)" in hot.stdout
    gated = runner.invoke(app, ["why", f"{root / 'runner.py'}:15", "--no-cache"]).stdout
    assert "only with RUNNER_TRACE set" in gated
    cold = runner.invoke(app, ["why", f"{root / 'runner.py'}:18", "--no-cache"]).stdout
    assert "which no hot root reaches" in cold and "no caller found" in cold
    assert "module-level code" in runner.invoke(app, ["why", f"{root / 'runner.py'}:3", "--no-cache"]).stdout
    assert runner.invoke(app, ["why", "runner.py", "--no-cache"]).exit_code == 2  # no line


def test_why_through_a_property_read_and_a_cached_property(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", {
        "runner.py": """
            import functools


            class Stats:
                @property
                def load(self):
                    return 1

                @functools.cached_property
                def size(self):
                    return 2


            class ModelRunner:
                def __init__(self):
                    self.stats = Stats()

                def execute_model(self, batch):
                    return self.stats.load + self.stats.size


            def report(obj):
                return obj.area
        """,
        "shapes.py": """
            class Shape:
                def area(self):
                    return 3
        """,
    })
    hot = runner.invoke(app, ["why", f"{root / 'runner.py'}:7", "--no-cache"]).stdout
    assert "hot (step) by default" in hot and "`self.stats.load`, property)" in hot
    cached = runner.invoke(app, ["why", f"{root / 'runner.py'}:11", "--no-cache"]).stdout
    assert "which no hot root reaches" in cached and "a cached property" in cached and "`self.stats.size`" in cached
    # a read named like a plain method is no call of it that failed to resolve
    cold = runner.invoke(app, ["why", f"{root / 'shapes.py'}:3", "--no-cache"]).stdout
    assert "no caller found" in cold and "obj.area" not in cold


def test_a_property_read_in_a_loop_runs_per_item(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", {
        "runner.py": """
            import logging

            logger = logging.getLogger(__name__)


            class Stats:
                @property
                def load(self):
                    logger.info("load")
                    return 1


            class ModelRunner:
                def __init__(self):
                    self.stats = Stats()

                def execute_model(self, batch):
                    total = self.stats.load
                    for req in batch.requests:
                        total += self.stats.load
                    return total
        """,
    })
    report = _report(root)
    found = [f for f in report["findings"] if f["rule"] == "default-on-emitter" and f["line"] == 9]
    assert [f["frequency"] for f in found] == ["request"]
    assert found[0]["hot_path"] == ["runner.ModelRunner.execute_model", "runner.Stats.load"]


def test_a_function_returning_a_property_that_reads_the_env_is_a_helper(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", {
        "runner.py": """
            import logging
            import os

            logger = logging.getLogger(__name__)


            class Cfg:
                @property
                def trace(self):
                    return os.environ.get("RUNNER_TRACE") == "1"


            def tracing(cfg: Cfg):
                if cfg.trace:
                    pass
                return cfg.trace


            class ModelRunner:
                def __init__(self):
                    self.cfg = Cfg()

                def execute_model(self, batch):
                    if tracing(self.cfg):
                        logger.info("trace %s", batch)
        """,
    })
    report = _report(root)
    logs = [f for f in report["findings"] if f["rule"] == "default-on-emitter"]
    assert logs == []  # the log line is behind RUNNER_TRACE, read through tracing() and the property
    assert "RUNNER_TRACE" in {s["name"] for s in report["switches"]}


def test_findings_on_the_call_graph_carry_their_hot_path(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", _WHY_TREE)
    report = _report(root)
    by_line = {f["line"]: f for f in report["findings"] if f["rule"] == "default-on-emitter"}
    assert by_line[10]["hot_path"] == ["runner.ModelRunner.execute_model", "runner.ModelRunner._prepare"]
    assert all("hot_path" not in f for f in report["findings"] if f["frequency"] in ("once", "unknown"))


def test_the_markdown_and_the_terminal_say_where_a_site_is_hot_from(tmp_path: Path, monkeypatch) -> None:
    root = write_tree(tmp_path / "t", _WHY_TREE)
    markdown = runner.invoke(app, ["scan", str(root), "-f", "markdown", "--no-cache", "--no-history", "-j", "1"]).stdout
    row = next(line for line in markdown.splitlines() if "`runner.py:10`" in line and " line: " in line)  # §1 names the rule in words
    assert "| `ModelRunner.execute_model (+1 call)` |" in row
    monkeypatch.chdir(tmp_path)
    text = runner.invoke(app, ["scan", "t", "--no-cache", "--no-history", "-j", "1"]).stdout
    top = text.split("Top default-ON sites", 1)[1]
    site = next(line for line in top.splitlines() if ":10 " in line)
    # the folder as the finding lines give it (`t/runner.py:10:...`), and the chain in words
    assert "t/runner.py:10 " in site and "t/runner.py:10:" in text
    assert site.endswith("execute_model and 1 more call")


_CYCLES_TREE = {
    "eng/__init__.py": "",
    "eng/nodes.py": """
        class Node:
            def __init__(self):
                self.next = self.follow()
                self.peer = Peer(self)

            def follow(self):
                return self.next

            def run(self):
                return 1


        class Peer:
            def __init__(self, node):
                self.node = node
                self.back = node.peer

            def run(self):
                return self.back.node.follow()


        def chain():
            a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = a8 = a9 = a10 = a11 = Node()
            return a11
    """,
    "eng/loop.py": """
        from eng.nodes import Node

        x = None
        y = x or Node()
        z = y
        x = y


        def use_x():
            x.run()


        def use_z():
            z.run()
    """,
    "eng/core.py": """
        from eng.nodes import Node, Peer, chain


        class Engine:
            def __init__(self):
                self.node = Node()
                self.peer = Peer(self.node)

            def step(self):
                self.node.next.run()
                self.peer.back.run()
                self.peer.run()
                chain().run()

            def again(self):
                self.node.next.peer.run()
                self.peer.back.node.run()
    """,
}


def test_answers_a_cycle_shaped_are_replayed_as_working_them_out_again_gives_them(tmp_path: Path, monkeypatch) -> None:
    # attributes that hold each other (cycles) and a chain past the depth limit: their answers
    # are cut, kept with their cuts and replayed; the check mode works each replay out again
    from cs_audit import api
    from cs_audit.config import load_config
    from cs_audit.joins import values

    root = write_tree(tmp_path / "t", _CYCLES_TREE)
    plain = _edges(root)
    monkeypatch.setattr(values, "REPLAY_CHECK", True)
    model, _ = api.tree_model(load_config(str(root), jobs=1, history=False, cache=False))
    assert model.resolver.types.replays > 0  # replays were checked (a mismatch raises ReplayMismatch)
    assert _edges(root) == plain
    assert ("eng.core.Engine.step", "eng.nodes.Peer.run", "attribute") in plain


def test_a_base_class_named_at_module_level_is_not_a_class_or_local_binding_of_that_name(tmp_path: Path) -> None:
    # a class's bases are looked up among the module-level bindings alone
    root = write_tree(tmp_path / "t", {
        "m.py": """
            class Real:
                def run(self):
                    return 1

            class Decoy:
                def run(self):
                    return 2

            Base = Real

            def make():
                Base = Decoy
                return Base

            class Holder:
                Base = Decoy

            class Child(Base):
                pass

            def use(child: Child):
                return child.run()
        """,
    })
    edges = _edges(root)
    assert ("m.use", "m.Real.run", "inherited") in edges
    assert not any(callee == "m.Decoy.run" for _, callee, _ in edges)


def test_a_call_of_whichever_class_an_operand_gives_is_typed_by_each(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", {
        "eng/__init__.py": "",
        "eng/caches.py": """
            class RadixCache:
                def attach(self):
                    return 1

            class Other:
                def attach(self):
                    return 2
        """,
        "eng/build.py": """
            from eng.caches import RadixCache

            def create(params, cache_class=None):
                cache = (cache_class or RadixCache)(params)
                cache.attach()
                return cache
        """,
    })
    edges = _edges(root)
    assert ("eng.build.create", "eng.caches.RadixCache.attach", "local") in edges
    assert not any(callee == "eng.caches.Other.attach" for _, callee, _ in edges)


def test_a_factory_gives_what_its_returns_build_and_its_annotation_only_past_them(tmp_path: Path) -> None:
    # annotated with the base every cache shares, the factory builds one subclass: the call on
    # what it gave lands there alone; a factory returning what the graph cannot type keeps the
    # annotation's family
    root = write_tree(tmp_path / "t", {
        "eng/__init__.py": "",
        "eng/cache.py": """
            class BaseCache:
                def lookup(self, k):
                    return k

            class ShmCache(BaseCache):
                def lookup(self, k):
                    return k + 1

            class LruCache(BaseCache):
                def lookup(self, k):
                    return k + 2

            def worker_cache(cfg) -> BaseCache | None:
                if cfg is None:
                    return None
                return ShmCache()

            def any_cache(cfg) -> BaseCache:
                return cfg.make()
        """,
        "eng/worker.py": """
            from eng.cache import any_cache, worker_cache

            class Worker:
                def __init__(self, cfg):
                    self.cache = worker_cache(cfg)
                    self.other = any_cache(cfg)

                def step(self, k):
                    return self.cache.lookup(k)

                def peek(self, k):
                    return self.other.lookup(k)
        """,
    })
    edges = _edges(root)

    def landed(caller: str) -> set[str]:
        return {callee for c, callee, _ in edges if c == caller and callee.endswith(".lookup")}

    assert landed("eng.worker.Worker.step") == {"eng.cache.ShmCache.lookup"}
    # `self.other` keeps the annotation's family: the base and both subclasses
    assert landed("eng.worker.Worker.peek") == {"eng.cache.ShmCache.lookup", "eng.cache.BaseCache.lookup", "eng.cache.LruCache.lookup"}
