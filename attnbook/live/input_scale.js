// Chapter 01: the attention weights of three tokens when the input X is
// scaled by s (slider): soft for small s, one-hot on C for large s.
// Data: X, W_q, W_k, tokens.

function weightsAt(s, X, Wq, Wk) {
  const Xs = X.map((row) => row.map((x) => s * x));
  const Q = matmul(Xs, Wq), K = matmul(Xs, Wk);
  const root = Math.sqrt(Wk[0].length);
  return matmul(Q, transpose(K)).map((r) => softmax(r.map((x) => x / root)));
}

function render({ model, el }) {
  setLanguage(model);
  el.classList.add("attnbook-live");
  const X = model.get("X"), Wq = model.get("W_q"), Wk = model.get("W_k");
  const tokens = model.get("tokens");
  const fig = el.appendChild(htmlEl("div", { class: "attnbook-live-figure" }));
  const redraw = (s) => {
    const w = weightsAt(s, X, Wq, Wk);
    fig.replaceChildren(heatmap(w, { id: "scale", rows: tokens, cols: tokens,
      digits: 2, xlabel: tr("keys (rows: queries)", "键（行：查询）"), label:
        tr(`attention weights with the input scaled by s = ${pyFixed(s, 2)}; `,
          `输入乘以s = ${pyFixed(s, 2)}时的注意力权重；`) +
        w.map((r, i) => tr(`row ${tokens[i]}: `, `${tokens[i]}行：`) +
          r.map((x) => pyFixed(x, 2)).join(", ")).join("; ") }));
  };
  return slider(model, el, { label: tr("scale s of X", "X的缩放系数s"), digits: 2 }, redraw);
}

export default { render };
