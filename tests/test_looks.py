"""The latency phase's loop (patchgate.latency.looks) on fake engines of exact speed:
looks until decided, the confirmation in fresh processes, and what it restarts."""

from __future__ import annotations

import pytest
from fakes import use_fake_engines, write_patch

from patchgate.engines.configurations import Configurations
from patchgate.latency import looks
from patchgate.patches import discover
from patchgate.profile import get_profile

PROFILE = get_profile("default").with_overrides(rounds=8, warmup=1, max_looks=3, settle_s=0.0)


def configurations(tmp_path, candidate: str | None, profile=PROFILE):
    patches = discover(write_patch(tmp_path / "p", candidate)) if candidate else []
    return Configurations(profile, {"candidate": patches, "current": [], "reference": []})


def test_a_uniform_slowdown_is_decided_by_the_pooled_score_first_and_confirmed(
        tmp_path, monkeypatch, reporter):
    built = use_fake_engines(monkeypatch)
    with configurations(tmp_path, "0001-slow-20.py") as configs:
        configs.start()
        result = looks.run(configs, PROFILE, reporter)
    # 8 rounds: the pooled score decides at once; a scenario alone would need a second
    # look (its share of alpha is below 2^-8: the run says so in a note), which a
    # slower score makes needless: straight to the fresh processes, which confirm it in
    # their first look and stop there too
    assert result.decisions["current"]["score"].look == 1
    assert result.looks == 1 and result.confirm_looks == 1
    assert any("cannot be significant before" in n for n in result.notes)
    assert result.final("current", "score") == "slower"
    assert all(result.decisions["current"][s.name].outcome == "undecided"
               for s in result.scenarios)
    # started twice: candidate and current+reference, then candidate and current again
    assert [e.label for e in built] == ["candidate", "current", "candidate", "current"]
    assert all(e.closed for e in built)
    assert any("measuring again in fresh engine processes" in x for x in reporter.lines)


def test_an_equal_candidate_is_equivalent_and_nothing_is_restarted(tmp_path, monkeypatch,
                                                                   reporter):
    built = use_fake_engines(monkeypatch)
    with configurations(tmp_path, "0001-same.py") as configs:
        configs.start()
        result = looks.run(configs, PROFILE, reporter)
    assert result.final("current", "score") == "equivalent"
    assert result.confirmation == {} and len(built) == 2


def test_an_undecided_item_gets_more_looks_up_to_the_budget(tmp_path, monkeypatch, reporter):
    """A 4 % slowdown against a 5 % threshold with 2 rounds a look: never decidable,
    so every look is taken, and the samples grow look by look."""
    prof = PROFILE.with_overrides(rounds=2, max_looks=3)
    use_fake_engines(monkeypatch)
    with configurations(tmp_path, "0001-slow-4.py", prof) as configs:
        configs.start()
        result = looks.run(configs, prof, reporter)
    assert result.looks == 3
    assert len(result.samples["candidate"]["prefill_b1"]) == 6
    assert len(result.samples["reference"]["prefill_b1"]) == 2  # the first look only
    assert sum("look 3 of 3" in x for x in reporter.lines) == 1


def test_the_candidate_that_is_the_current_baseline_is_not_confirmed(tmp_path, monkeypatch,
                                                                     reporter):
    use_fake_engines(monkeypatch)
    prof = PROFILE
    with Configurations(prof, {"candidate": [], "current": [], "reference": []}) as configs:
        configs.start()
        result = looks.run(configs, prof, reporter)
    assert result.same_as_current and result.looks == 1 and result.confirmation == {}


@pytest.mark.parametrize("kind", ["engines", "servers"])
def test_a_confirmation_restarts_exactly_the_labels_it_confirms(kind, tmp_path, monkeypatch):
    """Both kinds of configurations take the labels to restart (the serving set's
    servers used to restart everything, and took no labels)."""
    from patchgate.latency.serving.configurations import ServingConfigurations

    calls = []

    class Recording(Configurations if kind == "engines" else ServingConfigurations):
        def start(self, labels=None):
            calls.append(labels)

    prof = PROFILE.with_overrides(confirm=True)
    scen = looks.Schedule.static(prof).scenarios
    same = {s.name: [1.0 + 0.001 * i for i in range(8)] for s in scen}
    slow = {s.name: [1.3 + 0.001 * i for i in range(8)] for s in scen}
    result = looks.judged({"candidate": slow, "current": same, "reference": same}, scen, prof)
    patches = discover(write_patch(tmp_path / "p", "0001-slow-30.py"))
    configs = Recording(prof, {"candidate": patches, "current": [], "reference": []})
    monkeypatch.setattr(configs, "by_name", lambda labels=None: {})
    looks._confirm(configs, prof, result, ["current"], FakeReporter(),
                   timer=lambda engines, scenarios, rounds, bar: {
                       "candidate": {s.name: [1.3] * 8 for s in scenarios},
                       "current+reference": {s.name: [1.0] * 8 for s in scenarios}})
    assert calls == [("candidate", "current")]


