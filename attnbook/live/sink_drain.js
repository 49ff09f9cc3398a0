// Chapter 19: one row of attention with a sink (gpt-oss), the sink logit b
// on a slider: the softmax runs over the row's scores and b together, and
// the sink's share is taken from the keys. Data: z (the row's scores),
// values (one number per key), labels.

function render({ model, el }) {
  el.classList.add("attnbook-live");
  const z = model.get("z"), values = model.get("values");
  const labels = model.get("labels");
  const fig = el.appendChild(htmlEl("div", { class: "attnbook-live-figure" }));
  const caption = el.appendChild(htmlEl("p", { class: "attnbook-live-caption" }));
  const redraw = (b) => {
    const p = softmax(z.concat([b]));        // the keys, then the sink
    const w = p.slice(0, z.length);          // the sink's column dropped
    fig.replaceChildren(barChart(p, { labels: labels.concat(["sink"]),
      digits: 2, ymax: 1.1, xlabel: "key position, then the sink",
      label: `weights of one row with scores ${z.join(", ")} and sink ` +
        `logit b = ${pyFixed(b, 2)}: keys ` +
        w.map((x) => pyFixed(x, 2)).join(", ") +
        `, sink ${pyFixed(p[z.length], 2)}` }));
    caption.replaceChildren(
      `b = ${pyFixed(b, 2)}: the sink takes `,
      htmlEl("span", { "data-live-number": "" }, pyFixed(p[z.length], 3)),
      " of the row; output = weights @ values = ",
      htmlEl("span", { "data-live-number": "" }, pyFixed(dot(w, values), 3)),
      ` (values ${values.join(", ")}; the sink has none)`);
  };
  return slider(model, el, { label: "sink logit b", digits: 2 }, redraw);
}

export default { render };
