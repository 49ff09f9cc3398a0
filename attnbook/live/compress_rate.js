// Chapter 21b: DeepSeek-V4's compressor on one channel. N tokens, each with a
// value and a gate logit; every `rate` tokens are pooled into one entry by a
// softmax of the window's gate logits (like attnbook.reference.compress_kv
// with a zero position bias); a last incomplete window is dropped. The rate
// is on a slider. Data: values, gates (one per token), head_dim, context.

function compressEntries(values, gates, rate) {  // [entry per whole window]
  const out = [];
  for (let w = 0; (w + 1) * rate <= values.length; w++) {
    const p = softmax(gates.slice(w * rate, (w + 1) * rate));
    out.push(dot(p, values.slice(w * rate, (w + 1) * rate)));
  }
  return out;
}

function withCommas(n) {  // Python's f"{n:,}" for a whole number
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

function render({ model, el }) {
  setLanguage(model);
  el.classList.add("attnbook-live");
  const values = model.get("values"), gates = model.get("gates");
  const fig = el.appendChild(htmlEl("div", { class: "attnbook-live-figure" }));
  const caption = el.appendChild(htmlEl("p", { class: "attnbook-live-caption" }));
  const redraw = (r) => {
    const rate = Math.round(r);
    const entries = compressEntries(values, gates, rate);
    const labels = entries.map((_, w) => `${w * rate}-${(w + 1) * rate - 1}`);
    fig.replaceChildren(barChart(entries, { labels, digits: 2, ymax: 1.0,
      bar: Math.max(30, Math.min(46, Math.floor(460 / Math.max(1, entries.length)))),
      xlabel: tr("compressed entry (the tokens it pools)", "压缩条目（它汇聚的词元）"),
      label: tr(`${entries.length} compressed entries at rate ${rate}: `,
        `压缩率${rate}时的${entries.length}个压缩条目：`) +
        entries.map((x) => pyFixed(x, 2)).join(", ") }));
    const dropped = values.length % rate;
    const n = model.get("context"), d = model.get("head_dim");
    const mib = Math.floor(n / rate) * d * 2 / 2 ** 20;
    caption.replaceChildren(
      tr(`${values.length} tokens make `, `${values.length}个词元得到`),
      htmlEl("span", { "data-live-number": "" }, String(entries.length)),
      tr(" entries; tokens waiting for their window: ", "个条目；等待窗口填满的词元："),
      htmlEl("span", { "data-live-number": "" }, String(dropped)),
      tr(`. At ${withCommas(n)} tokens, one layer's compressed cache ` +
        `(${d} numbers per entry, bf16): `,
        `。在${withCommas(n)}个词元时，一层的压缩缓存（每个条目${d}个数，bf16）：`),
      htmlEl("span", { "data-live-number": "" }, pyFixed(mib, 1)),
      " MiB");
  };
  return slider(model, el, { label: tr("compression rate (tokens per entry)",
    "压缩率（每个条目的词元数）"), digits: 0 }, redraw);
}

export default { render };
