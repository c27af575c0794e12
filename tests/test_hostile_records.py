"""Issue 29, item 3: records are created exclusively. Of two writers of one record exactly one wins; the other
fails loudly and its record is kept beside (not read by the loader), so nothing it computed is lost."""

import json
import threading

import pytest

from hardlinear.harness import results


def _record(lr: float) -> dict:
    return {
        "identity": f"id-{lr}", "study": "race", "status": "ok", "config": {"trainer": {"lr": lr}},
        "row": {"problem": "p", "method": "m", "timestamp": "2026-01-01T00:00:00Z", "test/gap_mean": lr},
    }


def test_concurrent_writers_one_wins_the_other_fails_and_keeps_its_record(tmp_path):
    for attempt in range(30):
        run_dir = tmp_path / f"run{attempt}"
        barrier = threading.Barrier(2)
        outcome: dict[float, object] = {}

        def write(lr: float, run_dir=run_dir, barrier=barrier, outcome=outcome) -> None:
            barrier.wait()
            try:
                outcome[lr] = results.write_record(run_dir, _record(lr))
            except FileExistsError as err:
                outcome[lr] = err

        threads = [threading.Thread(target=write, args=(lr,)) for lr in (0.001, 0.002)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        errors = [v for v in outcome.values() if isinstance(v, FileExistsError)]
        assert len(errors) == 1, f"attempt {attempt}: both writers 'succeeded'; one record was replaced"
        winner = results.read_record(run_dir / results.RECORD_FILE)
        loser_lr = 0.001 if winner["config"]["trainer"]["lr"] == 0.002 else 0.002
        kept = [p for p in run_dir.iterdir() if p.name.startswith("record.conflict-")]
        assert len(kept) == 1 and str(kept[0]) in str(errors[0])
        assert results.read_record(kept[0])["config"]["trainer"]["lr"] == loser_lr  # a whole, verified record
        assert [p for p, _ in results.scan([run_dir])[0]] == [run_dir / results.RECORD_FILE]  # the loader reads one


def test_a_second_write_names_where_its_metrics_are(tmp_path):
    results.write_record(tmp_path, _record(0.1))
    with pytest.raises(FileExistsError, match=r"kept, unread by the loader, as .*record\.conflict-"):
        results.write_record(tmp_path, _record(0.2))
    kept = next(tmp_path.glob("record.conflict-*.json"))
    assert json.loads(kept.read_text())["row"]["test/gap_mean"] == 0.2
    assert results.read_record(tmp_path / results.RECORD_FILE)["row"]["test/gap_mean"] == 0.1
    assert not list(tmp_path.glob(".*.tmp"))
