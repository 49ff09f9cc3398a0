// attnbook live figures: the shared core. Every figure's module is this file
// followed by the figure's own file (attnbook/live/<figure>.js), so each
// widget carries one self-contained ES module. The core computes like the
// answer key (attnbook.reference) and prints numbers like Python does.

const SVG_NS = "http://www.w3.org/2000/svg";

// The figure's language: English or Chinese. On the site the page says it (the Chinese
// edition's pages are <html lang="zh-CN">); in JupyterLab, whose page is English, the
// figure's `lang` trait says it (attnbook.live sets it from the notebook's path: a notebook
// of zh/ is Chinese). Only the figure's own words change: numbers, tokens and the data's
// labels are the notebook's and stay as they are. tr(en, zh) picks one.
let LANG = "en";
function setLanguage(model) {
  const page = (document.documentElement.getAttribute("lang") || "").toLowerCase();
  LANG = page.startsWith("zh") || (model && model.get("lang") === "zh") ? "zh" : "en";
  return LANG;
}
function tr(en, zh) {
  return LANG === "zh" ? zh : en;
}

// Sum in NumPy's pairwise order (numpy's pairwise_sum), so that sums agree
// with np.sum bit for bit as often as possible.
function pairwiseSum(a, lo = 0, n = a.length) {
  if (n < 8) {
    let s = 0.0;
    for (let i = lo; i < lo + n; i++) s += a[i];
    return s;
  }
  if (n <= 128) {
    const r = a.slice(lo, lo + 8);
    let i = 8;
    for (; i < n - (n % 8); i += 8) {
      for (let j = 0; j < 8; j++) r[j] += a[lo + i + j];
    }
    let s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; i++) s += a[lo + i];
    return s;
  }
  let n2 = Math.floor(n / 2);
  n2 -= n2 % 8;
  return pairwiseSum(a, lo, n2) + pairwiseSum(a, lo + n2, n - n2);
}

// softmax(z / t) like attnbook.reference.softmax: the maximum is subtracted
// first; -Infinity gets weight exactly 0; t = 0 is the limit t -> 0+ (all
// the weight on the maximum, split equally between ties). A row with no
// finite entry (every key masked) returns zeros, like the answer key's
// scaled_dot_product_attention(..., fully_masked="zeros").
function softmax(z, t = 1.0) {
  const m = Math.max(...z);
  if (m === -Infinity) return z.map(() => 0.0);
  if (t === 0) {
    const hot = z.map((x) => (x === m ? 1.0 : 0.0));
    const s = pairwiseSum(hot);
    return hot.map((h) => h / s);
  }
  const e = z.map((x) => Math.exp((x - m) / t));
  const s = pairwiseSum(e);
  return e.map((x) => x / s);
}

function dot(a, b) {
  let s = 0.0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
}

function matmul(A, B) {  // (n, m) @ (m, p) as arrays of rows
  return A.map((row) => B[0].map((_, j) => dot(row, B.map((r) => r[j]))));
}

function transpose(A) {
  return A[0].map((_, j) => A.map((r) => r[j]));
}

// Python's f"{x:.{digits}f}". toFixed rounds an exact tie up (0.125 ->
// "0.13"); Python rounds it to even ("0.12"). toFixed(100) gives the exact
// decimal expansion of a double of ordinary size, which shows the ties.
function pyFixed(x, digits) {
  if (Number.isNaN(x)) return "nan";
  if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
  const sign = x < 0 || Object.is(x, -0) ? "-" : "";
  const a = Math.abs(x);
  let s = a.toFixed(digits);
  if (a < 1e21) {
    const exact = a.toFixed(100);
    const dot = exact.indexOf(".");
    const cut = digits === 0 ? dot : dot + 1 + digits;
    if (/^50*$/.test(exact.slice(dot + 1 + digits))) {
      const kept = exact.slice(0, cut);
      if (Number(kept[kept.length - 1]) % 2 === 0) s = kept;
    }
  }
  return sign + s;
}

// viridis, sampled at 9 points (matplotlib's values), linearly interpolated
const VIRIDIS = [[68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142],
  [33, 144, 141], [39, 173, 129], [92, 200, 99], [170, 220, 50],
  [253, 231, 37]];

