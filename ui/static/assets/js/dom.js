// Builds DOM from data without ever parsing markup: every value becomes a
// text node or an attribute, so nothing a workflow author or a script prints
// can inject HTML.

// Properties rather than attributes: they hold the live state of a control.
// `value` is applied after the children so a <select> has its options.
const properties = new Set(['value', 'checked', 'disabled', 'hidden', 'required', 'multiple']);

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  const later = [];
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined) continue;
    if (k.startsWith('on') && typeof v === 'function') {
      el.addEventListener(k.slice(2), v);
    } else if (properties.has(k)) {
      later.push([k, v]);
    } else if (k === 'class') {
      const cls = Array.isArray(v) ? v.filter(Boolean).join(' ') : v;
      if (cls) el.className = cls;
    } else if (v !== false) {
      el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  for (const [k, v] of later) el[k] = v;
  return el;
}

export function append(el, children) {
  for (const c of [children].flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// replace swaps an element's children for the given ones.
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

// link is an in-app link: the router handles it without a page load.
export function link(href, ...children) {
  return h('a', { href, 'data-route': true }, ...children);
}

// path joins URL segments, encoding each one.
export function path(...segments) {
  return '/' + segments.map((s) => encodeURIComponent(String(s))).join('/');
}
