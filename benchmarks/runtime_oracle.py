"""The runtime oracle of cs-audit's frequency claims, on Hugging Face transformers, in one command.

    python benchmarks/runtime_oracle.py [--cs-audit CMD] [--out DIR] [--warmup N] [--new-tokens N]

cs-audit says which log / env-read / sync sites run "per step".  This checks that against a
real run, with cs-audit's own ``trace`` and ``confirm``:

1. makes (or reuses) a venv of its own with torch and transformers pinned below; neither
   becomes a dependency of cs-audit;
2. ``cs-audit trace --package transformers`` runs this file's ``--child`` in that venv: it builds
   a tiny random model from its config (no hub download: a dense llama, then the MoE mixtral,
   then qwen3_moe, one model a run; 2 layers, hidden 64, vocab 1000) before the first step, then
   runs ``generate()`` greedy and sampled.  The step root is the top model's ``forward`` (one
   iteration of the generation loop: prefill or one decoded token); the first ``--warmup`` steps
   are left out.  One model a run, so that a step is a step of the model served: with several
   models in one run, each model's code would run on a third of the steps;
3. ``cs-audit confirm`` scans the installed transformers and joins each trace to it, the
   deployment audited being that run's model;
4. prints and writes ``oracle.md``: function-level PRECISION (of the functions holding a finding
   claimed per step by default, in modules the run loaded, how many ran at least 0.9 times a
   step) and RECALL (of the functions holding an ungated finding on a normal path that ran per step, how many
   are claimed per step), the graph's agreement over every function (``confirm``'s summary),
   the claimed findings by observed status, and ``confirm``'s text with the worst
   disagreements and their chains.
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
HOT = {"step", "request", "round", "layer"}
MODELS = {  # model_type -> (config overrides on top of the common tiny sizes, the top model's class)
    "llama": ({}, "LlamaForCausalLM"),
    "mixtral": ({"num_local_experts": 4, "num_experts_per_tok": 2}, "MixtralForCausalLM"),
    "qwen3_moe": ({"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32}, "Qwen3MoeForCausalLM"),
}
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=1000, max_position_embeddings=256)


class Failure(Exception):
    """An expected failure: printed as one line, exit status 2."""


# ---------------------------------------------------------------- child (runs in the venv, under trace)

def child(model_type: str, new_tokens: int, seed: int) -> None:
    import torch
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM

    transformers.logging.set_verbosity_error()
    extra = MODELS[model_type][0]
    config = AutoConfig.for_model(model_type, **TINY, **extra)
    torch.manual_seed(seed)
    models = [AutoModelForCausalLM.from_config(config).eval()]  # built before the first step
    ids = torch.randint(3, TINY["vocab_size"], (2, 8), generator=torch.Generator().manual_seed(seed))
    mask = torch.ones_like(ids)
    mask[1, :2] = 0  # the second row left-padded
    for model in models:
        for sample in (False, True):
            torch.manual_seed(seed)
            with torch.no_grad():
                model.generate(ids, attention_mask=mask, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                               do_sample=sample, pad_token_id=0)
    print(json.dumps({"torch": torch.__version__, "transformers": transformers.__version__}))


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


def pct(a: int, b: int) -> str:
    return f"{a}/{b} ({100 * a / b:.0f}%)" if b else f"{a}/0 (n/a)"


def summary(runs: dict[str, tuple[dict, dict]], versions: dict) -> list[str]:
    """The oracle's figures from each model's trace and ``confirm --format json``, added up over
    the models: finding-holding functions, as the oracle measured before ``confirm`` existed,
    then confirm's agreement over every function."""
    def claimed(f: dict) -> bool:
        return f["switch"] is None and f["frequency"] in HOT and f["path_kind"] == "normal"

    covered, per_step, hot, found = set(), set(), set(), set()
    counts: Counter[str] = Counter()
    agreement: Counter[str] = Counter()
    for model_type, (_, confirm) in runs.items():
        by_fn: dict[tuple[str, str, str], list[dict]] = {}
        for f in confirm["findings"]:
            # a finding the report puts on an error or rare path says its line runs seldom: a
            # count of its function's calls cannot tell, so it is left out
            if f["function"] and f["switch"] is None and f["path_kind"] == "normal":
                by_fn.setdefault((model_type, f["path"], f["function"]), []).append(f)
        status = {k: fs[0]["observed"]["status"] for k, fs in by_fn.items()}
        claimed_fns = {k for k, fs in by_fn.items() if any(claimed(f) for f in fs)}
        covered |= {k for k in claimed_fns if status[k] != "not-covered"}
        per_step |= {k for k in claimed_fns if status[k] == "per-step"}
        model_hot = {k for k in by_fn if status[k] == "per-step"}
        hot |= model_hot
        found |= model_hot & claimed_fns
        counts.update(f["observed"]["status"] for f in confirm["findings"] if claimed(f))
        agreement.update({k: v for k, v in (confirm["agreement"] or {}).items() if isinstance(v, int)})
    a = agreement
    rows = [f"| {m} | {t['steps']} | {c['files_loaded']} | {len(c['findings'])} | "
            + " | ".join(str((c["agreement"] or {}).get(k)) for k in AGREEMENT) + " |" for m, (t, c) in runs.items()]
    return [
        f"# Runtime oracle: transformers {versions.get('transformers')} (torch {versions.get('torch')})", "",
        f"Models {', '.join(runs)}, one a run; in each, 2 generate() calls, greedy and sampled, batch 2; "
        "a step is one of the run's top-model forwards, counted after the warm-up. Figures added up "
        "over the runs (a function counts once a model).", "",
        f"- PRECISION (functions with a finding claimed per step, in loaded modules, that ran per step): "
        f"{pct(len(per_step & covered), len(covered))}",
        f"- RECALL (functions with an ungated finding on a normal path that ran per step, claimed per step): "
        f"{pct(len(found), len(hot))}",
        f"- Graph agreement, every function of loaded modules: called per step by the graph {a['claimed_per_step']}, "
        f"of them ran per step {pct(a['claimed_ran_per_step'], a['claimed_per_step'])}, "
        f"of the {a['claimed_ran']} that ran at all {pct(a['claimed_ran_per_step'], a['claimed_ran'])}; "
        f"ran per step {a['ran_per_step']}, of them called per step by the graph "
        f"{pct(a['ran_per_step_claimed'], a['ran_per_step'])}",
        "- Findings claimed per step by default, by observed status: "
        + ", ".join(f"{s} {n}" for s, n in sorted(counts.items())), "",
        "| model | steps | modules loaded | findings | " + " | ".join(AGREEMENT) + " |",
        "|---" * (4 + len(AGREEMENT)) + "|", *rows, "",
    ]


