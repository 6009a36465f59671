"""The image rehearsal's kept base (tests/support/image_rehearsal.py): used only while it is what
build_base would make now, and young enough to stand for a fresh pull."""
from __future__ import annotations

import os
import time

from tests.support import image_rehearsal as rehearsal


def test_the_kept_base_is_named_after_what_shapes_it(monkeypatch):
    mirror = "http://deb.debian.org/debian"
    first = rehearsal.base_archive(mirror)
    assert first.parent == rehearsal.CACHE and first.name.startswith(f"base-{rehearsal.SUITE}-")
    assert rehearsal.base_archive(mirror) == first
    assert rehearsal.base_archive("http://mirror.example/debian") != first
    monkeypatch.setattr(rehearsal, "PYTHON_STAND_IN", [*rehearsal.PYTHON_STAND_IN, "curl"])
    assert rehearsal.base_archive(mirror) != first
    monkeypatch.undo()
    monkeypatch.setattr(rehearsal, "SLIM_DPKG_EXCLUDES", rehearsal.SLIM_DPKG_EXCLUDES + "path-exclude /x/*\n")
    assert rehearsal.base_archive(mirror) != first


def test_a_missing_or_week_old_base_is_built_again(tmp_path):
    kept = tmp_path / "base.tar"
    assert not rehearsal.fresh_base(kept)
    kept.write_bytes(b"")
    assert rehearsal.fresh_base(kept)
    old = time.time() - rehearsal.BASE_MAX_AGE_S - 60
    os.utime(kept, (old, old))
    assert not rehearsal.fresh_base(kept)
    assert rehearsal.fresh_base(kept, now=old + 3600)
