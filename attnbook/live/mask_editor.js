// Chapter 06: a mask the reader edits by clicking cells; the weights are
// recomputed at once. A row with every key hidden follows the answer key's
// fully_masked="zeros": zero weights and a zero output, and says so.
// Data: q, k (one row per token), tokens, mask (true = may attend), causal.

function render({ model, el }) {
  setLanguage(model);
  el.classList.add("attnbook-live");
  const q = model.get("q"), k = model.get("k"), tokens = model.get("tokens");
  const root = Math.sqrt(k[0].length);
  const scores = q.map((qi) => k.map((kj) => dot(qi, kj) / root));
  const fig = el.appendChild(htmlEl("div", { class: "attnbook-live-figure" }));
  const caption = el.appendChild(htmlEl("p", { class: "attnbook-live-caption" }));
  const bar = el.appendChild(htmlEl("div", { class: "attnbook-live-control" }));
  bar.appendChild(htmlEl("span", {},
    tr("Click a cell to hide or show that key for that query.",
      "点击一个格子：对该查询隐藏或显示该键。")));
  const reset = bar.appendChild(htmlEl("button", { type: "button" },
    tr("causal mask", "因果掩码")));
  const all = bar.appendChild(htmlEl("button", { type: "button" },
    tr("no mask", "无掩码")));
  const setMask = (m) => { model.set("mask", m); model.save_changes(); };
  const toggle = (i, j) => setMask(model.get("mask").map((r, a) =>
    r.map((x, b) => (a === i && b === j ? !x : x))));
  reset.addEventListener("click", () => setMask(model.get("causal")));
  all.addEventListener("click", () => setMask(scores.map((r) => r.map(() => true))));
  const redraw = () => {
    const mask = model.get("mask");
    const w = scores.map((r, i) => softmax(r.map((x, j) => (mask[i][j] ? x : -Infinity))));
    const notes = w.map((r, i) => (mask[i].some((x) => x)
      ? [tr("sum ", "和 "), pyFixed(pairwiseSum(r), 2)] : tr("no key: all 0", "无键：全为0")));
    const empty = tokens.filter((_, i) => !mask[i].some((x) => x));
    const svg = heatmap(w, { id: "mask", rows: tokens, cols: tokens, digits: 2,
      hidden: mask.map((r) => r.map((x) => !x)), rowNote: notes, onCell: toggle,
      cell: 50, left: 74, xlabel: tr("keys (rows: queries)", "键（行：查询）"),
      label: tr("attention weights under the mask; ", "掩码下的注意力权重；") + w.map((r, i) =>
        tr(`row ${tokens[i]}: `, `${tokens[i]}行：`) + (mask[i].some((x) => x) ? r.map((x, j) =>
          (mask[i][j] ? pyFixed(x, 2) : tr("hidden", "已隐藏"))).join(", ")
          : tr("every key hidden, weights 0", "所有键都被隐藏，权重为0")))
        .join("; ") });
    const focused = fig.querySelector("rect:focus");
    fig.replaceChildren(svg);
    if (focused) {  // keep the keyboard where it was
      svg.querySelector(`rect[data-row="${focused.dataset.row}"]` +
        `[data-col="${focused.dataset.col}"]`).focus();
    }
    caption.replaceChildren(empty.length
      ? tr(`Every key is hidden from ${empty.map((t) => `"${t}"`).join(", ")}: ` +
        "softmax has nothing to share out (0/0). As the answer key does with " +
        "fully_masked=\"zeros\", such a row gets weights 0 and output 0; " +
        "by default (fully_masked=\"raise\") it stops with an error.",
        `${empty.map((t) => `“${t}”`).join("、")}看不到任何键：softmax无从分配（0/0）。` +
        "与参考实现在fully_masked=\"zeros\"时的做法一样，这样的行权重为0、输出为0；" +
        "默认情况下（fully_masked=\"raise\"）则报错停止。")
      : tr("Every query sees at least one key: each row of weights sums to 1.",
        "每个查询都至少能看到一个键：每行权重之和为1。"));
  };
  model.on("change:mask", redraw);
  redraw();
  return () => model.off("change:mask", redraw);
}

export default { render };
