"""One reader per profile format, each giving a ``Profile``: calls (or samples) per frame.

Call-count formats: the ``trace`` JSON, pstats (``cProfile``/``profile``), viztracer JSON and
a torch-profiler Chrome trace with Python stacks.  Sampling formats: py-spy ``--format raw``
(collapsed stacks) and speedscope; they give time shares, not calls, so a frame seen in a
sample only shows that its function ran.  The JSON formats are read item by item
(``jsonstream``): a long run's trace can be larger than memory."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from cs_audit.confirm import jsonstream

FORMATS = ("trace", "pstats", "py-spy-raw", "speedscope", "viztracer", "torch")
SAMPLED = frozenset({"py-spy-raw", "speedscope"})

#: a frame of collapsed stacks: `name (file:line)`, the line left out under --nolineno
_RAW_FRAME = re.compile(r"^(?P<name>.*?) \((?P<file>[^()]*?\.pyw?)(?::(?P<line>\d+))?\)$")
#: viztracer's event name: `name (file:firstline)`
_VIZ_NAME = re.compile(r"^(?P<name>.+) \((?P<file>.+?\.pyw?):(?P<line>\d+)\)$")
#: the torch profiler's Python event: `file(firstline): name`
_TORCH_NAME = re.compile(r"^(?P<file>.+?\.pyw?)\((?P<line>\d+)\): (?P<name>.+)$")


class ProfileError(Exception):
    """A profile that cannot be read: said in one line."""


@dataclass(frozen=True, slots=True)
class Frame:
    """A function as a profile names it."""

    file: str
    #: the qualname when ``qualified``, else the function's own name
    name: str
    #: 0 when the profile gives none
    line: int = 0
    #: ``def``: the code's first line (its first decorator's, or its def); ``in``: a line it ran
    line_kind: str = ""
    qualified: bool = False


@dataclass
class Profile:
    format: str
    #: frame -> [calls after the warm-up, calls in all]; for a sampled format, samples holding it
    counts: dict[Frame, list[int]] = field(default_factory=dict)
    #: steps counted (calls of the step root after the warm-up); None: the profile does not say
    steps: int | None = None
    step_functions: tuple[str, ...] = ()
    warmup: int = 0
    command: tuple[str, ...] = ()
    #: the files of the modules the run loaded, when the profile lists them
    modules: frozenset[str] | None = None
    samples: int = 0
    #: the step roots ``steps`` was counted from by frame names (``--root``); the join
    #: counts them again among the tree's functions
    step_roots: tuple[str, ...] = ()

    @property
    def sampled(self) -> bool:
        return self.format in SAMPLED

    def add(self, frame: Frame, n: int = 1, counted: int | None = None) -> None:
        row = self.counts.setdefault(frame, [0, 0])
        row[0] += n if counted is None else counted
        row[1] += n


def read_profile(path: Path, format: str | None = None) -> Profile:
    """The profile in ``path``, its format found from its first bytes unless given."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(1 << 16)
    except OSError as exc:
        raise ProfileError(f"{path}: {exc.strerror or exc}") from None
    if not head.strip():
        raise ProfileError(f"{path}: the file is empty")
    format = format or sniff(head)
    if format is None:
        raise ProfileError(f"{path}: not a profile cs-audit reads (formats: {', '.join(FORMATS)})")
    reader = {"trace": read_trace, "pstats": read_pstats, "py-spy-raw": read_raw, "speedscope": read_speedscope,
              "viztracer": read_chrome, "torch": read_chrome}[format]
    try:
        profile = reader(path)
    except jsonstream.Truncated as exc:
        raise ProfileError(f"{path}: not a whole {format} profile ({exc}): truncated?") from None
    except (ValueError, TypeError, KeyError, EOFError, AttributeError, IndexError) as exc:
        raise ProfileError(f"{path}: not a {format} profile ({type(exc).__name__}: {str(exc)[:120]})") from None
    except UnicodeDecodeError as exc:
        raise ProfileError(f"{path}: not text ({exc.reason})") from None
    except OSError as exc:
        raise ProfileError(f"{path}: {exc.strerror or exc}") from None
    if not profile.counts:
        raise ProfileError(f"{path}: the {profile.format} profile holds no Python function")
    return profile


def sniff(head: bytes) -> str | None:
    """The format of a profile from its first bytes."""
    text = head.lstrip()
    if re.match(rb'\{\s*("|\})', text):
        if b'"cs-audit-trace"' in head:
            return "trace"
        if b"speedscope" in head or b'"shared"' in head or b'"profiles"' in head:
            return "speedscope"
        return "torch" if b"python_function" in head or b'"schemaVersion"' in head else "viztracer"
    if re.match(rb"\[\s*[{\]]", text):
        return "torch" if b"python_function" in head else "viztracer"
    if text[:1] in (b"{", b"\xfb"):  # marshal's dict
        return "pstats"
    try:
        first = head.decode("utf-8").splitlines()[0]
    except (UnicodeDecodeError, IndexError):
        return None
    stack, _, count = first.rstrip().rpartition(" ")
    return "py-spy-raw" if count.isdigit() and stack else None


