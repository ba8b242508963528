"""Synthetic tasks of the embedded default model: vocabulary, generators, tokenizer.

One module serves both sides, so training data and evaluation data can never drift
apart in format:

- ``models/train_default.py`` draws training items from :func:`sample` with the
  training seed (and skips any item whose prompt is an evaluation prompt);
- ``guards/build_tasks.py`` writes the evaluation JSONL files of ``guards/tasks``
  from :func:`make_eval_items` with the evaluation seed.

Every text is a sequence of vocabulary words separated by single spaces (numbers are
written digit by digit, ``4 9 2``), so the word-level tokenizer round-trips exactly.
An item is a dict with ``prompt``, ``answer`` (words, no terminator), and for
multiple choice ``choices`` and ``label``. The model is trained to write ``answer``
followed by ``.``. The retrieval tasks ask in completion form: the prompt ends with
the key the context is searched for (``question : the code for K``, ``question : P
lives``, ``question : c =``), so the first answer token is found by matching the
prompt's last words in the context (what an induction head does) rather than through
a paraphrased question; common_word and addition end with ``answer :``.

The six tasks mirror what the contest's model is judged on:

================  =========================================  =======================
task              what it asks                               scored by
================  =========================================  =======================
needle            value of one key hidden in a long haystack generation, exact match
common_word       the most frequent word of a list           generation, exact match
common_word_long  the same on lists of up to 200 words       generation, exact match
fact_mc           where a person lives, among four cities    log-likelihood, acc
addition          sum of two multi-digit numbers             generation, exact match
var_track         alias chain of a variable, then its value  generation, exact match
================  =========================================  =======================
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field, replace
from pathlib import Path

SPECIALS = ["<pad>", "<s>", "</s>", "<unk>"]
DIGITS = [str(d) for d in range(10)]
PUNCT = [".", ",", ":", ";", "?", "=", "+"]
FUNCTION_WORDS = (
    "haystack question answer what is the code for words which word most common "
    "facts lives works in where does live work sum vars value of"
).split()
LETTERS = [chr(c) for c in range(ord("a"), ord("z") + 1)]

_ONSETS = "b d f g k l m n p r s t v z".split()
_VOWELS = "a e i o u".split()


def _pseudo_words(n: int, seed: int, syllables: int) -> list[str]:
    rng = random.Random(seed)
    out: list[str] = []
    seen: set[str] = set(FUNCTION_WORDS) | set(LETTERS)
    while len(out) < n:
        w = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(syllables))
        if w not in seen:
            seen.add(w)
            out.append(w)
    return out


# Content vocabularies. Their seeds are part of the vocabulary, not of any data split.
NOUNS = _pseudo_words(240, seed=101, syllables=2)  # filler, keys, listed words
NAMES = _pseudo_words(48, seed=202, syllables=3)  # people of fact_mc
CITIES = _pseudo_words(32, seed=303, syllables=3)  # places of fact_mc

VOCAB_MULTIPLE = 64


def vocabulary() -> list[str]:
    """All tokens in id order, padded with ``<extra_i>`` to a multiple of 64."""
    words = SPECIALS + DIGITS + PUNCT + FUNCTION_WORDS + LETTERS + NOUNS + NAMES + CITIES
    assert len(words) == len(set(words)), "vocabulary words must be unique"
    pad = -len(words) % VOCAB_MULTIPLE
    return words + [f"<extra_{i}>" for i in range(pad)]


def build_tokenizer():
    """A word-level fast tokenizer over :func:`vocabulary` (whitespace split)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {w: i for i, w in enumerate(vocabulary())}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return tok


# ---------------------------------------------------------------- difficulty knobs


@dataclass(frozen=True)
class Difficulty:
    """Ranges the generators draw from (inclusive). Training uses wide ranges;
    the evaluation split uses one of :data:`EVAL_PRESETS` per task."""

    needle_words: tuple[int, int] = (16, 1400)  # haystack length in words
    needle_keys: tuple[int, int] = (1, 8)  # needles (one is asked, the rest distract)
    common_distinct: tuple[int, int] = (3, 24)
    common_top: tuple[int, int] = (2, 9)  # count of the most common word
    common_gap: tuple[int, int] = (1, 4)  # top count minus the most any other word gets
    # common_word_long: long lists (the top word ``top`` times, every other word up to
    # top - 1 times), inside common_word's training ranges (at most 24 words, 9 times)
    long_distinct: tuple[int, int] = (16, 24)
    long_top: tuple[int, int] = (6, 9)
    fact_people: tuple[int, int] = (2, 14)
    add_digits: tuple[int, int] = (1, 4)
    var_hops: tuple[int, int] = (0, 3)  # alias steps between the asked name and its value
    var_chains: tuple[int, int] = (2, 5)
    copy_words: tuple[int, int] = (4, 48)  # training-only copy task (AUXILIARY)


