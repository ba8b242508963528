"""The embedded default model and its task suite (models/default, guards/tasks)."""

from __future__ import annotations

import hashlib
import json
import random
import re
from pathlib import Path

import pytest

from guards import build_tasks
from models import synthtasks as st
from models import train_default

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "models" / "default"


def card_checksums() -> dict[str, str]:
    text = (MODEL / "README.md").read_text()
    rows = re.findall(r"^\|\s*`([^`]+)`\s*\|\s*`([0-9a-f]{64})`\s*\|", text, flags=re.M)
    return dict(rows)


def test_checksums_match_the_card():
    sums = card_checksums()
    assert {"model.safetensors", "config.json", "tokenizer.json",
            "modeling_minicpm.py", "configuration_minicpm.py"} <= set(sums)
    for name, digest in sums.items():
        assert hashlib.sha256((MODEL / name).read_bytes()).hexdigest() == digest, name


def test_model_size_and_context():
    total = sum(p.stat().st_size for p in MODEL.iterdir() if p.is_file())
    assert total <= 20 * 2**20
    cfg = json.loads((MODEL / "config.json").read_text())
    assert cfg["model_type"] == "minicpm"
    assert cfg["architectures"] == ["MiniCPMForCausalLM"]
    assert cfg["max_position_embeddings"] >= 2048
    assert cfg["hidden_size"] // cfg["num_attention_heads"] in (64, 128)
    for key in ("scale_emb", "scale_depth", "dim_model_base"):
        assert key in cfg


@pytest.fixture(scope="module")
def model_and_tokenizer():
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(MODEL, trust_remote_code=True,
                                                 dtype=torch.float32)
    return model.eval(), AutoTokenizer.from_pretrained(MODEL)


def test_model_loads_and_answers_eval_items(model_and_tokenizer):
    import torch

    model, tok = model_and_tokenizer
    items = [st.make_eval_items(t, 3)[0] for t in ("addition", "var_track", "needle")]
    right = 0
    for it in items:
        enc = tok(it["prompt"], return_tensors="pt")
        with torch.no_grad():
            out = model.generate(**enc, max_new_tokens=6, do_sample=False)
        text = tok.decode(out[0, enc["input_ids"].shape[1]:]).split(".")[0].strip()
        right += text == it["answer"]
    assert right >= 2  # a trained model, not random weights


def test_batched_left_padded_generation_matches_single(model_and_tokenizer):
    import torch

    model, tok = model_and_tokenizer
    prompts = [it["prompt"] for it in st.make_eval_items("addition", 4)]
    prompts[1] = st.make_eval_items("var_track", 1)[0]["prompt"]  # a longer one: padding
    singles = []
    for p in prompts:
        enc = tok(p, return_tensors="pt")
        with torch.no_grad():
            o = model.generate(**enc, max_new_tokens=5, do_sample=False)
        singles.append(o[0, enc["input_ids"].shape[1]:].tolist())
    tok.padding_side = "left"
    enc = tok(prompts, return_tensors="pt", padding=True)
    with torch.no_grad():
        o = model.generate(**enc, max_new_tokens=5, do_sample=False)
    assert [row.tolist() for row in o[:, enc["input_ids"].shape[1]:]] == singles


def test_tokenizer_round_trips_task_text():
    tok = st.build_tokenizer()
    for task in st.TASKS:
        item = st.make_eval_items(task, 2)[1]
        text, _ = st.training_text(item)
        ids = tok.encode(text).ids
        assert 3 not in ids  # no <unk>
        assert tok.decode(ids) == text


def test_generator_is_deterministic():
    for task in st.TASKS:
        assert st.make_eval_items(task, 5) == st.make_eval_items(task, 5)
        a = st.sample(task, random.Random(7))
        b = st.sample(task, random.Random(7))
        assert a == b
    assert st.make_eval_items("needle", 3, seed=1) != st.make_eval_items("needle", 3, seed=2)


def test_copy_task_is_training_only_and_deterministic():
    assert "copy" not in st.TASKS and "copy" in st.AUXILIARY
    a = st.sample("copy", random.Random(3))
    assert a == st.sample("copy", random.Random(3))
    listed = a["prompt"].split(" question :")[0].split()[2:]
    assert a["prompt"].startswith("code : ") and a["answer"].split() == listed
    lo, hi = st.TRAIN_DIFFICULTY.copy_words
    assert lo <= len(listed) <= hi
    text, spans = st.training_text(a)
    tok = st.build_tokenizer()
    assert tok.decode(tok.encode(text).ids) == text
    (start, end), = spans
    assert text.split()[start:end] == listed + ["."]
    with pytest.raises(KeyError, match="unknown task"):
        st.sample("nope", random.Random(0))


def test_training_weights_take_auxiliary_tasks_and_refuse_unknown_ones():
    w = train_default.parse_weights("copy=0.1,needle=0.5")
    assert w["copy"] == 0.1 and w["needle"] == 0.5
    assert w["addition"] == train_default.TASK_WEIGHTS["addition"]
    assert train_default.parse_weights(None) == train_default.TASK_WEIGHTS
    for bad in ("cpy=0.1", "needle", "needle=x", "needle=-1"):
        with pytest.raises(ValueError, match="--weights"):
            train_default.parse_weights(bad)


def test_lead_takes_one_task_for_a_fraction_and_refuses_bad_input():
    assert train_default.parse_lead("copy=0.1") == ("copy", 0.1)
    assert train_default.parse_lead(None) is None
    for bad in ("copy", "copy=1.5", "cpy=0.1", "copy=x", "copy=-0.1"):
        with pytest.raises(ValueError, match="--lead"):
            train_default.parse_lead(bad)
    stream = train_default.TaskStream(1, 512, 10**9, set(), 48, {"addition": 1.0, "copy": 0.0},
                                      train_default.Clock(3600), ("copy", 0.5))
    vocab = st.vocabulary()
    ids, _ = next(iter(stream))
    assert vocab[ids[0, 0]] == "code"  # the lead task while progress < 0.5


