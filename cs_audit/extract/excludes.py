"""``exclude`` globs compiled once into one matcher.

A path is excluded when a glob matches it whole (``fnmatchcase``), or matches one of the
folders it is in: ``third_party``, ``third_party/`` and ``vendor*`` each exclude what is
below the folders they match.  Trying every glob on every path costs paths x globs, and
past ``fnmatch``'s own cache each try compiles its glob again.  Here a glob without
wildcards is a set member; a glob with a literal start or end waits in a bucket keyed by
it and is compiled only when a path reaches that bucket; the few left share combined
regexes.  A path then costs a lookup per distinct key length, whatever the number of globs.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from fnmatch import translate

#: where a glob's wildcards can start (what comes before the first is literal)
_WILDCARD = re.compile(r"[*?[]")
#: a glob up to its last character that can belong to a wildcard (what follows is literal)
_UP_TO_LAST_WILDCARD = re.compile(r".*[*?[\]]", re.DOTALL)
#: globs joined into one regex: a bound on each ``re.compile``, which is slow on huge alternations
_GLOBS_PER_REGEX = 256


def _regexes(globs: list[str]) -> list[re.Pattern[str]]:
    """``globs`` as a few regexes.  translate() results joined by "|" match when one of them
    does (fnmatch documents that callers rely on this); each ends in ``\\Z``, so ``match``
    is a whole match."""
    return [re.compile("|".join(map(translate, globs[i:i + _GLOBS_PER_REGEX])))
            for i in range(0, len(globs), _GLOBS_PER_REGEX)]


class _GlobSet:
    """Whether any of a set of globs matches a whole string, as ``fnmatchcase`` does."""

    def __init__(self, globs: Iterable[str]) -> None:
        self.literal: set[str] = set()
        self.by_start: dict[str, list[str]] = {}
        self.by_end: dict[str, list[str]] = {}
        self.rest: list[str] = []
        for glob in globs:
            first = _WILDCARD.search(glob)
            if first is None:
                self.literal.add(glob)
                continue
            start = glob[:first.start()]
            end = glob[_UP_TO_LAST_WILDCARD.match(glob).end():]  # type: ignore[union-attr]  # it has a wildcard
            if start and len(start) >= len(end):
                self.by_start.setdefault(start, []).append(glob)
            elif end:
                self.by_end.setdefault(end, []).append(glob)
            else:
                self.rest.append(glob)
        self.start_lengths = sorted({len(key) for key in self.by_start})
        self.end_lengths = sorted({len(key) for key in self.by_end})
        #: a bucket's regexes, by (keyed by its start?, key), made when a string first reaches it
        self.compiled: dict[tuple[bool, str], list[re.Pattern[str]]] = {}
        self.rest_regexes: list[re.Pattern[str]] | None = None

    def _in_bucket(self, at_start: bool, key: str, text: str) -> bool:
        regexes = self.compiled.get((at_start, key))
        if regexes is None:
            regexes = self.compiled[at_start, key] = _regexes((self.by_start if at_start else self.by_end)[key])
        return any(regex.match(text) for regex in regexes)

    def matches(self, text: str) -> bool:
        if text in self.literal:
            return True
        size = len(text)
        for length in self.start_lengths:
            if length > size:
                break
            if text[:length] in self.by_start and self._in_bucket(True, text[:length], text):
                return True
        for length in self.end_lengths:
            if length > size:
                break
            if text[size - length:] in self.by_end and self._in_bucket(False, text[size - length:], text):
                return True
        if not self.rest:
            return False
        if self.rest_regexes is None:
            self.rest_regexes = _regexes(self.rest)
        return any(regex.match(text) for regex in self.rest_regexes)


class ExcludeMatcher:
    """``excludes(path)``: whether a glob matches the relative POSIX ``path`` or a folder of it."""

    def __init__(self, globs: Iterable[str]) -> None:
        globs = tuple(globs)
        # a glob ending in "/" matches no path whole (none ends so): it only names folders
        self._path_or_folder = _GlobSet(g for g in globs if not g.endswith("/"))
        self._folder_only = _GlobSet(g.rstrip("/") for g in globs if g.endswith("/"))
        #: folder path -> whether a glob matches it (the files of a folder ask the same)
        self._folders: dict[str, bool] = {}

    def excludes(self, path: str) -> bool:
        if self._path_or_folder.matches(path):
            return True
        slash = path.find("/")
        while slash != -1:
            folder = path[:slash]
            verdict = self._folders.get(folder)
            if verdict is None:
                verdict = self._folders[folder] = self._path_or_folder.matches(folder) or self._folder_only.matches(folder)
            if verdict:
                return True
            slash = path.find("/", slash + 1)
        return False


@functools.lru_cache(maxsize=2)
def exclude_matcher(globs: tuple[str, ...]) -> ExcludeMatcher:
    """The matcher of ``globs``, built once for every discovery of a scan (``fix`` discovers
    the tree twice; each sub-repository is listed on its own)."""
    return ExcludeMatcher(globs)