function viridis(f) {
  const x = Math.min(1, Math.max(0, f)) * (VIRIDIS.length - 1);
  const i = Math.min(VIRIDIS.length - 2, Math.floor(x));
  const u = x - i;
  const c = VIRIDIS[i].map((v, k) => Math.round(v + u * (VIRIDIS[i + 1][k] - v)));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

function svgEl(tag, attrs = {}, text = null) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== null) e.textContent = text;
  return e;
}

function htmlEl(tag, attrs = {}, text = null) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== null) e.textContent = text;
  return e;
}

// A number shown by a figure: the parity tests read every element that
// carries data-live-number, in document order.
function numberText(parent, attrs, text) {
  return parent.appendChild(svgEl("text", { ...attrs, "data-live-number": "" }, text));
}

// An SVG heatmap of a matrix with values in [0, 1]: one rect per cell, the
// value printed in it; hidden cells (masked) grey and hatched, labelled
// "hidden". opts: rows, cols (labels), digits, hidden (bool matrix or null),
// rowNote (per row: a note, [text, number] or null; drawn right of the
// row), onCell(i, j).
function heatmap(values, opts) {
  const n = values.length, m = values[0].length;
  const cell = opts.cell || 52, left = opts.left || 78, top = 26;
  const noteW = opts.rowNote ? 86 : 0;
  const width = left + m * cell + noteW + 8;
  const height = top + n * cell + 30;
  const svg = svgEl("svg", { viewBox: `0 0 ${width} ${height}`, role: "img",
    class: "attnbook-live-svg", "aria-label": opts.label || tr("heatmap", "热力图") });
  svg.style.maxWidth = `${width}px`;
  svg.appendChild(svgEl("rect", { x: 0, y: 0, width, height, fill: "white" }));
  const defs = svg.appendChild(svgEl("defs"));
  const pat = defs.appendChild(svgEl("pattern", { id: opts.id + "-hatch",
    width: 6, height: 6, patternUnits: "userSpaceOnUse",
    patternTransform: "rotate(45)" }));
  pat.appendChild(svgEl("rect", { width: 6, height: 6, fill: "#d9d9d9" }));
  pat.appendChild(svgEl("line", { x1: 0, y1: 0, x2: 0, y2: 6,
    stroke: "#7f7f7f", "stroke-width": 1.5 }));
  opts.cols.forEach((c, j) => svg.appendChild(svgEl("text", {
    x: left + (j + 0.5) * cell, y: top - 8, "text-anchor": "middle",
    class: "attnbook-live-label" }, c)));
  svg.appendChild(svgEl("text", { x: left + (m * cell) / 2, y: height - 6,
    "text-anchor": "middle", class: "attnbook-live-axis" },
    opts.xlabel || tr("keys", "键")));
  for (let i = 0; i < n; i++) {
    const y = top + i * cell;
    svg.appendChild(svgEl("text", { x: left - 6, y: y + cell / 2 + 4,
      "text-anchor": "end", class: "attnbook-live-label" }, opts.rows[i]));
    for (let j = 0; j < m; j++) {
      const x = left + j * cell;
      const hidden = opts.hidden && opts.hidden[i][j];
      const v = values[i][j];
      const r = svg.appendChild(svgEl("rect", { x, y, width: cell, height: cell,
        fill: hidden ? `url(#${opts.id}-hatch)` : viridis(v),
        stroke: "white", "stroke-width": 1, "data-row": i, "data-col": j }));
      if (opts.onCell) {  // clickable, and reachable with Tab + Enter/Space
        r.setAttribute("class", "attnbook-live-clickable");
        r.setAttribute("tabindex", "0");
        r.setAttribute("role", "button");
        r.setAttribute("aria-label", tr(`query ${opts.rows[i]}, key ${opts.cols[j]}: `,
          `查询${opts.rows[i]}，键${opts.cols[j]}：`) +
          (hidden ? tr("hidden", "已隐藏") : pyFixed(v, opts.digits)));
        r.addEventListener("click", () => opts.onCell(i, j));
        r.addEventListener("keydown", (ev) => {
          if (ev.key === "Enter" || ev.key === " ") {
            ev.preventDefault();
            opts.onCell(i, j);
          }
        });
      }
      if (hidden) {
        const t = svg.appendChild(svgEl("text", { x: x + cell / 2,
          y: y + cell / 2 + 4, "text-anchor": "middle",
          class: "attnbook-live-hidden" }, tr("hidden", "隐藏")));
        t.style.pointerEvents = "none";
      } else {
        const t = numberText(svg, { x: x + cell / 2, y: y + cell / 2 + 4,
          "text-anchor": "middle", class: "attnbook-live-cell",
          fill: v > 0.6 ? "black" : "white" }, pyFixed(v, opts.digits));
        t.style.pointerEvents = "none";
      }
    }
    if (opts.rowNote && opts.rowNote[i]) {  // a string, or [text, number]
      const note = [].concat(opts.rowNote[i]);
      const t = svg.appendChild(svgEl("text", { x: left + m * cell + 8,
        y: y + cell / 2 + 4, class: "attnbook-live-note" }, note[0]));
      if (note.length > 1) {
        t.appendChild(svgEl("tspan", { "data-live-number": "" }, note[1]));
      }
    }
  }
  return svg;
}

