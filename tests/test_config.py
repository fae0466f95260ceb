"""``minixla.config`` mirrors ``jax.config``: update, attribute reads, a context manager, env."""
import os

import pytest

import minixla
from minixla.config import config


def test_update_read_and_override_restore(monkeypatch):
    monkeypatch.delenv("MINIXLA_LOG_COMPILES", raising=False)
    assert minixla.config is config and config.minixla_log_compiles is False
    with config.override(minixla_log_compiles=True, minixla_recompile_warning_threshold="3"):
        assert config.minixla_log_compiles is True
        assert config.minixla_recompile_warning_threshold == 3  # parsed as its env variable
    assert config.minixla_log_compiles is False and config.minixla_recompile_warning_threshold == 8


def test_environment_variables_are_read_unless_updated(monkeypatch):
    monkeypatch.setenv("MINIXLA_EXPLAIN_CACHE_MISSES", "yes")
    monkeypatch.setenv("MINIXLA_COMPILATION_CACHE_MAX_SIZE", "12345")
    assert config.minixla_explain_cache_misses is True
    assert config.minixla_compilation_cache_max_size == 12345
    with config.override(minixla_explain_cache_misses=False):
        assert config.minixla_explain_cache_misses is False
    monkeypatch.setenv("MINIXLA_COMPILATION_CACHE_MAX_SIZE", "lots")
    with pytest.raises(ValueError, match="MINIXLA_COMPILATION_CACHE_MAX_SIZE"):
        config.minixla_compilation_cache_max_size


def test_env_only_options_set_their_variable_and_are_restored(monkeypatch):
    monkeypatch.delenv("MINIXLA_VERIFY", raising=False)
    with config.override(minixla_verify=True):
        assert os.environ["MINIXLA_VERIFY"] == "1" and config.minixla_verify is True
    assert "MINIXLA_VERIFY" not in os.environ


def test_errors_as_jax_config():
    with pytest.raises(ValueError, match="Unrecognized config option: minixla_nope"):
        config.update("minixla_nope", 1)
    with pytest.raises(AttributeError):
        config.minixla_nope
    with pytest.raises(ValueError, match="boolean"):
        config.update("minixla_log_compiles", "maybe")
    with pytest.raises(AttributeError):
        config.minixla_log_compiles = True


def test_every_option_is_documented_in_one_place():
    doc = minixla.config.__class__.__module__
    import sys
    text = sys.modules[doc].__doc__
    for opt in config.options():
        assert opt.name in text and opt.doc
        assert opt.name in config.describe()
