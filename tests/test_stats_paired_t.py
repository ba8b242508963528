"""The paired t-test a profile may choose (``test = "t"``): Student's t against tabled
values, the comparison it gives, how a look decides with it, and the profile key."""

from __future__ import annotations

import math
import random

import pytest

from patchgate.errors import PatchgateError
from patchgate.latency import budgets, decide
from patchgate.profile import get_profile
from patchgate.stats import paired_t
from patchgate.stats.paired_t import compare, compare_t, incomplete_beta, t_quantile, t_sf

# Student's t quantiles from the printed tables (P(T <= t) = p)
TABLE = [(0.95, 1, 6.314), (0.975, 3, 3.182), (0.99, 5, 3.365), (0.995, 30, 2.750),
         (0.9999, 7, 7.063), (0.999, 2, 22.327)]


@pytest.mark.parametrize(("p", "df", "t"), TABLE)
def test_t_quantiles_match_the_tables(p, df, t):
    assert t_quantile(p, df) == pytest.approx(t, abs=1e-3)
    assert t_sf(t_quantile(p, df), df) == pytest.approx(1 - p, rel=1e-9)
    assert t_quantile(1 - p, df) == pytest.approx(-t, abs=1e-3)


def test_the_incomplete_beta_and_the_t_tail_at_known_points():
    assert incomplete_beta(0.3, 2, 3) == pytest.approx(0.3483, abs=1e-12)  # a polynomial
    assert incomplete_beta(0.5, 4.5, 4.5) == pytest.approx(0.5)  # symmetric
    assert t_sf(2.0, 10) == pytest.approx(0.036694, abs=1e-6)
    assert t_sf(0.0, 3) == pytest.approx(0.5)
    assert t_sf(-1.0, 4) == pytest.approx(1 - t_sf(1.0, 4))
    assert t_sf(1.0, 1) == pytest.approx(0.25)  # Cauchy: 1/2 - atan(1)/pi


def test_four_quiet_rounds_decide_a_slowdown_the_signed_rank_test_cannot():
    """5 % slower at 0.3 % noise: the t-test's p is tiny at 4 rounds; the signed-rank
    test's is 1/16 at best, above the look's level."""
    d = [math.log(1.05) + e for e in (0.003, -0.002, 0.001, -0.003)]
    t = compare(d, 0.0083, "t")
    rank = compare(d, 0.0083, "signed-rank")
    assert t.p_slower < 1e-4 < 0.0083 < rank.p_slower == pytest.approx(1 / 16)
    assert 1.04 < t.ci_low < t.ratio < t.ci_high < 1.06
    assert math.isinf(rank.ci_high)  # 4 rounds: no signed-rank bound at this level
    assert t.p_faster == pytest.approx(1 - t.p_slower)


def test_the_t_interval_is_mean_plus_minus_the_quantile_times_the_standard_error():
    d = [0.01, -0.02, 0.015, 0.005, 0.0]
    c = compare_t(d, 0.025)
    mean, sd = sum(d) / 5, math.sqrt(sum((x - 0.002) ** 2 for x in d) / 4)
    half = t_quantile(0.975, 4) * sd / math.sqrt(5)
    assert c.ratio == pytest.approx(math.exp(mean))
    assert (c.ci_low, c.ci_high) == pytest.approx((math.exp(mean - half), math.exp(mean + half)))
    assert c.n == 5 and c.a == 0.025


def test_too_few_or_identical_rounds():
    one = compare_t([0.1], 0.05)
    assert (one.p_slower, one.p_faster, one.ci_high) == (1.0, 1.0, math.inf)
    same = compare_t([0.02, 0.02, 0.02], 0.05)
    assert (same.p_slower, same.p_faster) == (0.0, 1.0)
    assert same.ci_low == same.ci_high == pytest.approx(math.exp(0.02))
    with pytest.raises(ValueError, match="unknown test 'z'"):
        compare([0.1, 0.2], 0.05, "z")


def test_under_no_change_the_t_test_keeps_its_level_on_heavy_tails():
    """Symmetric heavy-tailed log ratios (a call in ten 3x as noisy, as on a shared
    machine), 4 rounds, 20,000 draws: the share found slower at 0.01 stays at or under
    0.01 (within its sampling error). A check of the property the docs rely on, not
    the gate's error rate (that is `patchgate calibrate`)."""
    rng = random.Random(7)
    hits = 0
    n = 20_000
    for _ in range(n):
        d = [rng.gauss(0, 0.01 * (3 if rng.random() < 0.1 else 1)) for _ in range(4)]
        hits += compare_t(d, 0.01).p_slower <= 0.01
    assert hits / n <= 0.01 + 3 * math.sqrt(0.01 * 0.99 / n)


def test_a_look_with_the_t_test_decides_what_the_signed_rank_look_leaves_open():
    rng = random.Random(3)
    weights = {"prefill_b1": 0.5, "decode_b1": 0.5}
    diffs = {k: [math.log(1.05) + rng.gauss(0, 0.003) for _ in range(4)] for k in weights}
    t = decide.look(diffs, weights, decide.Level(0.02, 0.05 / 3, "t"), 1)
    rank = decide.look(diffs, weights, decide.Level(0.02, 0.05 / 3), 1)
    assert {d.outcome for d in t.values()} == {"slower"}
    assert {d.outcome for d in rank.values()} == {"undecided"}


def test_rounds_and_notes_follow_the_test():
    assert decide.rounds_for(0.0083, "t") == paired_t.T_MIN_ROUNDS == 3
    assert decide.rounds_for(0.0083) == 7  # 2^-7 <= 0.0083
    assert decide.fewest_rounds(0.01, ["score", "decode_b1"], "t") == 3
    assert budgets.power_notes(4, 0.05 / 3, 6, "t") == []
    assert budgets.power_notes(4, 0.05 / 3, 6)  # signed-rank: a scenario alone cannot
    prof = get_profile("default").with_overrides(test="t", confirm_rounds=2)
    budget = budgets.confirm_budget(prof, {"current": ["score", "decode_b1"]})
    assert budget.rounds == 3 and "not 2" in budget.note
    assert budgets.alone_budget(prof).rounds == 3


def test_the_profile_key_takes_the_two_tests_and_names_any_other(tmp_path):
    from patchgate.profile import load as profiles

    assert get_profile("default").test == "signed-rank"
    path = tmp_path / "p.toml"
    text = ('description = "x"\nmodel = "models/default"\nengine = "transformers"\n'
            'test = "{}"\n[lengths]\nprefill_input = 8\nprefill_output = 1\n'
            'decode_input = 4\ndecode_output = 4\n')
    path.write_text(text.format("t"))
    assert profiles.get_profile(str(path)).test == "t"
    path.write_text(text.format("welch"))
    with pytest.raises(PatchgateError, match=r"p\.toml.*test = 'welch' is not allowed"):
        profiles.get_profile(str(path))


def test_the_report_legend_names_the_test_the_run_used():
    from patchgate.report.render import LEGEND, legend

    assert legend({"latency": {"test": "signed-rank"}}) == legend({}) == LEGEND
    t = legend({"latency": {"test": "t"}})
    assert "paired t-test's p-value" in t and "the mean log ratio" in t
    assert "signed-rank" not in t and "Hodges-Lehmann" not in t
