// Chapter 15: the KV cache of one sequence, in GiB (bf16), for a few models
// at the context length set by a slider (in units of 1,024 tokens): with the
// model's grouped-query attention, as if it used multi-head attention, and,
// for a model with a sliding window, with the window's cap. Data: names,
// layers, q_heads, kv_heads, head_dim, windows (0: none), bytes_per_number.

const GIB = 2 ** 30;
const KINDS = [["GQA", "#0072B2"], ["MHA", "#E69F00"],
  ["GQA + window", "#009E73"]];

function kindLabel(k) {
  return k === 2 ? tr("GQA + window", "GQA + 窗口") : KINDS[k][0];
}

function withCommas(n) {  // Python's f"{n:,}" for a whole number
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

function niceMax(v) {  // the smallest 1, 2, 2.5, 4 or 5 x a power of 10 >= v
  const p = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 2.5, 4, 5, 10].map((m) => m * p).find((x) => x >= v);
}

function cacheBars(model, tokens) {  // [[name, [[kind, GiB], ...]], ...]
  const bpn = model.get("bytes_per_number"), hd = model.get("head_dim");
  const L = model.get("layers"), windows = model.get("windows");
  const gib = (i, heads, n) => 2 * L[i] * heads * hd[i] * bpn * n / GIB;
  return model.get("names").map((name, i) => {
    const bars = [[0, gib(i, model.get("kv_heads")[i], tokens)],
      [1, gib(i, model.get("q_heads")[i], tokens)]];
    if (windows[i] > 0) {
      bars.push([2, gib(i, model.get("kv_heads")[i],
        Math.min(tokens, windows[i]))]);
    }
    return [name, bars];
  });
}

function drawBars(groups, tokens) {
  const left = 88, right = 50, top = 30, bh = 16, gap = 10, width = 440;
  const plotW = width - left - right;
  const nBars = groups.reduce((s, g) => s + g[1].length, 0);
  const height = top + nBars * bh + groups.length * gap + 34;
  const xmax = niceMax(Math.max(...groups.flatMap((g) => g[1].map((b) => b[1]))));
  const svg = svgEl("svg", { viewBox: `0 0 ${width} ${height}`, role: "img",
    class: "attnbook-live-svg", "aria-label": tr(`KV cache of one sequence of ${withCommas(tokens)} tokens in GiB: `,
      `一条${withCommas(tokens)}个词元的序列的KV缓存（GiB）：`) + groups.map(([name, bars]) =>
      `${name} ` + bars.map(([k, v]) => `${kindLabel(k)} ${pyFixed(v, 2)}`)
        .join(", ")).join("; ") });
  svg.style.maxWidth = `${width}px`;
  svg.appendChild(svgEl("rect", { x: 0, y: 0, width, height, fill: "white" }));
  KINDS.forEach(([label, color], k) => {  // the legend
    const x = left + k * 92;
    svg.appendChild(svgEl("rect", { x, y: 6, width: 12, height: 12, fill: color }));
    svg.appendChild(svgEl("text", { x: x + 16, y: 16,
      class: "attnbook-live-label" }, kindLabel(k)));
  });
  const xOf = (v) => left + plotW * v / xmax;
  const bottom = height - 34;
  for (let j = 0; j <= 5; j++) {
    const tick = xmax * j / 5;
    svg.appendChild(svgEl("line", { x1: xOf(tick), x2: xOf(tick), y1: top - 4,
      y2: bottom, stroke: "#e0e0e0" }));
    svg.appendChild(svgEl("text", { x: xOf(tick), y: bottom + 14,
      "text-anchor": "middle", class: "attnbook-live-tick" },
      String(Number(tick.toPrecision(3)))));
  }
  let y = top;
  for (const [name, bars] of groups) {
    svg.appendChild(svgEl("text", { x: left - 6, y: y + bars.length * bh / 2 + 4,
      "text-anchor": "end", class: "attnbook-live-label" }, name));
    for (const [k, v] of bars) {
      svg.appendChild(svgEl("rect", { x: left, y: y + 1, height: bh - 2,
        width: Math.max(0, xOf(v) - left), fill: KINDS[k][1] }));
      numberText(svg, { x: xOf(v) + 4, y: y + bh - 3,
        class: "attnbook-live-value" }, pyFixed(v, 2));
      y += bh;
    }
    y += gap;
  }
  svg.appendChild(svgEl("text", { x: left + plotW / 2, y: height - 6,
    "text-anchor": "middle", class: "attnbook-live-axis" },
    tr("KV cache of one sequence, bf16 (GiB)", "一条序列的KV缓存，bf16（GiB）")));
  return svg;
}

function render({ model, el }) {
  setLanguage(model);
  el.classList.add("attnbook-live");
  const fig = el.appendChild(htmlEl("div", { class: "attnbook-live-figure" }));
  const caption = el.appendChild(htmlEl("p", { class: "attnbook-live-caption" }));
  const redraw = (k) => {
    const tokens = Math.round(k) * 1024;
    fig.replaceChildren(drawBars(cacheBars(model, tokens), tokens));
    caption.replaceChildren(tr(`context: ${Math.round(k)} × 1,024 = `,
      `上下文：${Math.round(k)} × 1,024 = `),
      htmlEl("span", { "data-live-number": "" }, withCommas(tokens)),
      tr(" tokens", "个词元"));
  };
  return slider(model, el, { label: tr("context length (units of 1,024 tokens)",
    "上下文长度（单位：1,024个词元）"),
    digits: 0 }, redraw);
}

export default { render };
