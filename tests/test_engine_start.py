"""python -m patchgate.tools.engine_start: where one engine's start and first calls go."""

from __future__ import annotations

import json

from fakes import use_fake_engines

from patchgate.tools import engine_start


def test_one_engine_is_started_timed_call_by_call_and_closed(monkeypatch, tmp_path, capsys):
    built = use_fake_engines(monkeypatch)
    out = tmp_path / "start.json"
    assert engine_start.main(["--profile", "default", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc == json.loads(capsys.readouterr().out)
    assert [e.label for e in built] == ["reference"] and built[0].closed
    assert built[0].patches == []  # the profile's model alone
    assert built[0].calls == 12  # a first and a second call of each of the six scenarios
    assert set(doc["calls"]) == {"prefill_b1", "prefill_b8", "prefill_b64",
                                 "decode_b1", "decode_b8", "decode_b64"}
    assert all(c["first_call_s"] > 0 and c["second_call_s"] > 0 for c in doc["calls"].values())
    assert doc["start_s"] >= 0 and doc["close_s"] >= 0 and "import_s" not in doc


def test_the_log_level_reaches_the_engine_settings(monkeypatch, tmp_path):
    built = use_fake_engines(monkeypatch)
    engine_start.main(["--profile", "default", "--log-level", "info"])
    assert built[0].profile.engine_args["log_level"] == "info"
