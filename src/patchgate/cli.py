"""Command line: ``patchgate guard | check | report | badges | plot | table | fidelity |
calibrate | profiles | model grow``.

Exit codes: 0 accepted, skipped (nothing to test) or a command that succeeded; 1
rejected; 2 error (bad input, engine failure, interruption). Errors are printed once,
as ``ERROR <what went wrong>`` and a hint, without a traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .config import get_profile, repo_root
from .errors import EXIT_ACCEPTED, EXIT_ERROR, EXIT_REJECTED, PatchgateError
from .fidelity import BENCHES

EXIT_CODES = ("exit codes: 0 accepted, skipped (no new patch for this engine) or done; "
              "1 rejected; 2 error (bad input, engine failure, Ctrl-C)")


def _epilog() -> str:
    from .profiles import available

    names = ", ".join(p.stem for p in available())
    return (f"{EXIT_CODES}. profiles: {names} (profiles/*.toml; `patchgate profiles` "
            "describes them; --profile also takes a .toml path).")


def _parser() -> argparse.ArgumentParser:
    from . import __version__

    root = repo_root()
    ap = argparse.ArgumentParser(
        prog="patchgate", epilog=_epilog(),
        description="An accuracy-guarded performance-regression gate for LLM inference "
        "optimizations: six latency scenarios and an lm-eval accuracy guard per change.")
    ap.add_argument("--version", action="version", version=f"patchgate {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)

    ck = sub.add_parser("check", help="validate the patch folder only (fast: no model, no "
                        "measurement); for pre-commit and the first CI step",
                        epilog=EXIT_CODES)
    ck.add_argument("--patches", type=Path, default=root / "model_patches",
                    help="folder of NNNN-slug.py patches (default: model_patches/)")

    g = sub.add_parser("guard", help="run the gate on a profile: six scenarios + accuracy guard",
                       epilog=_epilog())
    g.add_argument("--profile", default="default",
                   help="a profile name (see `patchgate profiles`) or a profile .toml file")
    g.add_argument("--tasks", help="comma-separated lm-eval task or group names "
                   "(instead of the profile's tasks)")
    g.add_argument("--task-path", type=Path, help="a folder of lm-eval task YAMLs "
                   "(instead of the profile's task_path)")
    g.add_argument("--patches", type=Path, default=root / "model_patches",
                   help="folder of NNNN-slug.py patches (default: model_patches/)")
    g.add_argument("--baselines", type=Path, default=root / "baselines",
                   help="folder of stored results (default: baselines/)")
    g.add_argument("--changelog", type=Path, default=root / "CHANGELOG.md")
    g.add_argument("--json", type=Path, help="write the verdict JSON here")
    g.add_argument("--markdown", type=Path, help="write the markdown report here")
    g.add_argument("--accept", action="store_true",
                   help="if accepted: update baselines/ and append the change-log entry")
    g.add_argument("--record", action="store_true",
                   help="append a change-log entry whatever the verdict (baselines "
                   "change only with --accept)")
    g.add_argument("--rounds", type=int, help="timed rounds per scenario (profile default)")
    g.add_argument("--attribute", action="store_true",
                   help="with several new patches: also measure them one prefix at a time "
                   "(0001, 0001+0002, ...) and give each its own latency and accuracy change")
    g.add_argument("--scenarios", choices=("static", "serving"),
                   help="static: the six scenarios on loaded engines; serving: "
                   "sglang.bench_serving against one SGLang server per configuration at "
                   "concurrency 1, 8 and unlimited, as the contest scores (default: the "
                   "profile's)")
    g.add_argument("--explain", action="store_true",
                   help="profile each scenario found slower once for the current baseline "
                   "and once for the candidate, and report the largest differences; traces "
                   "go to <verdict>.explain/ beside --json (never timed into the verdict)")
    g.add_argument("--allow-slower", metavar="REASON",
                   help="let a latency regression pass, for this reason (it goes into the "
                   "change log and the report); never bypasses the accuracy rule")
    g.add_argument("--force-environment", action="store_true",
                   help="use stored results from another environment (not recommended)")
    g.add_argument("--quiet", action="store_true",
                   help="no progress bars or progress lines (the step lines stay)")

    r = sub.add_parser("report", help="render a verdict JSON as markdown or text")
    r.add_argument("verdict", type=Path)
    r.add_argument("--format", choices=("markdown", "text"), default="markdown")
    r.add_argument("--output", type=Path, help="write here instead of stdout")

    b = sub.add_parser("badges", help="write SVG badges (score, accuracy) from "
                       "baselines/<profile>/current.json")
    b.add_argument("--profile", default="default", help="profile name (a baselines/ folder)")
    b.add_argument("--baselines", type=Path, default=root / "baselines",
                   help="folder of stored results (default: baselines/)")
    b.add_argument("--out", type=Path, default=root / "docs" / "badges",
                   help="folder for <profile>-score.svg and <profile>-accuracy.svg "
                   "(default: docs/badges/)")

    t = sub.add_parser("plot", help="draw the trend of logged changes: score and latency "
                       "relative to the reference")
    t.add_argument("--profile", default="default", help="profile name (a baselines/ folder)")
    t.add_argument("--baselines", type=Path, default=root / "baselines",
                   help="folder of stored results (default: baselines/)")
    t.add_argument("--verdict", type=Path,
                   help="a verdict JSON (`guard --json`) to add as the last point")
    t.add_argument("--out", type=Path, action="append",
                   help="a .png or .svg to write; repeat for both "
                   "(default: docs/trend-<profile>.png)")

    tb = sub.add_parser("table", help="one markdown row per verdict file: patch, S1, S8, "
                        "Sinf, score, accuracy ratio, verdict")
    tb.add_argument("verdicts", type=Path, nargs="+")
    tb.add_argument("--output", type=Path, help="write here instead of stdout")

    f = sub.add_parser("fidelity", help="compare a verdict's latencies with SGLang's own "
                       "bench_one_batch on this machine (GPU profiles)")
    f.add_argument("--profile", required=True, help="an SGLang profile")
    f.add_argument("--verdict", type=Path, required=True,
                   help="the --json verdict of a guard run of this profile on this machine")
    f.add_argument("--out", type=Path, default=Path("fidelity.json"))
    f.add_argument("--repeats", type=int, default=3, help="bench runs per batch size")
    f.add_argument("--bench", choices=BENCHES, default="one_batch",
                   help="one_batch: python -m sglang.bench_one_batch (model runner only); "
                   "offline: SGLang's offline throughput benchmark on one engine (the "
                   "serving path the gate times); offline_batch_params: the same with "
                   "one sampling-params dict for the batch, as the gate sends it")

    c = sub.add_parser("calibrate", help="measure the gate's latency error rates on this "
                       "machine: A/A runs and planted slowdowns")
    c.add_argument("--profile", default="default", help="profile name (see `patchgate profiles`)")
    c.add_argument("--runs", type=int, default=20, help="runs of each kind (default: 20)")
    c.add_argument("--slowdowns", default="0.02,0.05,0.1",
                   help="planted slowdowns, comma-separated fractions (default: 0.02,0.05,0.1)")
    c.add_argument("--baselines", type=Path, default=root / "baselines",
                   help="folder of stored results; the result goes to "
                   "<baselines>/<profile>/calibration.json")
    c.add_argument("--out", type=Path, help="write the calibration here instead")
    c.add_argument("--rounds", type=int, help="timed rounds per look (profile default)")
    c.add_argument("--append", action="store_true",
                   help="add the runs to the calibration file's (same profile, settings and "
                   "machine): a calibration spread over several sessions")
    c.add_argument("--stored", action="store_true",
                   help="measure nothing: the paired and unpaired interval widths of the "
                   "samples stored in <baselines>/<profile>/{reference,current}.json")
    c.add_argument("--quiet", action="store_true", help="no progress bars or lines")

    sub.add_parser("profiles", help="list the profiles of profiles/ with their descriptions")

    mg = sub.add_parser("model", help="model folders: `model grow` builds a grown checkpoint")
    grow = mg.add_subparsers(dest="model_command", required=True).add_parser(
        "grow", help="grow a small MiniCPM, function-preserving, to a larger shape (bf16, "
        "into the cache); prints the folder")
    grow.add_argument("--shape", required=True, help="a shape of patchgate.grow.SHAPES "
                      "(minicpm4-8b)")
    grow.add_argument("--source", type=Path, default=root / "models" / "default",
                      help="the small model folder (default: models/default)")
    grow.add_argument("--cache", type=Path, help="folder of grown models (default: "
                      "$PATCHGATE_CACHE, else ~/.cache/patchgate/grown)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    run = None
    try:
        if args.command == "profiles":
            return _profiles()
        if args.command == "report":
            return _report(args)
        if args.command == "badges":
            return _badges(args)
        if args.command == "plot":
            return _plot(args)
        if args.command == "table":
            return _table(args)
        if args.command == "fidelity":
            return _fidelity(args)
        if args.command == "check":
            return _check(args)
        if args.command == "calibrate":
            return _calibrate(args)
        if args.command == "model":
            return _model_grow(args)
        from .gate import GuardOptions, Run, print_report, run_guard

        profile = _guard_profile(args)
        if args.rounds is not None:
            if args.rounds < 2:
                raise PatchgateError("--rounds must be at least 2", hint="use 5 or more")
            profile = profile.with_overrides(rounds=args.rounds)
        if args.scenarios:
            profile = profile.with_overrides(scenarios=args.scenarios)
        if args.allow_slower is not None and not args.allow_slower.strip():
            raise PatchgateError("--allow-slower needs a reason",
                                 hint='e.g. --allow-slower "exact softmax: needed for accuracy"')
        opts = GuardOptions(profile=profile, patches_dir=args.patches,
                            baselines_dir=args.baselines, changelog=args.changelog,
                            json_path=args.json, accept=args.accept, record=args.record,
                            force_environment=args.force_environment, quiet=args.quiet,
                            allow_slower=args.allow_slower, attribute=args.attribute,
                            explain=args.explain)
        run = Run(opts)
        verdict = run_guard(opts, run)
        print_report(verdict)
        if args.markdown:
            from .report import render_markdown
            from .storage import atomic_write_text

            atomic_write_text(args.markdown, render_markdown(verdict))
        return EXIT_REJECTED if verdict["verdict"] == "rejected" else EXIT_ACCEPTED
    except PatchgateError as e:
        return _fail(args, e.message, e.hint)
    except Exception as e:  # a bug here or in a library: an error (2), never "rejected" (1)
        import traceback

        traceback.print_exc()
        return _fail(args, f"unexpected {type(e).__name__} during {_step(run)}: {e}; "
                     f"{NOTHING_WRITTEN}",
                     "the traceback above says where; report it if the input looks right")
    except KeyboardInterrupt:
        return _fail(args, f"interrupted during {_step(run)}; {NOTHING_WRITTEN}",
                     "run the command again to get a verdict")


NOTHING_WRITTEN = "nothing under baselines/ or CHANGELOG.md was written"


def _profiles() -> int:
    from .profiles import listing

    for name, engine, description in listing():
        print(f"{name:22s} {engine:12s} {description}")
    return EXIT_ACCEPTED


def _guard_profile(args):
    """The profile of a guard run, with --tasks and --task-path applied; its model
    folder must exist."""
    from .profiles import check_engine_version, check_model

    profile = get_profile(args.profile)
    if args.tasks is not None:
        tasks = tuple(t.strip() for t in args.tasks.split(",") if t.strip())
        if not tasks:
            raise PatchgateError(f"--tasks {args.tasks!r} names no task",
                                 hint="e.g. --tasks gsm8k,arc_easy")
        profile = profile.with_overrides(tasks=tasks)
    if args.task_path is not None:
        if not args.task_path.is_dir():
            raise PatchgateError(f"--task-path {args.task_path}: not a folder",
                                 hint="pass a folder of lm-eval task YAML files")
        profile = profile.with_overrides(task_path=str(args.task_path.resolve()))
    check_model(profile, args.profile)
    check_engine_version(profile, args.profile)
    return profile


def _step(run) -> str:
    return run.step if run else "start-up"


def _fail(args, message: str, hint: str) -> int:
    """Report an error once (stderr, and the --json verdict file if asked): exit 2."""
    _error(message, hint)
    _error_json(args, message)
    return EXIT_ERROR


def _error(message: str, hint: str) -> None:
    print(f"ERROR {message}", file=sys.stderr)
    if hint:
        print(f"  hint: {hint}", file=sys.stderr)


def _error_json(args, message: str) -> None:
    path = getattr(args, "json", None)
    if path is None:
        return
    from .storage import atomic_write_json
    from .verdict import error_verdict

    try:
        atomic_write_json(path, error_verdict(getattr(args, "profile", "?"), message))
    except (OSError, PatchgateError):
        pass


def _read_verdict(path: Path) -> dict:
    from .storage import read_json

    verdict = read_json(path, hint="pass a file written by `patchgate guard --json`")
    for key in ("schema_version", "verdict", "reasons", "scenarios"):
        if key not in verdict:
            raise PatchgateError(f"{path}: not a verdict file (no {key!r})",
                                 hint="pass a file written by `patchgate guard --json`")
    return verdict


def _badges(args) -> int:
    from .badges import write_badges

    for path in write_badges(args.baselines, args.profile, args.out):
        print(path)
    return EXIT_ACCEPTED


def _plot(args) -> int:
    from .plot import write_plot

    verdict = _read_verdict(args.verdict) if args.verdict else None
    outputs = args.out or [repo_root() / "docs" / f"trend-{args.profile}.png"]
    for path in write_plot(args.baselines, args.profile, outputs, verdict):
        print(path)
    return EXIT_ACCEPTED


def _emit(text: str, output: Path | None) -> int:
    """Write ``text`` as it is to ``output`` (atomically), or to stdout ending in a newline."""
    if output:
        from .storage import atomic_write_text

        atomic_write_text(output, text)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return EXIT_ACCEPTED


def _table(args) -> int:
    from .report import render_results_table

    return _emit(render_results_table([(p.name, _read_verdict(p)) for p in args.verdicts]),
                 args.output)


def _fidelity(args) -> int:
    from tabulate import tabulate

    from .fidelity import run as run_fidelity

    rows = run_fidelity(get_profile(args.profile), args.verdict, args.out, args.repeats,
                        args.bench)
    print(tabulate([[r["name"], f"{1000 * r['gate_median_s']:.2f}",
                     f"{1000 * r['bench_median_s']:.2f}", f"{r['ratio']:.3f}"] for r in rows],
                   headers=["scenario", "gate ms", f"{args.bench} ms", "ratio"]))
    return EXIT_ACCEPTED


def _model_grow(args) -> int:
    from .grow_build import ensure

    done = ensure(args.source, args.shape, args.cache)
    how = "built" if done.built else "found in the cache"
    print(f"{args.shape}: {how} in {done.seconds:.1f} s", file=sys.stderr)
    print(done.path)
    return EXIT_ACCEPTED


def _check(args) -> int:
    from .patches import discover

    patches = discover(args.patches)
    for p in patches:
        engines = ", ".join(p.engines)
        args_ = f"; SERVER_ARGS {p.server_args}" if p.server_args else ""
        print(f"ok  {p.name}: {p.title} (engines: {engines}{args_})")
    print(f"{len(patches)} patch(es) in {args.patches}: valid")
    return EXIT_ACCEPTED


def _calibrate(args) -> int:
    from .calibration import calibrate, render
    from .gate import GuardOptions, Run

    profile = get_profile(args.profile)
    if args.stored:
        return _stored_gain(args)
    if args.rounds is not None:
        if args.rounds < 2:
            raise PatchgateError("--rounds must be at least 2", hint="use 5 or more")
        profile = profile.with_overrides(rounds=args.rounds)
    try:
        slowdowns = [float(x) for x in args.slowdowns.split(",") if x.strip()]
    except ValueError:
        raise PatchgateError(f"--slowdowns {args.slowdowns!r}: not comma-separated numbers",
                             hint="e.g. --slowdowns 0.02,0.05,0.1") from None
    run = Run(GuardOptions(profile=profile, patches_dir=Path("."), baselines_dir=args.baselines,
                           changelog=Path("."), quiet=args.quiet))
    kinds = 1 + len(slowdowns)
    run.say(f"[patchgate] calibrating {profile.name}: {args.runs} runs x {kinds} kinds "
            "(A/A and planted slowdowns), each the latency phase of a gate run; nothing is "
            "written until the end")
    doc = calibrate(profile, args.baselines, args.runs, slowdowns, run.progress,
                    lambda s: print(s, file=sys.stderr, flush=True), args.out, args.append)
    print(render(doc))
    return EXIT_ACCEPTED


def _stored_gain(args) -> int:
    from tabulate import tabulate

    from .baselines import BaselineStore
    from .calibration import stored_pairing_gain

    gains = stored_pairing_gain(BaselineStore(args.baselines, args.profile))
    print(tabulate([[n, g["rounds"], f"{100 * g['paired']:.2f} %",
                     f"{100 * g['unpaired']:.2f} %", f"{g['gain']:.2f}x"]
                    for n, g in gains.items()],
                   headers=["scenario", "rounds", "paired 95 % CI width (log)",
                            "unpaired", "unpaired / paired"], disable_numparse=True))
    return EXIT_ACCEPTED


def _report(args) -> int:
    from .report import render_markdown, render_terminal

    verdict = _read_verdict(args.verdict)
    text = render_markdown(verdict) if args.format == "markdown" else render_terminal(verdict)
    return _emit(text, args.output)


def entrypoint() -> None:
    raise SystemExit(main())


if __name__ == "__main__":
    entrypoint()


__all__ = ["main", "entrypoint"]