def read_trace(path: Path) -> Profile:
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg.startswith("Unterminated") or exc.pos >= len(text.rstrip()):
            raise jsonstream.Truncated("the file ends inside a value") from None
        raise
    if not isinstance(data, dict) or data.get("format") != "cs-audit-trace":
        raise ValueError("no cs-audit-trace header")
    profile = Profile("trace", steps=int(data["steps"]), step_functions=tuple(data.get("step_functions", ())),
                      warmup=int(data.get("warmup", 0)), command=tuple(data.get("command", ())),
                      modules=frozenset(data.get("modules", ())))
    for file, rows in data["functions"].items():
        for qualname, (counted, total) in rows.items():
            profile.add(Frame(file, qualname, qualified=True), int(total), int(counted))
    return profile


def read_pstats(path: Path) -> Profile:
    import pstats

    try:
        stats = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    except Exception as exc:  # noqa: BLE001 - marshal raises what it likes on a bad file
        raise ValueError(f"unreadable pstats data: {type(exc).__name__}") from None
    profile = Profile("pstats")
    for (file, line, name), row in stats.items():
        if file in ("~", "") or name.startswith("<built-in"):
            continue
        profile.add(Frame(file, name, int(line), "def"), int(row[1]))
    return profile


def _raw_frame(text: str) -> Frame | None:
    m = _RAW_FRAME.match(text.strip())
    if m is None:
        return None
    return Frame(m["file"], m["name"], int(m["line"] or 0), "in" if m["line"] else "")


def read_raw(path: Path) -> Profile:
    """py-spy ``--format raw``: one collapsed stack a line, `frame;frame;... COUNT`."""
    profile = Profile("py-spy-raw")
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            stack, _, count = line.rpartition(" ")
            if not count.isdigit():
                raise ValueError(f"line {number} does not end with a sample count")
            n = int(count)
            profile.samples += n
            for frame in {f for f in map(_raw_frame, stack.split(";")) if f is not None}:
                profile.add(frame, n)
    return profile


def read_speedscope(path: Path) -> Profile:
    """Speedscope: a sampled profile's samples are stacks of frame indices; an evented one's
    open events are calls."""
    frames: list[Frame | None] = []
    held: Counter = Counter()
    opened: Counter = Counter()
    samples = 0
    wanted = {("shared", "frames"), ("profiles", "*", "samples"), ("profiles", "*", "events")}
    with open(path, encoding="utf-8") as handle:
        for where, item in jsonstream.items(handle, wanted):
            if where[0] == "shared":
                file, line = item.get("file") or "", int(item.get("line") or 0)
                frames.append(Frame(file, str(item.get("name", "")), line, "in" if line else "") if file else None)
            elif where[2] == "samples":
                samples += 1
                held.update(set(item))
            elif isinstance(item, dict) and item.get("type") == "O":
                opened[item["frame"]] += 1
    profile = Profile("speedscope" if not opened else "speedscope-evented", samples=samples)
    for counter in (held, opened):
        for index, n in counter.items():
            frame = frames[index] if 0 <= index < len(frames) else None
            if frame is not None:
                profile.add(frame, n)
    if opened:
        profile.format = "speedscope-evented"
    return profile


def read_chrome(path: Path) -> Profile:
    """A Chrome trace's complete (``X``) and begin (``B``) events of Python functions, as
    viztracer (`name (file:line)`) and the torch profiler with ``with_stack`` (category
    ``python_function``, `file(line): name`) write them; torch's `ProfilerStep#N` annotations
    count the steps."""
    profile = Profile("viztracer")
    steps: set[str] = set()
    with open(path, encoding="utf-8") as handle:
        head = handle.read(1)
        while head.isspace():
            head = handle.read(1)
        handle.seek(0)
        wanted: set[tuple[str, ...]] = {("traceEvents",)} if head == "{" else {()}
        for _, event in jsonstream.items(handle, wanted):
            if not isinstance(event, dict) or event.get("ph") not in ("X", "B"):
                continue
            name = str(event.get("name", ""))
            if name.startswith("ProfilerStep#"):
                steps.add(name)
                continue
            m = _TORCH_NAME.match(name) if event.get("cat") == "python_function" else None
            if m is not None:
                profile.format = "torch"
            else:
                m = _VIZ_NAME.match(name)
            if m is None:
                continue
            qualified = "." in m["name"]
            profile.add(Frame(m["file"], m["name"], int(m["line"]), "def", qualified))
    if steps:
        profile.steps = len(steps)
    return profile
