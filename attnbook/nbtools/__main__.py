"""``python -m attnbook.nbtools COMMAND ...``: see :mod:`attnbook.nbtools`."""

from __future__ import annotations

import sys

from .execute import execute
from .shape import prepare
from .student import write_student_copies
from .tidy import tidy

USAGE = """usage: python -m attnbook.nbtools COMMAND ...
  prepare NOTEBOOK...          split cells, insert/update the bootstrap cell, add slide metadata
  tidy NOTEBOOK...             join split stream outputs, remove widget state and widget outputs
                               (except the live figures' state, renumbered)
  student OUTDIR [--key] NOTEBOOK...
                               write the student kit into OUTDIR (solutions removed; the
                               kit's own exercises sealed in its answer key unless --key)
  execute NOTEBOOK...          execute in place with nbconvert (fixed Output-widget sends)"""


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in ("tidy", "prepare", "student", "execute"):
        print(USAGE, file=sys.stderr)
        return 2
    command, args = argv[0], argv[1:]
    if command == "tidy":
        for p in args:
            if tidy(p):
                print(f"tidied {p}")
    elif command == "execute":
        return execute(args)
    elif command == "prepare":
        for p in args:
            if prepare(p):
                print(f"prepared {p}: cells split at headings and solution gates, bootstrap cell, slide metadata")
    else:
        if not args:
            print(USAGE, file=sys.stderr)
            return 2
        key = "--key" in args
        args = [a for a in args if a != "--key"]
        for target in write_student_copies(args[0], args[1:], key=key):
            print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