// An SVG bar chart of values in [0, ymax], each bar labelled with its value.
function barChart(values, opts) {
  const n = values.length, bw = opts.bar || 46, left = 40, top = 12;
  const plotH = opts.height || 170, ymax = opts.ymax || 1.0;
  const width = left + n * bw + 10, height = top + plotH + 44;
  const svg = svgEl("svg", { viewBox: `0 0 ${width} ${height}`, role: "img",
    class: "attnbook-live-svg", "aria-label": opts.label || tr("bar chart", "柱状图") });
  svg.style.maxWidth = `${width}px`;
  svg.appendChild(svgEl("rect", { x: 0, y: 0, width, height, fill: "white" }));
  const yOf = (v) => top + plotH * (1 - v / ymax);
  for (const tick of opts.ticks || [0, 0.5, 1]) {
    svg.appendChild(svgEl("line", { x1: left, x2: width - 6, y1: yOf(tick),
      y2: yOf(tick), stroke: "#e0e0e0" }));
    svg.appendChild(svgEl("text", { x: left - 4, y: yOf(tick) + 4,
      "text-anchor": "end", class: "attnbook-live-tick" }, String(tick)));
  }
  values.forEach((v, i) => {
    const x = left + i * bw + 5;
    svg.appendChild(svgEl("rect", { x, y: yOf(v), width: bw - 10,
      height: Math.max(0, plotH * v / ymax), fill: opts.color || "#3b75af" }));
    numberText(svg, { x: x + (bw - 10) / 2, y: yOf(v) - 4,
      "text-anchor": "middle", class: "attnbook-live-value" },
      pyFixed(v, opts.digits));
    svg.appendChild(svgEl("text", { x: x + (bw - 10) / 2, y: top + plotH + 16,
      "text-anchor": "middle", class: "attnbook-live-label" }, opts.labels[i]));
  });
  svg.appendChild(svgEl("text", { x: left + (n * bw) / 2, y: height - 6,
    "text-anchor": "middle", class: "attnbook-live-axis" }, opts.xlabel || ""));
  return svg;
}

// A labelled range input bound to the model's "value" trait. The figure
// redraws on every input event; the kernel (if any) hears of it through
// model.save_changes().
function slider(model, el, opts, redraw) {
  const box = el.appendChild(htmlEl("label", { class: "attnbook-live-control" }));
  box.appendChild(htmlEl("span", {}, opts.label));
  const input = box.appendChild(htmlEl("input", { type: "range",
    min: model.get("min"), max: model.get("max"), step: model.get("step"),
    value: model.get("value"), "aria-label": opts.label }));
  const readout = box.appendChild(htmlEl("output", {}));
  const show = () => {
    const v = Number(model.get("value"));
    readout.textContent = pyFixed(v, opts.digits);
    input.value = v;
    redraw(v);
  };
  input.addEventListener("input", () => {
    model.set("value", Number(input.value));
    model.save_changes();
  });
  model.on("change:value", show);
  show();
  return () => model.off("change:value", show);
}
