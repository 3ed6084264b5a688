// A destructive button that asks first, in the page (no window.confirm):
// a click shows the question with a confirming and a cancelling button.
import { h, replace } from './dom.js';

// confirmButton: label is the first button's text, question what is asked,
// yes the confirming button's text, and act the work to do (a promise; a
// rejection is shown in onError's place, and the question stays).
export function confirmButton({ label, question, yes, act, onError, id }) {
  const box = h('span', { class: 'confirm' });
  const first = h('button', { type: 'button', class: 'danger', id }, label);
  const ask = () => {
    const ok = h('button', { type: 'button', class: 'danger', 'data-confirm': 'yes' }, yes);
    const no = h('button', { type: 'button', class: 'secondary', 'data-confirm': 'no' }, 'Cancel');
    ok.addEventListener('click', async () => {
      ok.disabled = true;
      no.disabled = true;
      try {
        await act();
      } catch (err) {
        onError?.(err);
        ok.disabled = false;
        no.disabled = false;
      }
    });
    no.addEventListener('click', () => {
      replace(box, first);
      first.focus();
    });
    replace(box, h('span', { role: 'alert' }, question), ' ', ok, ' ', no);
    no.focus();
  };
  first.addEventListener('click', ask);
  return replace(box, first);
}
