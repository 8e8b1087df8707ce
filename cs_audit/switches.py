"""What decides whether code runs: a site's switch (``SwitchRef``: an env var, a log level, a
flag, an option) and the operands of the conditions around it (``GateRef``), as extraction
records them and the joins resolve them.  ``cs_audit.model`` re-exports them."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from cs_audit.records import record

GateKind = Literal["env", "call", "name", "level", "flag"]
SwitchKind = Literal["env", "level", "flag", "dynamic", "option"]


@record
@dataclass(frozen=True, slots=True)
class SwitchRef:
    """What decides whether a gated site runs: an env var (``env``, its name), a log-level
    check (``level``: `logger.isEnabledFor(DEBUG)`), a debug-looking config flag that is no
    env read (``flag``, its dotted name), or an env var whose name is not known statically
    (``dynamic``), or an engine option or platform whose default (``joins.defaults``) turns the
    code off (``option``: the setting that turns it on, `enable_eplb`, `platform=rocm`,
    `kv_cache_dtype=='fp8'`)."""

    kind: SwitchKind
    name: str = ""

    @property
    def text(self) -> str:
        """How reports spell it: the env var, ``flag:NAME``, ``<log level>``, ``<dynamic>``."""
        if self.kind == "env":
            return self.name
        if self.kind == "flag":
            return f"flag:{self.name}"
        if self.kind == "option":
            return f"option:{self.name}"
        return "<log level>" if self.kind == "level" else "<dynamic>"

    @property
    def is_env(self) -> bool:
        """A named env var: a switch of the inventory."""
        return self.kind == "env"


LEVEL_SWITCH = SwitchRef("level")
DYNAMIC_SWITCH = SwitchRef("dynamic")


def env_switch(name: str) -> SwitchRef:
    """The switch of an env var name as the extraction spells it (``<dynamic>`` when unknown)."""
    return DYNAMIC_SWITCH if name == "<dynamic>" else SwitchRef("env", name)


def by_text(switch: SwitchRef | None) -> str:
    """Sort key of switches: their report spelling."""
    return "" if switch is None else switch.text


@record(shared=True)
@dataclass(frozen=True, slots=True)
class GateRef:
    """One operand of a condition that may decide whether code runs.

    ``kind``: ``env`` (a direct env read of ``ref``), ``call`` (a call of ``ref``,
    maybe an env-reading helper; ``args`` holds its literal string arguments),
    ``name`` (a name/attribute, maybe a constant derived from an env read),
    ``level`` (``logger.isEnabledFor``/level compare), ``flag`` (a debug-looking
    config flag that is not an env read).
    ``active_when_set``: the guarded code runs when the operand is truthy/high
    (False for ``if not X:`` bodies, ``else`` branches of ``if X:``, and the rest
    of a block after ``if X: return``).
    ``any_of``: nonzero for an operand of a disjunction (`if A or B:`, the rest after
    `if A and B: return`), numbered so in its gates tuple: the operands of one number gate
    only together, when each stands for a switch (code the other operand runs is not gated).
    """

    kind: GateKind
    ref: str
    args: tuple[str, ...] = ()
    active_when_set: bool = True
    any_of: int = 0
    #: the operand compared with an int (`LEVEL >= 2`, `trace_level() < 3` before a return):
    #: the least value the guarded code runs at ("2"), or ``param:NAME`` (``+1`` after it for
    #: `>`) when compared with a parameter (`if _LEVEL >= level:` in `fa_log(level, msg)`)
    level: str = ""


def closure_arg(qualname: str) -> str:
    """The ``GateRef.args`` entry of a name a nested function reads from the enclosing
    function ``qualname`` (a closure variable): the gate resolves as that function's local."""
    return f"closure:{qualname}"


def closure_of(gate: GateRef) -> str | None:
    """The enclosing function a ``name`` gate reads its name from (``closure_arg``), if any."""
    for arg in gate.args:
        if arg.startswith("closure:"):
            return arg[len("closure:"):]
    return None


#: a ``name`` gate's arg: it tests one of its function's parameters, for truth or against a
#: literal (what the callers pass decides it: ``joins.param_gates``)
PARAM_TESTED = "param"
#: with ``PARAM_TESTED``: the function rebinds the parameter only after the test (and not in a
#: loop around it), so the test still sees what the callers passed
PARAM_FRESH = "param:fresh"
#: the second arg of an `isinstance` ``call`` gate: "class:" and the last names of the classes
#: tested, `|`-joined ("" when they are not plain names)
CLASS_TESTED = "class:"
#: a ``name`` gate's arg: the value is a field of a request a handler was handed (``ref``
#: `request:<its class>`), which only a request of that kind sets (``GateReader.derived``)
REQUEST_FIELD = "request"
#: a ``name`` gate's arg: no test but a dereference (`self.pool.size` read with nothing around
#: it): what runs after it in its block needs the attribute to hold an object, not None
DEREFERENCED = "deref"
#: the ``ref`` of a gate on the model architecture the deployment serves (`hf_config.architectures[0]
#: in HYBRID_ARCHS`), whose arg ``CLASS_TESTED`` names the architectures' classes it holds for
SERVED_ARCHITECTURE = "<served architecture>"


def as_operand(gate: GateRef) -> GateRef:
    """``gate`` as an operand of a comparison (it stands for the value, not a flag)."""
    return gate if "operand" in gate.args else replace(gate, args=("operand", *gate.args))


#: the operand of a test that holds with no env set (`getenv("M", "block") == "block"`): it
#: stands for no switch, and a name assigned from it alone is truthy by default
DEFAULT_ON = GateRef("name", "", ("default-on",))
