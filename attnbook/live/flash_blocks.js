// Chapter 17: one query row of tiled attention, key block by key block. The
// slider sets how many blocks of `block` keys have been merged into the
// running state (m, l, o), as ref.attention_state and
// ref.merge_attention_states compute it; the figure shows m, l and the
// output so far, o / l, next to the exact attention row.
// Data: q (one query), K, V (rows), block (keys per block).

function blockState(q, K, V) {  // like ref.attention_state for one query
  const s = K.map((k) => dot(q, k) / Math.sqrt(q.length));
  const m = Math.max(...s);
  const p = s.map((x) => Math.exp(x - m));
  const o = V[0].map((_, c) => dot(p, V.map((v) => v[c])));
  return [m, pairwiseSum(p), o];
}

function merge([ma, la, oa], [mb, lb, ob]) {  // ref.merge_attention_states
  const m = Math.max(ma, mb);
  const safe = m === -Infinity ? 0.0 : m;
  const a = Math.exp(ma - safe), b = Math.exp(mb - safe);
  return [m, a * la + b * lb, oa.map((x, c) => a * x + b * ob[c])];
}

function render({ model, el }) {
  setLanguage(model);
  el.classList.add("attnbook-live");
  const q = model.get("q"), K = model.get("K"), V = model.get("V");
  const B = model.get("block"), n = K.length, dv = V[0].length;
  const scores = K.map((k) => dot(q, k) / Math.sqrt(q.length));
  const exact = blockState(q, K, V);  // all keys at once: plain attention
  const strip = el.appendChild(htmlEl("div", { class: "attnbook-live-figure",
    style: "display: flex; flex-wrap: wrap; gap: 4px 12px;" }));
  const table = el.appendChild(htmlEl("table", {
    class: "attnbook-live-table", style: "border-collapse: collapse; " +
      "margin: 6px 0; font-variant-numeric: tabular-nums;" }));
  const caption = el.appendChild(htmlEl("p", {
    class: "attnbook-live-caption" }));
  const pad = "padding: 2px 8px; text-align: right;";
  const num = (parent, text) => parent.appendChild(
    htmlEl("td", { "data-live-number": "", style: pad }, text));
  const redraw = (t) => {
    let st = [-Infinity, 0.0, V[0].map(() => 0.0)];
    for (let j = 0; j < t * B && j < n; j += B) {
      st = merge(st, blockState(q, K.slice(j, j + B), V.slice(j, j + B)));
    }
    const [m, l, o] = st;
    // the strip of keys, a box per block (they wrap on a narrow screen):
    // each key's score, the blocks merged so far dark
    const blocks = [];
    for (let j = 0; j < n; j += B) {
      const last = Math.min(j + B, n) - 1, seen = j < t * B;
      const box = htmlEl("div", { style: "display: inline-block;" });
      box.appendChild(htmlEl("div", { style: "font-size: 12px; " +
        "text-align: center;" },
        tr(`block ${j / B + 1}: keys ${j}\u2013${last}`,
          `第${j / B + 1}块：键${j}\u2013${last}`)));
      for (let i = j; i <= last; i++) {
        box.appendChild(htmlEl("span", { "data-live-number": "", style:
          "display: inline-block; width: 3.4em; padding: 8px 0; " +
          "margin-right: 2px; text-align: center; font-size: 13px; " +
          (seen ? "background: #31688e; color: white;"
            : "background: #e8e8e8; color: black;") }, pyFixed(scores[i], 2)));
      }
      blocks.push(box);
    }
    strip.replaceChildren(...blocks, htmlEl("div", { style: "font-size: " +
      "12px; color: #404040; width: 100%;" },
      tr("the score of each key (q \u00b7 k / \u221ad); dark: the blocks merged so far",
        "每个键的分数（q \u00b7 k / \u221ad）；深色：已合并的块")));
    // the running state and the output so far, next to the exact row
    const head = htmlEl("tr");
    head.appendChild(htmlEl("th", {}, ""));
    for (let c = 0; c < dv; c++) {
      head.appendChild(htmlEl("th", { style: pad }, `out[${c}]`));
    }
    const running = htmlEl("tr");
    running.appendChild(htmlEl("th", {}, tr("so far, o / l", "目前的o / l")));
    if (l > 0) o.forEach((x) => num(running, pyFixed(x / l, 3)));
    else running.appendChild(htmlEl("td", { colspan: dv }, tr("(no key yet)", "（还没有键）")));
    const full = htmlEl("tr");
    full.appendChild(htmlEl("th", {}, tr("exact row", "精确结果")));
    exact[2].forEach((x) => num(full, pyFixed(x / exact[1], 3)));
    table.replaceChildren(head, running, full);
    caption.replaceChildren(tr("running maximum m = ", "当前最大值m = "),
      htmlEl("span", { "data-live-number": "" }, pyFixed(m, 3)),
      tr(", running sum l = ", "，累积和l = "),
      htmlEl("span", { "data-live-number": "" }, pyFixed(l, 3)));
  };
  const label = tr(`key blocks merged (of ${Math.ceil(n / B)})`,
    `已合并的键块（共${Math.ceil(n / B)}块）`);
  return slider(model, el, { label, digits: 0 }, redraw);
}

export default { render };
