"""Command line: ``patchgate guard | check | report | table | badges | plot | fidelity |
calibrate | profiles | model grow``.

``guard`` lives here; every other command is registered by the module of its tool
(``add_command``) and handled there. Exit codes: 0 accepted, skipped (nothing to test)
or a command that succeeded; 1 rejected; 2 error (bad input, engine failure,
interruption, SIGTERM); 3 inconclusive. Errors are printed once, as ``ERROR <what went
wrong>`` and a hint, without a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import signal
import sys
import threading
from pathlib import Path

from . import registry
from .errors import (
    EXIT_ACCEPTED,
    EXIT_ERROR,
    EXIT_INCONCLUSIVE,
    EXIT_REJECTED,
    SIGTERM,
    PatchgateError,
    interrupted_by,
    note_signal,
    take_signal,
)
from .profile import available, get_profile, repo_root
from .profile import commands as profile_commands
from .profile.origin import origin
from .report import commands as report_commands
from .tools import calibrate, check, fidelity

EXIT_CODES = ("exit codes: 0 accepted, skipped (no new patch for this engine) or done; "
              "1 rejected; 2 error (bad input, engine failure, Ctrl-C, SIGTERM); "
              "3 inconclusive (the run could not show the change is not slower: re-run "
              "with more rounds or on a quieter runner)")
COMMANDS = (check, report_commands, fidelity, calibrate, profile_commands)
NOTHING_WRITTEN = "nothing under baselines/ or CHANGELOG.md was written"


def _epilog() -> str:
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
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    _add_guard(sub, root)
    for module in COMMANDS:
        module.add_command(sub, root)
    _describe(sub, root)
    return ap


class _Formatter(argparse.HelpFormatter):
    """Every option's default in its help (as pip and ruff show them), a path relative to
    the checkout, unless the help already says it or there is none."""

    root: Path = Path(".")

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (not action.option_strings or default in (None, False, argparse.SUPPRESS)
                or "default" in text or isinstance(default, bool)):
            return text
        if isinstance(default, Path):
            try:
                default = f"{default.resolve().relative_to(self.root.resolve())}/" \
                    if default.is_dir() else default.resolve().relative_to(self.root.resolve())
            except ValueError:
                pass
        return f"{text} (default: {default})" if text else f"(default: {default})"


def _describe(sub, root: Path) -> None:
    """Each command's ``--help`` opens with what it does (its one-line help) and shows
    every option's default; nested commands too (``model grow``)."""
    _Formatter.root = root
    helps = {a.dest: a.help for a in sub._choices_actions}
    for name, parser in sub.choices.items():
        parser.formatter_class = _Formatter
        if not parser.description and helps.get(name):
            parser.description = helps[name][0].upper() + helps[name][1:] + "."
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                _describe(action, root)


