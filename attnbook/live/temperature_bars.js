// Chapter 04: softmax(z / t) of fixed scores as bars, with its entropy, for
// the temperature t set by a slider. Data: z (the scores), labels.

function entropy(p) {  // nats; 0 log 0 counts as 0 (the chapter's entropy)
  return pairwiseSum(p.map((x) => (x > 0 ? -x * Math.log(x) : 0.0)));
}

function render({ model, el }) {
  setLanguage(model);
  el.classList.add("attnbook-live");
  const z = model.get("z"), labels = model.get("labels");
  const fig = el.appendChild(htmlEl("div", { class: "attnbook-live-figure" }));
  const caption = el.appendChild(htmlEl("p", { class: "attnbook-live-caption" }));
  const redraw = (t) => {
    const p = softmax(z, t);
    fig.replaceChildren(barChart(p, { labels, digits: 2, ymax: 1.1,
      xlabel: tr("position", "位置"), label: tr(`softmax of the scores ${z.join(", ")} ` +
        `divided by t = ${pyFixed(t, 2)}: weights `,
        `分数${z.join(", ")}除以t = ${pyFixed(t, 2)}后的softmax：权重 `) +
        p.map((x) => pyFixed(x, 2)).join(", ") }));
    caption.replaceChildren(
      tr(`softmax(z / t), t = ${pyFixed(t, 2)}: entropy `, `softmax(z / t)，t = ${pyFixed(t, 2)}：熵 `),
      htmlEl("span", { "data-live-number": "" }, pyFixed(entropy(p), 3)),
      tr(` nats (largest possible: log ${z.length} = ${pyFixed(Math.log(z.length), 3)})`,
        ` nats（最大可能值：log ${z.length} = ${pyFixed(Math.log(z.length), 3)}）`));
  };
  return slider(model, el, { label: tr("temperature t", "温度t"), digits: 2 }, redraw);
}

export default { render };
