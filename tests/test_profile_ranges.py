"""Profile values outside their ranges fail when the profile loads: in `patchgate guard`
before anything else, in seconds, exit 2, with an error that names the file, the key
and the allowed range."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from patchgate.cli import main
from patchgate.errors import PatchgateError
from patchgate.profile import Profile, Thresholds, get_profile
from patchgate.profile import load as profiles
from patchgate.profile.schema import Sequential, Serving

BASE = '''description = "x"
model = "models/default"
engine = "transformers"
{top}
[lengths]
prefill_input = 8
prefill_output = 1
decode_input = 4
decode_output = 4
'''


def write(tmp_path: Path, top: str = "", tables: str = "") -> str:
    path = tmp_path / "p.toml"
    path.write_text(BASE.format(top=top) + tables)
    return str(path)


# (top-level lines, tables, the key the error names, the allowed range it says)
BAD = [
    ("", "[thresholds]\nlatency = -0.5\n", "thresholds.latency = -0.5",
     "0 < thresholds.latency < 1"),
    ("", "[thresholds]\nlatency = 1.0\n", "thresholds.latency = 1.0",
     "0 < thresholds.latency < 1"),
    ("", "[thresholds]\nlatency = nan\n", "thresholds.latency = nan",
     "0 < thresholds.latency < 1"),
    ("", "[thresholds]\nalpha = 0.5\n", "thresholds.alpha = 0.5", "0 < thresholds.alpha < 0.5"),
    ("", "[thresholds]\nalpha = 0\n", "thresholds.alpha = 0.0", "0 < thresholds.alpha < 0.5"),
    ("", "[thresholds]\naccuracy_reject = 0\n", "thresholds.accuracy_reject = 0.0",
     "0 < thresholds.accuracy_reject <= 1"),
    ("", "[thresholds]\naccuracy_reject = 1.01\n", "thresholds.accuracy_reject = 1.01",
     "0 < thresholds.accuracy_reject <= 1"),
    ("", "[thresholds]\nc_low = 0\n", "thresholds.c_low = 0.0", "0 < thresholds.c_low <= 1"),
    ("", "[thresholds]\nc_high = 1.5\n", "thresholds.c_high = 1.5",
     "0 < thresholds.c_high <= 1"),
    ("", "[thresholds]\nc_low = 0.99\nc_high = 0.97\n", "thresholds.c_low = 0.99 is above "
     "thresholds.c_high = 0.97", "c_low <= c_high"),
    ("rounds = 1", "", "rounds = 1", "rounds >= 2"),
    ("warmup = -1", "", "warmup = -1", "warmup >= 0"),
    ("max_looks = 0", "", "max_looks = 0", "max_looks >= 1"),
    ("settle_s = -0.01", "", "settle_s = -0.01", "settle_s >= 0"),
    ("call_timeout_s = 0", "", "call_timeout_s = 0.0", "call_timeout_s > 0"),
    ("call_timeout_s = inf", "", "call_timeout_s = inf", "call_timeout_s > 0"),
    ("eval_batch_size = 0", "", "eval_batch_size = 0", "eval_batch_size >= 1"),
    ("threads = 0", "", "threads = 0", "threads >= 1"),
    ("seed = -3", "", "seed = -3", "seed >= 0"),
    ("", "[serving]\nnum_prompts = 0\n", "serving.num_prompts = 0", "serving.num_prompts >= 1"),
    ("", "[serving]\noutput_len = -1\n", "serving.output_len = -1", "serving.output_len >= 1"),
    ("", "[serving]\nstartup_timeout_s = 0\n", "serving.startup_timeout_s = 0.0",
     "serving.startup_timeout_s > 0"),
    ("", "[serving]\nconcurrencies = [1, 0, \"unlimited\"]\n", "serving.concurrencies[1] = 0",
     ">= 1"),
    ("batch_sizes = []", "", "batch_sizes is empty", "batch_sizes = [1, 8, 64]"),
    ("batch_sizes = [1, 0, 64]", "", "batch_sizes[1] = 0", ">= 1"),
    ("batch_sizes = [1, 64, 8]", "", "batch_sizes = [1, 64, 8] is not strictly increasing",
     "[1, 8, 64]"),
    ("batch_sizes = [8, 8]", "", "batch_sizes = [8, 8] is not strictly increasing", "[1, 8, 64]"),
    ("tasks = [\"needle\", \" \"]", "", "tasks[1] is blank", "task"),
    ("engine_version = \"new\"", "", "engine_version = 'new' is not a version", "0.5.19"),
]


@pytest.mark.parametrize("top, tables, what, allowed", BAD)
def test_a_value_out_of_range_names_the_file_the_key_and_the_range(tmp_path, top, tables,
                                                                   what, allowed):
    path = write(tmp_path, top, tables)
    with pytest.raises(PatchgateError) as e:
        get_profile(path)
    assert e.value.message.startswith(f"{path}: {what}"), e.value.message
    assert allowed in e.value.message + e.value.hint


def test_the_hint_gives_the_default_as_an_example(tmp_path):
    with pytest.raises(PatchgateError) as e:
        get_profile(write(tmp_path, "", "[thresholds]\nlatency = -0.5\n"))
    assert e.value.hint == "set thresholds.latency within that range, e.g. 0.05 (the default)"


@pytest.mark.parametrize("top, tables", [
    ("rounds = 2\nwarmup = 0\nsettle_s = 0\nseed = 0\nbatch_sizes = [4]", ""),
    ("", "[thresholds]\naccuracy_reject = 1\nc_low = 0.98\nc_high = 0.98\nlatency = 0.001\n"
     "alpha = 0.49\n"),
    ("", "[serving]\nconcurrencies = [1, 4, \"unlimited\"]\n"),
])
def test_values_at_the_edges_of_their_ranges_load(tmp_path, top, tables):
    assert get_profile(write(tmp_path, top, tables)).name == "p"


def test_every_default_is_inside_its_range():
    for key, allowed in profiles.RANGES.items():
        default = profiles._default(key)
        assert default is None or allowed.holds(default), key


def test_every_number_of_the_schema_has_a_range():
    """A new numeric key of the schema needs its range in RANGES (or a check of its own)."""
    def numeric(cls, prefix: str = "") -> set[str]:
        return {prefix + f.name for f in dataclasses.fields(cls)
                if "int" in str(f.type) or "float" in str(f.type)}

    keys = numeric(Profile) | numeric(profiles.Lengths, "lengths.") | \
        numeric(Thresholds, "thresholds.") | numeric(Serving, "serving.") | \
        numeric(Sequential, "sequential.")
    own = {"batch_sizes", "serving.concurrencies"}
    assert len(keys) > 20
    assert keys - own == set(profiles.RANGES)


@pytest.mark.parametrize("top, tables, key", [
    ("", "[thresholds]\nlatency = -0.5\n", "thresholds.latency"),
    ("", "[thresholds]\naccuracy_reject = 0\n", "thresholds.accuracy_reject"),
    ("rounds = 1", "", "rounds"),
])
def test_guard_fails_in_seconds_before_any_engine_naming_file_and_key(tmp_path, capsys, top,
                                                                      tables, key):
    path = write(tmp_path, top, tables)
    t0 = time.monotonic()
    code = main(["guard", "--profile", path, "--baselines", str(tmp_path / "b"),
                 "--changelog", str(tmp_path / "CHANGELOG.md")])
    took = time.monotonic() - t0
    err = capsys.readouterr().err
    assert code == 2
    assert f"ERROR {path}: {key} = " in err and "out of range" in err
    assert "loading engine" not in err and "validating patches" not in err
    assert took < 10, took
    assert not (tmp_path / "b").exists() and not (tmp_path / "CHANGELOG.md").exists()


@pytest.mark.parametrize("body, says", [
    ("[repeats]\nprefill_b3 = 2", "repeats.prefill_b3 is not a scenario of this profile"),
    ("[repeats]\nprefill_b1 = 0", "repeats.prefill_b1 = 0 is out of range"),
])
def test_repeats_name_scenarios_of_the_profile_and_count_calls(tmp_path, body, says):
    from patchgate.errors import PatchgateError
    from patchgate.profile import load as profiles

    path = tmp_path / "mine.toml"
    path.write_text('description = "x"\nmodel = "models/default"\nengine = "transformers"\n'
                    "[lengths]\nprefill_input = 8\nprefill_output = 1\ndecode_input = 4\n"
                    f"decode_output = 2\n{body}\n")
    with pytest.raises(PatchgateError) as e:
        profiles.load(path)
    assert says in str(e.value)


def test_primed_names_scenarios_of_the_profile(tmp_path):
    from patchgate.errors import PatchgateError
    from patchgate.profile import load as profiles

    path = tmp_path / "mine.toml"
    body = ('description = "x"\nmodel = "models/default"\nengine = "transformers"\n'
            'primed = [{}]\n[lengths]\nprefill_input = 8\nprefill_output = 1\n'
            "decode_input = 4\ndecode_output = 2\n")
    path.write_text(body.format('"prefill_b1", "prefill_b3"'))
    with pytest.raises(PatchgateError, match="primed names 'prefill_b3', not a scenario"):
        profiles.load(path)
    path.write_text(body.format('"prefill_b1"'))
    assert profiles.load(path).primed == ("prefill_b1",)