class FakeReporter:
    def say(self, text):
        pass

    def phase(self, key, text=None):
        pass

    def progress(self, total, desc):
        from patchgate.report.console import Silent

        return Silent(total)


def test_after_a_slower_score_the_fresh_processes_can_name_the_scenarios():
    """First processes, 8 rounds: the pooled score slower, no scenario decidable alone.
    The fresh processes test every item; a scenario they find slower counts (the score
    in the first, it in the fresh ones), one they do not stays as it was."""
    prof = PROFILE.with_overrides(rounds=8)
    scen = looks.Schedule.static(prof).scenarios
    base = {s.name: [1.0 + 0.001 * i for i in range(8)] for s in scen}
    slow = {n: [x * 1.3 for x in xs] for n, xs in base.items()}
    first = looks.judged({"candidate": slow, "current": base, "reference": base}, scen, prof)
    assert first.decisions["current"]["score"].outcome == "slower"
    assert first.decisions["current"]["decode_b1"].outcome == "undecided"
    base12 = {s.name: [1.0 + 0.001 * i for i in range(12)] for s in scen}
    fresh = dict(base12, decode_b1=[x * 1.3 for x in base12["decode_b1"]])
    again = looks.judged({"candidate": fresh, "current": base12, "reference": base12}, scen,
                         prof.with_overrides(rounds=12))
    first.confirmation = again.decisions
    assert again.decisions["current"]["decode_b1"].outcome == "slower"
    assert first.final("current", "decode_b1") == "slower"
    assert first.final("current", "prefill_b1") == "undecided"
    assert not first.unconfirmed("current", "decode_b1")


def test_the_confirmation_spends_its_own_budget(tmp_path, monkeypatch, reporter):
    """confirm_rounds and confirm_looks: the fresh processes replicate the finding in
    one look of 6 rounds, each test at the whole alpha of the one comparison flagged
    (0.05 / 1 / 1), where the first processes tested at 0.05 / 3 looks."""
    prof = PROFILE.with_overrides(confirm_rounds=6, confirm_looks=1)
    use_fake_engines(monkeypatch)
    with configurations(tmp_path, "0001-slow-20.py", prof) as configs:
        configs.start()
        result = looks.run(configs, prof, reporter)
    assert result.final("current", "score") == "slower"
    assert result.confirm_looks == 1 and result.confirm_rounds == 6
    assert result.confirm_alpha == pytest.approx(0.05)
    assert result.alpha_look == pytest.approx(0.05 / 3)
    assert {len(v) for v in result.confirm_samples["candidate"].values()} == {6}
    assert {len(v) for v in result.samples["candidate"].values()} == {8}
    assert result.confirmation["current"]["score"].alpha == pytest.approx(0.05)


def test_a_confirmation_too_short_to_confirm_is_lengthened_and_says_so(
        tmp_path, monkeypatch, reporter):
    """2 rounds could never be significant at 0.05 / 3 (the smallest p is 2^-2): the
    slowdown would pass unconfirmed. The budget takes the fewest that can (7) and a note
    names the key; 7 rounds over two configurations are run as 8 (balanced orders)."""
    prof = PROFILE.with_overrides(confirm_rounds=2)
    use_fake_engines(monkeypatch)
    with configurations(tmp_path, "0001-slow-20.py", prof) as configs:
        configs.start()
        result = looks.run(configs, prof, reporter)
    assert result.final("current", "score") == "slower"
    assert result.confirm_rounds == 7
    assert any("7 rounds a look, not 2 (confirm_rounds)" in n for n in result.notes)


