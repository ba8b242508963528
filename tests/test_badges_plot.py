"""`patchgate badges` and `patchgate plot` on stored results made in tmp_path."""

import json
import xml.etree.ElementTree as ET

import pytest

from patchgate.cli import main
from patchgate.errors import EXIT_ACCEPTED, EXIT_ERROR
from patchgate.profile import Thresholds, get_profile
from patchgate.report import badges, plot
from patchgate.store import history
from patchgate.store.baselines import BaselineStore, make_envelope

PROFILE = "h200-default"
SCENARIOS = ("prefill_b1", "prefill_b8", "prefill_b64", "decode_b1", "decode_b8", "decode_b64")
REFERENCE_S = {"prefill_b1": 0.041, "prefill_b8": 0.287, "prefill_b64": 2.214,
               "decode_b1": 1.873, "decode_b8": 2.046, "decode_b64": 3.912}
ACCURACY = {"tasks": {"fact_mc": {"metric": "acc", "value": 0.58,
                                  "samples": [{"id": "0", "score": 1.0}]}}, "mean": 0.58}


def _scenarios(factor: float) -> dict:
    return {name: {"phase": name.split("_")[0], "batch_size": int(name.split("_b")[1]),
                   "input_len": 16, "output_len": 4,
                   "samples_s": [REFERENCE_S[name] * factor] * 3} for name in SCENARIOS}


def _store(tmp_path, score=104.6, accuracy_ratio=0.9953, factor=0.9):
    store = BaselineStore(tmp_path / "baselines", PROFILE)
    patches = [{"name": "0001-fuse-add-rmsnorm.py", "title": "Fuse.", "sha256": "ab" * 32}]
    store.save_many({
        "reference": make_envelope(PROFILE, "reference", {},
                                   {"scenarios": _scenarios(1.0), "accuracy": ACCURACY}),
        "current": make_envelope(PROFILE, "current", {},
                                 {"patches": patches, "scenarios": _scenarios(factor),
                                  "accuracy": ACCURACY},
                                 extra={"score": score, "S": {}, "C": 1.0,
                                        "accuracy_ratio": accuracy_ratio}),
    })
    return tmp_path / "baselines"


@pytest.mark.parametrize(("score", "color"), [
    (104.6, badges.GREEN), (100.0, badges.GREEN), (99.99, badges.YELLOW),
    (97.0, badges.YELLOW), (96.99, badges.RED), (0.0, badges.RED)])
def test_score_colour(score, color):
    assert badges.score_color(score) == color


@pytest.mark.parametrize(("ratio", "color"), [
    (1.002, badges.GREEN), (0.99, badges.GREEN), (0.9899, badges.YELLOW),
    (0.97, badges.YELLOW), (0.9699, badges.RED)])
def test_accuracy_colour(ratio, color):
    assert badges.accuracy_color(ratio, Thresholds()) == color


def test_the_accuracy_badge_follows_the_profiles_limit(tmp_path):
    """A profile whose limit is 95 % (C reaching 0 at 93 %): 96 % of the reference is
    green there, where the default limits (99 %, C zero at 97 %) make it red."""
    lenient = get_profile(PROFILE).with_overrides(
        thresholds=Thresholds(accuracy_reject=0.95, c_low=0.93, c_high=0.95))
    root = _store(tmp_path, accuracy_ratio=0.96)
    out = tmp_path / "badges"
    colors = {}
    for prof in (lenient, get_profile(PROFILE)):
        (path,) = [p for p in badges.write_badges(root, prof, out) if "accuracy" in p.name]
        ns = {"s": "http://www.w3.org/2000/svg"}
        colors[prof.thresholds.accuracy_reject] = [
            r.get("fill") for r in ET.parse(path).getroot().iterfind(".//s:rect[@x]", ns)]
    assert colors == {0.95: [badges.GREEN], 0.99: [badges.RED]}


def test_badges_written_from_current_json(tmp_path, capsys):
    root = _store(tmp_path, score=98.25, accuracy_ratio=0.9953)
    out = tmp_path / "docs" / "badges"
    assert main(["badges", "--profile", PROFILE, "--baselines", str(root),
                 "--out", str(out)]) == EXIT_ACCEPTED
    score_svg = out / f"{PROFILE}-score.svg"
    accuracy_svg = out / f"{PROFILE}-accuracy.svg"
    assert capsys.readouterr().out.split() == [str(score_svg), str(accuracy_svg)]
    for path, label, value, color in (
            (score_svg, f"score {PROFILE}", "98.2", badges.YELLOW),
            (accuracy_svg, f"accuracy {PROFILE}", "99.5 % of ref", badges.GREEN)):
        svg = ET.parse(path).getroot()  # well-formed XML
        ns = {"s": "http://www.w3.org/2000/svg"}
        texts = [t.text for t in svg.iterfind(".//s:text", ns)]
        assert (texts[0], texts[-1]) == (label, value)
        assert [r.get("fill") for r in svg.iterfind(".//s:rect[@x]", ns)] == [color]
        assert int(svg.get("width")) > 60


