// Chapter 22c: Kimi Delta Attention decays each key channel (row i of the
// state S) by its own exp(g_i) at every token; Gated DeltaNet decays the
// whole state by one number. The number of tokens t since a write is on a
// slider; the bars show what each channel still holds of it, the caption
// what one decay per token (the mean of the channels' g) would keep.
// Data: g (one log-decay per channel), labels.

function render({ model, el }) {
  setLanguage(model);
  el.classList.add("attnbook-live");
  const g = model.get("g"), labels = model.get("labels");
  const gMean = pairwiseSum(g) / g.length;
  const fig = el.appendChild(htmlEl("div", { class: "attnbook-live-figure" }));
  const caption = el.appendChild(htmlEl("p", { class: "attnbook-live-caption" }));
  const redraw = (t) => {
    const kept = g.map(() => 1.0);
    let one = 1.0;
    for (let s = 0; s < Math.round(t); s++) {   // the state, token by token
      g.forEach((gi, i) => { kept[i] *= Math.exp(gi); });
      one *= Math.exp(gMean);
    }
    fig.replaceChildren(barChart(kept, { labels, digits: 2, ymax: 1.1, bar: 56,
      xlabel: tr("key channels 0 to 4, labelled by their g", "键通道0到4，标注为各自的g"),
      label: tr(`share of a write still held by each key channel after ${t} ` +
        "tokens: ", `写入${t}个词元之后，各键通道仍保留的份额：`) +
        kept.map((x) => pyFixed(x, 2)).join(", ") }));
    caption.replaceChildren(
      tr(`t = ${t} tokens: the slowest channel keeps `,
        `t = ${t}个词元：最慢的通道保留`),
      htmlEl("span", { "data-live-number": "" }, pyFixed(Math.max(...kept), 3)),
      tr(", the fastest ", "，最快的通道保留"),
      htmlEl("span", { "data-live-number": "" }, pyFixed(Math.min(...kept), 3)),
      tr(`; one decay per token (g = ${pyFixed(gMean, 3)}, the mean) would ` +
        "keep ", `；若每个词元只用一个衰减（g = ${pyFixed(gMean, 3)}，即平均值），` +
        "每个通道都只保留"),
      htmlEl("span", { "data-live-number": "" }, pyFixed(one, 3)),
      tr(" in every channel.", "。"));
  };
  return slider(model, el, { label: tr("tokens since the write, t",
    "写入后经过的词元数t"), digits: 0 }, redraw);
}

export default { render };
