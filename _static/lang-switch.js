// The language switch (attnbook/i18n/sphinx_ext.py puts the link on every page): it opens the
// same section of the other edition. Both editions have the same sections in the same order,
// so the link carries the section's number (?section=N) and the other page scrolls to its N-th.
(function () {
  function sections() {
    return Array.from(document.querySelectorAll("article.bd-article section[id]"));
  }
  function current() {
    const all = sections();
    let n = -1;
    for (let i = 0; i < all.length; i++) {
      if (all[i].getBoundingClientRect().top <= window.innerHeight / 3) n = i;  // in the top third
    }
    if (n < 0 && location.hash) {
      n = all.findIndex((s) => "#" + s.id === decodeURIComponent(location.hash));
    }
    return n;
  }
  document.addEventListener("click", function (ev) {
    const a = ev.target.closest && ev.target.closest("a.attnbook-lang-switch");
    if (!a) return;
    const n = current();
    if (n > 0) {
      ev.preventDefault();
      location.href = a.getAttribute("href") + "?section=" + n;
    }
  });
  // The link is written at the top of the article (it works there without scripts); moved
  // into the article's header bar, which stays on screen, it can be clicked from anywhere
  // in the page, and then carries the section being read.
  function dock() {
    const nav = document.querySelector("nav.attnbook-lang");
    const bar = document.querySelector(".article-header-buttons");
    if (nav && bar) {
      nav.classList.add("attnbook-lang-docked");
      bar.prepend(nav);
    }
  }
  function arrive() {
    const n = parseInt(new URLSearchParams(location.search).get("section") || "", 10);
    if (!(n > 0)) return;
    const target = sections()[n];
    if (!target) return;
    history.replaceState(null, "", location.pathname + "#" + target.id);
    target.scrollIntoView();
  }
  function ready() {
    dock();
    arrive();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", ready);
  else ready();
})();

// sphinx-togglebutton's script gives its buttons an English aria-label ("Toggle hidden
// content") when the page has loaded; on a Chinese page they are named in Chinese.
window.addEventListener("load", function () {
  if (!(document.documentElement.lang || "").toLowerCase().startsWith("zh")) return;
  document.querySelectorAll("button.toggle-button").forEach(function (b) {
    if (b.getAttribute("aria-label") === "Toggle hidden content") {
      b.setAttribute("aria-label", "显示/隐藏内容");
    }
  });
});
