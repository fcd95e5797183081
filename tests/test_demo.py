"""The demo's CNN (``examples/train_digits.py --model cnn``) trains, under ``tg.jit``, to at least 0.97
held-out accuracy on scikit-learn's digits (issue 6). The MLP default is what ``make demo`` runs."""
import pathlib
import re
import sys

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


def test_cnn_demo_reaches_097(tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    import train_digits
    monkeypatch.setattr(train_digits, "OUTPUT_DIR", tmp_path)
    train_digits.main(["--model", "cnn"])  # raises SystemExit below 0.97
    printed = capsys.readouterr().out
    accuracy = float(re.search(r"final held-out accuracy: ([0-9.]+)", printed).group(1))
    assert accuracy >= 0.97
    assert (tmp_path / "digits_training_cnn.png").exists()
    sys.modules.pop("train_digits", None)
