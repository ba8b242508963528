"""SGLang's own offline benchmark for the gate's six scenarios, one engine for all.

``python -m patchgate.tools.bench_offline --profile P --out rows.jsonl [--repeats N]``
starts ``sglang.Engine`` with the settings the gate gives the unpatched model when it
runs alone (:func:`patchgate.engines.sglang.server_args`: the profile's
``engine_args``, its memory fraction, radix cache off), not through patchgate's
adapter and its worker hook, so only the harness differs, and times each
scenario with SGLang's ``throughput_test_once`` from
``sglang.benchmark.offline_throughput`` (``python -m sglang.bench_offline_throughput``):
one ``generate`` call of the whole batch, greedy, ``ignore_eos``, fixed lengths. The
prompts are the token ids the gate sends (:func:`patchgate.latency.scenarios.prompt_ids`,
same seed), passed as ``input_ids`` (the benchmark's own datasets need text and a
tokenizer, which a random-weight model does not ship, and its random dataset
downloads ShareGPT). One warm-up call per scenario, then ``--repeats`` timed ones;
one JSON row per timed call. ``--batch-params`` sends the batch's sampling parameters
as one dict, the way the gate calls ``generate``, instead of the benchmark's one dict
per request (the two are otherwise the same call), so a difference between the two
benchmark modes is what that choice costs.

Used by ``patchgate fidelity --bench offline``; runs in its own process so the GPU
memory is given back when it ends.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..engines.sglang import model_vocab_size, server_args
from ..errors import PatchgateError
from ..latency.scenarios import make_scenarios, prompt_ids
from ..profile import get_profile


def engine_kwargs(profile) -> dict:
    """``sglang.Engine`` arguments of the gate's unpatched configuration, alone on the
    GPU: the model, its dtype and the profile's settings; token ids in and the radix
    cache off, as in every patchgate run."""
    return server_args(profile, [])


def requests(profile, row_type) -> dict[str, list]:
    """Per scenario name, the batch as the benchmark's dataset rows (token-id prompts)."""
    vocab = model_vocab_size(profile.model_path())
    return {s.name: [row_type(prompt=ids, prompt_len=len(ids), output_len=s.output_len)
                     for ids in prompt_ids(s, vocab, profile.seed)]
            for s in make_scenarios(profile)}


class TokenIdBackend:
    """What ``throughput_test_once`` calls, forwarding its prompts as ``input_ids``;
    with ``batch_params``, per-request sampling parameters that are all equal go as
    one dict (as the gate sends them)."""

    def __init__(self, engine, batch_params: bool = False):
        self.engine = engine
        self.batch_params = batch_params

    def generate(self, prompt, sampling_params, **kw):
        if (self.batch_params and isinstance(sampling_params, list) and sampling_params
                and all(p == sampling_params[0] for p in sampling_params)):
            sampling_params = sampling_params[0]
        return self.engine.generate(input_ids=prompt, sampling_params=sampling_params, **kw)

    def get_server_info(self):
        return self.engine.get_server_info()

    def shutdown(self):
        self.engine.shutdown()


def _sglang_bench():
    try:
        import sglang
        from sglang.benchmark.datasets.common import DatasetRow
        from sglang.benchmark.offline_throughput import throughput_test_once
    except ImportError as e:
        raise PatchgateError(f"SGLang's offline benchmark is not importable ({e})",
                             hint="needs SGLang >= 0.5.16 (`pip install -e .[sglang]`)") from e
    return sglang, DatasetRow, throughput_test_once


def run(profile, out: Path, repeats: int, batch_params: bool = False) -> None:
    sglang, row_type, throughput_test_once = _sglang_bench()
    batches = requests(profile, row_type)
    backend = TokenIdBackend(sglang.Engine(**engine_kwargs(profile)), batch_params)
    try:
        with out.open("w") as f:
            for s in make_scenarios(profile):
                for i in range(1 + repeats):
                    r = throughput_test_once("engine", backend, batches[s.name],
                                             ignore_eos=True, extra_request_body={},
                                             profile=False)
                    want = s.batch_size * s.output_len
                    if r["total_output_tokens"] != want:
                        raise PatchgateError(f"{s.name}: SGLang returned "
                                             f"{r['total_output_tokens']} tokens, not {want}",
                                             hint="fixed output lengths need ignore_eos")
                    if i == 0:
                        continue  # warm-up
                    f.write(json.dumps({"scenario": s.name, "batch_size": s.batch_size,
                                        "input_len": s.input_len, "output_len": s.output_len,
                                        "total_latency": r["total_latency"]}) + "\n")
                    f.flush()
                print(f"[bench_offline] {s.name} done", file=sys.stderr, flush=True)
    finally:
        backend.shutdown()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m patchgate.tools.bench_offline",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-params", action="store_true",
                    help="one sampling-params dict for the batch, as the gate sends it")
    args = ap.parse_args(argv)
    try:
        run(get_profile(args.profile), args.out, args.repeats, args.batch_params)
    except PatchgateError as e:
        print(f"ERROR {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
