/* attnbook: the site's loader for live figures (attnbook/live).
 *
 * A page built from an executed notebook holds the notebook's widget state
 * (<script type="application/vnd.jupyter.widget-state+json">, written by
 * myst-nb) and one <script type="application/vnd.jupyter.widget-view+json">
 * where each widget was displayed. This loader renders the anywidget models
 * among them: it imports the model's ES module (stored in the state, as
 * "_esm") from a blob: URL, which works over http and file://, and calls its
 * render({model, el}) with a small in-page model (get, set, on, off,
 * save_changes). There is no kernel: the figure's own JavaScript computes
 * everything. Other widget types are left alone (the book has none).
 *
 * This replaces the standard widget front end (@jupyter-widgets/html-manager,
 * several MB, which myst-nb loads from CDNs by default: _config.yml turns
 * that off with nb_ipywidgets_js: {}). Jupyter Book loads every .js file in
 * _static on every page; on a page without widget state this does nothing.
 */
(function () {
  "use strict";
  var STATE = "application/vnd.jupyter.widget-state+json";
  var VIEW = "application/vnd.jupyter.widget-view+json";

  function Model(state) {
    this.state = Object.assign({}, state);
    this.listeners = {};
  }
  Model.prototype.get = function (key) { return this.state[key]; };
  Model.prototype.set = function (key, value) {
    var old = this.state[key];
    this.state[key] = value;
    if (old !== value) this.emit("change:" + key, value);
  };
  Model.prototype.on = function (name, fn) {
    (this.listeners[name] = this.listeners[name] || []).push(fn);
  };
  Model.prototype.off = function (name, fn) {
    var list = this.listeners[name] || [];
    this.listeners[name] = fn ? list.filter(function (f) { return f !== fn; }) : [];
  };
  Model.prototype.emit = function (name, value) {
    (this.listeners[name] || []).slice().forEach(function (fn) { fn(value); });
  };
  Model.prototype.save_changes = function () {};  // no kernel to tell
  Model.prototype.send = function () {};

  var modules = {};  // one import per distinct module text
  function load(esm) {
    if (!modules[esm]) {
      var url = URL.createObjectURL(new Blob([esm], { type: "text/javascript" }));
      modules[esm] = import(url);
    }
    return modules[esm];
  }

  var styled = {};
  function addStyle(css) {
    if (!css || styled[css]) return;
    styled[css] = true;
    var style = document.createElement("style");
    style.textContent = css;
    document.head.appendChild(style);
  }

  function renderOne(view, models) {
    var id = JSON.parse(view.textContent).model_id;
    var entry = models[id];
    if (!entry || entry.model_module !== "anywidget" || !entry.state._esm) return null;
    var el = document.createElement("div");
    el.className = "attnbook-live-host";
    view.parentNode.insertBefore(el, view.nextSibling);
    addStyle(entry.state._css);
    var model = new Model(entry.state);
    return load(entry.state._esm).then(function (mod) {
      var widget = mod.default || mod;
      if (typeof widget === "function") widget = widget();
      return Promise.resolve(widget.initialize && widget.initialize({ model: model }))
        .then(function () { return widget.render({ model: model, el: el }); });
    }).then(function () { el.setAttribute("data-live-ready", ""); });
  }

  // With JavaScript on, the <noscript> note shown before each live figure is
  // empty: hide the output box that holds it.
  function hideNoscriptBoxes() {
    document.querySelectorAll("noscript[data-attnbook-live]").forEach(function (n) {
      var box = n.parentElement && n.parentElement.closest(".output, .cell_output > div");
      if (box) box.style.display = "none";
    });
  }

  function start() {
    hideNoscriptBoxes();
    var stateTag = document.querySelector('script[type="' + STATE + '"]');
    if (!stateTag) return;
    var models = JSON.parse(stateTag.textContent).state || {};
    var views = document.querySelectorAll('script[type="' + VIEW + '"]');
    var jobs = Array.prototype.map.call(views, function (view) {
      return Promise.resolve().then(function () { return renderOne(view, models); })
        .catch(function (err) { console.error("live figure:", err); });
    });
    window.attnbookLiveReady = Promise.all(jobs);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
