// Chapter 25: the steps of ring attention under a causal mask. P ranks each
// keep their queries; at step s rank r holds the key/value shard
// (r - s) mod P (ref.ring_schedule). Each grid is the (query rank, key
// shard) tiles: the number in a tile is the (query, key) pairs the causal
// mask keeps there (ref.causal_pairs); a tile with none is skipped. The
// slider sets the step; the tiles of this step are outlined, those done
// before it shaded, and each rank's work so far is written beside its row.
// Left: the contiguous split; right: the zigzag split.
// Data: pairs (contiguous), pairs_zigzag: (P, P) ints.

function ringGrid(pairs, step, title) {
  const P = pairs.length, cell = 46, left = 70, top = 40;
  const width = left + P * cell + 64, height = top + P * cell + 28;
  const svg = svgEl("svg", { viewBox: `0 0 ${width} ${height}`, role: "img",
    class: "attnbook-live-svg", "aria-label": title });
  svg.style.maxWidth = `${width}px`;
  svg.appendChild(svgEl("rect", { x: 0, y: 0, width, height, fill: "white" }));
  svg.appendChild(svgEl("text", { x: left + (P * cell) / 2, y: 14,
    "text-anchor": "middle", "font-weight": "bold" }, title));
  for (let j = 0; j < P; j++) {
    svg.appendChild(svgEl("text", { x: left + (j + 0.5) * cell, y: top - 8,
      "text-anchor": "middle", class: "attnbook-live-label" }, `KV ${j}`));
  }
  svg.appendChild(svgEl("text", { x: left + P * cell + 32, y: top - 8,
    "text-anchor": "middle", class: "attnbook-live-label" },
    tr("work", "工作量")));
  for (let r = 0; r < P; r++) {
    const y = top + r * cell;
    svg.appendChild(svgEl("text", { x: left - 6, y: y + cell / 2 + 4,
      "text-anchor": "end", class: "attnbook-live-label" },
      tr(`rank ${r}`, `rank ${r}`)));
    let done = 0;
    for (let j = 0; j < P; j++) {
      const at = (r - j + P) % P;            // the step rank r holds shard j
      const x = left + j * cell, n = pairs[r][j];
      const skipped = n === 0, now = at === step, before = at < step;
      if (!skipped && at <= step) done += n;
      svg.appendChild(svgEl("rect", { x: x + 1, y: y + 1, width: cell - 2,
        height: cell - 2, fill: skipped ? "#f0f0f0" : now ? "#31688e"
          : before ? "#a6c8dd" : "white",
        stroke: now ? "#e66101" : "#999999", "stroke-width": now ? 3 : 1 }));
      if (skipped) {
        svg.appendChild(svgEl("text", { x: x + cell / 2, y: y + cell / 2 + 4,
          "text-anchor": "middle", class: "attnbook-live-label",
          fill: "#404040" }, tr("skip", "跳过")));  // >= 10 px at zoom 200 %
      } else {
        numberText(svg, { x: x + cell / 2, y: y + cell / 2 + 4,
          "text-anchor": "middle", class: "attnbook-live-cell",
          fill: now ? "white" : "black" }, String(n));
      }
    }
    numberText(svg, { x: left + P * cell + 32, y: y + cell / 2 + 4,
      "text-anchor": "middle", class: "attnbook-live-cell" }, String(done));
  }
  svg.appendChild(svgEl("text", { x: left + (P * cell) / 2, y: height - 6,
    "text-anchor": "middle", class: "attnbook-live-axis" },
    tr("key/value shard", "键值分片")));
  return svg;
}

function render({ model, el }) {
  setLanguage(model);
  el.classList.add("attnbook-live");
  const pairs = model.get("pairs"), zig = model.get("pairs_zigzag");
  const P = pairs.length;
  const holds = el.appendChild(htmlEl("p", { class: "attnbook-live-caption" }));
  const grids = el.appendChild(htmlEl("div", { class: "attnbook-live-figure",
    style: "display: flex; flex-wrap: wrap; gap: 4px 16px;" }));
  const caption = el.appendChild(htmlEl("p", {
    class: "attnbook-live-caption" }, tr("Dark, outlined: the tiles of this " +
    "step; light: done before; a number: the (query, key) pairs the causal " +
    "mask keeps in that tile.", "深色加框：本步的块；浅色：之前已算的块；" +
    "数字：因果掩码在该块中保留的（查询，键）对数。")));
  const redraw = (v) => {
    const s = Math.round(v);
    holds.replaceChildren(tr(`step ${s}: `, `第${s}步：`));
    for (let r = 0; r < P; r++) {
      holds.appendChild(document.createTextNode(
        (r ? tr(", ", "，") : "") + tr(`rank ${r} holds KV `, `rank ${r}持有KV `)));
      holds.appendChild(htmlEl("span", { "data-live-number": "" },
        String((r - s + P) % P)));
    }
    const boxes = [[pairs, tr("contiguous split", "连续切分")],
      [zig, tr("zigzag split", "之字形切分")]].map(([p, t]) => {
      const box = htmlEl("div", { style: "flex: 1 1 280px; max-width: 360px;" });
      box.appendChild(ringGrid(p, s, t));
      return box;
    });
    grids.replaceChildren(...boxes);
  };
  const label = tr(`ring step s (of ${P - 1})`, `环的步数s（最大${P - 1}）`);
  return slider(model, el, { label, digits: 0 }, redraw);
}

export default { render };
