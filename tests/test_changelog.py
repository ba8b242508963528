from patchgate.store import changelog

ENTRY_A = changelog.format_entry(changelog.Entry(
    "2025-06-01", "Fuse the residual add into RMSNorm.",
    "One kernel instead of two.\nSaves a pass over the hidden state.\n\nDetails follow.",
    "accepted", "Accepted: score 104.2.", ["0001-fuse-add-rmsnorm.py"]))
ENTRY_B = changelog.format_entry(changelog.Entry(
    "2025-06-02", "Quantize weights to 4 bits", "", "rejected", "Rejected.",
    ["0001-fuse-add-rmsnorm.py", "0002-int4.py"]))


def test_format_entry():
    assert ENTRY_A == (
        "### 2025-06-01 — Fuse the residual add into RMSNorm. (accepted)\n"
        "\n"
        "One kernel instead of two. Saves a pass over the hidden state.\n"
        "\n"
        "Patches: `0001-fuse-add-rmsnorm.py`\n"
        "\n"
        "Accepted: score 104.2.\n")
    assert "Patches: `0001-fuse-add-rmsnorm.py`, `0002-int4.py`\n" in ENTRY_B


def test_entry_names_its_profile():
    entry = changelog.format_entry(changelog.Entry("d", "t", "", "accepted", "Accepted.",
                                                   ["0003-fp8-kv.py"], profile="h200-default"))
    assert "Patches: `0003-fp8-kv.py` (profile `h200-default`)\n" in entry


def test_long_description_is_cut():
    entry = changelog.format_entry(changelog.Entry("d", "t", "word " * 200, "error", "Error.", []))
    description = entry.split("\n")[2]
    assert len(description) <= changelog.MAX_DESCRIPTION and description.endswith("…")


def test_append_into_missing_file(tmp_path):
    path = tmp_path / "CHANGELOG.md"
    changelog.append_entry(path, ENTRY_A)
    text = path.read_text()
    assert text.startswith("# Changelog\n")
    assert "\n## Optimization log\n\n### 2025-06-01" in text
    assert text.endswith(ENTRY_A)


def test_append_keeps_later_sections_and_order(tmp_path):
    path = tmp_path / "CHANGELOG.md"
    notes = "## Release notes\n\n### 0.1.0\n\n- First release.\n"
    path.write_text("# Changelog\n\n## Optimization log\n\n" + notes)
    changelog.append_entry(path, ENTRY_A)
    changelog.append_entry(path, ENTRY_B)
    assert path.read_text() == (
        "# Changelog\n\n## Optimization log\n\n" + ENTRY_A + "\n" + ENTRY_B + "\n" + notes)


def test_append_creates_section_before_other_sections(tmp_path):
    path = tmp_path / "CHANGELOG.md"
    path.write_text("# Changelog\n\nIntro.\n\n## Release notes\n\n- x\n")
    changelog.append_entry(path, ENTRY_B)
    assert path.read_text() == (
        "# Changelog\n\nIntro.\n\n## Optimization log\n\n"
        + ENTRY_B
        + "\n## Release notes\n\n- x\n")


def test_result_sentence_accepted():
    verdict = {"verdict": "accepted", "score": 104.23, "accuracy": {"ratio": 1.0}, "reasons": [],
               "scenarios": [{"name": "prefill_b1", "ratio": 0.95},
                             {"name": "decode_b64", "ratio": 0.91},
                             {"name": "decode_b1", "ratio": 1.02}]}
    assert changelog.result_sentence(verdict) == (
        "Accepted: score 104.2, accuracy 100.0 % of reference; "
        "largest changes: decode_b64 0.91x, prefill_b1 0.95x.")


def test_result_sentence_rejected_and_error():
    verdict = {"verdict": "rejected", "score": 0.0, "accuracy": {"ratio": 0.961},
               "reasons": ["accuracy 96.1 % of reference, below 99 %."],
               "scenarios": [{"name": "decode_b1", "ratio": 0.5},
                             {"name": "prefill_b8", "ratio": 1.9}]}
    assert changelog.result_sentence(verdict) == (
        "Rejected (accuracy 96.1 % of reference, below 99 %): score 0.0, accuracy 96.1 % of "
        "reference; largest changes: decode_b1 0.50x, prefill_b8 1.90x.")
    error = {"verdict": "error", "score": None, "accuracy": None, "scenarios": [],
             "reasons": ["0002-int4.py failed to import"]}
    assert changelog.result_sentence(error) == "Error (0002-int4.py failed to import)."