TRAIN_DIFFICULTY = Difficulty()

# Evaluation difficulty presets. Training excludes the evaluation items of every
# preset (see ``models/train_default.eval_prompts``), so the evaluation split can be
# set per task after training, at the edge of what the model does, without any of
# its items having been trained on.
EVAL_PRESETS = {
    "easy": Difficulty(needle_words=(150, 1350), needle_keys=(1, 3), common_distinct=(12, 24),
                       common_top=(4, 8), common_gap=(1, 2), fact_people=(2, 6),
                       add_digits=(2, 3), var_hops=(0, 1), var_chains=(2, 3),
                       long_distinct=(16, 24), long_top=(6, 9)),
    "medium": Difficulty(needle_words=(150, 1350), needle_keys=(2, 5),
                         common_distinct=(12, 24), common_top=(4, 8), common_gap=(1, 2),
                         fact_people=(4, 10), add_digits=(3, 3), var_hops=(0, 2),
                         var_chains=(2, 4), long_distinct=(18, 24), long_top=(7, 9)),
    "hard": Difficulty(needle_words=(150, 1350), needle_keys=(4, 8), common_distinct=(16, 24),
                       common_top=(4, 8), common_gap=(1, 1), fact_people=(8, 14),
                       add_digits=(3, 4), var_hops=(1, 3), var_chains=(3, 5),
                       long_distinct=(20, 24), long_top=(8, 9)),
}
# The preset each task is evaluated at: models/eval_presets.json, written by
# ``python -m models.select_presets`` from the trained model's quick evaluation of
# every preset (train_log.json): per task, the hardest preset the model still does.
EVAL_PRESETS_FILE = Path(__file__).resolve().parent / "eval_presets.json"
EVAL_TASK_PRESET: dict[str, str] = json.loads(EVAL_PRESETS_FILE.read_text())["presets"]


@dataclass
class Curriculum:
    """Caps the needle task while training: the haystack grows linearly from
    ``start`` words to the difficulty's maximum, and the number of needles from one
    to the maximum, over the first ``ramp`` fraction of training. With one needle the
    code is found by looking for digits; each added needle then asks for the key to
    be matched (CPU probe, model card: with one to eight needles from the start the
    loss never leaves chance)."""

    start: int = 48
    ramp: float = 0.5
    progress: float = field(default=1.0)

    def _f(self) -> float:
        return min(1.0, self.progress / self.ramp) if self.ramp > 0 else 1.0

    def cap(self, hi: int) -> int:
        return int(self.start + self._f() * (hi - self.start))

    def cap_keys(self, hi: int) -> int:
        return max(1, round(1 + self._f() * (hi - 1)))


def _r(rng: random.Random, lo_hi: tuple[int, int]) -> int:
    return rng.randint(lo_hi[0], lo_hi[1])


def _digits(rng: random.Random, n: int) -> list[str]:
    return [str(rng.randint(1, 9))] + [str(rng.randint(0, 9)) for _ in range(n - 1)]


# ---------------------------------------------------------------- generators


def gen_needle(rng: random.Random, d: Difficulty, cur: Curriculum | None = None,
               questions: int = 1) -> dict:
    lo, hi = d.needle_words
    if cur is not None:
        hi = max(lo, cur.cap(hi))
    n_words = rng.randint(min(lo, hi), hi)
    k_lo, k_hi = d.needle_keys
    if cur is not None:
        k_hi = max(k_lo, cur.cap_keys(k_hi))
    n_keys = rng.randint(min(k_lo, k_hi), k_hi)
    keys = rng.sample(NOUNS, n_keys)
    key_set = set(keys)
    filler_pool = [w for w in NOUNS if w not in key_set]
    words = [rng.choice(filler_pool) for _ in range(n_words)]
    values = {k: _digits(rng, 4) for k in keys}
    slots = sorted(rng.sample(range(n_words + 1), n_keys), reverse=True)
    for k, pos in zip(keys, slots, strict=True):
        words[pos:pos] = ["the", "code", "for", k, *values[k], "."]
    asked = rng.sample(keys, min(questions, n_keys))
    head = "haystack : " + " ".join(words)
    qa = [(f"question : the code for {k}", " ".join(values[k])) for k in asked]
    return _with_questions("needle", head, qa)