#: confirm's agreement counts, in the order the table shows them
AGREEMENT = ("claimed_per_step", "claimed_ran", "claimed_ran_per_step", "ran_per_step", "ran_per_step_claimed")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cs-audit", default="cs-audit", help="the cs-audit command (e.g. 'python -m cs_audit')")
    parser.add_argument("--out", type=Path, default=Path.home() / ".cache/cs-audit-oracle/out")
    parser.add_argument("--venv", type=Path, default=Path.home() / ".cache/cs-audit-oracle/venv")
    parser.add_argument("--warmup", type=int, default=1, help="steps left out at the start (the first prefill)")
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", "-j", type=int, default=1)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", choices=sorted(MODELS), default="llama", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.model, args.new_tokens, args.seed)
        return 0
    out = args.out.expanduser().resolve()
    cs_audit = args.cs_audit.split()
    try:
        if args.warmup < 0 or args.new_tokens < 1:
            raise Failure("--new-tokens must be at least 1, and --warmup at least 0")
        if not cs_audit or not shutil.which(cs_audit[0]):
            raise Failure(f"cs-audit command not found: {args.cs_audit!r} (pass --cs-audit)")
        out.mkdir(parents=True, exist_ok=True)
        python = ensure_venv(args.venv.expanduser().resolve())
        runs: dict[str, tuple[dict, dict]] = {}
        texts: list[str] = []
        versions: dict = {}
        for model_type, (_, cls) in MODELS.items():
            folder = out / model_type
            folder.mkdir(exist_ok=True)
            trace_path, confirm_path = folder / "runtime.json", folder / "confirm.json"
            print(f"running generate() on {model_type} under cs-audit trace", file=sys.stderr)
            traced = run([*cs_audit, "trace", "--package", "transformers", f"--root={cls}.forward",
                          "--warmup", str(args.warmup), "-o", str(trace_path), "--", str(python),
                          os.path.abspath(__file__), "--child", "--model", model_type,
                          "--new-tokens", str(args.new_tokens), "--seed", str(args.seed)], "cs-audit trace",
                         env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"})
            versions = json.loads(traced.stdout.strip().splitlines()[-1])
            trace = json.loads(trace_path.read_text(encoding="utf-8"))
            if trace["steps"] <= 0:
                raise Failure(f"the {model_type} run counted no step after the warm-up")
            tree = trace["folders"][0]
            print(f"confirming against a scan of {tree}", file=sys.stderr)
            # the run is eager on the CPU and serves this architecture: audit that deployment (no
            # graph replays the forward, no other model's forward runs)
            config = folder / "cs-audit.toml"
            config.write_text(f'deployment = {{platform = "cpu", models = ["{model_type}"]}}\n', encoding="utf-8")
            common = [str(trace_path), tree, "-j", str(args.jobs), "--config", str(config)]
            run([*cs_audit, "confirm", *common, "--format", "json", "-o", str(confirm_path)], "cs-audit confirm")
            text = run([*cs_audit, "confirm", *common, "--limit", "25"], "cs-audit confirm").stdout
            runs[model_type] = (trace, json.loads(confirm_path.read_text(encoding="utf-8")))
            texts += [f"## cs-audit confirm: {model_type}", "", "```", text.rstrip(), "```", ""]
        report = "\n".join(summary(runs, versions) + texts)
        (out / "oracle.md").write_text(report, encoding="utf-8")
        print(report)
        print(f"written: {out / 'oracle.md'} and, for each model, its runtime.json and confirm.json", file=sys.stderr)
    except Failure as exc:
        print(f"runtime_oracle: {exc}", file=sys.stderr)
        return 2
    except (json.JSONDecodeError, KeyError, IndexError) as exc:
        print(f"runtime_oracle: unexpected output from cs-audit: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