@pytest.mark.parametrize("level, items, expected", [
    (0.05, ["prefill_b1", "score"], 6),       # the score's half of 0.05: 2^-6 <= 0.025
    (0.05 / 3, ["prefill_b1", "score"], 7),   # one comparison, three looks
    (0.05 / 6, ["prefill_b1", "score"], 8),   # two comparisons, three looks
    (0.05, ["prefill_b1", "decode_b1", "decode_b8"], 6),  # a third of 0.05: 2^-6 <= 0.0167
])
def test_fewest_rounds_is_where_the_smallest_signed_rank_p_first_reaches_the_share(
        level, items, expected):
    from patchgate import stats
    from patchgate.latency import decide

    n = decide.fewest_rounds(level, items)
    share = decide.SCORE_SHARE if "score" in items else 1 / len(items)
    assert n == expected
    assert stats.signed_rank(list(range(1, n + 1))).p_greater <= share * level
    assert stats.signed_rank(list(range(1, n))).p_greater > share * level


# ------------------------------------------------- confirm_strongest: one scenario first

STRONGEST = PROFILE.with_overrides(confirm_strongest=True, confirm_looks=1)


def test_confirm_strongest_measures_one_scenario_and_the_rejection_stands_on_it(
        tmp_path, monkeypatch, reporter):
    """A uniform 20 % slowdown: the first processes find the pooled score slower; the
    fresh ones measure one scenario alone, 6 rounds at 0.05 / 2 (2^-6 <= 0.025), find it
    slower, and measure nothing else. The score stays slower (the first processes'
    finding, confirmed through that scenario); the other scenarios keep their outcome."""
    built = use_fake_engines(monkeypatch)
    with configurations(tmp_path, "0001-slow-20.py", STRONGEST) as configs:
        configs.start()
        result = looks.run(configs, STRONGEST, reporter)
    a = result.alone
    assert a is not None and a.confirmed and a.rounds == 6
    assert a.alpha == pytest.approx(0.025) and a.decision.alpha == pytest.approx(0.025)
    assert result.confirmation == {} and result.confirm_samples == {}
    assert set(a.samples["candidate"]) == {a.item} and len(a.samples["candidate"][a.item]) == 6
    assert result.final("current", "score") == "slower"
    assert result.final("current", a.item) == "slower"
    others = [s.name for s in result.scenarios if s.name != a.item]
    assert all(result.final("current", n) == "undecided" for n in others)
    assert result.not_remeasured() == ["score"]
    assert (result.confirm_looks, result.confirm_rounds) == (1, 6)
    # the fresh candidate timed one scenario: 1 warm-up + 6 rounds (the first: six)
    first_cand, fresh_cand = built[0], built[2]
    assert fresh_cand.label == "candidate" and fresh_cand.calls == 7
    assert first_cand.calls > 6 * fresh_cand.calls
    assert any(f"{a.item} alone first" in x for x in reporter.lines)


def test_confirm_strongest_reaches_the_verdict_as_a_confirmed_rejection(tmp_path, monkeypatch,
                                                                       reporter):
    from patchgate.verdict import judge

    use_fake_engines(monkeypatch)
    with configurations(tmp_path, "0001-slow-20.py", STRONGEST) as configs:
        configs.start()
        result = looks.run(configs, STRONGEST, reporter)
    rows = judge.rows(result)
    block = judge.latency_block(result, STRONGEST)
    reasons = judge.latency_reasons(rows, block, "current baseline")
    x = result.alone.item
    (row,) = [r for r in rows if r["regressed"]]
    assert row["name"] == x and row["confirmation"]["outcome"] == "slower"
    assert row["confirmation"]["rounds"] == 6
    assert block["score"]["outcome"] == "slower" and block["score"]["confirmation"] is None
    assert any(r.startswith(f"{x} is ") and "again in fresh engine processes, alone: " in r
               and r.endswith("the rejection stands on it") for r in reasons)
    assert block["alone"]["item"] == x and block["alone"]["outcome"] == "slower"
    assert any(r.startswith("the score is") and "; not re-measured in fresh processes" in r
               for r in reasons)
    (note,) = [n for n in judge.latency_notes(result) if "alone first" in n]
    assert "the rejection stands on it" in note and "score slower in the first" in note


def _recomputed(samples: dict, a: float, test: str = "signed-rank"):
    from patchgate.latency import decide
    from patchgate.stats import paired_t

    diffs = decide.differences({"x": samples["candidate"]}, {"x": samples["current"]})["x"]
    return paired_t.compare(diffs, a, test)


