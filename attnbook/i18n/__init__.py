"""The Chinese edition: translations per page (locale/zh/*.po), the generated Chinese book (zh/),
and the rules a translation is held to. `python -m attnbook.i18n --help` lists the commands."""

from .units import Unit, all_pages, page_units, toc_pages  # noqa: F401
