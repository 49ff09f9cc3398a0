"""``python -m attnbook.nbtools COMMAND ...``: see :mod:`attnbook.nbtools`."""

from __future__ import annotations

import sys

from .execute import execute
from .setup_cell import set_repository
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
  execute NOTEBOOK...          execute in place with nbconvert (fixed Output-widget sends)
  repository URL REF NOTEBOOK...
                               set the book's repository (URL "" unsets it) in _config.yml and
                               in every notebook's set-up cell (its source only; no execution):
                               the launch buttons open tag REF (to be created on the commit that
                               records this), Colab installs attnbook from this clone's HEAD"""


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["simd-off"]:
        from .machine import simd_off_setting

        print(simd_off_setting())
        return 0
    if not argv or argv[0] not in ("tidy", "prepare", "student", "execute", "repository"):
        print(USAGE, file=sys.stderr)
        return 2
    command, args = argv[0], argv[1:]
    if command == "tidy":
        for p in args:
            if tidy(p):
                print(f"tidied {p}")
    elif command == "execute":
        return execute(args)
    elif command == "repository":
        if len(args) < 2:
            print(USAGE, file=sys.stderr)
            return 2
        try:
            changed = set_repository(args[0], args[1], args[2:])
        except ValueError as err:
            print(f"make repository: {err}", file=sys.stderr)
            return 1
        for line in changed or ["nothing to change"]:
            print(line)
        if args[0]:
            print(f"Now commit this and tag that commit {args[1]}, then push both, e.g.:\n"
                  f'  git commit -am "Publish {args[1]}" && git tag {args[1]} && '
                  f"git push origin HEAD {args[1]}\n"
                  "(the launch buttons open the tag; Colab installs the helper package from "
                  "the commit recorded, this clone's HEAD before the commit above)")
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
