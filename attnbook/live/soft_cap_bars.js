// Chapter 20: one row of scores soft-capped, c tanh(s / c), and the softmax
// weights of the capped row as bars, for the cap c set by a slider.
// Data: z (the scores), labels.

function render({ model, el }) {
  el.classList.add("attnbook-live");
  const z = model.get("z"), labels = model.get("labels");
  const fig = el.appendChild(htmlEl("div", { class: "attnbook-live-figure" }));
  const caption = el.appendChild(htmlEl("p", { class: "attnbook-live-caption" }));
  const redraw = (c) => {
    const capped = z.map((s) => c * Math.tanh(s / c));
    const p = softmax(capped);
    fig.replaceChildren(barChart(p, { labels, digits: 2, ymax: 1.1,
      xlabel: "key", label: `softmax of the scores ${z.join(", ")} ` +
        `soft-capped at c = ${pyFixed(c, 0)}: weights ` +
        p.map((x) => pyFixed(x, 2)).join(", ") }));
    const parts = [`scores capped at c = ${pyFixed(c, 0)}: `];
    capped.forEach((s, i) => {
      parts.push(htmlEl("span", { "data-live-number": "" }, pyFixed(s, 2)));
      if (i < capped.length - 1) parts.push(", ");
    });
    parts.push(` (uncapped: ${z.join(", ")})`);
    caption.replaceChildren(...parts);
  };
  return slider(model, el, { label: "cap c", digits: 0 }, redraw);
}

export default { render };
