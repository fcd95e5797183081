"""Every notebook's code cells run top to bottom without error (their asserts check the numbers)."""
import json
import pathlib

import pytest

NOTEBOOKS = sorted((pathlib.Path(__file__).parent.parent / "docs" / "tutorials").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path):
    cells = json.loads(path.read_text())["cells"]
    namespace = {"__name__": "__notebook__"}
    for cell in cells:
        if cell["cell_type"] == "code":
            exec(compile("".join(cell["source"]), f"{path.name}", "exec"), namespace)