def _add_guard(sub, root: Path) -> None:
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
    g.add_argument("--changelog", type=Path, default=root / "CHANGELOG.md",
                   help="the change log the entry is appended to (--accept, --record)")
    g.add_argument("--base", metavar="REF",
                   help="the git revision whose baselines/ and CHANGELOG.md the change is "
                   "judged against; the change's own edits to them are ignored (default: "
                   "HEAD; in a pull request, its base commit; 'worktree': the files on disk)")
    g.add_argument("--json", type=Path, help="write the verdict JSON here")
    g.add_argument("--markdown", type=Path, help="write the markdown report here")
    g.add_argument("--accept", action="store_true",
                   help="if accepted: update baselines/ and append the change-log entry")
    g.add_argument("--record", action="store_true",
                   help="append a change-log entry whatever the verdict (baselines "
                   "change only with --accept)")
    g.add_argument("--rounds", type=int, help="timed rounds per scenario (profile default)")
    g.add_argument("--full-accuracy", action="store_true",
                   help="evaluate every accuracy item (default: the sequential guard stops "
                   "as soon as the full-set verdict is certain; profile [sequential] full)")
    g.add_argument("--attribute", action="store_true",
                   help="with several new patches: also measure them one prefix at a time "
                   "(0001, 0001+0002, ...) and give each its own latency and accuracy change")
    g.add_argument("--scenarios", choices=registry.names("scenarios"),
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
    g.add_argument("--ray", metavar="ADDRESS",
                   help="spread the run over a Ray cluster ('auto': the one this machine "
                   "belongs to): latency in one bench per node that offers a bench slot, "
                   "every round on one node, a block of rounds each; the accuracy guard's "
                   "engines in actors (one GPU each on a GPU profile, half of one where the "
                   "cluster has too few), every item's score "
                   "as the serial run's (pip install -e .[ray])")
    g.add_argument("--ray-actors", type=int, metavar="N",
                   help="with --ray: accuracy engines per configuration (default: half the "
                   "nodes that offer a bench slot: the candidate's and the reference's "
                   "side by side)")
    g.add_argument("--ray-benches", type=int, metavar="N",
                   help="with --ray: latency benches, one a node (default: every node that "
                   "offers a bench slot; 0: latency on this machine)")
    g.add_argument("--quiet", action="store_true",
                   help="no progress bars or progress lines (the step lines stay)")
    g.set_defaults(handler=None)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    with _sigterm_interrupts():
        return _main(args)


def _main(args) -> int:
    reporter = None
    if args.command is None:  # bare `patchgate`: what it can do, as git and pip say it
        _parser().print_help()
        return 0
    try:
        if args.handler is not None:
            return args.handler(args)
        from .report.console import Reporter

        reporter = Reporter(quiet=args.quiet)
        return _guard(args, reporter)
    except PatchgateError as e:
        stop = take_signal()
        if stop is not None:  # a library turned the interruption into its own error
            return _interrupted(args, reporter, stop, e.message)
        return _fail(args, e.message, e.hint)
    except Exception as e:  # a bug here or in a library: an error (2), never "rejected" (1)
        import traceback

        stop = take_signal()
        if stop is not None:
            return _interrupted(args, reporter, stop, f"{type(e).__name__}: {e}")
        traceback.print_exc()
        return _fail(args, f"unexpected {type(e).__name__} during {_step(reporter)}: {e}; "
                     f"{NOTHING_WRITTEN}",
                     "the traceback above says where; report it if the input looks right")
    except KeyboardInterrupt as e:
        return _interrupted(args, reporter, e)


def _interrupted(args, reporter, stop: KeyboardInterrupt, then: str = "") -> int:
    """Exit 2 for an interruption (Ctrl-C, SIGTERM), naming the step it stopped and the
    error a library raised after it (``then``), if one did."""
    after = f" (then: {then})" if then else ""
    return _fail(args, f"interrupted{interrupted_by(stop)} during {_step(reporter)}; "
                 f"{NOTHING_WRITTEN}{after}", "run the command again to get a verdict")


@contextlib.contextmanager
def _sigterm_interrupts():
    """SIGTERM (what a CI runner sends on cancel) ends a command as Ctrl-C does: engines
    and servers closed on the way out, a message, exit 2. The previous handler comes
    back afterwards (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise note_signal(KeyboardInterrupt(SIGTERM))

    def ctrl_c(signum, frame):  # Python's own, and noted
        raise note_signal(KeyboardInterrupt())

    take_signal()  # none of an earlier command's
    old = signal.signal(signal.SIGTERM, interrupt)
    # Ctrl-C as Python answers it, noted; where SIGINT is ignored (a background job) it stays so
    old_int = signal.getsignal(signal.SIGINT)
    if old_int is signal.default_int_handler:
        signal.signal(signal.SIGINT, ctrl_c)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
        if old_int is signal.default_int_handler:
            signal.signal(signal.SIGINT, old_int)


def _guard(args, reporter) -> int:
    from .gate import GuardOptions, run_guard
    from .report.render import render_terminal

    profile = _guard_profile(args)
    if args.allow_slower is not None and not args.allow_slower.strip():
        raise PatchgateError("--allow-slower needs a reason",
                             hint='e.g. --allow-slower "exact softmax: needed for accuracy"')
    if args.ray_actors is not None and (args.ray is None or args.ray_actors < 1):
        raise PatchgateError(f"--ray-actors {args.ray_actors}: needs --ray and at least 1",
                             hint="e.g. --ray auto --ray-actors 4")
    if args.ray_benches is not None and (args.ray is None or args.ray_benches < 0):
        raise PatchgateError(f"--ray-benches {args.ray_benches}: needs --ray and at least 0",
                             hint="e.g. --ray auto --ray-benches 2 (0: latency here)")
    opts = GuardOptions(profile=profile, patches_dir=args.patches,
                        baselines_dir=args.baselines, changelog=args.changelog,
                        json_path=args.json, accept=args.accept, record=args.record,
                        force_environment=args.force_environment, quiet=args.quiet,
                        allow_slower=args.allow_slower, attribute=args.attribute,
                        explain=args.explain, base=args.base,
                        origin=origin(args.profile, _overrides(args)), ray=args.ray,
                        ray_actors=args.ray_actors, ray_benches=args.ray_benches)
    verdict = run_guard(opts, reporter)
    print(render_terminal(verdict))
    if args.markdown:
        from .files import atomic_write_text
        from .report.markdown import render_markdown

        atomic_write_text(args.markdown, render_markdown(verdict))
    return {"rejected": EXIT_REJECTED, "inconclusive": EXIT_INCONCLUSIVE}.get(
        verdict["verdict"], EXIT_ACCEPTED)


def _overrides(args) -> list[str]:
    """The options of a guard run that change what its profile says."""
    given = [(f"--tasks {args.tasks}", args.tasks), (f"--task-path {args.task_path}",
                                                      args.task_path),
             (f"--rounds {args.rounds}", args.rounds),
             (f"--scenarios {args.scenarios}", args.scenarios),
             ("--full-accuracy", args.full_accuracy),
             ("--force-environment", args.force_environment)]
    return [text for text, value in given if value]


def _guard_profile(args):
    """The profile of a guard run, with --tasks, --task-path, --rounds and --scenarios
    applied; its model folder must exist."""
    from .profile.load import check_engine_version, check_model

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
    if args.rounds is not None:
        if args.rounds < 2:
            raise PatchgateError("--rounds must be at least 2", hint="use 5 or more")
        profile = profile.with_overrides(rounds=args.rounds)
    if args.scenarios:
        profile = profile.with_overrides(scenarios=args.scenarios)
    if getattr(args, "full_accuracy", False):
        profile = profile.with_overrides(
            sequential=dataclasses.replace(profile.sequential, full=True))
    check_model(profile, args.profile)
    check_engine_version(profile, args.profile)
    return profile


def _step(reporter) -> str:
    return reporter.doing if reporter else "start-up"


def _fail(args, message: str, hint: str) -> int:
    """Report an error once (stderr, and the --json verdict file if asked): exit 2."""
    print(f"ERROR {message}", file=sys.stderr)
    if hint:
        print(f"  hint: {hint}", file=sys.stderr)
    path = getattr(args, "json", None)
    if path is not None:
        from .files import atomic_write_json
        from .verdict import document

        try:
            atomic_write_json(path, document.error(getattr(args, "profile", "?"), message))
        except (OSError, PatchgateError):
            pass
    return EXIT_ERROR


def entrypoint() -> None:
    raise SystemExit(main())


if __name__ == "__main__":
    entrypoint()


__all__ = ["main", "entrypoint"]
