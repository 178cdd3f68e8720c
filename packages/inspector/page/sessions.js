// The sessions: project, status, turns, tokens, cost and cache-hit share, each
// subagent's session folded under the session that delegated to it.
import { Fragment } from 'preact'
import { count, Failure, Heading, html, money, percent, sessionHref, Status, useData, useFirstView, when } from './ui.js'

function Rows({ row, depth }) {
  const estimated = row.figures === 'estimated' ? ' (est.)' : ''
  return html`<${Fragment}>
    <tr class=${depth ? 'child' : ''}>
      <td>${depth > 0 && html`<span aria-label="subagent of the session above">↳ </span>`}<a href=${sessionHref(row.id)}>${row.id}</a></td>
      <td title=${row.cwd ?? ''}>${row.project ?? '–'}</td>
      <td><${Status} status=${row.status} />${row.error && html` <span class="muted">${row.error}</span>`}</td>
      <td class="num">${count(row.turns)}</td>
      <td class="num">${count(row.requests)}</td>
      <td class="num">${count(row.inputTokens)}${estimated}</td>
      <td class="num">${money(row.cost)}</td>
      <td class="num">${percent(row.hitShare)}</td>
      <td>${when(row.createdAt)}</td>
    </tr>
    ${row.children.map(child => html`<${Rows} key=${child.id} row=${child} depth=${depth + 1} />`)}
  </${Fragment}>`
}

export function SessionsView({ version }) {
  const { data, error } = useData('sessions', version)
  useFirstView(Boolean(data))
  return html`<${Heading} level=${1}>Sessions</${Heading}>
    ${error && html`<${Failure} error=${error} />`}
    ${!data && !error && html`<p class="loading">Reading the sessions…</p>`}
    ${data &&
    (data.sessions.length === 0
      ? html`<p>No stored sessions yet: run <code>loom run "…"</code> first.</p>`
      : html`<table>
          <caption>Figures are what the provider reported; (est.) marks Loom's estimates where it reported none.</caption>
          <thead>
            <tr>
              <th scope="col">Session</th><th scope="col">Project</th><th scope="col">Status</th><th scope="col" class="num">Turns</th>
              <th scope="col" class="num">Requests</th><th scope="col" class="num">Input tokens</th><th scope="col" class="num">Cost</th>
              <th scope="col" class="num">Cache hits</th><th scope="col">Created</th>
            </tr>
          </thead>
          <tbody>${data.sessions.map(row => html`<${Rows} key=${row.id} row=${row} depth=${0} />`)}</tbody>
        </table>`)}`
}
