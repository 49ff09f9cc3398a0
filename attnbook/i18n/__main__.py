"""The Chinese edition's commands (the Makefile calls them).

    python -m attnbook.i18n update [PAGE ...]   bring locale/zh/<page>.po in line with the English
                                                 (make translations); a changed English unit keeps
                                                 its old Chinese, marked fuzzy, the old English beside it
    python -m attnbook.i18n check [PAGE ...]    list every missing, stale or malformed translation and
                                                 every glossary term not used (exit 1 if any)
    python -m attnbook.i18n sheet PAGE [--todo]  the page as a plain-text translation sheet (stdout)
    python -m attnbook.i18n fill SHEET ...       write the sheets' Chinese into locale/zh
    python -m attnbook.i18n build               write the Chinese book zh/ from the English and locale/zh
    python -m attnbook.i18n font                the Chinese web font subset _static/fonts/ (make font)

PAGE: as in _toc.yml, e.g. chapters/03_softmax, or a file name (chapters/03_softmax.ipynb,
locale/zh/chapters/03_softmax.po); none means every page.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .units import BOOK_ROOT, all_pages


def _page(arg: str) -> str:
    p = arg.replace("\\", "/")
    for prefix in ("locale/zh/", "zh/"):
        if p.startswith(prefix):
            p = p[len(prefix):]
    for suffix in (".ipynb", ".md", ".po"):
        if p.endswith(suffix):
            p = p[: -len(suffix)]
    if p not in all_pages():
        raise SystemExit(f"{arg}: not a page of the book (see _toc.yml)")
    return p


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m attnbook.i18n", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["update", "check", "build", "font", "sheet", "fill"])
    ap.add_argument("pages", nargs="*")
    ap.add_argument("--todo", action="store_true", help="sheet: only untranslated or fuzzy entries")
    ap.add_argument("--no-terms", action="store_true", help="check: skip the glossary rule")
    args = ap.parse_args(argv)
    if args.command == "fill":
        from .sheet import fill

        for path in args.pages:
            page, n = fill(path)
            print(f"{page}: {n} translation(s) written")
        return 0
    pages = [_page(p) for p in args.pages] or all_pages()

    if args.command == "sheet":
        from .sheet import write_sheet

        for page in pages:
            sys.stdout.write(write_sheet(page, only_todo=args.todo))
        return 0

    if args.command == "update":
        from .catalog import update_page

        for page in pages:
            c = update_page(page)
            changed = {k: v for k, v in c.items() if v and k != "kept"}
            if changed:
                print(f"{page}: " + ", ".join(f"{v} {k}" for k, v in changed.items()))
        return 0

    if args.command == "check":
        from .catalog import problems
        from .check_terms import page_term_problems

        found = [str(p) for p in problems(pages)]
        if not args.no_terms:
            for page in pages:
                found += [f"locale/zh/{page}.po: {m}" for m in page_term_problems(page)]
        for line in found:
            print(line)
        print(f"{len(found)} problem(s) in {len(pages)} page(s)", file=sys.stderr)
        return 1 if found else 0

    if args.command == "build":
        from .generate import build

        for path in build():
            print(path)
        return 0

    if args.command == "font":
        from .font import make_font

        print(make_font())
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
