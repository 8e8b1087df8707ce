"""Words for findings: derived from the finding's fields, never stored by the rules."""

from __future__ import annotations

from cs_audit.model import Finding

_FREQ_WORDS = {
    "step": "every engine step",
    "request": "once per request per step",
    "round": "every verify round",
    "layer": "once per layer per step",
    "once": "once",
    "unknown": "off the known hot paths",
}


def _gate_words(switch: str | None) -> str:
    if switch is None:
        return "with no debug env set"
    if switch.startswith("flag:"):
        return f"only when the flag `{switch[5:]}` is on"
    if switch.startswith("<"):
        return "behind a log-level check"
    return f"only when `{switch}` is set"


def message_for(f: Finding) -> str:
    extra = dict(f.extra)
    when = _FREQ_WORDS.get(f.frequency, f.frequency)
    gate = _gate_words(f.switch)
    if f.rule == "env-read-hot":
        via = extra.get("via", "")
        how = f"through `{via.split(':', 1)[1]}()`" if via.startswith("helper:") else f"via `{via}`"
        return (f"`{extra.get('var', '?')}` is read from the environment {how} {when}; "
                "resolve it once at import and test the constant.")
    if f.rule == "default-on-emitter":
        return (f"`{extra.get('emitter', '?')}` ({extra.get('level', '')}) runs {when} {gate}; "
                "gate it behind a trace level or log it once.")
    if f.rule == "eager-format":
        kinds = ", ".join(f.eager_kinds)
        target = extra.get("emitter", "?")
        if extra.get("level") == "helper":
            return (f"arguments to `{target}()` are built ({kinds}) before it checks its own gate; "
                    "test the gate at the call site.")
        return (f"`{target}` builds its message ({kinds}) before the level check decides; "
                "pass lazy %-style arguments.")
    if f.rule == "sync-in-debug":
        return (f"`.{extra.get('call', 'item')}()` forces a host-device sync in debug/log code {gate}, {when}; "
                "move it out of the log path or behind the highest trace level.")
    if f.rule == "duplicate-helper":
        return (f"`{extra.get('group', '?')}` has {extra.get('copies', '2')} identical copies (up to local names); "
                "keep one in a shared module.")
    if f.rule == "per-call-open":
        return f"a file is opened (mode `{extra.get('mode', '')}`), written and closed per call, {when}; keep one handle open."
    if f.rule == "redundant-flush":
        return f"`{extra.get('handle', '')}` is line-buffered, so this flush() is redundant; drop one of the two."
    if f.rule == "hardcoded-output-path":
        return f"output goes to the literal path `{extra.get('output_path', '')}`; build it under the configured output root."
    if f.rule == "own-timestamp":
        return "this process mints its own run timestamp for an output path; read the run directory the launcher exports."
    return f.rule
