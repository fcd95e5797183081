"""`make lint`'s last step: mypy must reject tests/typing/bad_usage.py with exactly the errors that its
``# expect: [code]`` comments name (line and code), and no others. Exits 1, saying what differs, if not.

Usage: python tests/typing/check_rejected.py [mypy arguments...]
"""
import re
import sys
from pathlib import Path

from mypy import api

BAD = Path(__file__).with_name("bad_usage.py")
ERROR = re.compile(r"^[^:]+:(\d+): error: .*\[([a-z-]+)\]$")


def main(argv: list[str]) -> int:
    expected = {(i, m.group(1)) for i, line in enumerate(BAD.read_text().splitlines(), 1)
                if (m := re.search(r"# expect: \[([a-z-]+)\]$", line))}
    stdout, stderr, status = api.run([*argv, "--no-error-summary", "--show-error-codes", str(BAD)])
    got = {(int(m.group(1)), m.group(2)) for m in map(ERROR.match, stdout.splitlines()) if m}
    if status == 1 and got == expected:
        print(f"mypy rejects {BAD.name} with the {len(expected)} expected errors")
        return 0
    print(f"{BAD.name}: mypy exited {status}; missing {sorted(expected - got)}, unexpected {sorted(got - expected)}",
          stdout, stderr, sep="\n", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
