"""The transformers engine's worker process (patchgate.engines.isolated): the tokenizer
the accuracy guard needs is loaded in this process while the worker loads the model."""

import pytest

from patchgate.engines.isolated import IsolatedEngine
from patchgate.profile import get_profile

PROFILE = get_profile("default")


def test_the_tokenizer_is_loaded_while_the_worker_loads_the_model():
    engine = IsolatedEngine(PROFILE, [], "candidate")
    try:
        assert engine._tokenizer is None
        engine.ready()
        assert engine._tokenizer is not None
        assert engine.tokenizer.encode("hello") == engine._tokenizer.encode("hello")
    finally:
        engine.close()


def test_a_tokenizer_that_fails_to_load_fails_where_the_guard_asks_for_it(monkeypatch):
    import transformers

    def broken(*a, **kw):
        raise OSError("no tokenizer files")

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", broken)
    engine = IsolatedEngine(PROFILE, [], "candidate")
    try:
        engine.ready()  # the model loads in the worker; the preload's failure waits
        assert engine._tokenizer is None
        with pytest.raises(OSError, match="no tokenizer files"):
            engine.tokenizer  # noqa: B018
    finally:
        engine.close()
