import threading
import time

from pipelines.state import documents_state as ds
def test_the_live_state_is_the_first_folder_until_a_rebuild_hands_its_own_over(tmp_path):
    assert ds.current(tmp_path) == tmp_path / "documents"
    fresh = ds.fresh(tmp_path, "ab12cd34")
    assert fresh == tmp_path / "documents-ab12cd34"
    ds.adopt(tmp_path, fresh)
    assert ds.current(tmp_path) == fresh


def test_stale_states_are_removed_and_the_kept_ones_and_other_folders_stay(tmp_path):
    for name in ("documents", "documents-old1", "documents-new2", "documentsx", "query"):
        (tmp_path / name / "query").mkdir(parents=True)
    gone = ds.remove_stale(tmp_path, {tmp_path / "documents-new2", tmp_path / "documents-old1"})
    assert gone == [tmp_path / "documents"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["documents-new2", "documents-old1", "documentsx", "query"]


def test_the_handover_lock_holds_a_live_batch_until_the_rebuild_lets_go(tmp_path):
    order = []
    held = threading.Event()

    def rebuild():
        with ds.handover_lock(tmp_path):
            held.set()
            time.sleep(0.3)
            ds.adopt(tmp_path, ds.fresh(tmp_path, "r1"))
            order.append("adopted")

    t = threading.Thread(target=rebuild)
    t.start()
    held.wait(5)
    # flock is per open file: a second open in this process waits like another process would
    with ds.handover_lock(tmp_path):
        order.append(f"live batch sees {ds.current(tmp_path).name}")
    t.join()
    assert order == ["adopted", "live batch sees documents-r1"]
