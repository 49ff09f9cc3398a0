// Chapter 21: one query of DeepSeek Sparse Attention. The indexer's scores
// choose which keys the query keeps (its top k); attention then runs over the
// kept keys alone. k is on a slider. Data: index (the indexer's score of each
// key), z (the attention scores), values (one number per key), labels.

// The kept keys: the k highest index scores, ties to the earlier key
// (like attnbook.reference.topk_mask).
function topK(index, k) {
  const order = index.map((_, j) => j).sort((a, b) => index[b] - index[a] || a - b);
  const keep = index.map(() => false);
  order.slice(0, k).forEach((j) => { keep[j] = true; });
  return keep;
}

function render({ model, el }) {
  setLanguage(model);
  el.classList.add("attnbook-live");
  const index = model.get("index"), z = model.get("z");
  const values = model.get("values"), labels = model.get("labels");
  const fig = el.appendChild(htmlEl("div", { class: "attnbook-live-figure" }));
  const caption = el.appendChild(htmlEl("p", { class: "attnbook-live-caption" }));
  const redraw = (k) => {
    const keep = topK(index, Math.round(k));
    const w = softmax(z.map((s, j) => (keep[j] ? s : -Infinity)));
    const out = dot(w, values);
    fig.replaceChildren(barChart(w, { labels: labels.map((l, j) =>
      (keep[j] ? l : `(${l})`)), digits: 2, ymax: 1.1,
      xlabel: tr("key (in brackets: not in the top k, weight 0)",
        "键（括号中的键不在前k个之内，权重为0）"),
      label: tr(`attention weights of one query keeping its top ${pyFixed(k, 0)} ` +
        "keys by index score: ", `一个查询按索引分数只保留前${pyFixed(k, 0)}个键时的注意力权重：`) +
        w.map((x) => pyFixed(x, 2)).join(", ") }));
    const kept = labels.filter((_, j) => keep[j]).join(", ");
    const ranked = index.map((_, j) => j)
      .sort((a, b) => index[b] - index[a] || a - b).map((j) => labels[j]);
    caption.replaceChildren(
      tr(`the indexer ranks the keys ${ranked.join(", ")}; the top ${pyFixed(k, 0)} ` +
        `kept: ${kept}; output = weights @ values = `,
        `索引器给键的排序：${ranked.join(", ")}；保留前${pyFixed(k, 0)}个：${kept}；` +
        "输出 = 权重 @ 值 = "),
      htmlEl("span", { "data-live-number": "" }, pyFixed(out, 3)),
      tr(` (values ${values.join(", ")})`, `（值为${values.join(", ")}）`));
  };
  return slider(model, el, { label: tr("keys kept, k", "保留的键数k"), digits: 0 }, redraw);
}

export default { render };
