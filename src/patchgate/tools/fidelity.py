"""Fidelity: do the gate's latencies match SGLang's own benchmark?

``patchgate fidelity --profile P --verdict V.json`` runs
``python -m sglang.bench_one_batch`` with the profile's model and engine settings
for the six scenarios (each batch size ``--repeats`` times, after SGLang's own
warm-up) and compares its latency with the median the gate reported in the verdict
``V.json`` of a run on the same machine:

- prefill scenario (``prefill_input`` in, ``prefill_output`` = 1 out): the gate's
  ``generate`` call vs bench_one_batch's prefill latency (one forward and sample);
- decode scenario (``decode_input`` in, ``decode_output`` out): the gate's call vs
  bench_one_batch's total latency (prefill plus ``decode_output - 1`` decode steps).

bench_one_batch drives SGLang's model runner directly (no scheduler, no IPC, no
overlap of CPU and GPU work between decode steps), so the ratio shows how the
engine's serving path differs from the model's own time.

``--bench offline`` compares with SGLang's offline benchmark instead
(:mod:`patchgate.tools.bench_offline`: ``throughput_test_once`` of
``sglang.bench_offline_throughput`` on an engine with the gate's own settings for the
unpatched model), the same serving path the gate times: there the ratio checks the
gate's own harness (warm-up, interleaving and timing). ``offline_batch_params`` is
the same benchmark sending the batch's sampling parameters as one dict, as the gate
does.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

from ..errors import PatchgateError
from ..profile import get_profile, repo_root
from ..verdict import document

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")
# engine settings that bench_one_batch takes as flags (ServerArgs names)
PASSED = ("dtype", "load_format", "kv_cache_dtype", "disable_prefill_cuda_graph",
          "attention_backend", "chunked_prefill_size", "quantization", "mem_fraction_static")
# bench_one_batch prefills the whole batch in one forward (no chunking): 64 x 2048
# tokens of an 8B model need about 16 GiB of activations beyond the KV pool, which at
# SGLang's default static fraction ran out of memory on one H200. The pool's size does
# not change a step's latency.
BENCH_MEM_FRACTION = 0.6


def bench_command(profile, result_file: Path, repeats: int = 3) -> list[str]:
    """The bench_one_batch command line for the profile's six scenarios."""
    ln = profile.lengths
    args = {"dtype": profile.dtype, "mem_fraction_static": BENCH_MEM_FRACTION,
            **profile.engine_args}
    cmd = [sys.executable, "-m", "sglang.bench_one_batch",
           "--model-path", str(profile.model_path()), "--trust-remote-code",
           "--disable-radix-cache", "--result-filename", str(result_file),
           "--batch-size", *[str(b) for b in profile.batch_sizes * repeats],
           "--input-len", str(ln.prefill_input), str(ln.decode_input),
           "--output-len", str(ln.prefill_output), str(ln.decode_output)]
    if not any((profile.model_path() / f).exists() for f in TOKENIZER_FILES):
        # bench_one_batch loads a tokenizer even for its synthetic token ids, which a
        # random-weight model folder does not ship; any tokenizer will do there.
        cmd += ["--tokenizer-path", str(repo_root() / "models" / "default")]
    for key in PASSED:
        if key in args:
            value = args[key]
            flag = "--" + key.replace("_", "-")
            if value is True:
                cmd.append(flag)
            elif value not in (False, None):
                cmd += [flag, str(value)]
    return cmd


#: ``offline_batch_params``: the offline benchmark with the batch's sampling parameters
#: in one dict, as the gate sends them (``python -m patchgate.tools.bench_offline --batch-params``).
BENCHES = ("one_batch", "offline", "offline_batch_params")


def offline_command(profile, result_file: Path, repeats: int = 3,
                    batch_params: bool = False) -> list[str]:
    """The :mod:`patchgate.tools.bench_offline` command line (one engine, six scenarios)."""
    return [sys.executable, "-m", "patchgate.tools.bench_offline", "--profile", profile.name,
            "--out", str(result_file), "--repeats", str(repeats)] + (
                ["--batch-params"] if batch_params else [])


def offline_medians(rows: list[dict]) -> dict[str, float]:
    """Median offline-benchmark latency per scenario name."""
    found: dict[str, list[float]] = {}
    for r in rows:
        found.setdefault(r["scenario"], []).append(float(r["total_latency"]))
    return {k: statistics.median(v) for k, v in sorted(found.items())}


