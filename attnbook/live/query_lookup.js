// Chapter 02: a soft lookup whose query moves from one query to another
// (slider a: q = (1 - a) q_from + a q_to). Bars: the weight of each key;
// below: the answer, the weighted average of the values.
// Data: K, q_from, q_to, values, names, unit, from_label, to_label; on a Chinese page
// names_zh, from_label_zh, to_label_zh when the chapter gives them (the people's names).

function render({ model, el }) {
  setLanguage(model);
  el.classList.add("attnbook-live");
  const zh = (key) => (LANG === "zh" && (model.get(key + "_zh") || []).length
    ? model.get(key + "_zh") : model.get(key));
  const K = model.get("K"), v = model.get("values"), names = zh("names");
  const qa = model.get("q_from"), qb = model.get("q_to");
  const unit = model.get("unit");
  const fig = el.appendChild(htmlEl("div", { class: "attnbook-live-figure" }));
  const caption = el.appendChild(htmlEl("p", { class: "attnbook-live-caption" }));
  const redraw = (a) => {
    const q = qa.map((x, i) => (1 - a) * x + a * qb[i]);
    const w = softmax(K.map((k) => dot(k, q)));
    const answer = dot(w, v);
    fig.replaceChildren(barChart(w, { labels: names, digits: 3, bar: 78,
      ymax: 1.1, xlabel: tr("key (weights)", "键（权重）"), label: tr("weights ", "权重 ") +
        w.map((x, i) => `${names[i]} ${pyFixed(x, 3)}`).join(", ") +
        tr(`; answer ${pyFixed(answer, 2)} ${unit}`, `；答案${pyFixed(answer, 2)} ${unit}`) }));
    caption.replaceChildren(tr("query [", "查询["),
      ...q.flatMap((x, i) => [i ? ", " : "",
        htmlEl("span", { "data-live-number": "" }, pyFixed(x, 1))]),
      tr("]: answer ", "]：答案 "),
      htmlEl("strong", { "data-live-number": "" }, pyFixed(answer, 2)),
      ` ${unit}`);
  };
  const label = tr(`query: ${model.get("from_label")} (0) to ${model.get("to_label")} (1)`,
    `查询：从${zh("from_label")}（0）到${zh("to_label")}（1）`);
  return slider(model, el, { label, digits: 2 }, redraw);
}

export default { render };
