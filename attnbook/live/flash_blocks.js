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
  el.classList.add("attnbook-live");
  const q = model.get("q"), K = model.get("K"), V = model.get("V");
  const B = model.get("block"), n = K.length, dv = V[0].length;
  const scores = K.map((k) => dot(q, k) / Math.sqrt(q.length));
  const exact = blockState(q, K, V);  // all keys at once: plain attention
  const strip = el.appendChild(htmlEl("div", {
    class: "attnbook-live-figure" }));
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
    // the strip of keys: each key's score, the blocks merged so far coloured
    const cell = 42, gap = 10, top = 20;
    const x = (j) => 4 + j * cell + Math.floor(j / B) * gap;
    const width = x(n - 1) + cell + 4;
    const svg = svgEl("svg", { viewBox: `0 0 ${width} ${top + cell + 22}`,
      role: "img", class: "attnbook-live-svg", "aria-label":
        `${n} keys in blocks of ${B}; blocks merged so far: ${t}` });
    svg.style.maxWidth = `${width}px`;
    svg.appendChild(svgEl("rect", { x: 0, y: 0, width, height: top + cell + 22,
      fill: "white" }));
    for (let j = 0; j < n; j += B) {
      const last = Math.min(j + B, n) - 1;
      svg.appendChild(svgEl("text", { x: (x(j) + x(last) + cell) / 2, y: 14,
        "text-anchor": "middle", class: "attnbook-live-label" },
        `block ${j / B + 1}: keys ${j}\u2013${last}`));
    }
    scores.forEach((s, j) => {
      const seen = j < t * B;
      svg.appendChild(svgEl("rect", { x: x(j), y: top, width: cell - 2,
        height: cell, fill: seen ? "#31688e" : "#e8e8e8",
        stroke: seen ? "#31688e" : "#b0b0b0" }));
      numberText(svg, { x: x(j) + cell / 2 - 1, y: top + cell / 2 + 4,
        "text-anchor": "middle", class: "attnbook-live-cell",
        fill: seen ? "white" : "black" }, pyFixed(s, 2));
    });
    svg.appendChild(svgEl("text", { x: 4, y: top + cell + 16,
      class: "attnbook-live-note" }, "the score of each key " +
      "(q \u00b7 k / \u221ad); dark: the blocks merged so far"));
    strip.replaceChildren(svg);
    // the running state and the output so far, next to the exact row
    const head = htmlEl("tr");
    head.appendChild(htmlEl("th", {}, ""));
    for (let c = 0; c < dv; c++) {
      head.appendChild(htmlEl("th", { style: pad }, `out[${c}]`));
    }
    const running = htmlEl("tr");
    running.appendChild(htmlEl("th", {}, `o / l after ${t} of ` +
      `${Math.ceil(n / B)} blocks`));
    if (l > 0) o.forEach((x) => num(running, pyFixed(x / l, 3)));
    else running.appendChild(htmlEl("td", { colspan: dv }, "(no key yet)"));
    const full = htmlEl("tr");
    full.appendChild(htmlEl("th", {}, "exact attention row"));
    exact[2].forEach((x) => num(full, pyFixed(x / exact[1], 3)));
    table.replaceChildren(head, running, full);
    caption.replaceChildren("running maximum m = ",
      htmlEl("span", { "data-live-number": "" }, pyFixed(m, 3)),
      ", running sum l = ",
      htmlEl("span", { "data-live-number": "" }, pyFixed(l, 3)));
  };
  return slider(model, el, { label: "key blocks merged", digits: 0 }, redraw);
}

export default { render };
