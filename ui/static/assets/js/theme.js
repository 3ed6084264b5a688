// The colour theme: the system's (prefers-color-scheme), light or dark, as
// picked with the header's button and remembered in localStorage. A
// classic script run before the page is drawn, so a dark page never
// flashes light: it switches the dark stylesheet's media on or off.
(function () {
  'use strict';
  var KEY = 'appliance.theme';
  var ORDER = ['system', 'light', 'dark'];
  var MEDIA = { system: '(prefers-color-scheme: dark)', light: 'not all', dark: 'all' };
  var LABEL = { system: 'Auto', light: 'Light', dark: 'Dark' };

  function stored() {
    var v = null;
    try { v = localStorage.getItem(KEY); } catch (e) { v = null; }
    return ORDER.indexOf(v) >= 0 ? v : 'system';
  }

  function apply(theme) {
    var link = document.getElementById('dark-css');
    if (link) link.media = MEDIA[theme];
    document.documentElement.setAttribute('data-theme', theme);
    var b = document.getElementById('theme');
    if (!b) return;
    var next = ORDER[(ORDER.indexOf(theme) + 1) % ORDER.length];
    b.textContent = LABEL[theme];
    // The name starts with the visible text, as speech control expects.
    b.setAttribute('aria-label', 'Theme: ' + LABEL[theme] + ' (switch to ' + LABEL[next] + ')');
    b.title = theme === 'system' ? 'Colours follow the system; click for ' + LABEL[next] : 'Colours: ' + LABEL[theme] + '; click for ' + LABEL[next];
  }

  apply(stored());
  document.addEventListener('DOMContentLoaded', function () {
    var b = document.getElementById('theme');
    apply(stored());
    b.addEventListener('click', function () {
      var next = ORDER[(ORDER.indexOf(stored()) + 1) % ORDER.length];
      try { localStorage.setItem(KEY, next); } catch (e) { /* private mode: this page only */ }
      apply(next);
    });
  });
  // Another tab that picks a theme changes this one too.
  window.addEventListener('storage', function (e) {
    if (e.key === KEY || e.key === null) apply(stored());
  });
}());