def shown(cmd: list[str]) -> list[str]:
    """``cmd`` as a record keeps it: ``python`` for the interpreter, paths inside the
    repository relative to it, other paths by their file name (no machine's paths)."""
    root = repo_root().resolve()
    out = ["python"]
    for arg in cmd[1:]:
        if arg.startswith("/"):
            path = Path(arg).resolve()
            arg = str(path.relative_to(root)) if path.is_relative_to(root) else path.name
        out.append(arg)
    return out


def bench_medians(rows: list[dict], profile) -> dict[str, float]:
    """Median bench_one_batch latency per gate scenario name, from its JSONL rows."""
    ln = profile.lengths
    found: dict[str, list[float]] = {}
    for r in rows:
        key = (r["input_len"], r["output_len"])
        if key == (ln.prefill_input, ln.prefill_output):
            name, value = f"prefill_b{r['batch_size']}", r["prefill_latency"]
        elif key == (ln.decode_input, ln.decode_output):
            name, value = f"decode_b{r['batch_size']}", r["total_latency"]
        else:
            continue
        found.setdefault(name, []).append(float(value))
    return {k: statistics.median(v) for k, v in sorted(found.items())}


def compare(verdict: dict, bench: dict[str, float]) -> list[dict]:
    """One row per scenario: the gate's median (the unpatched configuration), the
    bench median and their ratio."""
    rows = []
    for s in verdict["scenarios"]:
        b = bench.get(s["name"])
        if b is None:
            raise PatchgateError(f"the SGLang benchmark reported nothing for {s['name']}",
                                 hint="see its output above (batch too large for memory?)")
        gate = s["reference_median_s"]
        rows.append({"name": s["name"], "gate_median_s": gate, "bench_median_s": b,
                     "ratio": gate / b})
    return rows


def run(profile, verdict_path: Path, out: Path, repeats: int = 3,
        bench: str = "one_batch") -> list[dict]:
    verdict = document.load(verdict_path)
    if verdict.get("profile") != profile.name:
        raise PatchgateError(f"{verdict_path} is a verdict of profile "
                             f"{verdict.get('profile')!r}, not {profile.name!r}",
                             hint="compare runs of the same profile on the same machine")
    result = out.with_suffix(".bench.jsonl")
    result.unlink(missing_ok=True)
    if bench not in BENCHES:
        raise PatchgateError(f"unknown bench {bench!r}", hint=f"one of {', '.join(BENCHES)}")
    offline = bench != "one_batch"
    if offline:
        cmd = offline_command(profile, result, repeats, bench == "offline_batch_params")
    else:
        cmd = bench_command(profile, result, repeats)
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    proc = subprocess.run(cmd, check=False)
    if proc.returncode != 0 or not result.exists():
        raise PatchgateError(f"{cmd[2]} exited with {proc.returncode}",
                             hint="see its output above")
    rows_in = [json.loads(x) for x in result.read_text().splitlines() if x.strip()]
    medians = (offline_medians(rows_in) if offline
               else bench_medians(rows_in, profile))
    rows = compare(verdict, medians)
    out.write_text(json.dumps({"profile": profile.name, "bench": bench,
                               "command": shown(cmd),
                               "repeats": repeats,
                               "rows": rows, "environment": verdict.get("environment")},
                              indent=2) + "\n")
    return rows


def add_command(sub, root: Path) -> None:
    """``patchgate fidelity``."""
    f = sub.add_parser("fidelity", help="compare a verdict's latencies with SGLang's own "
                       "bench_one_batch on this machine (GPU profiles)")
    f.add_argument("--profile", required=True, help="an SGLang profile")
    f.add_argument("--verdict", type=Path, required=True,
                   help="the --json verdict of a guard run of this profile on this machine")
    f.add_argument("--out", type=Path, default=Path("fidelity.json"),
                   help="where the comparison goes (JSON)")
    f.add_argument("--repeats", type=int, default=3, help="bench runs per batch size")
    f.add_argument("--bench", choices=BENCHES, default="one_batch",
                   help="one_batch: python -m sglang.bench_one_batch (model runner only); "
                   "offline: SGLang's offline throughput benchmark on one engine (the "
                   "serving path the gate times); offline_batch_params: the same with "
                   "one sampling-params dict for the batch, as the gate sends it")
    f.set_defaults(handler=handle)


def handle(args) -> int:
    from tabulate import tabulate

    rows = run(get_profile(args.profile), args.verdict, args.out, args.repeats, args.bench)
    print(tabulate([[r["name"], f"{1000 * r['gate_median_s']:.2f}",
                     f"{1000 * r['bench_median_s']:.2f}", f"{r['ratio']:.3f}"] for r in rows],
                   headers=["scenario", "gate ms", f"{args.bench} ms", "ratio"]))
    return 0
