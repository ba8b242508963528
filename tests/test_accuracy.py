"""The accuracy guard on lm-eval's real output (no model): a scripted engine answers the
fixture tasks (tests/fixtures/tasks) through EngineLM and real lm-eval; the default
model's tokenizer turns text into ids. What is checked: generation batches never mix
two tasks' stop sequences, samples are paired by task, filter and item, any per-item
metric can be the primary one, flipped items are listed, old baselines still pair."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchgate.errors import PatchgateError
from patchgate.guard import lmeval as acc
from patchgate.guard import results as acc_results
from patchgate.guard.decision import AccuracyDecision
from patchgate.guard.lm_model import lm_class
from patchgate.profile import get_profile
from patchgate.verdict.accuracy import accuracy_block

ROOT = Path(__file__).resolve().parent.parent
TASKS = Path(__file__).parent / "fixtures" / "tasks"


def rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (TASKS / f"{name}.jsonl").read_text().splitlines()]


def answers(wrong: set[str] = frozenset()) -> dict[str, str]:
    """What the scripted model says after each prompt: the right answer, then more text
    (so stop sequences matter); items in ``wrong`` get a wrong answer."""
    out = {}
    for r in rows("addition"):
        ans = "1 2 3 4" if r["id"] in wrong else r["answer"]
        out[r["prompt"]] = f"{ans} . sum : 1 2"
    for r in rows("var_track"):
        ans = "w = 1 2 3" if r["id"] in wrong else r["answer"]
        out[r["prompt"]] = f"{ans} . question : c"
    for r in rows("fact_mc"):
        out[r["prompt"]] = r["choices"][(r["label"] + (r["id"] in wrong)) % 4]
    return out


class ScriptedEngine:
    """Greedy "model" with a fixed answer per prompt; like a real engine, a row ends
    after a token in ``stop_ids`` or at ``max_new_tokens``."""

    def __init__(self, tok, said: dict[str, str]):
        self.tok, self.said, self.calls = tok, said, []

    def _ids(self, text: str) -> list[int]:
        return self.tok(text, add_special_tokens=False)["input_ids"]

    def generate_until(self, prompts, max_new_tokens, stop_ids):
        self.calls.append((len(prompts), max_new_tokens, stop_ids))
        out = []
        for p in prompts:
            row = []
            for t in self._ids(self.said[self.tok.decode(p)])[:max_new_tokens]:
                row.append(t)
                if t in stop_ids:
                    break
            out.append(row)
        return out

    def loglikelihood(self, requests):
        out = []
        for ctx, cont in requests:
            right = self.tok.decode(cont).strip() == self.said[self.tok.decode(ctx)]
            out.append((0.0 if right else -5.0 - len(cont), right))
        return out


def run(tok, said, tasks=("fx_suite",), primary=None, batch_size=64):
    engine = ScriptedEngine(tok, said)
    spec = acc.Tasks(tuple(tasks), str(TASKS), batch_size, primary or {})
    return acc.run_guard_tasks(engine, tok, spec), engine


@pytest.fixture(scope="module")
def right(tok):
    return run(tok, answers())


def test_stop_sequences_never_leak_between_tasks(tok, right):
    result, engine = right
    dot, eq = (tok.convert_tokens_to_ids(t) for t in (".", "="))
    # batches per generation setting (split by prompt length): fx_gsm (newline: no token
    # holds it), fx_chain ("."), fx_hop ("="); each with its own stops (and EOS) only
    stops = sorted({(max_new, tuple(sorted(s))) for _, max_new, s in engine.calls})
    assert stops == [(4, tuple(sorted({eq, tok.eos_token_id}))),
                     (10, (tok.eos_token_id,)),
                     (16, tuple(sorted({dot, tok.eos_token_id})))]
    # the chain answer holds fx_hop's "=": cut only at its own "."
    assert result["tasks"]["fx_chain"]["value"] == 1.0
    assert result["tasks"]["fx_chain"]["samples"][0]["output"].strip() == "w = m = r = 6 6 5"
    assert result["tasks"]["fx_hop"]["value"] == 1.0


def test_one_sample_per_item_on_the_first_filter_and_metric(right):
    result, _ = right
    gsm = result["tasks"]["fx_gsm"]
    assert (gsm["metric"], gsm["filter"]) == ("exact_match", "strict-match")
    assert len(gsm["samples"]) == 16 and len({s["id"] for s in gsm["samples"]}) == 16
    # strict-match wants four digits: the 3- and 5-digit sums fail it, not flexible-extract
    n4 = sum(len(r["answer"].split()) == 4 for r in rows("addition"))
    assert gsm["value"] == n4 / 16 < 1.0
    assert gsm["others"] == [{"metric": "exact_match", "filter": "flexible-extract",
                              "value": 1.0}]
    first = gsm["samples"][0]
    assert first["id"] == "addition-0000" and first["output"].startswith("8 1 7 2 . sum")
    assert first["answer"] == "8 1 7 2" and first["target"] == "8 1 7 2"
    assert first["prompt"] == rows("addition")[0]["prompt"]
    arc = result["tasks"]["fx_arc"]
    assert (arc["metric"], arc["filter"], arc["value"]) == ("acc", "none", 1.0)
    assert arc["others"][0]["metric"] == "acc_norm"
    assert arc["samples"][0]["output"] == arc["samples"][0]["target"] == "fatoba"


def test_the_primary_metric_and_filter_come_from_the_profile(tok):
    result, _ = run(tok, answers(), primary={"fx_gsm": {"filter": "flexible-extract"},
                                             "fx_arc": {"metric": "acc_norm"}})
    assert result["tasks"]["fx_gsm"]["filter"] == "flexible-extract"
    assert result["tasks"]["fx_gsm"]["value"] == 1.0
    assert result["tasks"]["fx_arc"]["metric"] == "acc_norm"
    # a group's setting applies to its tasks
    result, _ = run(tok, answers(), primary={"fx_suite": {"filter": "flexible-extract"},
                                             "fx_arc": {"filter": "none"}}, tasks=("fx_suite",))
    assert result["tasks"]["fx_gsm"]["filter"] == "flexible-extract"
    with pytest.raises(PatchgateError, match="task fx_gsm has no filter 'loose'") as e:
        run(tok, answers(), primary={"fx_gsm": {"filter": "loose"}})
    assert "strict-match, flexible-extract" in e.value.hint
    with pytest.raises(PatchgateError, match="task fx_arc has no metric 'f1'") as e:
        run(tok, answers(), primary={"fx_arc": {"metric": "f1"}})
    assert "acc, acc_norm" in e.value.hint


def test_a_metric_that_is_not_a_number_per_item_is_refused():
    sample = {"doc_id": 0, "doc": {}, "filter": "none", "metrics": ["f1"],
              "f1": ("gold", "pred"), "arguments": [("q", {"until": ["."]})],
              "resps": [["x"]], "filtered_resps": ["x"], "target": "gold"}
    res = {"samples": {"squadish": [sample]},
           "configs": {"squadish": {"metric_list": [{"metric": "f1"}]}}}
    with pytest.raises(PatchgateError, match="metric f1 of task squadish is not a number"):
        acc.collect(res)



def test_lower_is_better_metrics_are_never_read_as_accuracy():
    """A ratio of error rates would pass a change that doubles them: by default the first
    higher-is-better metric is primary; naming a lower-is-better one is an error."""
    def sample(i, ter, ok):
        return {"doc_id": i, "doc": {}, "filter": "none", "metrics": ["ter", "exact_match"],
                "ter": ter, "exact_match": ok, "arguments": [("q", {"until": ["."]})],
                "resps": [["x"]], "filtered_resps": ["x"], "target": "y"}
    res = {"samples": {"mt": [sample(0, 0.5, 1.0), sample(1, 0.9, 0.0)]},
           "configs": {"mt": {"metric_list": [
               {"metric": "ter", "higher_is_better": False},
               {"metric": "exact_match", "higher_is_better": True}]}}}
    out = acc.collect(res)
    assert out["tasks"]["mt"]["metric"] == "exact_match" and out["tasks"]["mt"]["value"] == 0.5
    with pytest.raises(PatchgateError, match="metric ter of task mt is lower-is-better") as e:
        acc.collect(res, primary={"mt": {"metric": "ter"}})
    assert "metric = exact_match" in e.value.hint
    # lm-eval's own higher_is_better table counts too (a metric_list without the key)
    res["configs"]["mt"]["metric_list"] = [{"metric": "ter"}, {"metric": "exact_match"}]
    res["higher_is_better"] = {"mt": {"ter": False, "exact_match": True}}
    assert acc.collect(res)["tasks"]["mt"]["metric"] == "exact_match"

def test_pairing_by_task_filter_and_item_and_the_flipped_items(tok, right):
    ref, _ = right
    cand, _ = run(tok, answers(wrong={"addition-0000", "var_track-0003", "fact_mc-0002"}))
    r, c = acc_results.paired_scores(ref, cand)
    assert len(r) == len(c) == 4 * 16
    flips = acc_results.flips(ref, cand)
    assert [(f["task"], f["id"], f["direction"]) for f in flips] == [
        ("fx_arc", "fact_mc-0002", "right->wrong"),
        ("fx_chain", "var_track-0003", "right->wrong"),
        ("fx_gsm", "addition-0000", "right->wrong"),
        ("fx_hop", "var_track-0003", "right->wrong")]  # "w" is not its first hop "t"
    gsm = flips[2]
    assert (gsm["reference_output"], gsm["candidate_output"], gsm["target"]) == \
        ("8 1 7 2", "1 2 3 4", "8 1 7 2")
    assert gsm["candidate_generation"].startswith("1 2 3 4 . sum")
    assert gsm["prompt"] == rows("addition")[0]["prompt"]
    block = accuracy_block(r, c, ref, cand, get_profile("default"),
                           AccuracyDecision.full_set(r, c, 0.99), flips=flips)
    assert block["flips_total"] == 4 and block["flipped_to_wrong"] == 4
    assert block["per_task"]["fx_gsm"]["filter"] == "strict-match"
    assert block["per_task"]["fx_gsm"]["others"][0]["candidate"] == 15 / 16
    # the same task judged on another filter is not paired with it
    other, _ = run(tok, answers(), primary={"fx_gsm": {"filter": "flexible-extract"}})
    with pytest.raises(PatchgateError, match="strict-match in the reference but on "
                       "exact_match/flexible-extract"):
        acc_results.paired_scores(ref, other)
    assert acc_results.differences(ref, other) == [
        "fx_gsm: stored exact_match/strict-match, now exact_match/flexible-extract"]
    assert acc_results.differences(ref, cand) == []


def test_stored_results_drop_prompts_and_old_baselines_still_pair(right):
    ref, _ = right
    kept = acc_results.stored(ref)
    assert all("prompt" not in s for t in kept["tasks"].values() for s in t["samples"])
    assert kept["tasks"]["fx_gsm"]["samples"][0]["output"].startswith("8 1 7 2")
    assert "prompt" in ref["tasks"]["fx_gsm"]["samples"][0]  # the original is untouched
    # a baseline stored before filters were recorded: metric, id and score only
    old = {"tasks": {"fx_chain": {"metric": "exact_match", "value": 1.0,
                                  "samples": [{"id": s["id"], "score": s["score"]}
                                              for s in ref["tasks"]["fx_chain"]["samples"]]}},
           "mean": 1.0}
    new = {"tasks": {"fx_chain": ref["tasks"]["fx_chain"]}, "mean": 1.0}
    assert acc_results.paired_scores(old, new) == ([1.0] * 16, [1.0] * 16)
    assert acc_results.differences(old, new) == []


def test_stored_baselines_with_samples_load(tmp_path, right):
    from patchgate.store import baselines

    ref, _ = right
    env = {"python": "3"}
    envelope = baselines.make_envelope("p", "reference", env,
                                       {"accuracy": acc_results.stored(ref)})
    path = tmp_path / "p" / "reference.json"
    path.parent.mkdir()
    path.write_text(json.dumps(envelope))
    loaded = baselines.BaselineStore(tmp_path, "p").load("reference")
    assert loaded["accuracy"]["tasks"]["fx_gsm"]["filter"] == "strict-match"


def test_stop_ids_are_the_tokens_holding_a_stop_sequence(tok):
    lm = lm_class()(ScriptedEngine(tok, {}), tok)
    assert lm._stop_ids(["."]) == {tok.convert_tokens_to_ids("."), tok.eos_token_id}
    assert lm._stop_ids(["\n"]) == {tok.eos_token_id}


def test_reports_show_filters_other_metrics_and_the_first_flipped_items(tok, right):
    from patchgate.report.markdown import render_markdown
    from patchgate.report.render import render_terminal

    ref, _ = right
    wrong = {f"addition-{i:04d}" for i in range(7)} | {"fact_mc-0001"}
    cand, _ = run(tok, answers(wrong=wrong))
    r, c = acc_results.paired_scores(ref, cand)
    verdict = json.loads((Path(__file__).parent / "golden" / "verdict.json").read_text())
    verdict["accuracy"] = accuracy_block(r, c, ref, cand, get_profile("default"),
                                         AccuracyDecision.full_set(r, c, 0.99),
                                         flips=acc_results.flips(ref, cand))
    verdict["accuracy"]["flips_file"] = "v.flips.jsonl"
    text = render_terminal(verdict)
    assert "fx_gsm    exact_match / strict-match              0.875        0.500" in text
    assert "exact_match / flexible-extract (shown)" in text
    assert "acc_norm (shown)" in text
    # 7 items flip on the primary filter (flexible-extract's flips are not counted)
    assert "flipped items: 7 (the first 7 below; all in v.flips.jsonl)" in text
    # fx_arc's flip comes first (task order), with both choices and the target
    line = next(ln for ln in text.splitlines() if ln.startswith("fx_arc") and "fact_mc-0001"
                in ln)
    assert line.split() == ["fx_arc", "fact_mc-0001", "right->wrong", "tesobo", "gisipe",
                            "tesobo"]
    md = render_markdown(verdict)
    # folded under its summary line on GitHub
    assert "<summary>flipped items: 7 (the first 5 below; all in v.flips.jsonl)</summary>" \
        in md
    table = md.split("flipped items: 7")[1]
    assert table.count("right->wrong") == 5


def test_generation_settings_as_lm_eval_reads_them(tok):
    from patchgate.guard.lm_model import cut, group_key, max_gen_toks, stop_sequences

    assert max_gen_toks({"until": ["."]}) == 256  # lm-eval's default
    assert max_gen_toks({"max_new_tokens": 12}) == 12
    assert stop_sequences({"until": "\n\n"}) == ["\n\n"]
    assert group_key({"until": ["."], "max_gen_toks": 8}) == \
        group_key({"max_gen_toks": 8, "until": ["."]}) != group_key({"until": ["="]})
    assert cut("3 . 5 = x", ["="]) == "3 . 5 " and cut("3 . 5", [""]) == "3 . 5"
    lm = lm_class()(ScriptedEngine(tok, {}), tok)
    with pytest.raises(PatchgateError, match="tokenizer has no chat template"):
        lm.apply_chat_template([{"role": "user", "content": "x"}])
