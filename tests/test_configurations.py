"""The configurations of a run (patchgate.engines.configurations): one engine per
distinct patch set, named by the labels that share it; restarts of some labels only."""

from __future__ import annotations

import pytest
from fakes import use_fake_engines, write_patch

from patchgate.engines.configurations import Configurations
from patchgate.patches import discover
from patchgate.profile import get_profile

PROFILE = get_profile("default")


@pytest.fixture
def patches(tmp_path):
    return discover(write_patch(tmp_path / "p", "0001-slow-10.py"))


def test_labels_with_the_same_patches_share_one_engine(monkeypatch, patches, reporter):
    built = use_fake_engines(monkeypatch)
    sets = {"candidate": patches, "current": patches, "reference": []}
    with Configurations(PROFILE, sets, reporter.say) as configs:
        assert not configs.started
        configs.ensure_started()
        configs.ensure_started()  # once
        assert configs.names() == ["candidate+current", "reference"]
        assert configs.same("candidate", "current") and not configs.same("candidate",
                                                                          "reference")
        assert configs.engine("current") is configs.engine("candidate")
        assert list(configs.by_name()) == ["candidate+current", "reference"]
        assert [e.share for e in built] == [0.5, 0.5]
    assert [e.label for e in built] == ["candidate", "reference"] and all(e.closed for e in built)
    loading = [x for x in reporter.lines if x.startswith("loading")]
    assert loading == ["loading engine for candidate+current (1 patches)",
                       "loading engine for reference (0 patches)"]
    # each engine's start is timed (a GPU verdict's engines phase, engine by engine)
    ready = [x for x in reporter.lines if " ready " in x]
    assert [x.split(" ready ")[0] for x in ready] == ["engine for candidate+current",
                                                      "engine for reference"]
    assert all(" s after the first start (its start call " in x for x in ready)


def test_start_with_labels_restarts_only_those(monkeypatch, patches, reporter):
    built = use_fake_engines(monkeypatch)
    sets = {"candidate": patches, "current": [], "reference": []}
    with Configurations(PROFILE, sets, reporter.say) as configs:
        configs.start()
        first_candidate, shared = configs.engine("candidate"), configs.engine("reference")
        configs.start(("candidate",))
        assert first_candidate.closed and configs.engine("candidate") is not first_candidate
        assert configs.engine("reference") is shared and not shared.closed
    assert len(built) == 3
    assert reporter.lines[-2] == "loading engine for candidate (1 patches) in fresh processes"


def test_a_failing_start_closes_the_engines_already_started(monkeypatch, patches):
    from patchgate.engines import factory
    from patchgate.errors import PatchgateError

    built = use_fake_engines(monkeypatch)
    fake = factory.start

    def start(profile, patches, label, share=1.0):
        if label == "current":  # the engine of current+reference
            raise PatchgateError("no engine for you")
        return fake(profile, patches, label, share)

    monkeypatch.setattr(factory, "start", start)
    with pytest.raises(PatchgateError, match="no engine"):
        with Configurations(PROFILE, {"candidate": patches, "current": [],
                                      "reference": []}) as configs:
            configs.start()
    assert [e.closed for e in built] == [True]


def test_configurations_need_the_three_labels():
    with pytest.raises(ValueError, match="candidate, current and reference"):
        Configurations(PROFILE, {"candidate": [], "reference": []})


def test_accuracy_engines_are_the_runs_own_or_pools_it_owns(monkeypatch, patches):
    """Without a pool maker the guard gets the configuration's engine (started if need
    be); with one (``guard --ray``), one pool per patch set, built once, closed with the
    configurations, and the local engines are not started for it."""
    from fakes import FakeEngine

    built = use_fake_engines(monkeypatch)
    sets = {"candidate": patches, "current": patches, "reference": []}
    with Configurations(PROFILE, sets) as configs:
        assert configs.accuracy_engine("candidate") is configs.engine("candidate")
        assert configs.accuracy_spread() is None
    pools: list = []

    class Pool(FakeEngine):
        def spread(self):
            return {"actors": 1}

    def make(profile, patch_set, name):
        pools.append(Pool(profile, patch_set, name))
        return pools[-1]

    built.clear()
    with Configurations(PROFILE, sets) as configs:
        configs.spread_accuracy(make)
        cand = configs.accuracy_engine("candidate")
        assert configs.accuracy_engine("current") is cand  # one pool per patch set
        ref = configs.accuracy_engine("reference")
        assert [p.label for p in pools] == ["candidate+current", "reference"]
        assert not configs.started  # no local engine was started for accuracy
        assert configs.accuracy_spread() == {"candidate+current": {"actors": 1},
                                             "reference": {"actors": 1}}
    assert cand.closed and ref.closed


def test_the_guards_batches_go_to_an_engine_whole_and_in_order():
    """answer_batches: a plain engine answers batch after batch; an engine with
    answer_all (a pool) gets them all at once; the ticks count requests."""
    from patchgate.guard.lm_model import answer_batches

    class Plain:
        def loglikelihood(self, pairs):
            return [(float(len(c)), True) for c, _ in pairs]

    batches = [([([1] * n, [2])] * n,) for n in (3, 1, 2)]
    ticks: list[int] = []
    out = answer_batches(Plain(), "loglikelihood", batches, ticks.append)
    assert out == [[(3.0, True)] * 3, [(1.0, True)], [(2.0, True)] * 2] and ticks == [3, 1, 2]

    class Spread(Plain):
        seen = None

        def answer_all(self, verb, many, tick):
            Spread.seen = (verb, len(many))
            return [getattr(self, verb)(*args) for args in many]

    assert answer_batches(Spread(), "loglikelihood", batches) == out
    assert Spread.seen == ("loglikelihood", 3)


def test_on_a_gpu_the_latency_engines_close_before_the_pools_start(monkeypatch, patches):
    from fakes import FakeEngine

    built = use_fake_engines(monkeypatch)
    sets = {"candidate": patches, "current": patches, "reference": []}
    gpu = PROFILE.with_overrides(device="cuda")
    with Configurations(gpu, sets) as configs:
        configs.ensure_started()
        configs.spread_accuracy(lambda prof, ps, name: FakeEngine(prof, ps, name))
        assert all(not e.closed for e in built)
        configs.accuracy_engine("candidate")
        assert len(built) == 3 and all(e.closed for e in built[:2])  # GPU memory freed
        assert not built[2].closed  # the pool, until the configurations close
        # messages still name each configuration, from the patch sets alone
        assert configs.described() == {"candidate+current": "candidate (0001-slow-10.py)",
                                       "reference": "reference (no patches)"}
    assert built[2].closed
