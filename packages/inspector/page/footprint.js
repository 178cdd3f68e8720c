// A plugin's footprint across a session: the tokens of its sections, runtime
// contexts and tools in every request, and the header changes it caused.
import { useMemo } from 'preact/hooks'
import { Chart } from './chart.js'
import { count, Failure, Heading, html, sessionHref, useData, useFirstView } from './ui.js'

export function FootprintView({ id, plugin, version }) {
  const query = plugin === undefined ? '' : `?plugin=${encodeURIComponent(plugin)}`
  const { data, error } = useData(`sessions/${encodeURIComponent(id)}/footprint${query}`, version)
  useFirstView(Boolean(data))
  const chart = useMemo(
    () =>
      data && {
        x: data.steps.map(step => step.request),
        series: [
          { label: 'sections', values: data.steps.map(step => step.sections) },
          { label: 'runtime contexts', values: data.steps.map(step => step.contexts) },
          { label: 'tools', values: data.steps.map(step => step.tools) },
        ],
        markers: data.changes.map(change => change.request),
      },
    [data],
  )
  if (error) return html`<${Failure} error=${error} />`
  if (!data) return html`<p class="loading">Reading every request's manifest…</p>`
  const choose = event => {
    location.hash = sessionHref(id, 'footprint', event.currentTarget.value)
  }
  return html`<${Heading}>Footprint of ${data.plugin ?? 'a plugin'}</${Heading}>
    <div class="toolbar">
      <label>Plugin
        <select onChange=${choose} value=${data.plugin ?? ''}>
          ${data.plugins.map(entry => html`<option value=${entry.name}>${entry.name} (${count(entry.tokens)} tokens in the last request)</option>`)}
        </select>
      </label>
    </div>
    ${data.plugin !== null && data.steps.length > 0 &&
    html`<${Chart} title=${`Tokens of ${data.plugin} per request`} x=${chart.x} series=${chart.series} markers=${chart.markers} format=${count} />`}
    <section aria-labelledby="caused-title">
      <h3 id="caused-title">Header changes it caused</h3>
      ${data.changes.length === 0
        ? html`<p>None: its part of the request header never changed.</p>`
        : html`<ul>${data.changes.map(
            change => html`<li><a href=${sessionHref(id, 'r', change.request)}>Request ${change.request}</a> (${change.reason}): ${change.causes.join('; ') || 'named in the change'}</li>`,
          )}</ul>`}
    </section>
    <details>
      <summary>The figures as a table</summary>
      <table>
        <caption>Tokens of ${data.plugin} per request</caption>
        <thead><tr><th scope="col">Request</th><th scope="col" class="num">Sections</th><th scope="col" class="num">Contexts</th><th scope="col" class="num">Tools</th><th scope="col" class="num">Total</th><th scope="col">Rows</th></tr></thead>
        <tbody>
          ${data.steps.map(
            step => html`<tr>
              <td><a href=${sessionHref(id, 'r', step.request)}>${step.request}</a></td><td class="num">${count(step.sections)}</td><td class="num">${count(step.contexts)}</td>
              <td class="num">${count(step.tools)}</td><td class="num">${count(step.tokens)}</td><td>${step.rows.map(row => row.name).join(', ')}</td>
            </tr>`,
          )}
        </tbody>
      </table>
    </details>`
}