def gen_common_word(rng: random.Random, d: Difficulty, cur: Curriculum | None = None,
                    questions: int = 1) -> dict:
    n = _r(rng, d.common_distinct)
    top = _r(rng, d.common_top)
    gap = min(_r(rng, d.common_gap), top - 1)
    ws = rng.sample(NOUNS, n)
    counts = [top] + [rng.randint(1, top - gap) for _ in range(n - 1)]
    seq = [w for w, c in zip(ws, counts, strict=True) for _ in range(c)]
    rng.shuffle(seq)
    head = "words : " + " ".join(seq)
    return _with_questions("common_word", head,
                           [("question : which word is most common ? answer :", ws[0])])


def gen_common_word_long(rng: random.Random, d: Difficulty, cur: Curriculum | None = None,
                         questions: int = 1) -> dict:
    """common_word on long lists: 16-24 words, the most common one 6-9 times and
    every other word up to one fewer times (up to 200 words to count). The same
    question and training ranges as common_word; the default model was never trained
    on it by this name (``TASK_WEIGHTS``), only on common_word, whose ranges include
    these lists. It sits at the edge of what the model counts: where a loss of
    precision shows."""
    long = replace(d, common_distinct=d.long_distinct, common_top=d.long_top,
                   common_gap=(1, 1))
    return gen_common_word(rng, long, cur, questions) | {"task": "common_word_long"}


def gen_fact_mc(rng: random.Random, d: Difficulty, cur: Curriculum | None = None,
                questions: int = 1) -> dict:
    n = _r(rng, d.fact_people)
    people = rng.sample(NAMES, n)
    lives = {p: rng.choice(CITIES) for p in people}
    works = {p: rng.choice([c for c in CITIES if c != lives[p]]) for p in people}
    facts = [f"{p} lives {lives[p]} ." for p in people]
    facts += [f"{p} works {works[p]} ." for p in people]
    rng.shuffle(facts)
    head = "facts : " + " ".join(facts)
    asked = rng.sample(people, min(questions, n))
    qa = []
    for p in asked:
        rel = rng.choice(["lives", "works"])
        ans = lives[p] if rel == "lives" else works[p]
        qa.append((f"question : {p} {rel}", ans))
    item = _with_questions("fact_mc", head, qa)
    # Four choices: the answer, the other relation's city, two more cities of the text.
    p, ans = asked[0], qa[0][1]
    other = works[p] if ans == lives[p] else lives[p]
    seen = [c for c in dict.fromkeys(list(lives.values()) + list(works.values()))
            if c not in (ans, other)]
    extra = rng.sample(seen, min(2, len(seen)))
    extra += rng.sample([c for c in CITIES if c not in {ans, other, *extra}], 2 - len(extra))
    choices = [ans, other, *extra]
    rng.shuffle(choices)
    item["choices"] = choices
    item["label"] = choices.index(ans)
    return item


def gen_addition(rng: random.Random, d: Difficulty, cur: Curriculum | None = None,
                 questions: int = 1) -> dict:
    a = _digits(rng, _r(rng, d.add_digits))
    b = _digits(rng, _r(rng, d.add_digits))
    s = str(int("".join(a)) + int("".join(b)))
    prompt = f"sum : {' '.join(a)} + {' '.join(b)} = answer :"
    return {"task": "addition", "prompt": prompt, "answer": " ".join(s)}