def test_needle_curriculum_starts_with_one_short_needle():
    cur = st.Curriculum(start=48, ramp=0.5, progress=0.0)
    rng = random.Random(0)
    for _ in range(20):
        it = st.sample("needle", rng, curriculum=cur)
        assert it["prompt"].count(" the code for ") == 2  # one needle, one question
    cur.progress = 0.5
    assert cur.cap_keys(8) == 8 and cur.cap(1400) == 1400


def test_retrieval_prompts_end_with_the_key_that_precedes_the_answer():
    rng = random.Random(1)
    for task in ("needle", "fact_mc", "var_track"):
        for _ in range(20):
            it = st.sample(task, rng)
            words = it["prompt"].split()
            head, key = words[: words.index("question")], words[-2:]
            first = it["answer"].split()[0]
            # the last two prompt words are followed by the answer's first word in the context
            pairs = {tuple(head[i:i + 3]) for i in range(len(head) - 2)}
            assert (*key, first) in pairs, (task, it["prompt"][-60:], it["answer"])


def test_committed_task_data_matches_generator():
    assert build_tasks.main(["--check"]) == 0


def test_eval_items_have_the_stated_shape():
    for task in st.TASKS:
        rows = [json.loads(x) for x in (ROOT / "guards/tasks" / f"{task}.jsonl").open()]
        assert len(rows) >= 100
        assert len({r["prompt"] for r in rows}) == len(rows)
    tok = st.build_tokenizer()
    needle = [json.loads(x) for x in (ROOT / "guards/tasks/needle.jsonl").open()]
    lengths = [len(tok.encode(r["prompt"]).ids) for r in needle]
    assert max(lengths) <= 1500 and max(lengths) >= 1200


def test_training_never_draws_an_eval_item():
    exclude = train_default.eval_prompts()
    # every preset's items are excluded, so the evaluation preset can be chosen later
    assert len(exclude) > 100 * len(st.TASKS) * (len(st.EVAL_PRESETS) - 1)
    for task in st.TASKS:
        assert {it["prompt"] for it in st.make_eval_items(task)} <= exclude
        for preset in st.EVAL_PRESETS.values():
            assert {it["prompt"] for it in st.make_eval_items(task, difficulty=preset)} <= exclude
    rng = random.Random("train:1234:0")
    for task in st.TASKS:
        for _ in range(300):
            assert train_default.draw(rng, task, None, exclude)["prompt"] not in exclude


def test_exclusion_filter_skips_a_planted_item():
    planted = train_default.draw(random.Random(5), "addition", None, set())
    again = train_default.draw(random.Random(5), "addition", None, {planted["prompt"]})
    assert again["prompt"] != planted["prompt"]


def test_training_smoke_writes_a_complete_model_folder(tmp_path):
    """Two steps on CPU with the muP knobs set: a loadable folder and its log."""
    import torch
    from transformers import AutoModelForCausalLM

    out = tmp_path / "m"
    assert train_default.main(["--out", str(out), "--steps", "2", "--tokens-per-batch", "1024",
                               "--device", "cpu", "--workers", "0", "--eval-items", "1",
                               "--scale-emb", "1", "--init-std", "0.05"]) == 0
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["scale_emb"] == 1.0 and cfg["initializer_range"] == 0.05
    assert cfg["auto_map"]["AutoModelForCausalLM"] == "modeling_minicpm.MiniCPMForCausalLM"
    log = json.loads((out / "train_log.json").read_text())
    assert log["steps_done"] >= 1 and set(log["command_args"]) >= {"scale_emb", "init_std"}
    model = AutoModelForCausalLM.from_pretrained(out, trust_remote_code=True,
                                                 dtype=torch.float32)
    assert model.config.scale_emb == 1.0


def test_retrieval_probe_runs(capsys):
    from models import probe_retrieval

    assert probe_retrieval.main(["--minutes", "0.05", "--scale-emb", "1"]) == 0
    out = capsys.readouterr().out
    assert "small scale_emb=1.0" in out and "step 0 loss_ema" in out and "done:" in out
    assert probe_retrieval.main(["--task", "needle", "--copy", "1", "--minutes", "0.05",
                                 "--scale-emb", "1"]) == 0
    assert "needle small scale_emb=1.0" in capsys.readouterr().out


def test_common_word_long_counts_long_lists_inside_the_trained_ranges():
    """The counting task at the edge: 18-24 words (its preset), the answer the one
    most common word, every other word up to one fewer times; never in the default
    training mix."""
    from collections import Counter

    preset = st.EVAL_PRESETS[st.EVAL_TASK_PRESET["common_word_long"]]
    train = st.TRAIN_DIFFICULTY
    for it in st.make_eval_items("common_word_long"):
        assert it["task"] == "common_word_long"
        words = it["prompt"].split(" question :")[0].split()[2:]
        counts = Counter(words).most_common()
        assert preset.long_distinct[0] <= len(counts) <= preset.long_distinct[1]
        assert counts[0][0] == it["answer"] and counts[0][1] > counts[1][1]
        assert preset.long_top[0] <= counts[0][1] <= preset.long_top[1]
        assert len(counts) <= train.common_distinct[1] and counts[0][1] <= train.common_top[1]
    assert "common_word_long" not in train_default.TASK_WEIGHTS
