"""A runtime oracle for cs-audit's frequency claims on Hugging Face transformers.

    python benchmarks/runtime_generate.py [--cs-audit CMD] [--out DIR] [--warmup N]

cs-audit says which log / env-read / sync sites run "per step" (frequency step, request,
layer or round, ungated, on the normal path).  This script checks that against a real run:

1. makes (or reuses) a venv of its own with torch and transformers pinned below; neither
   becomes a dependency of cs-audit;
2. in that venv, builds tiny random models from configs (no hub download: a dense llama and
   the MoE mixtral and qwen3_moe; 2 layers, hidden 64, vocab 1000), runs ``generate()``
   greedy and sampled under ``sys.setprofile`` and counts the calls of each transformers
   function after the warm-up (prefill) steps; a step is one call of the top model's forward;
3. scans the same installed transformers with cs-audit (``CMD scan ... --format json``);
4. joins the two by (path relative to the package, qualname) and writes ``oracle.md``:
   PRECISION = of the functions claimed per step (in modules the run loaded), how many ran
   at least 0.9 times a step; RECALL = of the functions that ran per step and hold an
   ungated finding, how many are claimed per step; then each claimed finding's status and
   the worst disagreements (claimed per step, ran under 0.1 times a step).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

TORCH = "torch==2.13.0"
TRANSFORMERS = "transformers==5.17.0"
PER_STEP = {"step", "request", "round", "layer"}
PER_STEP_MIN, RARE_MAX = 0.9, 0.1
MODELS = {  # model_type -> config overrides on top of the common tiny sizes
    "llama": {},
    "mixtral": {"num_local_experts": 4, "num_experts_per_tok": 2},
    "qwen3_moe": {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32},
}
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=1000, max_position_embeddings=256)


class Failure(Exception):
    """An expected failure: printed as one line, exit status 2."""


# ---------------------------------------------------------------- child (runs in the venv)

def child(out: Path, warmup: int, new_tokens: int, seed: int) -> None:
    import inspect

    import torch
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM

    transformers.logging.set_verbosity_error()
    root = os.path.dirname(os.path.abspath(transformers.__file__)) + os.sep
    keys: dict = {}  # code object -> "relpath:qualname", or None outside transformers
    after: Counter = Counter()  # calls once the warm-up steps of the current generate() are over
    ever: Counter = Counter()  # all calls, model building and warm-up included
    st = {"step_code": None, "forwards": 0, "active": False, "steps": 0, "generates": 0}

    def key(code):
        k = keys.get(code, 0)
        if k == 0:
            f = code.co_filename
            k = keys[code] = (os.path.relpath(f, root).replace(os.sep, "/") + ":" + code.co_qualname
                              if f.startswith(root) else None)
        return k

    def profile(frame, event, arg):
        if event == "call":
            code = frame.f_code
            k = key(code)
            if k is None:
                return
            ever[k] += 1
            if code is st["step_code"]:
                st["forwards"] += 1
                st["steps"] += st["active"]
            if st["active"]:
                after[k] += 1
        elif event == "return" and frame.f_code is st["step_code"] and not st["active"]:
            st["active"] = st["forwards"] >= warmup  # counting starts when the warm-up forward returns

    step_functions = []
    sys.setprofile(profile)
    try:
        for model_type, extra in MODELS.items():
            config = AutoConfig.for_model(model_type, **TINY, **extra)
            torch.manual_seed(seed)
            model = AutoModelForCausalLM.from_config(config).eval()
            st["step_code"] = inspect.unwrap(type(model).forward).__code__
            step_functions.append(key(st["step_code"]))
            ids = torch.randint(3, TINY["vocab_size"], (2, 8), generator=torch.Generator().manual_seed(seed))
            mask = torch.ones_like(ids)
            mask[1, :2] = 0  # the second row left-padded
            for sample in (False, True):
                torch.manual_seed(seed)
                st["forwards"], st["active"] = 0, warmup == 0
                with torch.no_grad():
                    model.generate(ids, attention_mask=mask, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                                   do_sample=sample, pad_token_id=0)
                st["active"] = False  # building the next model is not a step
                st["generates"] += 1
    finally:
        sys.setprofile(None)
    result = {
        "root": root.rstrip(os.sep), "command": [sys.executable] + sys.argv, "steps": st["steps"],
        "transformers": transformers.__version__, "torch": torch.__version__, "models": list(MODELS),
        "step_functions": step_functions, "warmup": warmup, "generate_calls": st["generates"],
        "functions": dict(sorted(after.items())), "functions_all": dict(sorted(ever.items())),
    }
    (out / "runtime.json").write_text(json.dumps(result, indent=1), encoding="utf-8")


# ---------------------------------------------------------------- parent

def run(cmd: list[str], what: str, **kw) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(cmd, text=True, capture_output=True, **kw)
    except OSError as exc:
        raise Failure(f"{what}: cannot run {cmd[0]}: {exc.strerror}") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
        raise Failure(f"{what} failed (exit {proc.returncode}): {last}")
    return proc


def ensure_venv(venv: Path) -> Path:
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"making the venv {venv}", file=sys.stderr)
        run([sys.executable, "-m", "venv", str(venv)], "python -m venv")
    check = f"import importlib.metadata as m; assert m.version('torch').split('+')[0] == {TORCH.split('==')[1]!r}; " \
            f"assert m.version('transformers') == {TRANSFORMERS.split('==')[1]!r}"
    if subprocess.run([str(python), "-c", check], capture_output=True).returncode != 0:
        print(f"installing {TORCH} {TRANSFORMERS} into {venv}", file=sys.stderr)
        run([str(python), "-m", "pip", "install", "-q", TORCH, TRANSFORMERS], "pip install")
    return python


def norm(qualname: str) -> str:
    return qualname.replace("<locals>.", "")


def fkey(relpath: str, qualname: str) -> str:
    return f"{relpath}:{norm(qualname)}"


def table(rows: list[list], head: list[str]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return lines + ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]


def join(runtime: dict, scan: dict) -> str:
    steps = runtime["steps"]
    if steps <= 0:
        raise Failure("the run counted no decoding step after the warm-up")
    after: Counter = Counter()
    ever: Counter = Counter()
    for src, dst in ((runtime["functions"], after), (runtime["functions_all"], ever)):
        for k, n in src.items():
            path, _, qual = k.partition(":")
            dst[fkey(path, qual)] += n
    loaded = {k.partition(":")[0] for k, n in ever.items() if n and not k.endswith(":<module>")}
    rate = {k: n / steps for k, n in after.items()}

    by_fn: dict[str, list[dict]] = {}
    for f in scan["findings"]:
        if f.get("function") and f.get("switch") is None:
            by_fn.setdefault(fkey(f["path"], f["function"]), []).append(f)

    def claimed(f: dict) -> bool:
        return f.get("switch") is None and f.get("frequency") in PER_STEP and (f.get("path_kind") or "normal") == "normal"

    claimed_fns = sorted(k for k, fs in by_fn.items() if any(claimed(f) for f in fs))
    covered = [k for k in claimed_fns if k.partition(":")[0] in loaded]
    ran = [k for k in covered if ever[k]]
    per_step = [k for k in ran if rate.get(k, 0) >= PER_STEP_MIN]
    hot_sited = sorted(k for k in by_fn if rate.get(k, 0) >= PER_STEP_MIN)
    found = [k for k in hot_sited if k in claimed_fns]

    def pct(a: int, b: int) -> str:
        return f"{a}/{b} ({100 * a / b:.0f}%)" if b else f"{a}/0 (n/a)"

    def freq(k: str) -> str:
        return f"{rate.get(k, 0):.2f}"

    out = [f"# Runtime oracle: transformers {runtime.get('transformers')} (torch {runtime.get('torch')})", "",
           f"Models {', '.join(runtime.get('models', []))}; {runtime.get('generate_calls')} generate() calls, greedy and sampled, "
           f"batch 2; {steps} decoding steps "
           f"counted after {runtime.get('warmup')} warm-up step(s) per generate(); step = "
           f"{', '.join(runtime.get('step_functions', []))}.",
           f"Scan: {len(scan['findings'])} findings; {len(claimed_fns)} functions claimed per step by default; "
           f"{len(loaded)} modules loaded in the run.", "",
           f"- Claimed per-step functions in loaded modules: {len(covered)}; ran at all: {len(ran)}; "
           f"ran per step (calls/steps >= {PER_STEP_MIN}): {len(per_step)}",
           f"- PRECISION (per step / claimed in loaded modules): {pct(len(per_step), len(covered))}; "
           f"per step / ran: {pct(len(per_step), len(ran))}",
           f"- RECALL (claimed per step / ran per step with an ungated finding): {pct(len(found), len(hot_sited))}", ""]
    out += ["## Claimed per-step functions that ran per step", ""]
    out += table([[f"`{k}`", freq(k)] for k in per_step], ["function", "calls/step"]) + [""]
    out += ["## Ran per step with an ungated finding, not claimed per step (recall misses)", ""]
    out += table([[f"`{k}`", freq(k), ", ".join(sorted({f"{f['frequency']}/{f.get('path_kind') or 'normal'}" for f in by_fn[k]}))]
                  for k in hot_sited if k not in claimed_fns], ["function", "calls/step", "findings (frequency/path_kind)"]) + [""]

    rows, statuses, worst = [], Counter(), []
    for f in sorted((f for f in scan["findings"] if f.get("function") and claimed(f)), key=lambda f: (f["path"], f["line"])):
        k = fkey(f["path"], f["function"])
        if f["path"] not in loaded:
            status = "not-covered"
        elif not ever[k]:
            status = "never-ran"
        elif rate.get(k, 0) >= PER_STEP_MIN:
            status = "confirmed-per-step"
        else:
            status = "ran-not-per-step"
        statuses[status] += 1
        rows.append([f"`{f['path']}:{f['line']}`", f["rule"], f"`{f['function']}`", f["frequency"], freq(k), status])
        if status != "not-covered" and rate.get(k, 0) < RARE_MAX:
            worst.append((f, k))
    out += ["## Finding level: claimed per step, default on", "",
            "Status counts: " + ", ".join(f"{s} {n}" for s, n in sorted(statuses.items())), ""]
    out += table(rows, ["site", "rule", "function", "frequency", "calls/step", "status"]) + [""]
    out += [f"## Worst disagreements: claimed per step, ran < {RARE_MAX} per step (loaded modules)", ""]
    out += table([[f"`{f['path']}:{f['line']}`", f["rule"], f"`{f['function']}`", freq(k), f"{ever[k]}",
                   " -> ".join(f.get("hot_path") or []) or "-"] for f, k in worst],
                 ["site", "rule", "function", "calls/step", "calls in all", "hot_path"]) + [""]
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cs-audit", default="cs-audit", help="the cs-audit command to scan with")
    parser.add_argument("--out", type=Path, default=Path.home() / ".cache/cs-audit-oracle/out")
    parser.add_argument("--venv", type=Path, default=Path.home() / ".cache/cs-audit-oracle/venv")
    parser.add_argument("--warmup", type=int, default=1, help="decoding steps per generate() left out (prefill)")
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    out = args.out.expanduser().resolve()
    if args.child:
        child(out, args.warmup, args.new_tokens, args.seed)
        return 0
    try:
        if args.warmup < 0 or args.new_tokens <= args.warmup:
            raise Failure("--new-tokens must exceed --warmup, and --warmup must be >= 0")
        if not args.cs_audit.split() or not shutil.which(args.cs_audit.split()[0]):
            raise Failure(f"cs-audit command not found: {args.cs_audit!r} (pass --cs-audit)")
        out.mkdir(parents=True, exist_ok=True)
        python = ensure_venv(args.venv.expanduser().resolve())
        print("running generate() under the profiler", file=sys.stderr)
        run([str(python), os.path.abspath(__file__), "--child", "--out", str(out), "--warmup", str(args.warmup),
             "--new-tokens", str(args.new_tokens), "--seed", str(args.seed)], "the runtime child",
            env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"})
        runtime = json.loads((out / "runtime.json").read_text(encoding="utf-8"))
        print(f"scanning {runtime['root']} with {args.cs_audit}", file=sys.stderr)
        scan_path = out / "scan.json"
        scan_path.unlink(missing_ok=True)
        run(args.cs_audit.split() + ["scan", runtime["root"], "--format", "json", "-o", str(scan_path),
                                     "--no-cache", "-j", "1", "-q"], "cs-audit scan")
        try:
            scan = json.loads(scan_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise Failure(f"{scan_path} is not JSON: {exc}") from None
        report = join(runtime, scan)
        (out / "oracle.md").write_text(report, encoding="utf-8")
        print(report)
        print(f"written: {out / 'oracle.md'}, {out / 'runtime.json'}, {scan_path}", file=sys.stderr)
    except Failure as exc:
        print(f"runtime_generate: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"runtime_generate: {exc.filename}: not found", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