def test_badge_width_follows_the_text():
    short = badges.render_svg(badges.Badge("a", "1", badges.GREEN))
    long = badges.render_svg(badges.Badge("patchgate score", "104.6", badges.GREEN))
    width = [int(ET.fromstring(s).get("width")) for s in (short, long)]
    assert width[0] < width[1]


def test_badges_without_a_baseline(tmp_path, capsys):
    assert main(["badges", "--profile", PROFILE, "--baselines", str(tmp_path),
                 "--out", str(tmp_path / "out")]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert err.startswith(f"ERROR {tmp_path / PROFILE / 'current.json'} does not exist")
    assert not (tmp_path / "out").exists()


def test_badges_from_a_corrupt_baseline(tmp_path, capsys):
    path = tmp_path / PROFILE / "current.json"
    path.parent.mkdir()
    path.write_text('{"schema_version": 1,')
    assert main(["badges", "--profile", PROFILE, "--baselines", str(tmp_path)]) == EXIT_ERROR
    assert capsys.readouterr().err.startswith(f"ERROR {path} is not valid JSON")


def test_badges_need_the_score_in_extra(tmp_path, capsys):
    root = _store(tmp_path)
    path = root / PROFILE / "current.json"
    envelope = json.loads(path.read_text())
    del envelope["extra"]["score"]
    path.write_text(json.dumps(envelope))
    assert main(["badges", "--profile", PROFILE, "--baselines", str(root),
                 "--out", str(tmp_path / "out")]) == EXIT_ERROR
    assert capsys.readouterr().err.startswith(
        f"ERROR {path}: extra.score: expected a number, got None")


# --- plot -------------------------------------------------------------------------

CHANGES = [  # new patch, verdict, score, latency factor vs the reference
    ("0001-fuse-add-rmsnorm.py", "accepted", 103.2, 0.97),
    ("0002-rope-without-fp32-casts.py", "accepted", 105.9, 0.95),
    ("0003-int4-weight-only-quantization.py", "rejected", 0.0, 0.70),
    ("0004-fp8-kv-cache.py", "accepted", 109.4, 0.90),
    ("0005-mixed-precision.py", "rejected", 104.1, 0.99),
]


def _history(root, changes=CHANGES):
    path = root / PROFILE / history.HISTORY
    path.parent.mkdir(parents=True, exist_ok=True)
    accepted, lines = [], []
    for name, verdict, score, factor in changes:
        accepted += [name] if verdict == "accepted" else []
        lines.append(json.dumps({
            "schema_version": 1, "date": "2026-07-01T10:00:00+00:00", "profile": PROFILE,
            "verdict": verdict, "new_patches": [name], "patches": accepted,
            "score": score, "S": {"1": score, "8": score, "inf": score},
            "C": 1.0 if score else 0.0, "accuracy_ratio": 0.995 if score else 0.93,
            "scenarios": {s: {"median_s": REFERENCE_S[s] * factor,
                              "reference_median_s": REFERENCE_S[s]} for s in SCENARIOS}}))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_trend_points_from_history(tmp_path):
    points = plot.trend_points(plot.read_history(_history(tmp_path)))
    assert [p.label for p in points] == [
        "reference", "0001 fuse-add-rmsnorm", "0002 rope-without-fp32-cas…",
        "0003 int4-weight-only-quan…", "0004 fp8-kv-cache", "0005 mixed-precision"]
    assert [p.verdict for p in points] == ["reference", "accepted", "accepted", "rejected",
                                          "accepted", "rejected"]
    assert [p.score for p in points] == [100.0, 103.2, 105.9, 0.0, 109.4, 104.1]
    assert points[4].ratios == pytest.approx({s: 0.90 for s in SCENARIOS})
    assert plot._accepted_state(points) == [0, 1, 2, 2, 4, 4]


def test_trend_points_without_history_use_current_json(tmp_path):
    root = _store(tmp_path, score=104.6, factor=0.9)
    store = BaselineStore(root, PROFILE)
    points = plot.trend_points([], store.load("current"), store.load("reference"))
    assert [(p.label, p.verdict, p.score) for p in points] == [
        ("reference", "reference", 100.0), ("0001 fuse-add-rmsnorm", "accepted", 104.6)]
    assert points[1].ratios == pytest.approx({s: 0.9 for s in SCENARIOS})


def test_short_labels():
    assert plot.short_label(["0003-fp8-kv-cache.py"]) == "0003 fp8-kv-cache"
    assert plot.short_label(["0003-a.py", "0004-b.py"]) == "0003+0004"
    assert plot.short_label([]) == "re-run"


def test_many_points_show_patch_numbers_only():
    points = [plot.Point(f"{i:04d} some-long-name", "accepted", 100.0) for i in range(90)]
    x, labels = plot.tick_labels(points)
    assert len(x) == 30 and x[:2] == [0, 3] and labels[:2] == ["0000", "0003"]


def test_plot_png_and_svg(tmp_path, capsys):
    """Draws the synthetic history plus a PR's verdict; look at it with
    `pytest --basetemp=/tmp/pt tests/test_badges_plot.py` then /tmp/pt/.../trend.png."""
    _history(tmp_path)
    verdict = tmp_path / "verdict.json"
    verdict.write_text(json.dumps({
        "schema_version": 1, "verdict": "accepted", "reasons": [], "score": 111.0,
        "new_patches": ["0006-cuda-graphs.py"],
        "scenarios": [{"name": s, "median_s": REFERENCE_S[s] * 0.88,
                       "reference_median_s": REFERENCE_S[s]} for s in SCENARIOS]}))
    png, svg = tmp_path / "docs" / "trend.png", tmp_path / "docs" / "trend.svg"
    assert main(["plot", "--profile", PROFILE, "--baselines", str(tmp_path), "--verdict",
                 str(verdict), "--out", str(png), "--out", str(svg)]) == EXIT_ACCEPTED
    assert capsys.readouterr().out.split() == [str(png), str(svg)]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert (int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")) == \
        (1000, 720)
    text = svg.read_text()
    ET.fromstring(text)
    assert "<dc:date>" not in text
    assert sorted(p.name for p in png.parent.iterdir()) == ["trend.png", "trend.svg"]


def test_plot_without_anything_to_draw(tmp_path, capsys):
    assert main(["plot", "--profile", PROFILE, "--baselines", str(tmp_path),
                 "--out", str(tmp_path / "t.png")]) == EXIT_ERROR
    assert capsys.readouterr().err.startswith(
        f"ERROR nothing to plot for profile {PROFILE}: no history.jsonl")


def test_plot_names_the_bad_history_line(tmp_path, capsys):
    path = _history(tmp_path)
    path.write_text(path.read_text() + "{not json\n")
    assert main(["plot", "--profile", PROFILE, "--baselines", str(tmp_path),
                 "--out", str(tmp_path / "t.png")]) == EXIT_ERROR
    assert capsys.readouterr().err.startswith(f"ERROR {path}:6: not valid JSON")


def test_plot_refuses_another_history_version(tmp_path, capsys):
    path = tmp_path / PROFILE / history.HISTORY
    path.parent.mkdir()
    path.write_text(json.dumps({"schema_version": 2, "verdict": "accepted", "score": 1,
                                "scenarios": {}}) + "\n")
    assert main(["plot", "--profile", PROFILE, "--baselines", str(tmp_path),
                 "--out", str(tmp_path / "t.png")]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert err.startswith(f"ERROR {path}:1: schema_version 2, this patchgate reads 1")
    assert "hint: upgrade patchgate" in err


def test_plot_refuses_other_formats_and_error_verdicts(tmp_path, capsys):
    _history(tmp_path)
    assert main(["plot", "--profile", PROFILE, "--baselines", str(tmp_path),
                 "--out", str(tmp_path / "t.pdf")]) == EXIT_ERROR
    assert "unsupported plot format" in capsys.readouterr().err
    verdict = tmp_path / "verdict.json"
    verdict.write_text(json.dumps({"schema_version": 1, "verdict": "error", "reasons": ["x"],
                                   "score": None, "scenarios": []}))
    assert main(["plot", "--profile", PROFILE, "--baselines", str(tmp_path), "--verdict",
                 str(verdict), "--out", str(tmp_path / "t.png")]) == EXIT_ERROR
    assert "the verdict has no score" in capsys.readouterr().err
    assert not (tmp_path / "t.png").exists()


def test_the_plot_marks_model_or_task_changes_and_drift():
    rec = {"verdict": "accepted", "score": 100.0, "scenarios": {}}
    a, b = {"model": "a", "tasks": "t"}, {"model": "b", "tasks": "t"}
    history_ = [rec | {"workload": a}, rec | {"workload": a}, rec | {"workload": b},
                rec | {}]  # an old line without a fingerprint marks nothing
    assert plot.workload_marks(history_) == [3]
    flat = [rec | {"score": s} for s in (100.3, 99.6, 100.1, 99.8, 100.4, 99.9, 100.2,
                                         99.7, 100.0, 100.1, 92.2, 91.8, 92.5, 91.9,
                                         92.1, 92.3, 91.7, 92.0)]
    assert plot.drift_marks(flat) == [11]  # the first change after the shift (1 + 10)
    assert history.change_points(flat)[0]["before"] == pytest.approx(100.01)


def test_every_profile_with_baselines_has_its_badges():
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    for current in sorted((root / "baselines").glob("*/current.json")):
        profile = current.parent.name
        for kind in ("score", "accuracy"):
            assert (root / "docs" / "badges" / f"{profile}-{kind}.svg").exists(), (profile, kind)
        assert f"docs/badges/{profile}-score.svg" in (root / "README.md").read_text()


@pytest.mark.parametrize(("status", "color"), [("accepted", badges.GREEN),
                                               ("rejected", badges.RED),
                                               ("inconclusive", badges.YELLOW)])
def test_the_verdict_badge_shows_each_state_on_its_own(tmp_path, status, color):
    path = badges.write_verdict_badge({"verdict": status, "profile": "default"}, tmp_path)
    svg = path.read_text()
    assert path.name == "default-verdict.svg" and f">{status}<" in svg and color in svg
