"""What ``make dist`` built: the wheel holds the package and its package data and nothing else, the sdist
holds what builds, tests and documents it. Prints each archive's files other than modules.

    python tests/check_dist.py dist
"""
from __future__ import annotations

import pathlib
import sys
import tarfile
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE_DATA = ["tapegrad/py.typed", "tapegrad/coverage_reference.json"]
# the sdist, beside the package: folders that must have files in it, and single files
SDIST_FOLDERS = ["tests", "docs", "notebooks", "examples", "benchmarks"]
SDIST_FILES = ["Makefile", "pyproject.toml", "README.md", "MANIFEST.in", "noxfile.py", "LICENSE", "CHANGELOG.md",
               "src/tapegrad/py.typed", "src/tapegrad/coverage_reference.json"]


def check(dist: pathlib.Path) -> None:
    [wheel] = dist.glob("tapegrad-*.whl")
    [sdist] = dist.glob("tapegrad-*.tar.gz")
    names = zipfile.ZipFile(wheel).namelist()
    missing = [name for name in PACKAGE_DATA if name not in names]
    assert not missing, f"{wheel.name} lacks its package data: {missing}"
    stray = sorted({name.split("/")[0] for name in names} - {"tapegrad"} - {n.split("/")[0] for n in names
                                                                           if ".dist-info/" in n})
    assert not stray, f"{wheel.name} holds more than the package: {stray}"
    print(f"{wheel.name}: {len(names)} files; besides the modules:")
    print("".join(f"  {name}\n" for name in names if not name.endswith(".py")), end="")

    top = sdist.name.removesuffix(".tar.gz")
    with tarfile.open(sdist) as archive:
        files = {member.name.removeprefix(f"{top}/") for member in archive.getmembers() if member.isfile()}
    # LICENSE and CHANGELOG.md go in whenever the source tree has them
    expected = [name for name in SDIST_FILES if name not in ("LICENSE", "CHANGELOG.md") or (ROOT / name).exists()]
    missing = [name for name in expected if name not in files]
    missing += [f"{folder}/" for folder in SDIST_FOLDERS if not any(f.startswith(f"{folder}/") for f in files)]
    assert not missing, f"{sdist.name} lacks {missing}"
    built = [f for f in files if f.startswith(("docs/_build/", "dist/", "build/")) or "/demo_output/" in f]
    assert not built, f"{sdist.name} holds build outputs: {built[:5]}"
    counts = {folder: sum(f.startswith(f"{folder}/") for f in files) for folder in SDIST_FOLDERS}
    print(f"{sdist.name}: {len(files)} files, " + ", ".join(f"{folder}/ {n}" for folder, n in counts.items())
          + "; " + ", ".join(name for name in SDIST_FILES if name in files and "/" not in name))


if __name__ == "__main__":
    check(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "dist"))
