"""Where templates keep their preload probes' answers: the user's cache, shared by the books."""

from __future__ import annotations

import os

import pytest

from livecells.pipeline.processes import probe_folder


def test_the_answers_go_to_livecells_cache_dir_else_the_users_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LIVECELLS_CACHE_DIR", str(tmp_path / "mine"))
    assert probe_folder(str(tmp_path / "doctrees")) == str(tmp_path / "mine" / "probes")
    assert (tmp_path / "mine" / "probes").is_dir()
    monkeypatch.delenv("LIVECELLS_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert probe_folder(None) == str(tmp_path / "xdg" / "livecells" / "probes")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert probe_folder(None) == str(tmp_path / "home" / ".cache" / "livecells" / "probes")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_cache_that_cannot_be_written_leaves_the_answers_in_the_doctree_folder(tmp_path, monkeypatch):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        monkeypatch.setenv("LIVECELLS_CACHE_DIR", str(locked))
        assert probe_folder(str(tmp_path / "doctrees")) == str(tmp_path / "doctrees" / "livecells-probe")
        assert probe_folder(None) is None
    finally:
        locked.chmod(0o700)


def test_a_cache_path_that_is_a_file_leaves_the_answers_in_the_doctree_folder(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv("LIVECELLS_CACHE_DIR", str(tmp_path / "file"))
    assert probe_folder(str(tmp_path / "doctrees")) == str(tmp_path / "doctrees" / "livecells-probe")