def gen_var_track(rng: random.Random, d: Difficulty, cur: Curriculum | None = None,
                  questions: int = 1) -> dict:
    n_chains = _r(rng, d.var_chains)
    hops = [_r(rng, d.var_hops) for _ in range(n_chains)]
    names = rng.sample(LETTERS, sum(h + 1 for h in hops))
    stmts: list[list[str]] = []  # each chain's statements, in order
    ends: list[tuple[str, str]] = []
    i = 0
    for h in hops:
        chain = names[i:i + h + 1]
        i += h + 1
        value = " ".join(_digits(rng, 3))
        stmts.append([f"{chain[0]} = {value} ."] + [f"{chain[j + 1]} = {chain[j]} ."
                                                    for j in range(h)])
        # The answer walks the chain back to the value: "c = b ." "b = a ." "a = 4 1 7 ."
        # asked "c =" is answered "b = a = 4 1 7"; each step looks up "name =".
        ends.append((chain[-1], " = ".join([*reversed(chain[:-1]), value])))
    # Interleave chains while keeping each chain's order (a name is defined before use).
    order: list[str] = []
    queues = [list(s) for s in stmts]
    while any(queues):
        q = rng.choice([q for q in queues if q])
        order.append(q.pop(0))
    head = "vars : " + " ".join(order)
    picks = rng.sample(ends, min(questions, len(ends)))
    qa = [(f"question : {n} =", v) for n, v in picks]
    return _with_questions("var_track", head, qa)


def _with_questions(task: str, head: str, qa: list[tuple[str, str]]) -> dict:
    """First question forms the prompt/answer; further ones (training only) follow it."""
    item = {"task": task, "prompt": f"{head} {qa[0][0]}", "answer": qa[0][1]}
    if len(qa) > 1:
        item["more"] = [{"question": q, "answer": a} for q, a in qa[1:]]
    return item


def gen_copy(rng: random.Random, d: Difficulty, cur: Curriculum | None = None,
             questions: int = 1) -> dict:
    """Training only: repeat a random list of words and digits. Every answer token is
    a lookup of the token after the previous one (an induction step), so this dense
    task grows the attention that the retrieval tasks need (model card: a small model
    learns it in a few hundred steps while needle sits on a plateau)."""
    ws = [rng.choice(NOUNS + DIGITS) for _ in range(_r(rng, d.copy_words))]
    return _with_questions("copy", "code : " + " ".join(ws),
                           [("question : what is the code ? answer :", " ".join(ws))])


GENERATORS = {
    "needle": gen_needle,
    "common_word": gen_common_word,
    "common_word_long": gen_common_word_long,
    "fact_mc": gen_fact_mc,
    "addition": gen_addition,
    "var_track": gen_var_track,
}
TASKS = tuple(GENERATORS)  # the evaluated tasks
# Training-only tasks: mixed in with ``--weights copy=0.1``; never evaluated.
AUXILIARY = {"copy": gen_copy}
TRAINABLE = (*TASKS, *AUXILIARY)  # every task a training mix may name


def sample(task: str, rng: random.Random, difficulty: Difficulty = TRAIN_DIFFICULTY,
           curriculum: Curriculum | None = None, questions: int = 1) -> dict:
    """One item of ``task`` (an evaluated or an auxiliary task) drawn from ``rng``."""
    gen = GENERATORS.get(task) or AUXILIARY.get(task)
    if gen is None:
        raise KeyError(f"unknown task {task!r}: one of {sorted(TRAINABLE)}")
    return gen(rng, difficulty, curriculum, questions)


def training_text(item: dict) -> tuple[str, list[tuple[int, int]]]:
    """The full training text of an item and the word spans (start, end) that carry
    loss: every answer plus its terminating ``.``."""
    words = item["prompt"].split()
    spans = []
    for q, a in [(None, item["answer"])] + [(m["question"], m["answer"]) for m in
                                           item.get("more", [])]:
        if q is not None:
            words += q.split()
        start = len(words)
        words += a.split() + ["."]
        spans.append((start, len(words)))
    return " ".join(words), spans


EVAL_SEED = 20261202
EVAL_ITEMS_PER_TASK = 100


def make_eval_items(task: str, n: int = EVAL_ITEMS_PER_TASK, seed: int = EVAL_SEED,
                    difficulty: Difficulty | None = None) -> list[dict]:
    """The evaluation split of one task: deterministic in (task, n, seed, difficulty);
    the difficulty defaults to the task's preset in :data:`EVAL_TASK_PRESET`."""
    if difficulty is None:
        difficulty = EVAL_PRESETS[EVAL_TASK_PRESET[task]]
    rng = random.Random(f"{seed}:{task}")
    items = []
    seen = set()
    while len(items) < n:
        it = sample(task, rng, difficulty)
        if it["prompt"] in seen:
            continue
        seen.add(it["prompt"])
        it["id"] = f"{task}-{len(items):04d}"
        items.append(it)
    return items
