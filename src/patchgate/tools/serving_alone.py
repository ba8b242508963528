"""The serving set's commands, to run them alone; and their durations against a verdict's.

A fidelity check of the serving harness: SGLang's server and ``sglang.bench_serving``
run by hand, exactly as the gate runs them for the reference (no patches, the
profile's settings, the whole GPU), should take what the gate measured for the
reference, within a few per cent.

    python -m patchgate.tools.serving_alone --profile h200-minicpm8b-dummy --out DIR
        line 1: the launch_server command (port 30000, or --port);
        lines 2-4: the bench_serving commands of serving_c1, serving_c8, serving_cinf,
        each appending to DIR/serving_cX.jsonl (run each a few times)
    python -m patchgate.tools.serving_alone --compare VERDICT.json DIR
        per scenario: the verdict's reference median, the median duration in
        DIR/serving_cX.jsonl, and their ratio

``docs/gpu-runs/gpu.sh serving-alone`` runs both steps.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
from pathlib import Path

from ..errors import PatchgateError
from ..latency.serving import bench, server
from ..latency.serving.scenarios import make_scenarios
from ..profile import get_profile
from ..verdict import document


def commands(profile, out_dir: Path, port: int = 30000) -> list[list[str]]:
    """The reference's server command, then one bench_serving command per scenario."""
    model = profile.model_path()
    tok = server.tokenizer_path(model)
    launch = server.launch_command(profile, [], port, share=1.0, python="python3")
    url = f"http://{server.HOST}:{port}"
    return [launch] + [bench.bench_command(url, s, (str(model), str(tok)), profile.seed,
                                           out_dir / f"{s.name}.jsonl", python="python3")
                       for s in make_scenarios(profile)]


def compare(verdict: dict, out_dir: Path) -> list[dict]:
    """Per scenario: the gate's reference median duration, the median of the durations
    bench_serving wrote alone, and alone / gate."""
    rows = []
    for sc in (verdict.get("serving") or {}).get("scenarios", []):
        path = out_dir / f"{sc['name']}.jsonl"
        try:
            runs = [json.loads(x)["duration"] for x in path.read_text().splitlines()
                    if x.strip()]
        except (OSError, ValueError, KeyError) as e:
            raise PatchgateError(f"{path}: no bench_serving durations ({e})",
                                 hint="run the bench_serving commands first") from None
        gate = sc["configurations"]["reference"]["duration_s"]
        alone = statistics.median(runs)
        rows.append({"name": sc["name"], "gate_s": gate, "alone_s": alone, "runs": len(runs),
                     "ratio": alone / gate})
    if not rows:
        raise PatchgateError("the verdict has no serving block",
                             hint="pass the --json of a `guard --scenarios serving` run")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m patchgate.tools.serving_alone",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", help="print the commands of this profile's reference")
    ap.add_argument("--out", type=Path, default=Path("serving-alone"),
                    help="folder of the bench_serving result files")
    ap.add_argument("--port", type=int, default=30000)
    ap.add_argument("--compare", nargs=2, metavar=("VERDICT", "DIR"),
                    help="compare the durations in DIR with the verdict's reference")
    args = ap.parse_args(argv)
    if args.compare:
        verdict = document.load(Path(args.compare[0]))
        for r in compare(verdict, Path(args.compare[1])):
            print(f"{r['name']:14s} gate {r['gate_s']:9.3f} s  alone {r['alone_s']:9.3f} s "
                  f"({r['runs']} runs)  ratio {r['ratio']:.3f}")
        return 0
    if not args.profile:
        ap.error("--profile or --compare")
    args.out.mkdir(parents=True, exist_ok=True)
    for cmd in commands(get_profile(args.profile), args.out, args.port):
        print(shlex.join(cmd))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
