"""Values that flow through calls, through `cs-audit callgraph`: arguments into parameters,
decorators, lambdas, functions handed to calls outside the tree, iteration, call chains.
Each case has the edge the graph must have and, next to it, one it must not."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from cs_audit.cli import app
from cs_audit.testing import write_tree

runner = CliRunner()


def _edges(root: Path) -> dict[tuple[str, str], str]:
    result = runner.invoke(app, ["callgraph", str(root), "--format", "json", "--no-cache", "-j", "1"])
    assert result.exit_code == 0, result.output
    return {(e["caller"], e["callee"]): e["how"] for e in json.loads(result.stdout)["edges"]}


def test_an_argument_flows_into_the_parameter_it_is_passed_as(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", {
        "m.py": """
            def on_done():
                return 1

            def never_passed():
                return 2

            def run(cb, other):
                cb()
                other()

            class Box:
                def __init__(self, sink):
                    self.sink = sink

                def drain(self):
                    self.sink.push()

            class Pipe:
                def push(self):
                    return 3

            class Socket:
                def push(self):
                    return 4

            def main():
                run(on_done, other=on_done)
                Box(Pipe()).drain()
        """,
    })
    edges = _edges(root)
    assert ("m.run", "m.on_done") in edges  # positional and keyword
    assert ("m.Box.drain", "m.Pipe.push") in edges  # a constructor argument stored on self
    assert not any(callee in ("m.never_passed", "m.Socket.push") for _, callee in edges)


def test_arguments_follow_calls_through_parameters_to_a_fixed_point(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", {
        "m.py": """
            def leaf():
                return 1

            def inner(g):
                g()

            def outer(f):
                inner(f)

            outer(leaf)
        """,
    })
    assert ("m.inner", "m.leaf") in _edges(root)


def test_a_decorated_function_is_what_its_decorator_returns(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", {
        "timing.py": """
            import functools

            def timed(fn):
                @functools.wraps(fn)
                def wrapper(*args, **kwargs):
                    return fn(*args, **kwargs)
                return wrapper
        """,
        "runner.py": """
            from timing import timed

            class Runner:
                @timed
                def execute(self):
                    return 1

                @property
                def size(self):
                    return 2

                def step(self):
                    self.execute()
                    return self.size

            @timed
            def helper():
                return 3

            def main():
                helper()
                Runner().step()
        """,
    })
    edges = _edges(root)
    assert ("runner", "timing.timed") in edges  # applying the decorator at import
    assert ("runner.main", "timing.timed.<locals>.wrapper") in edges
    assert ("timing.timed.<locals>.wrapper", "runner.helper") in edges
    assert ("runner.Runner.step", "timing.timed.<locals>.wrapper") in edges
    assert ("timing.timed.<locals>.wrapper", "runner.Runner.execute") in edges
    assert ("runner.main", "runner.Runner.size") not in edges  # a property is no wrapper


def test_a_decorator_usable_bare_or_called_gives_its_wrapper_either_way(tmp_path: Path) -> None:
    # `def dec(func=None, *, opt=None)`: `return inner(func)` bare, `return inner` called with
    # options; a bare `@dec` method is `inner`'s wrapper, never `inner` itself
    root = write_tree(tmp_path / "t", {
        "check.py": """
            import functools

            def consensus(func=None, *, same=None):
                def decorator(f):
                    @functools.wraps(f)
                    def wrapper(*args, **kwargs):
                        return f(*args, **kwargs)
                    return wrapper

                if func is not None:
                    return decorator(func)
                return decorator

            class Runner:
                @consensus
                def save(self):
                    return 1

                @consensus(same=True)
                def load(self):
                    return 2

                def step(self):
                    self.save()
                    self.load()
        """,
    })
    edges = _edges(root)
    wrapper, inner = "check.consensus.<locals>.decorator.<locals>.wrapper", "check.consensus.<locals>.decorator"
    assert ("check.Runner.step", wrapper) in edges
    assert ("check.Runner.step", inner) not in edges


def test_functions_decorated_in_many_places_are_not_merged(tmp_path: Path) -> None:
    files = {
        "trace.py": """
            def traced(fn):
                def wrapper(*args):
                    return fn(*args)
                return wrapper
        """,
    }
    for name in ("a", "b", "c"):
        files[f"{name}.py"] = f"""
            from trace import traced

            @traced
            def load_{name}():
                return 1

            def use_{name}():
                return load_{name}()
        """
    edges = _edges(write_tree(tmp_path / "t", files))
    assert ("a.use_a", "a.load_a") in edges  # calling it still runs it
    assert ("a.use_a", "trace.traced.<locals>.wrapper") in edges
    # the wrapper's `fn` is every decorated function: no caller of one runs the others
    assert not any(callee in ("b.load_b", "c.load_c") for caller, callee in edges if caller.startswith(("a.", "trace.")))


def test_a_decorator_from_outside_the_tree_leaves_the_function_itself(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", {
        "timing.py": """
            def timed(fn):
                def wrapper(*args):
                    return fn(*args)
                return wrapper
        """,
        "m.py": """
            import torch
            from timing import timed

            @torch.inference_mode()
            def forward():
                return 1

            def step():
                return forward()

            class Runner:
                @torch.inference_mode()
                @timed
                def sample(self):
                    return 2

                def step(self):
                    return self.sample()
        """,
    })
    edges = _edges(root)
    assert ("m.step", "m.forward") in edges
    # over a decorator of the tree, it leaves what that one gave: the wrapper, which runs the method
    assert ("m.Runner.step", "timing.timed.<locals>.wrapper") in edges
    assert ("timing.timed.<locals>.wrapper", "m.Runner.sample") in edges


def test_a_lambda_is_a_function_that_runs_where_it_is_called(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", {
        "m.py": """
            class Req:
                def priority(self):
                    return 1

                def cost(self):
                    return 2

            def keep(fn):
                return fn  # stores it, never calls it

            def order(reqs: list[Req]):
                ranked = sorted(reqs, key=lambda r: r.priority())
                later = keep(lambda r: r.cost())
                return ranked, later
        """,
    })
    edges = _edges(root)
    # handed to a call outside the tree (sorted): it runs there
    assert edges.get(("m.order", "m.order.<locals>.<lambda1>")) == "callback"
    assert ("m.order.<locals>.<lambda1>", "m.Req.priority") not in edges  # `r` has no type
    assert ("m.order", "m.keep") in edges
    assert ("m.order", "m.order.<locals>.<lambda2>") not in edges  # keep is in the tree and never calls it
    assert not any(caller == "m.order" and callee == "m.Req.cost" for caller, callee in edges)


def test_a_named_function_handed_to_a_callback_api_runs_at_the_call(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", {
        "m.py": """
            class Worker:
                def __init__(self, pool):
                    self.pool = pool

                def _run(self):
                    return 1

                def _other(self):
                    return 2

                def step(self):
                    self.pool.submit(self._run)
                    print(self._other)
        """,
    })
    edges = _edges(root)
    assert edges.get(("m.Worker.step", "m.Worker._run")) == "callback"
    assert ("m.Worker.step", "m.Worker._other") not in edges  # print is no callback API


def test_callee_chains_unpacking_and_subscript_stores(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", {
        "m.py": """
            def a():
                return 1

            def b():
                return 2

            def c():
                return 3

            def make():
                return a

            TABLE = {}

            def register():
                TABLE["b"] = b

            def main():
                make()()
                first, (second, third) = a, (b, c)
                third()
                TABLE["b"]()
        """,
    })
    edges = _edges(root)
    assert edges.get(("m.main", "m.a")) == "result"  # make()() calls what make returns
    assert ("m.main", "m.c") in edges  # nested tuple unpacking
    assert ("m.main", "m.b") in edges  # a module table filled in a function
    assert ("m.register", "m.b") not in edges  # storing is no call


def test_a_for_loop_calls_the_iteration_protocol_and_types_its_variable(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", {
        "m.py": """
            class Req:
                def advance(self):
                    return 1

            class Queue:
                def __iter__(self):
                    return self

                def __next__(self) -> Req:
                    raise StopIteration

            def gen():
                yield Req()

            def step(q: Queue, items: list):
                for r in q:
                    r.advance()
                for g in gen():
                    g.advance()
                for x in items:
                    x.advance()
        """,
    })
    edges = _edges(root)
    assert {("m.step", "m.Queue.__iter__"), ("m.step", "m.Queue.__next__"), ("m.step", "m.Req.advance")} <= set(edges)
    assert ("m.step", "m.gen") in edges
    # the plain list gives its elements no type: the only `advance` edges are the typed ones
    assert sum(1 for caller, callee in edges if callee == "m.Req.advance") == 1


def test_raise_constructs_and_star_imports_resolve(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", {
        "errors.py": """
            class Abort(Exception):
                def __init__(self):
                    super().__init__("abort")

            def helper():
                return 1
        """,
        "m.py": """
            from errors import *

            def step(bad):
                helper()
                if bad:
                    raise Abort
                raise ValueError
        """,
    })
    edges = _edges(root)
    assert ("m.step", "errors.Abort.__init__") in edges
    assert ("m.step", "errors.helper") in edges
    assert not any(callee.startswith("ValueError") for _, callee in edges)


def test_a_helper_many_functions_hand_callables_to_runs_each_callers_own(tmp_path: Path) -> None:
    files = {"par.py": """
        def run_pair(fn0, fn1):
            fn0()
            return fn1()
    """}
    for name in ("a", "b", "c"):
        files[f"{name}.py"] = f"""
            from par import run_pair

            def left_{name}():
                return 1

            def right_{name}():
                return 2

            def step_{name}():
                return run_pair(left_{name}, right_{name})
        """
    edges = _edges(write_tree(tmp_path / "t", files))
    assert edges.get(("a.step_a", "a.left_a")) == "callback"  # runs at the call that hands it over
    assert ("a.step_a", "a.right_a") in edges
    assert not any(caller == "par.run_pair" for caller, _ in edges)  # fn0 is none of them in particular
    assert not any(caller == "a.step_a" and callee.startswith(("b.", "c.")) for caller, callee in edges)


def test_a_project_names_its_own_callback_apis(tmp_path: Path) -> None:
    files = {
        "m.py": """
            import scheduler_lib

            def tick():
                return 1

            def step():
                scheduler_lib.every_step(tick)
        """,
    }
    assert ("m.step", "m.tick") not in _edges(write_tree(tmp_path / "plain", files))
    files["pyproject.toml"] = '[tool.cs-audit.call_graph]\ncallback_calls = ["every_step"]\n'
    assert _edges(write_tree(tmp_path / "configured", files)).get(("m.step", "m.tick")) == "callback"


def test_a_property_read_runs_its_getter(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", {
        "batch.py": """
            import functools

            class Batch:
                def __init__(self):
                    self.reqs = []

                @property
                def num_reqs(self) -> int:
                    return len(self.reqs)

                @functools.cached_property
                def layout(self):
                    return 1

                def reset(self):
                    self.reqs = []

            class Base:
                @property
                def size(self):
                    return 0

            class Grown(Base):
                @property
                def size(self):
                    return 1

            class Plain:
                def __init__(self):
                    self.num_reqs = 0

            class Switchboard:
                @property
                def reset(self):
                    return 3

            class Knob:
                def __init__(self):
                    self.level = 1  # runs the setter: still a property of this file

                @property
                def level(self):
                    return self._level

                @level.setter
                def level(self, value):
                    self._level = value

            def current(knob: Knob):
                return knob.level
        """,
        "engine.py": """
            from batch import Base, Batch, Grown, Plain

            class Engine:
                def __init__(self):
                    self.batch = Batch()
                    self.plain = Plain()

                def step(self, base: Base, grown: Grown):
                    n = self.batch.num_reqs + self.batch.layout
                    if base.size and grown.size:
                        pass
                    return n

                def other(self, anything):
                    callback = self.batch.reset
                    return self.plain.num_reqs, anything.num_reqs, callback
        """,
    })
    edges = _edges(root)
    step = "engine.Engine.step"
    assert edges.get((step, "batch.Batch.num_reqs")) == "property"  # through `self.batch = Batch()`
    assert edges.get((step, "batch.Batch.layout")) == "property"  # a cached_property
    assert edges.get(("batch.current", "batch.Knob.level")) == "property"  # with a setter, read in its own file
    # a base-typed receiver may be any class built on it: each getter, as a method's overrides
    assert {(step, "batch.Base.size"), (step, "batch.Grown.size")} <= set(edges)
    # a bound method read is no call (`reset` is a property of another class); a plain
    # attribute named like a property is no property; an untyped receiver is not resolved by name
    assert not any(caller == "engine.Engine.other" for caller, _ in edges)


def test_comprehensions_and_copies_hold_their_elements(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", {
        "m.py": """
            class Manager:
                def free(self):
                    return 1

            class Worker:
                def run(self):
                    return 2

            def make(i) -> Manager:
                return Manager()

            class Coordinator:
                def __init__(self, n):
                    self.managers = tuple(make(i) for i in range(n))
                    self.workers = [Worker() for _ in range(n)]
                    self.by_name = {str(i): Worker() for i in range(n)}

                def step(self):
                    for manager in self.managers:
                        manager.free()
                    self.workers[0].run()
                    for worker in sorted(self.by_name.values()):
                        worker.run()

                def other(self, names):
                    for name in list(names):
                        name.free()

                def numbered(self):
                    for i, manager in enumerate(self.managers):
                        manager.free()

                def zipped(self):
                    for manager, worker in zip(self.managers, self.workers):
                        worker.run()

                def named(self):
                    for name, worker in self.by_name.items():
                        worker.run()

                def letters(self):
                    for i, name in enumerate(["a", "b"]):
                        name.free()
        """,
    })
    edges = _edges(root)
    assert ("m.Coordinator.step", "m.Manager.free") in edges  # elements of a tuple() of a generator
    assert ("m.Coordinator.step", "m.Worker.run") in edges  # a list comprehension's elements
    assert ("m.Coordinator.other", "m.Manager.free") not in edges  # a copy of an untyped parameter
    # enumerate, zip and items() pair each name with the elements it walks
    assert {("m.Coordinator.numbered", "m.Manager.free"), ("m.Coordinator.zipped", "m.Worker.run"),
            ("m.Coordinator.named", "m.Worker.run")} <= set(edges)
    assert not any(caller == "m.Coordinator.letters" for caller, _ in edges)


def test_a_for_loop_over_an_iterator_object_types_its_variable_by_next(tmp_path: Path) -> None:
    # `__iter__` returns an object whose `__next__` says what each item is (no generator beside it)
    root = write_tree(tmp_path / "t", {
        "m.py": """
            class Req:
                def advance(self):
                    return 1

            class Cursor:
                def __next__(self) -> Req:
                    raise StopIteration

            class Queue:
                def __iter__(self) -> Cursor:
                    return Cursor()

            def step(q: Queue):
                for r in q:
                    r.advance()
        """,
    })
    assert ("m.step", "m.Req.advance") in set(_edges(root))
