"""`python -m tests.support.tee FILE ARGV…`: run ARGV with this process's stdin, and copy
every byte it writes to stdout into FILE as well (a stdio MCP client keeps the wire to itself;
the test reads FILE to see that nothing but protocol went out). ARGV dies with this process
(`DETEKTIV_LIFELINE`), and this process ends when its stdin does."""

from __future__ import annotations

import os
import subprocess
import sys
import threading


def main() -> int:
    record, argv = sys.argv[1], sys.argv[2:]
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             env={**os.environ, "DETEKTIV_LIFELINE": str(os.getpid())})
    assert child.stdin is not None and child.stdout is not None
    sink = child.stdin

    def forward() -> None:
        for chunk in iter(lambda: sys.stdin.buffer.read1(65536), b""):
            sink.write(chunk)
            sink.flush()
        sink.close()

    threading.Thread(target=forward, daemon=True).start()
    with open(record, "wb") as copy:
        for chunk in iter(lambda: child.stdout.read1(65536), b""):  # type: ignore[union-attr]
            copy.write(chunk)
            copy.flush()
            sys.stdout.buffer.write(chunk)
            sys.stdout.buffer.flush()
    return child.wait()


if __name__ == "__main__":
    sys.exit(main())
