"""Port reservation: only ports the kernel could hand to an outgoing connection are reserved, and
what was reserved before is kept."""
import pytest

from pipelines.devstack import processes


@pytest.fixture
def reserved(tmp_path, monkeypatch):
    """The kernel's reserved ports file (holding two earlier reservations) and an ephemeral range."""
    path, ephemeral = tmp_path / "reserved", tmp_path / "range"
    path.write_text("40000-40002,50000\n")
    ephemeral.write_text("32768\t60999\n")
    monkeypatch.setattr(processes, "RESERVED_PORTS", path)
    monkeypatch.setattr(processes, "EPHEMERAL_RANGE", ephemeral)
    return path


def test_only_ephemeral_ports_are_added_to_what_was_reserved(reserved):
    processes.reserve_ports([25532, 40001, 55532, 55533])
    assert reserved.read_text() == "40000-40002,50000,55532,55533\n"


def test_nothing_is_written_when_no_port_is_ephemeral(reserved):
    before = reserved.stat().st_mtime_ns
    processes.reserve_ports([25532, 29192, 40000])
    assert reserved.read_text() == "40000-40002,50000\n" and reserved.stat().st_mtime_ns == before
