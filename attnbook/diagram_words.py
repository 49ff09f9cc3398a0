"""The words of the diagrams in ``figures/`` (:mod:`attnbook.diagrams`), in both languages.

One table, :data:`WORDS`: each diagram function takes ``lang`` and writes ``WORDS[key]`` in it.
Kept apart from the drawing code (which imports matplotlib) so that ``make font``
(:mod:`attnbook.i18n.font`) can collect the Chinese characters the diagrams need.
"""

from __future__ import annotations

__all__ = ["LANGS", "WORDS", "word", "characters"]

LANGS = ("en", "zh")

#: Every word the diagrams write: key -> (English, Chinese); "{...}" fields are filled by
#: the drawing code (numbers and letters only). The Chinese uses the glossary's terms
#: (头, 词元, 查询, 键, 值, 转置; 重塑 for reshape, as chapter 09 writes it).
WORDS = {
    # pipeline_three_tokens
    "each_w": ("(each W is 4 x 2)", "（每个W都是4 x 2）"),
    "rows_cols": ("rows: queries\ncolumns: keys", "行：查询\n列：键"),
    "row_sums": ("each row\nsums to 1", "每一行\n之和为1"),
    "output": ("output $AV$", "输出\n$AV$"),
    "v_supplies": ("V supplies the values that the weights mix", "V提供值，权重对这些值加权求和"),
    # concat_matmul
    "one_product": ("one product: (8, 6) @ (6, 2)", "一次乘积：(8, 6) @ (6, 2)"),
    "two_in_one": ("two products in one: (8, 6) @ (6, 4)", "两个乘积合为一次：(8, 6) @ (6, 4)"),
    "green_block": ("The green block, X @ W1, is the same in both pictures; the purple block is X @ W2.",
                    "绿色块X @ W1在两幅图中完全相同；紫色块是X @ W2。"),
    # the multi-head diagrams
    "head": ("head {h}", "头{h}"),
    "head_quoted": ("'head {h}'", "“头{h}”"),
    "token": ("token {t}", "词元{t}"),
    "q_one_sequence": ("q for one sequence: (N, D) = ({n}, {d})", "一个序列的q：(N, D) = ({n}, {d})"),
    "reshape": ("reshape", "重塑"),
    "cut_rows": ("each token's row, cut into NH rows of HS", "每个词元的一行切成NH行，每行HS个"),
    "indexed": ("indexed [token, head, :]", "下标为[词元, 头, :]"),
    "transpose": ("transpose", "转置"),
    "swap": ("swap N, NH", "交换N与NH"),
    "row_h": ("Row h of every token's slice goes to head h, in token order: "
              "head 1's matrix is the orange rows a2 a3, b2 b3, c2 c3, d2 d3.",
              "每个词元切片的第h行按词元顺序进入头h：头1的矩阵就是橙色的a2 a3、b2 b3、c2 c3、d2 d3这几行。"),
    "head_outputs": ("head outputs (NH, N, HS) = ({nh}, {n}, {hs})", "各头的输出(NH, N, HS) = ({nh}, {n}, {hs})"),
    "transpose_back": ("transpose back", "转置回来"),
    "then_reshape": ("then reshape", "再重塑"),
    "merged": ("merged (N, NH*HS) = ({n}, {d})", "合并后(N, NH*HS) = ({n}, {d})"),
    "then_wo": ("then @ W_o (D, D)", "再乘以W_o (D, D)"),
    "side_by_side": ("Each token's row is its three heads' outputs side by side: "
                     "the concatenation of the list-of-heads version.",
                     "每个词元的一行是它三个头的输出并排放在一起：正是逐头列表版本中的拼接。"),
    "right": ("right: reshape to (N, NH, HS), then transpose", "正确：先重塑为(N, NH, HS)，再转置"),
    "wrong": ("wrong: reshape straight to (NH, N, HS)", "错误：直接重塑为(NH, N, HS)"),
    "own_columns": ("each head holds its own columns of every token", "每个头拿到每个词元中属于自己的列"),
    "head0_holds": ("'head 0' holds all of token a and part of b; rows are no longer tokens",
                    "“头0”拿到词元a的全部和b的一部分；行不再对应词元"),
    "both_shapes": ("Both results have shape (3, 4, 2); only the colours and labels show the difference.",
                    "两个结果的形状都是(3, 4, 2)；只有颜色和标签显出区别。"),
}


def word(key: str, lang: str, **fields) -> str:
    """The word(s) `key` of :data:`WORDS` in `lang`, fields filled."""
    if lang not in LANGS:
        raise ValueError(f"lang must be one of {LANGS}, got {lang!r}")
    return WORDS[key][LANGS.index(lang)].format(**fields)


def characters(lang: str) -> set[str]:
    """Every non-ASCII character of the diagrams' words in `lang`."""
    return {c for words in WORDS.values() for c in words[LANGS.index(lang)] if ord(c) > 127}
