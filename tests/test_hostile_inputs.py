"""Issue 29, item 10: every bad input of the attack catalogue (``scripts/attack_inputs.py``) is refused clearly
before work or handled; none is unclear, accepted silently, corrupting or a hole. One test per in-process attack
(the CLI attacks, subprocesses, and the slower report attacks of issue 59 run with ``python scripts/attack_inputs.py``
or ``pytest -m slow``)."""

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "attack_inputs.py"
_spec = importlib.util.spec_from_file_location("attack_inputs", SCRIPT)
attacks = importlib.util.module_from_spec(_spec)
sys.modules["attack_inputs"] = attacks
_spec.loader.exec_module(attacks)

FAST = [a for a in attacks.ATTACKS if not a.slow]


@pytest.mark.parametrize("attack", FAST, ids=[f"{a.surface}: {a.name}" for a in FAST])
def test_a_bad_input_is_refused_clearly_or_handled(attack, tmp_path):
    outcome, message = attacks.classify(attack, tmp_path)
    wanted = "handled" if attack.expect == "handle" else "rejected"
    assert outcome == wanted, f"{attack.surface} / {attack.name}: {outcome}: {message}"


SLOW = [a for a in attacks.ATTACKS if a.slow]


@pytest.mark.slow
@pytest.mark.parametrize("attack", SLOW, ids=[f"{a.surface}: {a.name}" for a in SLOW])
def test_a_bad_command_line_is_refused_in_one_clear_line(attack, tmp_path):
    outcome, message = attacks.classify(attack, tmp_path)
    wanted = "handled" if attack.expect == "handle" else "rejected"
    assert outcome == wanted, f"{attack.surface} / {attack.name}: {outcome}: {message}"


def test_the_catalogue_covers_every_surface_of_the_issue():
    surfaces = {a.surface for a in attacks.ATTACKS}
    assert surfaces == {"npz problem file", "inputs file", "config", "checkpoint", "results root", "layer call", "evaluate.py"}
    assert len(attacks.ATTACKS) >= 170
