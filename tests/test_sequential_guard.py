"""The sequential accuracy guard in the gate (patchgate.guard.sequential), on real
lm-eval and the fixture tasks, answered by the scripted engine of test_accuracy: the
items in blocks, prompts as a full run builds them, only chosen items reach the engine,
an early decision where the data allow and the exact full-set rule at the end."""

from __future__ import annotations

import pytest
from test_accuracy import TASKS, ScriptedEngine, answers, rows

from patchgate.guard import lmeval as acc
from patchgate.guard import sequential
from patchgate.profile import Sequential, get_profile
from patchgate.stats import sequential as S

SPEC = acc.Tasks(("fx_suite",), str(TASKS), 2)  # batches of 2: first look 8 items


def lm(tok, said):
    engine = ScriptedEngine(tok, said)
    return acc.make_lm(engine, tok, SPEC), engine


def prompts(engine) -> int:
    return len(engine.calls)


@pytest.fixture(autouse=True)
def schedule_only(monkeypatch):
    """Scripted engines answer in no time, so the guard would space its looks to the end
    (:func:`sequential.least_step`); here the looks follow the schedule alone."""
    monkeypatch.setattr(sequential, "ANSWERING_PER_OVERHEAD", 0)


def profile(block=8, delta=0.01):
    return get_profile("default").with_overrides(sequential=Sequential(block=block, delta=delta))


def test_the_looks_grow_by_a_factor_and_end_at_the_total():
    def looks(total, block, growth=1.25):
        return S.looks(total, S.SequentialSettings(block=block, growth=growth))
    assert looks(600, 16) == [16, 32, 48, 64, 80, 100, 125, 157, 197, 247, 309, 387, 484, 600]
    assert looks(600, 16, growth=1.5) == [16, 32, 48, 72, 108, 162, 243, 365, 548, 600]
    assert looks(10, 16) == [10]
    assert looks(48, 8, growth=1.5) == [8, 16, 24, 36, 48]
    assert looks(40, 16, growth=1) == [16, 32, 40]


def test_the_survey_answers_nothing_and_lists_every_item(tok):
    model, engine = lm(tok, answers())
    suite = sequential.survey(model, SPEC)
    assert prompts(engine) == 0
    assert suite.tasks == ("fx_arc", "fx_chain", "fx_gsm", "fx_hop")
    assert suite.sizes == [16, 16, 16, 16] and sum(len(i) for i in suite.ids) == 64


def test_a_clear_loss_is_rejected_before_the_end_on_full_run_prompts(tok):
    """A third of the items wrong: rejected on a share of them. Each evaluated item has
    the prompt and the score a full run gives it; no other item reached the engine."""
    wrong = {r["id"] for r in rows("addition")} | {r["id"] for r in rows("fact_mc")}
    cand, engine = lm(tok, answers(wrong))
    ref, _ = lm(tok, answers())
    found = sequential.until_decided(cand, ref, SPEC, profile(), limit=0.99)
    d = found.decision
    assert d.outcome == "reject" and d.fails and d.items < d.total == 64
    assert d.low < d.high < 0.99 and d.limit == 0.99
    assert found.candidate["partial"] == {"evaluated": d.items, "total": 64}
    full = acc.run_guard_tasks(ScriptedEngine(tok, answers(wrong)), tok, SPEC)
    for name, task in found.candidate["tasks"].items():
        whole = {s["id"]: s for s in full["tasks"][name]["samples"]}
        for s in task["samples"]:
            assert (s["prompt"], s["score"]) == (whole[s["id"]]["prompt"], whole[s["id"]]["score"])
    assert [i["id"] for t in found.reference["tasks"].values() for i in t["samples"]] == \
        [i["id"] for t in found.candidate["tasks"].values() for i in t["samples"]]


def test_no_change_passes_and_a_stored_reference_pairs_by_id(tok):
    """No change on 64 items: a pass needs nearly every item (the unseen ones could
    all be lost), so it runs to the end; paired with the stored reference's scores."""
    stored = acc.run_guard_tasks(ScriptedEngine(tok, answers()), tok, SPEC)
    cand, engine = lm(tok, answers())
    found = sequential.until_decided(cand, stored, SPEC, profile(), limit=0.99)
    assert found.decision.outcome == "pass" and found.standing.reference_exact
    assert found.reference["tasks"]["fx_gsm"]["samples"][0]["id"] == \
        found.candidate["tasks"]["fx_gsm"]["samples"][0]["id"]


def test_at_the_last_item_the_decision_is_the_full_set_rule(tok):
    """One item of 64 wrong: 98.4 % of the reference, a loss no early look can show at
    this size: the guard runs to the end and rejects, as the full-set rule does."""
    wrong = {rows("addition")[0]["id"]}
    cand, _ = lm(tok, answers(wrong))
    ref, _ = lm(tok, answers())
    found = sequential.until_decided(cand, ref, SPEC, profile(), limit=0.99)
    assert found.decision.items == 64 and found.decision.outcome == "reject"
    assert found.decision.why == "all items evaluated" and not found.decision.early
    assert "partial" not in found.candidate


@pytest.mark.parametrize("keep", [{"fx_gsm": {"addition-0001"}}, {}])
def test_subset_recomputes_values_and_marks_partial(tok, keep):
    full = acc.run_guard_tasks(ScriptedEngine(tok, answers()), tok, SPEC)
    part = sequential.subset(full, keep, 64)
    assert set(part["tasks"]) == set(keep)
    assert all("others" not in t for t in part["tasks"].values())
    assert part.get("partial", {}).get("evaluated", 0) == sum(len(v) for v in keep.values())


def test_a_look_waits_until_its_answering_outweighs_its_lm_eval_runs(monkeypatch):
    monkeypatch.setattr(sequential, "ANSWERING_PER_OVERHEAD", 4)
    points = S.looks(600, S.SequentialSettings(block=16, growth=1.25))
    assert sequential.next_look(points, 0, 1) == 16
    assert sequential.next_look(points, 16, 1) == 32
    assert sequential.next_look(points, 16, 100) == 125  # the first point 100 items on
    assert sequential.next_look(points, 500, 1000) == 600  # never past the end
    # 16 items took 2.2 s, of which 2 x 0.5 s were the two lm-eval runs' fixed cost:
    # 75 ms of answering an item, so the next look adds 4 x 1 s of it, 54 items
    per_item = sequential.answering_s(2.2, 16, 2, 0.5)
    assert per_item == pytest.approx(0.075)
    assert sequential.least_step(per_item, 2, 0.5) == 54
    # a real evaluation: seconds an item, a look's fixed cost is nothing
    assert sequential.least_step(sequential.answering_s(160.0, 16, 2, 0.5), 2, 0.5) == 1
    # a look that took less than its runs' fixed cost: answering looks free, the next
    # look waits as long as a look may (never a division by zero)
    assert sequential.answering_s(0.5, 16, 2, 0.5) == 0.0
    assert sequential.least_step(0.0, 2, 0.5) > 10**6


def test_batches_hold_requests_of_like_length():
    from patchgate.guard.lm_model import chunks

    order = list(range(7))
    assert chunks(order, [100, 90, 60, 49, 40, 30, 10], 16) == [[0, 1, 2], [3, 4, 5], [6]]
    assert chunks(order, [50] * 7, 3) == [[0, 1, 2], [3, 4, 5], [6]]
    assert chunks([], [], 4) == []
