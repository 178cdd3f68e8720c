// Two requests' manifests side by side, and what `loom prompt --diff` says of
// them: rows added, removed, moved and changed, the history and the tokens.
import { count, Failure, Heading, html, sessionHref, useData, useFirstView } from './ui.js'

const key = row => `${row.kind} ${row.name}`

function Side({ title, rows, marks }) {
  return html`<section aria-label=${title}>
    <h3>${title}</h3>
    <ol>
      ${rows.map(row => {
        const mark = marks.get(key(row))
        return html`<li class=${mark ?? ''}>${mark ? html`<span class="sr">${mark}: </span>` : ''}${row.kind} ${row.name} <span class="muted">← ${row.owner} · ${count(row.tokens)}</span></li>`
      })}
    </ol>
  </section>`
}

export function DiffView({ id, session, a, b, version }) {
  const last = session.requests.length
  const first = a ?? Math.max(1, last - 1)
  const second = b ?? last
  const { data, error } = useData(`sessions/${encodeURIComponent(id)}/diff?a=${first}&b=${second}`, version)
  useFirstView(Boolean(data))
  if (!last) return html`<p>This session has sent no request yet.</p>`
  const pick = side => event => {
    const value = Number(event.currentTarget.value)
    location.hash = sessionHref(id, 'diff', side === 'a' ? value : first, side === 'b' ? value : second)
  }
  const options = selected => session.requests.map(request => html`<option value=${request.request} selected=${request.request === selected}>Request ${request.request} (turn ${request.turn ?? '–'})</option>`)
  const picker = html`<div class="toolbar">
    <label>Request A<select onChange=${pick('a')}>${options(first)}</select></label>
    <label>Request B<select onChange=${pick('b')}>${options(second)}</select></label>
  </div>`
  if (error) return html`<${Heading}>Diff</${Heading}>${picker}<${Failure} error=${error} />`
  if (!data) return html`<${Heading}>Diff</${Heading}>${picker}<p class="loading">Comparing…</p>`
  const { diff } = data
  const before = new Map([...diff.removed.map(row => [key(row), 'removed']), ...diff.changed.map(change => [key(change.before), 'changed']), ...diff.moved.map(move => [key(move.row), 'moved'])])
  const after = new Map([...diff.added.map(row => [key(row), 'added']), ...diff.changed.map(change => [key(change.after), 'changed']), ...diff.moved.map(move => [key(move.row), 'moved'])])
  const lines = [
    ...diff.added.map(row => ['added', `${key(row)} ← ${row.owner} (${count(row.tokens)} tokens)`]),
    ...diff.removed.map(row => ['removed', `${key(row)} ← ${row.owner} (${count(row.tokens)} tokens)`]),
    ...diff.moved.map(move => ['moved', `${key(move.row)}: position ${move.from + 1} → ${move.to + 1}`]),
    ...diff.changed.map(change => [
      'changed',
      change.hashOnly
        ? `${key(change.after)}: only in hash (same ${count(change.after.chars)} chars)`
        : `${key(change.after)}: ${count(change.before.chars)} → ${count(change.after.chars)} chars, ${count(change.before.tokens)} → ${count(change.after.tokens)} tokens`,
    ]),
  ]
  const nonMessages = manifest => manifest.rows.filter(row => row.kind !== 'message')
  return html`<${Heading}>Request ${data.a} → request ${data.b}</${Heading}>
    ${picker}
    <section aria-labelledby="diff-summary">
      <h3 id="diff-summary">What changed</h3>
      ${lines.length === 0
        ? html`<p>No section, context or tool differs.</p>`
        : html`<ul>${lines.map(([kind, text]) => html`<li><strong>${kind}</strong> ${text}</li>`)}</ul>`}
      <p>History: ${count(diff.messages.before)} → ${count(diff.messages.after)} messages · total ~${count(diff.tokens.before)} → ~${count(diff.tokens.after)} tokens</p>
    </section>
    <div class="diff">
      <${Side} title=${`Request ${data.a}`} rows=${nonMessages(data.before)} marks=${before} />
      <${Side} title=${`Request ${data.b}`} rows=${nonMessages(data.after)} marks=${after} />
    </div>`
}
