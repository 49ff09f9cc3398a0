"""The live figures' base classes and the helpers every figure uses: the ES module (the
shared ``core.js`` and the figure's own file), the style sheet, the notebook's language and
Python's number formatting. The figures themselves are in :mod:`attnbook.live`."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent


def esm_source(js_file: str) -> str:
    """The ES module of a figure: the shared core, then the figure's file."""
    core = (HERE / "core.js").read_text(encoding="utf-8")
    own = (HERE / js_file).read_text(encoding="utf-8")
    return core.rstrip("\n") + "\n\n" + own


def css_source() -> str:
    """The style sheet every live figure carries."""
    return (HERE / "live.css").read_text(encoding="utf-8")


def notebook_language() -> str:
    """"zh" when the running notebook is one of the Chinese edition's (zh/chapters/...), else "en".

    Jupyter servers tell the kernel which notebook it runs (JPY_SESSION_NAME, the notebook's
    path); without it (nbconvert, nbval, a script) the answer is "en".
    """
    import os

    path = os.environ.get("JPY_SESSION_NAME", "").replace("\\", "/")
    return "zh" if path.startswith("zh/") or "/zh/" in path else "en"


#: What a reader with JavaScript off sees on the site before a live figure, instead of an
#: empty box. The notebooks store the English (their outputs are one for both editions); the
#: Chinese site shows the Chinese (attnbook/i18n/sphinx_ext.py, tested in tests/site).
NOSCRIPT = {
    "en": ("This live figure needs JavaScript. Without it, the chapter's static figures show "
           "the same computation at fixed settings."),
    "zh": "这个交互图需要JavaScript。没有JavaScript时，本章的静态图在固定的设置下展示同样的计算。",
}


def noscript_note(lang: str = "en") -> str:
    """The HTML of the no-JavaScript note in `lang`."""
    return f"<noscript data-attnbook-live><p><em>{NOSCRIPT[lang]}</em></p></noscript>"


def _fixed(x: float, digits: int) -> str:
    """Python's formatting, as the JavaScript core's pyFixed reproduces it."""
    return f"{float(x):.{digits}f}"


try:  # anywidget is in requirements.txt; without it the module still imports
    import anywidget
    import traitlets
except ModuleNotFoundError:  # pragma: no cover
    anywidget = None

if anywidget is not None:

    class LiveFigure(anywidget.AnyWidget):
        """Base class of the live figures (see the module's docstring).

        A subclass sets ``js_file`` (its JavaScript, in this folder) and
        implements :meth:`numbers`.
        """

        js_file = ""
        description = "a live figure"
        # The language of the figure's own words in JupyterLab (on the site, the page's
        # lang decides): "zh" in a notebook of the Chinese edition (zh/...).
        lang = traitlets.Unicode().tag(sync=True)

        @traitlets.default("lang")
        def _lang_default(self):
            return notebook_language()

        def __init_subclass__(cls, **kwargs):
            super().__init_subclass__(**kwargs)
            # only where the class body names its file (add_traits makes
            # subclasses on the fly, whose _esm is then a trait)
            if "js_file" in cls.__dict__ and cls.js_file:
                cls._esm = esm_source(cls.js_file)
                cls._css = css_source()

        def numbers(self, control=None) -> list[str]:
            """The numbers the figure shows at ``control``, computed in Python."""
            raise NotImplementedError

        @classmethod
        def from_state(cls, state: dict):
            """The figure whose stored widget state is ``state`` (no checks)."""
            obj = cls.__new__(cls)
            own = set(cls.class_trait_names(sync=True)) - set(
                anywidget.AnyWidget.class_trait_names(sync=True))
            anywidget.AnyWidget.__init__(
                obj, **{n: state[n] for n in own if n in state})
            return obj

        def __repr__(self):
            return f"{type(self).__name__}: {self.description}"

        def _ipython_display_(self):
            from IPython.display import HTML, display

            # what a reader with JavaScript off sees on the site, instead of
            # an empty box (with JavaScript on, a <noscript> shows nothing)
            display(HTML(noscript_note("en")))
            bundle = self._repr_mimebundle_()
            data, meta = bundle if isinstance(bundle, tuple) else (bundle, {})
            display(data, metadata=meta, raw=True)

    class SliderFigure(LiveFigure):
        """A live figure with one slider: ``value`` in [min, max] by step."""

        value = traitlets.Float().tag(sync=True)
        min = traitlets.Float().tag(sync=True)
        max = traitlets.Float().tag(sync=True)
        step = traitlets.Float().tag(sync=True)

        def __init__(self, *, value, min, max, step, **kwargs):
            if not (min <= value <= max) or step <= 0:
                raise ValueError(f"need min <= value <= max and step > 0, got "
                                 f"{min}, {value}, {max}, step {step}")
            super().__init__(value=value, min=min, max=max, step=step, **kwargs)

        def control_values(self) -> list[float]:
            """Every value the slider can take, as the browser gives them."""
            n = round((self.max - self.min) / self.step)
            return [round(self.min + k * self.step, 10) for k in range(n + 1)]

        def __repr__(self):
            return (f"{type(self).__name__}: {self.description} "
                    f"(value {self.value:g})")