def test_the_verdict_carries_the_seconds_its_rows_were_decided_on(tmp_path, monkeypatch,
                                                                 reporter):
    """Every row's ``samples_s`` (candidate and current, paired by round) and the fresh
    processes' (``confirmation.samples_s``) give back the row's ratio, interval and p
    with the statistics alone: the verdict file is enough to check it."""
    from patchgate.verdict import judge

    use_fake_engines(monkeypatch)
    with configurations(tmp_path, "0001-slow-20.py", STRONGEST) as configs:
        configs.start()
        result = looks.run(configs, STRONGEST, reporter)
    rows = judge.rows(result)
    for row in rows:
        got = row["samples_s"]
        assert len(got["candidate"]) == len(got["current"]) == row["rounds"]
        c = _recomputed(got, row["alpha"])
        assert (c.ratio, c.ci_low, c.ci_high, c.p_slower) == pytest.approx(
            (row["ratio"], row["ci_low"], row["ci_high"], row["p_value"]))
    (row,) = [r for r in rows if r["confirmation"]]
    again = row["confirmation"]
    assert len(again["samples_s"]["candidate"]) == again["rounds"] == 6
    c = _recomputed(again["samples_s"], result.alone.alpha)
    assert (c.ratio, c.p_slower) == pytest.approx((again["ratio"], again["p_value"]))
    assert judge.latency_block(result, STRONGEST)["score"]["confirmation"] is None


def test_confirm_strongest_measures_every_item_when_the_one_is_not_slower_again(
        tmp_path, monkeypatch, reporter):
    """The first candidate process alone is 20 % slower (a process effect): the scenario
    measured alone is not slower in fresh processes, so every item found slower is
    measured there, at the other half of the level, and the score is not slower."""
    from patchgate.verdict import judge

    built = use_fake_engines(monkeypatch)
    with configurations(tmp_path, "0001-once-20.py", STRONGEST) as configs:
        configs.start()
        result = looks.run(configs, STRONGEST, reporter)
    assert result.decisions["current"]["score"].outcome == "slower"  # the first processes
    a = result.alone
    assert a is not None and not a.confirmed
    assert result.confirm_alpha == pytest.approx(0.025)
    assert set(result.confirmation["current"]) == {*(s.name for s in result.scenarios),
                                                   "score"}
    assert result.final("current", "score") != "slower"
    assert not any(result.final("current", s.name) == "slower" for s in result.scenarios)
    assert result.again("current", a.item) is result.confirmation["current"][a.item]
    assert result.not_remeasured() == []
    assert [e.label for e in built] == ["candidate", "current", "candidate", "current"]
    assert any("then every item found slower" in n for n in judge.latency_notes(result))


def test_confirm_strongest_is_left_out_where_it_cannot_apply(tmp_path, monkeypatch, reporter):
    """Off by default: the fresh processes test every item, as before."""
    use_fake_engines(monkeypatch)
    prof = PROFILE.with_overrides(confirm_looks=1)
    with configurations(tmp_path, "0001-slow-20.py", prof) as configs:
        configs.start()
        result = looks.run(configs, prof, reporter)
    assert result.alone is None and result.confirm_alpha == pytest.approx(0.05)
    assert "score" in result.confirmation["current"]


def _decision(name, ratio, lo, outcome):
    from patchgate import stats
    from patchgate.latency import decide

    cmp = stats.PairedComparison(ratio=ratio, ci_low=lo, ci_high=ratio * 1.1, p_slower=0.01,
                                 p_faster=0.99, n=8, a=0.01, detectable=0.01)
    return decide.Decision(name, cmp, outcome, 1, 0.01)


def test_strongest_is_the_flagged_scenario_whose_interval_stands_out_most():
    from patchgate.latency.budgets import strongest

    d = {"decode_b1": _decision("decode_b1", 1.20, 1.10, "slower"),
         "decode_b8": _decision("decode_b8", 1.30, 1.15, "undecided"),
         "prefill_b1": _decision("prefill_b1", 1.25, 1.12, "slower"),
         "score": _decision("score", 1.1, 1.02, "undecided")}
    assert strongest(d, 0.05) == "prefill_b1"  # decode_b8 was not found slower
    # a slower score carries every scenario: decode_b8 stands out most
    d["score"] = _decision("score", 1.1, 1.02, "slower")
    assert strongest(d, 0.05) == "decode_b8"
    # none beyond the threshold: nothing to measure alone
    assert strongest(d, 0.35) is None
