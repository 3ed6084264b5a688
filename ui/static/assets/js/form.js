// The run form of a task, generated from its input definitions, and the
// rules that turn what the user entered into the execute payload.
import { h } from './dom.js';

// CUSTOM is the value of the "other value" choice of an options field that
// allows custom values; a NUL never appears in a workflow's option.
const CUSTOM = '\u0000custom';

// orderedFields lists [key, definition] pairs by `order`, then in the order
// the server sent them (which is the workflow file's).
export function orderedFields(defs) {
  const entries = Object.entries(defs || {});
  const rank = (d) => (Number.isInteger(d?.order) ? d.order : Infinity);
  return entries
    .map((e, i) => [e, i])
    .sort(([a, i], [b, j]) => rank(a[1]) - rank(b[1]) || i - j)
    .map(([e]) => e);
}

// kindOf is the control a field gets; a type the UI does not know is a
// connection type, whose value is a connection name.
export function kindOf(def) {
  if (def.options?.length) return 'options';
  switch (def.type) {
    case 'string': case 'text': case 'integer': case 'number':
    case 'boolean': case 'date': case 'datetime':
      return def.type;
    default:
      return 'connection';
  }
}

// keepsDefault says a secret field with a default shows a placeholder, and
// when left empty is omitted so the server renders the default itself.
function keepsDefault(def) {
  return Boolean(def.secret) && def.default !== undefined && def.default !== null;
}

// toPayload turns raw form values (key -> string or boolean) into the
// execute input. Empty fields are omitted, so the server applies defaults
// and reports missing required ones. Numbers that do not parse are errors.
export function toPayload(defs, raw) {
  const input = {};
  const errors = [];
  for (const [key, def] of orderedFields(defs)) {
    const v = raw[key];
    if (v === undefined) continue;
    const kind = kindOf(def);
    if (kind === 'boolean') {
      input[key] = Boolean(v);
      continue;
    }
    if (v === '') continue;
    if (kind === 'integer' || kind === 'number') {
      const n = Number(v);
      if (!Number.isFinite(n) || (kind === 'integer' && !Number.isInteger(n))) {
        errors.push(`${def.name || key}: "${v}" is not ${kind === 'integer' ? 'a whole number' : 'a number'}`);
        continue;
      }
      input[key] = n;
      continue;
    }
    input[key] = v;
  }
  return { input, errors };
}

// defaultText is a default as a control's initial value.
function defaultText(def) {
  if (def.default === undefined || def.default === null || keepsDefault(def)) return '';
  if (typeof def.default === 'object') return JSON.stringify(def.default);
  return String(def.default);
}

// runForm builds the form; onRun gets the payload and may throw an error
// whose message is shown next to the form.
export function runForm(defs, onRun) {
  const fields = orderedFields(defs);
  const readers = {};
  const controls = fields.map(([key, def], i) => {
    const { el, read } = field(key, def, `in-${i}`);
    readers[key] = read;
    return el;
  });
  const error = h('p', { class: 'error', role: 'alert', id: 'run-error' });
  const submit = h('button', { type: 'submit' }, 'Run');
  return h('form', {
    class: 'run-form stack',
    'aria-describedby': 'run-error',
    novalidate: true,
    async onsubmit(e) {
      e.preventDefault();
      error.textContent = '';
      const raw = Object.fromEntries(Object.entries(readers).map(([k, read]) => [k, read()]));
      const { input, errors } = toPayload(defs, raw);
      if (errors.length) {
        error.textContent = errors.join('; ');
        return;
      }
      submit.disabled = true;
      try {
        await onRun(input);
      } catch (err) {
        error.textContent = err.message;
      } finally {
        submit.disabled = false;
      }
    },
  },
  controls.length ? controls : h('p', { class: 'muted' }, 'This task takes no input.'),
  h('div', { class: 'actions' }, submit, error));
}

function field(key, def, id) {
  const kind = kindOf(def);
  const helpID = `${id}-help`;
  const help = def.description ? h('p', { class: 'help', id: helpID }, def.description) : null;
  const described = help ? helpID : null;
  const required = Boolean(def.required) && !keepsDefault(def);
  const label = h('label', { for: id }, def.name || key,
    required ? h('span', { class: 'required', title: 'required' }, ' *') : null,
    required ? h('span', { class: 'visually-hidden' }, ' (required)') : null);
  const common = { id, name: key, 'aria-describedby': described, required: required && kind !== 'boolean' };

  if (kind === 'boolean') {
    const box = h('input', { ...common, type: 'checkbox', checked: def.default === true || def.default === 'true' });
    return { el: h('div', { class: 'field checkbox' }, box, label, help), read: () => box.checked };
  }
  if (kind === 'options') return optionsField(def, id, label, help, common);

  let control;
  if (kind === 'text') {
    control = h('textarea', { ...common, rows: 4, value: defaultText(def) });
  } else {
    const type = def.secret ? 'password'
      : { integer: 'number', number: 'number', date: 'date', datetime: 'datetime-local' }[kind] || 'text';
    control = h('input', {
      ...common, type,
      step: kind === 'integer' ? '1' : kind === 'number' ? 'any' : null,
      autocomplete: def.secret ? 'off' : null,
      placeholder: keepsDefault(def) ? '•••••• (leave empty to keep the default)' : kind === 'connection' ? `a ${def.type} connection name` : null,
      value: defaultText(def),
    });
  }
  return { el: h('div', { class: 'field' }, label, control, help), read: () => control.value };
}

function optionsField(def, id, label, help, common) {
  const dflt = defaultText(def);
  const known = def.options.map(String);
  const custom = def.allow_custom && dflt !== '' && !known.includes(dflt);
  const select = h('select', { ...common, value: custom ? CUSTOM : dflt },
    !common.required || dflt === '' ? h('option', { value: '' }, common.required ? 'Choose…' : '—') : null,
    known.map((o) => h('option', { value: o }, o)),
    def.allow_custom ? h('option', { value: CUSTOM }, 'Other value…') : null);
  if (!def.allow_custom) {
    return { el: h('div', { class: 'field' }, label, select, help), read: () => select.value };
  }
  const other = h('input', {
    id: `${id}-custom`, type: def.secret ? 'password' : 'text', value: custom ? dflt : '',
    hidden: !custom, 'aria-label': `${def.name || common.name}: other value`,
  });
  select.addEventListener('change', () => {
    other.hidden = select.value !== CUSTOM;
    if (!other.hidden) other.focus();
  });
  return {
    el: h('div', { class: 'field' }, label, select, other, help),
    read: () => (select.value === CUSTOM ? other.value : select.value),
  };
}
