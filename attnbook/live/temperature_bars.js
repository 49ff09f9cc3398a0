// Chapter 04: softmax(z / t) of fixed scores as bars, with its entropy, for
// the temperature t set by a slider. Data: z (the scores), labels.

function entropy(p) {  // nats; 0 log 0 counts as 0 (the chapter's entropy)
  return pairwiseSum(p.map((x) => (x > 0 ? -x * Math.log(x) : 0.0)));
}

function render({ model, el }) {
  el.classList.add("attnbook-live");
  const z = model.get("z"), labels = model.get("labels");
  const fig = el.appendChild(htmlEl("div", { class: "attnbook-live-figure" }));
  const caption = el.appendChild(htmlEl("p", { class: "attnbook-live-caption" }));
  const redraw = (t) => {
    const p = softmax(z, t);
    fig.replaceChildren(barChart(p, { labels, digits: 2, ymax: 1.1,
      xlabel: "position", label: `softmax of the scores ${z.join(", ")} ` +
        `divided by t = ${pyFixed(t, 2)}: weights ` +
        p.map((x) => pyFixed(x, 2)).join(", ") }));
    caption.replaceChildren(
      `softmax(z / t), t = ${pyFixed(t, 2)}: entropy `,
      htmlEl("span", { "data-live-number": "" }, pyFixed(entropy(p), 3)),
      ` nats (largest possible: log ${z.length} = ` +
        `${pyFixed(Math.log(z.length), 3)})`);
  };
  return slider(model, el, { label: "temperature t", digits: 2 }, redraw);
}

export default { render };
