// Chapter 20: one row of scores soft-capped, c tanh(s / c), and the softmax
// weights of the capped row as bars, for the cap c set by a slider.
// Data: z (the scores), labels.

function render({ model, el }) {
  setLanguage(model);
  el.classList.add("attnbook-live");
  const z = model.get("z"), labels = model.get("labels");
  const fig = el.appendChild(htmlEl("div", { class: "attnbook-live-figure" }));
  const caption = el.appendChild(htmlEl("p", { class: "attnbook-live-caption" }));
  const redraw = (c) => {
    const capped = z.map((s) => c * Math.tanh(s / c));
    const p = softmax(capped);
    fig.replaceChildren(barChart(p, { labels, digits: 2, ymax: 1.1,
      xlabel: tr("key", "键"), label: tr(`softmax of the scores ${z.join(", ")} ` +
        `soft-capped at c = ${pyFixed(c, 0)}: weights `,
        `分数${z.join(", ")}在c = ${pyFixed(c, 0)}处软截断后的softmax：权重 `) +
        p.map((x) => pyFixed(x, 2)).join(", ") }));
    const parts = [tr(`scores capped at c = ${pyFixed(c, 0)}: `,
      `在c = ${pyFixed(c, 0)}处截断后的分数：`)];
    capped.forEach((s, i) => {
      parts.push(htmlEl("span", { "data-live-number": "" }, pyFixed(s, 2)));
      if (i < capped.length - 1) parts.push(", ");
    });
    parts.push(tr(` (uncapped: ${z.join(", ")})`, `（未截断：${z.join(", ")}）`));
    caption.replaceChildren(...parts);
  };
  return slider(model, el, { label: tr("cap c", "上限c"), digits: 0 }, redraw);
}

export default { render };
