// The status filter of job lists: a select whose values are the `status`
// query of GET /api/jobs.
import { h } from './dom.js';

export const STATUSES = [
  ['', 'All statuses'], ['pending,running', 'Live'], ['pending', 'pending'], ['running', 'running'],
  ['completed', 'completed'], ['failed', 'failed'], ['cancelled', 'cancelled'], ['skipped', 'skipped'],
];

// statusSelect is the select (id for its label) set to value, calling
// onchange with the chosen value.
export function statusSelect(id, value, onchange) {
  return h('select', { id, value, onchange: (e) => onchange(e.target.value) },
    STATUSES.map(([v, label]) => h('option', { value: v }, label)));
}
