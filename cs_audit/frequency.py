"""How often a site runs: the frequencies of ``rules/costs.yaml`` ``frequencies`` (a project
adds its own under ``costs``), each with its rank, its words and its per-step multiplier.

The code names three of them itself: ``step`` (an event loop's root, a root that states no
frequency), ``once`` (start-up code) and ``unknown`` (what no hot root reaches). The last two
are the only ones off the hot paths, so whether a frequency is hot needs no table.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: a frequency, by the name the rules declare it under (`step`, `layer`, a project's `tick`)
FrequencyName = str

STEP: FrequencyName = "step"
ONCE: FrequencyName = "once"
UNKNOWN: FrequencyName = "unknown"
#: the frequencies off every hot path, both given by the code, never by a root
NOT_HOT = frozenset({ONCE, UNKNOWN})
#: the least modulus that makes `X % n == 0` a rare branch (every n-th call)
PERIODIC_AT_LEAST = 8
_KEYS = {"rank", "multiplier", "words", "legend", "symbol"}


class FrequencyError(ValueError):
    """A frequency table that cannot be read, or a name it does not declare."""


def is_hot(name: FrequencyName | None) -> bool:
    """Whether code at ``name`` runs on a hot path (every declared frequency but ``once`` and ``unknown``)."""
    return bool(name) and name not in NOT_HOT


@dataclass(frozen=True, slots=True)
class Frequency:
    """One frequency: how it ranks against the others (a function two roots reach at two
    frequencies runs at the higher; 0: off the hot paths), how many times per engine step it
    runs (the factor of every per-event cost), and how the report words it."""

    name: FrequencyName
    rank: float
    multiplier: float
    #: in a finding's message: "runs once per layer per step"
    words: str
    #: in §1's legend: "**round** = one verify round of one request"
    legend: str
    #: the letter the report's assumptions give its multiplier (`B`, `L`), "" for none
    symbol: str = ""


@dataclass(frozen=True, slots=True)
class Frequencies:
    """The declared frequencies, by name."""

    by_name: Mapping[FrequencyName, Frequency]

    @classmethod
    def parse(cls, table: Any, where: str = "costs.yaml: frequencies") -> Frequencies:
        """The table of ``costs.yaml`` ``frequencies`` (name -> {rank, multiplier, words, ...}),
        checked: ``step``, ``once`` and ``unknown`` declared, only the last two at rank 0."""
        if not isinstance(table, Mapping):
            raise FrequencyError(f"{where}: expected a table of frequency name -> {{rank, multiplier, words}}")
        out: dict[FrequencyName, Frequency] = {}
        for name, entry in table.items():
            at = f"{where}.{name}"
            if not isinstance(entry, Mapping) or not {"rank", "multiplier", "words"} <= set(entry):
                raise FrequencyError(f"{at}: expected {{rank, multiplier, words}}, like {{rank = 2, multiplier = 4, words = 'every tick'}}")
            unknown = set(entry) - _KEYS
            if unknown:
                raise FrequencyError(f"{at}: unknown keys {sorted(unknown)} (known: {sorted(_KEYS)})")
            rank, multiplier = entry["rank"], entry["multiplier"]
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in (rank, multiplier)):
                raise FrequencyError(f"{at}: rank and multiplier must be numbers from 0")
            if (rank == 0) != (name in NOT_HOT):
                raise FrequencyError(f"{at}: rank must be {'0' if name in NOT_HOT else 'above 0'} "
                                     f"(only {' and '.join(sorted(NOT_HOT))} are off the hot paths)")
            words = entry["words"]
            if not isinstance(words, str) or not words or not isinstance(entry.get("legend", ""), str) \
                    or not isinstance(entry.get("symbol", ""), str):
                raise FrequencyError(f"{at}: words, legend and symbol must be strings")
            out[str(name)] = Frequency(str(name), float(rank), float(multiplier), words, entry.get("legend") or words,
                                       entry.get("symbol", ""))
        missing = sorted({STEP, *NOT_HOT} - set(out))
        if missing:
            raise FrequencyError(f"{where}: {', '.join(missing)} must be declared (the code gives them)")
        return cls(out)

    def check(self, name: Any, where: str) -> FrequencyName:
        """``name`` when it is declared; a ``FrequencyError`` naming ``where`` otherwise."""
        if not isinstance(name, str) or name not in self.by_name:
            raise FrequencyError(f"{where}: unknown frequency {name!r} (declared: {', '.join(self.by_name)})")
        return name

    def rank(self, name: FrequencyName | None) -> float:
        """How often ``name`` runs against the others (0: off the hot paths, or no frequency)."""
        found = self.by_name.get(name or "")
        return found.rank if found is not None else 0.0

    def multiplier(self, name: FrequencyName) -> float:
        found = self.by_name.get(name)
        return found.multiplier if found is not None else 0.0

    def words(self, name: FrequencyName) -> str:
        found = self.by_name.get(name)
        return found.words if found is not None else name

    def most_often(self, names: Iterable[FrequencyName]) -> FrequencyName:
        return max(names, key=self.rank)

    @property
    def hot(self) -> tuple[Frequency, ...]:
        """The hot frequencies, least often first (the order the report lists them in)."""
        return tuple(sorted((q for q in self.by_name.values() if q.rank > 0), key=lambda q: (q.rank, q.name)))

    def above_step(self, name: FrequencyName) -> bool:
        """Whether ``name`` runs more often than once per engine step (per request, round, layer)."""
        return self.rank(name) > self.rank(STEP)
