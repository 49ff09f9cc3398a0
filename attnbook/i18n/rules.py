"""What a translation must keep: the rules `make test` holds every Chinese unit to.

- Everything that is not prose is identical: inline code, math, link targets, the targets
  of roles ({ref}, {doc}, {numref}), label lines `(name)=`, directive options (`:label:`,
  `:class:`), fenced code blocks, headings' count and levels, every number of the English.
- Chinese punctuation next to Chinese text (，。：；？！（）), and no space between Chinese
  and code, math or Latin words (注意力图（attention map）, 用`np.einsum`计算).
- Glossary terms: a unit whose English uses a glossary term (outside code and math) uses the
  term's Chinese name from the glossary's Chinese column; the first such unit of a page (not
  a heading) gives the English in brackets: 注意力图（attention map）. A translator comment
  `glossary: not <term>` on an entry exempts it (the word used in another sense).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .units import BOOK_ROOT, Unit

CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK = re.compile(f"[{CJK}]")
_MATH_BLOCK = re.compile(r"\$\$.+?\$\$", re.S)
_MATH = re.compile(r"(?<![\\$])\$(?!\s)((?:[^$\n]|\n(?![ \t]*\n))+?)(?<![\s\\])\$(?!\d)")
_ROLE = re.compile(r"\{([a-z:]+)\}`([^`]*)`")
_CODE = re.compile(r"(`+)(.+?)\1", re.S)
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_LABEL = re.compile(r"^\s*\(([^)\s]+)\)=\s*$", re.M)
_OPTION = re.compile(r"^\s*(:(?:label|class|name|nowrap|number|tags|width|align|enumerated|"
                     r"hidden|dropdown|open|alt|figwidth|scale):.*?)\s*$", re.M)
_HEADING = re.compile(r"^(#{1,6}) ", re.M)
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])(\d[\d,]*(?:\.\d+)?)")
_DIRECTIVE = re.compile(r"^\s*(`{3,}|:{3,})\{([a-z-]+)\}", re.M)


_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,}|:{3,})(.*)$")


def _fences(text: str) -> tuple[list[str], str]:
    """(the fenced code blocks, the text without them and without directive fence lines).

    A line scanner: ```` ```{name} ```` and ``:::{name}`` open a directive (its fence lines are
    structure, its body prose), ```` ```python ```` or a bare ```` ``` ```` outside a directive's
    closing position opens a code block, kept whole; a bare fence closes what is open.
    """
    code, out, stack, cur, cur_fence = [], [], [], None, ""
    for line in text.split("\n"):
        m = _FENCE_OPEN.match(line)
        if cur is not None:
            cur.append(line)
            if m and m.group(1)[0] == cur_fence[0] and len(m.group(1)) >= len(cur_fence) \
                    and not m.group(2).strip():
                code.append("\n".join(cur))
                cur = None
            continue
        if m:
            run, info = m.group(1), m.group(2).strip()
            if info.startswith("{") or (info and run[0] == ":"):
                stack.append(run)
                out.append(" ")
                continue
            if not info and stack and stack[-1][0] == run[0] and len(run) >= len(stack[-1]):
                stack.pop()
                out.append(" ")
                continue
            if run[0] != ":":
                cur, cur_fence = [line], run
                continue
        out.append(line)
    if cur is not None:
        code.append("\n".join(cur))
    return code, "\n".join(out)


def _role_target(name: str, content: str) -> str:
    m = re.search(r"<([^<>]+)>\s*$", content)
    return f"{name}:{m.group(1) if m else content}"


def parts(text: str) -> dict[str, Counter]:
    """The parts of a unit that must be identical in every language."""
    fenced, rest = _fences(text)
    blocks = _MATH_BLOCK.findall(rest)
    rest = _MATH_BLOCK.sub(" ", rest)
    roles = [_role_target(n, c) for n, c in _ROLE.findall(rest)]
    rest = _ROLE.sub(" ", rest)
    code = [m.group(2) for m in _CODE.finditer(rest)]
    rest = _CODE.sub(" ", rest)
    maths = _MATH.findall(rest)
    rest = _MATH.sub(" ", rest)
    return {
        "fenced code": Counter(fenced), "display math": Counter(blocks), "role target": Counter(roles),
        "inline code": Counter(code), "math": Counter(maths), "link target": Counter(_LINK.findall(rest)),
        "label": Counter(_LABEL.findall(text)), "directive option": Counter(_OPTION.findall(text)),
        "directive": Counter(d for _, d in _DIRECTIVE.findall(text)),
        "heading": Counter(_HEADING.findall(_fences(text)[1])),
    }


def prose(text: str) -> str:
    """The unit without code, math, roles, link targets and HTML tags: the words a reader reads."""
    t = _fences(text)[1]
    t = _MATH_BLOCK.sub(" ", t)
    t = _ROLE.sub("X", t)   # inline code, math and roles read as a Latin word, X: the spacing
    t = _CODE.sub("X", t)   # rules see `q`的 as X的, and $x$ cm as X cm
    t = _MATH.sub("X", t)
    t = _LINK.sub("] ", t)
    t = re.sub(r"<[^>\n]+>", " ", t)
    t = _OPTION.sub(" ", t)
    t = _LABEL.sub(" ", t)
    return t


def numbers(text: str) -> Counter:
    return Counter(n.replace(",", "") for n in _NUMBER.findall(prose(text)))


# A number and the word for its size after it: 4k, 128K, 1M, 7B, 54 thousand, 13.7万, 100万, 1亿.
_SIZED = re.compile(r"(?<![A-Za-z0-9_.])(\d[\d,]*(?:\.\d+)?)"
                    r"([kKMB](?![A-Za-z0-9])|百万|千万|[千万亿]|[ -](?:thousand|million|billion)(?![a-z]))?")
_SIZES = {"k": (10**3, 2**10), "K": (10**3, 2**10), "M": (10**6, 2**20), "B": (10**9,),
          "千": (10**3,), "万": (10**4,), "亿": (10**8,),
          "百万": (10**6,), "千万": (10**7,)}


def _values(number: str, size: str | None) -> frozenset:
    """What a written number may mean: 04 is 4; 4k is 4,000 or 4,096; 13.7万 is 137,000.
    A decimal with no size word means only itself (0.50 is not 0.5: the digits were printed)."""
    digits = number.replace(",", "")
    if size:
        return frozenset(round(float(digits) * f, 6) for f in _SIZES[size.replace("-", " ").strip()
                                                                        .replace("thousand", "k")
                                                                        .replace("million", "M")
                                                                        .replace("billion", "B")])
    return frozenset([int(digits)]) if "." not in digits else frozenset()


def _sized_numbers(text: str) -> list[tuple[str, str, frozenset]]:
    return [(m.group(1).replace(",", ""), m.group(2) or "", _values(m.group(1), m.group(2)))
            for m in _SIZED.finditer(prose(text))]


def missing_numbers(english: str, chinese: str) -> list[str]:
    """The English's numbers the Chinese does not have, written the same or as the same value in
    Chinese form (13.7万 for 137k, 100万 for 1M, 4096 for 4k, 第4章 for chapter 04)."""
    zh = _sized_numbers(chinese)
    rest = []
    for digits, size, values in _sized_numbers(english):   # the same digits and size word first
        same = next((i for i, (d, s, _) in enumerate(zh) if d == digits and s == size), None)
        if same is None:
            rest.append((digits + size, values))
        else:
            del zh[same]
    missing = []
    for written, values in rest:                          # then the same value in another form
        same = next((i for i, (_, _, v) in enumerate(zh) if values & v), None)
        if same is None:
            missing.append(written)
        else:
            del zh[same]
    return missing


# 位置信息（旋转位置编码（RoPE））: an English gloss in a bracket that is inside another bracket.
_NESTED_GLOSS = re.compile(r"[（(][^（）()]*[（(][A-Za-z][^（）()]*[）)][^（）()]*[）)]")
# [注意力（attention）](ch.ipynb): a gloss in a link's text.
_LINK_GLOSS = re.compile(r"\[[^\]\n]*（[A-Za-z][^）\n]*）[^\]\n]*\]\(")
# logit（logit）, FlashAttention（FlashAttention）: a term glossed by itself.
_SAME_GLOSS = re.compile(r"(?<![A-Za-z])([A-Za-z][\w\- ]*?)（\1）", re.I)

_PUNCT_AFTER = re.compile(f"[{CJK}][,;:?!]|[{CJK}]\\.(?!\\w)|[,;:?!] *[{CJK}]")
_SPACE = re.compile(f"[{CJK}，。：；？！、（）] +[A-Za-z0-9`$]|[A-Za-z0-9`$] +[{CJK}，。：；？！、（）]")


@lru_cache(maxsize=1)
def _markdown():
    from markdown_it import MarkdownIt
    from mdit_py_plugins.dollarmath import dollarmath_plugin

    return MarkdownIt("commonmark").use(dollarmath_plugin)


def stray_emphasis(text: str) -> int:
    """How many * or _ delimiters CommonMark leaves as literal characters (outside code and math).

    In Chinese a bold that closes after Chinese punctuation and is followed by a letter,
    `**线程。**NumPy`, or opens after a letter before punctuation, `的**“注意力”**`, is not
    emphasis: the asterisks show. Punctuation goes outside the stars: `**线程**。`.
    """
    html = _markdown().render(text)
    html = re.sub(r"<code>.*?</code>|<span class=\"math[^\"]*\">.*?</span>|<pre>.*?</pre>", " ", html,
                  flags=re.S)
    return len(re.findall(r"\*\*|(?<![\w*])\*(?=\S)", html))


def form_problems(unit: Unit, zh: str, tcomment: str = "") -> list[str]:
    out = []
    if unit.kind in ("title", "caption-part"):
        return out if _CJK.search(zh) else ["not Chinese"]
    if unit.kind == "figure":  # a figure's label: its own rules (figures.py)
        from .figures import form_problems as figure_problems

        return figure_problems(unit.text, zh, tcomment)
    en_parts, zh_parts = parts(unit.text), parts(zh)
    for name, want in en_parts.items():
        got = zh_parts[name]
        if want != got:
            missing = list((want - got).elements())[:3]
            extra = list((got - want).elements())[:3]
            msg = f"{name} differs from the English"
            if missing:
                msg += f"; missing {missing}"
            if extra:
                msg += f"; added {extra}"
            out.append(msg)
    missing = missing_numbers(unit.text, zh)
    if missing:
        out.append(f"numbers of the English missing: {sorted(missing)}")
    for m in _NESTED_GLOSS.finditer(zh_prose_all := prose(zh)):
        out.append(f"a gloss inside another bracket: {m.group(0)!r} (gloss the term once, at its "
                   "first use, outside other brackets)")
        break
    for m in _LINK_GLOSS.finditer(_fences(zh)[1]):
        out.append(f"a gloss inside a link's text: {m.group(0)!r} (put the English outside the link, "
                   "or leave it out)")
        break
    for m in _SAME_GLOSS.finditer(_MATH.sub(" ", _fences(zh)[1])):
        out.append(f"a gloss identical to its term: {m.group(0)!r}")
        break
    words = re.findall(r"[A-Za-z]{3,}", prose(unit.text))
    zh_prose = prose(zh)
    if len(words) >= 3 and not _CJK.search(zh_prose):
        out.append("not translated into Chinese")
    if stray_emphasis(zh) > stray_emphasis(unit.text):
        out.append("bold or italics that CommonMark will not render: the stars show (put Chinese "
                   "punctuation outside them: **线程**。 not **线程。**)")
    for m in _PUNCT_AFTER.finditer(zh_prose):
        out.append(f"ASCII punctuation next to Chinese: {m.group(0)!r} (use ，。：；？！（）)")
        break
    for m in _SPACE.finditer(zh_prose):
        out.append(f"a space between Chinese and code, math or Latin: {m.group(0)!r}")
        break
    return out


# ----------------------------------------------------------------------------------------
# The glossary: the single source of the Chinese names

@dataclass(frozen=True)
class Term:
    english: tuple[str, ...]   # the names to look for in the English (lower case)
    chinese: tuple[str, ...]   # any of these in the Chinese satisfies the rule
    row: str                   # the glossary row, for messages


def _names(cell: str, *, keep_parenthesis: bool) -> list[str]:
    cell = re.sub(r"`[^`]*`", "", cell)
    out = []
    for alt in cell.split(" / "):
        alt = alt.strip()
        inner = re.findall(r"[（(]([^）)]*)[）)]", alt)
        main = re.sub(r"\s*[（(][^）)]*[）)]", "", alt).strip()
        if main:
            out.append(main)
        if keep_parenthesis:
            out += [i.strip() for i in inner for i in i.split(",") if i.strip()]
    return out


# Glossary entries whose English is also an everyday word used in its everyday sense all over
# the book ("the keys a query can reach"): their Chinese is not required wherever the word is.
ORDINARY_WORDS = {"reach", "state"}  # "state a claim", the online softmax's state (m, l, o)
# Phrases in which a term's English is not the term ("the answer key" is no key).
EVERYDAY_PHRASES = ("answer keys", "answer key", "expected values", "expected value")
IRREGULAR_PLURALS = (("y", "ies"), ("ix", "ices"), ("ex", "ices"))


def _squeeze(text: str) -> str:
    """No space between Chinese and Latin or digits (the book's Chinese style)."""
    text = text.strip()
    text = re.sub(f"(?<=[{CJK}]) +(?=[A-Za-z0-9δ`$])", "", text)
    return re.sub(f"(?<=[A-Za-z0-9δ`$]) +(?=[{CJK}])", "", text)


@lru_cache(maxsize=None)
def glossary_terms(root: Path = BOOK_ROOT) -> tuple[Term, ...]:
    """The glossary's rows: English names (parentheses dropped) and Chinese names (kept)."""
    terms = []
    for line in (root / "glossary.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not line.startswith("|") or set(cells[0]) <= set("-: "):
            continue
        if cells[0] == "English":
            continue
        en = tuple(n.strip().lower() for n in re.split(r",\s*", " / ".join(_names(cells[0], keep_parenthesis=False)).replace(" / ", ","))
                   if n.strip())
        zh = tuple(_squeeze(n) for n in re.split(r"[,，、]", " / ".join(_names(cells[1], keep_parenthesis=True)).replace(" / ", ","))
                   if n.strip())
        if en[0] in ORDINARY_WORDS:
            continue
        if en and zh and any(_CJK.search(z) for z in zh):  # "FlashAttention": the same in both
            terms.append(Term(en, zh, cells[0]))
    return tuple(terms)


def _normal(english: str) -> str:
    """The English as the term rule reads it: prose only, lower case, one space, no everyday
    phrases."""
    text = re.sub(r"\s+", " ", prose(english).lower())
    for phrase in EVERYDAY_PHRASES:
        text = text.replace(phrase, " ")
    return text


@lru_cache(maxsize=None)
def _patterns(term: Term, root: Path = BOOK_ROOT):
    """(longer names to take out first, [(name, pattern)]) for one term, compiled once.

    "rotary position embedding" is not a use of "position embedding" nor of "embedding": the
    longer glossary names that contain one of this term's names are taken out first."""
    longer = sorted({name for other in glossary_terms(root) if other is not term
                     for name in other.english
                     if any(n != name and n in name for n in term.english)}, key=len, reverse=True)
    strip = re.compile("|".join(map(re.escape, longer))) if longer else None
    found = []
    for name in term.english:
        forms = [re.escape(name) + (r"(?:e?s)?" if re.search(r"[a-z]$", name) else "")]
        for singular, plural in IRREGULAR_PLURALS:
            if name.endswith(singular):
                forms.append(re.escape(name[: -len(singular)] + plural))
        found.append((name, re.compile(rf"(?<![\w-])(?:{'|'.join(forms)})(?![\w-])")))
    return strip, found


def _uses_normal(term: Term, text: str, root: Path = BOOK_ROOT) -> str | None:
    strip, found = _patterns(term, root)
    if strip is not None:
        text = strip.sub(" ", text)
    return next((name for name, pattern in found if pattern.search(text)), None)


def uses(term: Term, english: str, root: Path = BOOK_ROOT) -> str | None:
    """The English name of `term` this English prose uses (whole words, any case, plurals),
    or None; a longer glossary term that contains it does not count."""
    return _uses_normal(term, _normal(english), root)


def term_problems(page: str, units: list[Unit], zh: dict[str, str], comments: dict[str, str],
                  root: Path = BOOK_ROOT, glossed: set[str] | None = None) -> list[str]:
    """Glossary terms on one page: each used in Chinese; where the page must gloss a term
    (`glossed`, the rows of the terms it must gloss; None: every term it uses), the first use
    gives the English in brackets. Elsewhere a gloss is allowed, not wanted."""
    out = []
    units = [u for u in units if u.ctx in zh and u.kind not in ("title", "caption-part")]
    normal = {u.ctx: _normal(u.text) for u in units}
    squeezed = {u.ctx: _squeeze(zh[u.ctx]) for u in units}
    for term in glossary_terms(root):
        first = glossed is None or term.row in glossed
        for u in units:
            name = _uses_normal(term, normal[u.ctx], root)
            if name is None or f"glossary: not {name}" in comments.get(u.ctx, ""):
                continue
            if u.kind == "figure" and "figure: as in English" in comments.get(u.ctx, ""):
                continue  # a figure's string kept in English (a token, a symbol)
            text = squeezed[u.ctx]
            found = [c for c in term.chinese if c.lower() in text.lower()]
            if not found:
                out.append(f"{u.ctx}: uses {name!r}; the Chinese has none of {list(term.chinese)}")
                continue
            if first and u.kind != "figure" and not _is_heading_only(text):  # a label: no gloss
                first = False
                if not any(_CJK.search(c) for c in found):
                    continue  # the English name itself (token, logits): nothing to bracket
                if any(w.lower() in name for c in found for w in re.findall(r"[A-Za-z]{2,}", c)):
                    continue  # KV缓存, Adam优化器, RoPE基数: the English is in the name already
                if not re.search(rf"[（(][^）)]*{re.escape(name)}", _LINK.sub("]", text), re.I):
                    out.append(f"{u.ctx}: first use of {list(term.chinese)[0]} on this page: give the "
                               f"English in brackets, e.g. {term.chinese[0]}（{name}）")
    return out


def _is_heading_only(text: str) -> bool:
    return all(line.startswith("#") for line in text.strip().splitlines())


# ----------------------------------------------------------------------------------------
# Fixed Chinese terms (issue 31): words a native reader misreads, and one name per term

# Never in any Chinese unit: (pattern, why).
BANNED_ZH = (
    (r"逻辑值", "逻辑值 reads as a Boolean: write logit（未归一化的对数几率）, then logit"),
    (r"价值向量", "value is 值 / 值向量 (as in d2l-zh), not 价值向量"),
    (r"对数和指数", "log-sum-exp is log-sum-exp（LSE）, not 对数和指数 ('log and exp')"),
    (r"前向计算|前向传递", "forward pass is 前向传播 everywhere"),
    (r"注意力池", "the sink is 注意力汇聚点 (注意力池 collides with attention pooling)"),
    (r"业界", "'the field' is 学界 / 这一领域"),
    (r"门控(?:（gate）|logit)", "gate as a noun is 门 (d2l-zh: 更新门, 重置门); 门控 is 'gated'"),
    (r"(?<=[A-Za-z])等(?=[（(，,])", "et al. is 等人"),
    (r"原文`\d{3}`", "a source is cited as 来源`001`"),
    (r"《[A-Za-z]", "an English title is in italics; 《》 only for Chinese titles"),
    (r"动手试一试", "the interactive sections are 动手试试"),
)
_BANNED_ZH = tuple((re.compile(p), why) for p, why in BANNED_ZH)

# An English name whose Chinese is one name on every page: (English, Chinese).
ONE_NAME = (
    ("forward pass", "前向传播"),
    ("lightning indexer", "闪电索引器"),
    ("attention sink", "注意力汇聚点"),
)


def banned_term_problems(units: list[Unit], zh: dict[str, str]) -> list[str]:
    """Chinese units that use a banned word, or give a ONE_NAME term another name."""
    out = []
    for u in units:
        text = zh.get(u.ctx, "")
        if not text:
            continue
        for pattern, why in _BANNED_ZH:
            m = pattern.search(text)
            if m:
                out.append(f"{u.ctx}: {text[max(0, m.start() - 8):m.end() + 8]!r}: {why}")
        english = _normal(u.text)
        for name, chinese in ONE_NAME:
            if re.search(rf"(?<![\w-]){re.escape(name)}(?:e?s)?(?![\w-])", english) \
                    and chinese not in _squeeze(text):
                out.append(f"{u.ctx}: uses {name!r}; its one Chinese name is {chinese}")
    return out
