// Chapter 19: one row of attention with a sink (gpt-oss), the sink logit b
// on a slider: the softmax runs over the row's scores and b together, and
// the sink's share is taken from the keys. Data: z (the row's scores),
// values (one number per key), labels.

function render({ model, el }) {
  setLanguage(model);
  el.classList.add("attnbook-live");
  const z = model.get("z"), values = model.get("values");
  const labels = model.get("labels");
  const fig = el.appendChild(htmlEl("div", { class: "attnbook-live-figure" }));
  const caption = el.appendChild(htmlEl("p", { class: "attnbook-live-caption" }));
  const redraw = (b) => {
    const p = softmax(z.concat([b]));        // the keys, then the sink
    const w = p.slice(0, z.length);          // the sink's column dropped
    fig.replaceChildren(barChart(p, { labels: labels.concat([tr("sink", "汇聚点")]),
      digits: 2, ymax: 1.1, xlabel: tr("key position, then the sink", "键的位置，最后是汇聚点"),
      label: tr(`weights of one row with scores ${z.join(", ")} and sink logit b = ` +
        `${pyFixed(b, 2)}: keys `, `分数为${z.join(", ")}、汇聚点logit b = ${pyFixed(b, 2)}` +
        "时一行的权重：键 ") + w.map((x) => pyFixed(x, 2)).join(", ") +
        tr(`, sink ${pyFixed(p[z.length], 2)}`, `，汇聚点 ${pyFixed(p[z.length], 2)}`) }));
    caption.replaceChildren(
      tr(`b = ${pyFixed(b, 2)}: the sink takes `, `b = ${pyFixed(b, 2)}：汇聚点占去这一行的`),
      htmlEl("span", { "data-live-number": "" }, pyFixed(p[z.length], 3)),
      tr(" of the row; output = weights @ values = ", "；输出 = 权重 @ 值 = "),
      htmlEl("span", { "data-live-number": "" }, pyFixed(dot(w, values), 3)),
      tr(` (values ${values.join(", ")}; the sink has none)`,
        `（值为${values.join(", ")}；汇聚点没有值）`));
  };
  return slider(model, el, { label: tr("sink logit b", "汇聚点logit b"), digits: 2 }, redraw);
}

export default { render };
