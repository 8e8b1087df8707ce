"""What a joined model keeps for a later build of the same tree: where each file's calls
land (``Resolutions``) and what its sites' gates resolved to (``SiteGates``), as records the
cache stores (``incremental``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from cs_audit.model import (
    FuncKey,
    SwitchRef,
)
from cs_audit.records import record

#: the call sites of one file that land in the tree, flat: (index in ``FileFacts.calls``,
#: target number in ``Resolutions.targets``, ``HOWS`` code) for each target of each site, in site order
FileResolutions = tuple[int, ...]


@record
@dataclass(frozen=True)
class Resolutions:
    """Where each file's call sites land, and the digest of the tables that decided it
    (``Resolver.tables_digest``): a file's entry holds for as long as its facts and the
    digest are the same (a later run passes it back to ``build_model``).  Plain ints and
    one table of targets: stored and loaded whole on every scan that joins."""

    digest: str
    targets: tuple[FuncKey, ...]
    files: dict[str, FileResolutions]
    #: what flows into each parameter (``Types.parameters``), worked out with the files
    parameters: tuple[tuple[tuple[str, str, str], tuple[tuple[str, str | None, str], ...]], ...] = ()
    #: resolved for ``build_model(whole=...)``
    whole: bool = True
    #: the calls that went through the types (None: all of them)
    typed: Demand | None = None
    #: per file: digest of the typed questions its calls asked, and whether an answer read a
    #: parameter (``_asked_of``)
    asked: dict[str, tuple[str, bool]] = field(default_factory=dict)
    #: each file's part of ``digest`` (``Resolver.tables_digests``), and the digest of the names
    #: those parts read
    file_digests: dict[str, str] = field(default_factory=dict)
    lands_digest: str = ""


@record
@dataclass(frozen=True)
class SiteGates:
    """The switches of the sites' gates of a model (``_site_gates``), kept for a later build:
    a file's row holds while its facts and the ``gates_digest`` are the same, since an answer
    depends on nothing else.  Each row numbers the answers of the file's ``site_gate_keys``
    (-1: not asked) in one table of answers."""

    digest: str
    answers: tuple[tuple[tuple[SwitchRef, ...], SwitchRef | None], ...]
    files: dict[str, tuple[int, ...]]
    #: each file's part of the digest (``_file_gates_digest``)
    file_digests: dict[str, str] = field(default_factory=dict)
    #: per file, the answer of each of its calls by index in ``FileFacts.calls`` (``array('i')``
    #: bytes, -1: no gates or not asked): an edge's switch without hashing its gates
    calls: dict[str, bytes] = field(default_factory=dict)
    #: per file, the rows an analysis derived from the file's facts and its sites' answers
    #: alone (``TreeModel.gate_rows``), kept only where no answer of the file was shaped
    rows: dict[str, tuple] = field(default_factory=dict)
    #: per file, what an analysis derived from the file's facts alone, by variable
    #: (``TreeModel.use_rows``): holds while the file's facts do, whatever the digest
    uses: dict[str, dict[str, tuple]] = field(default_factory=dict)


@record
@dataclass(frozen=True)
class Demand:
    """The calls ``build_model(whole=False)`` resolves through the types: those of the
    functions a hot root reaches (how often code runs, what a switch turns on there), and
    every call named like an env-reading helper (which switches are read where) or like a
    function holding an event loop (which option picks the loop); the others by name, as before the types (Jarvis asks on demand from its entry functions)."""

    functions: frozenset[FuncKey]
    #: the names of env-reading helpers
    names: frozenset[str]
