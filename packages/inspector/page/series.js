// Over the session: the cache-hit share of every request (what the provider
// reported beside Loom's estimate) and its input tokens, with the request
// header changes on the same axis and their attributed causes below.
import { useMemo } from 'preact/hooks'
import { Chart } from './chart.js'
import { count, Failure, Heading, html, money, percent, sessionHref, useData, useFirstView } from './ui.js'

export function SeriesView({ id, version }) {
  const { data, error } = useData(`sessions/${encodeURIComponent(id)}/series`, version)
  useFirstView(Boolean(data))
  const charts = useMemo(() => {
    if (!data) return null
    const points = data.points
    const x = points.map(point => point.request)
    const reported = points.some(point => point.reportedHitShare !== null)
    const markers = points.filter(point => point.header && point.header.reason !== 'initial').map(point => point.request)
    return {
      x,
      markers,
      hits: [
        ...(reported ? [{ label: 'reported by the provider', values: points.map(point => point.reportedHitShare) }] : []),
        { label: 'estimated', values: points.map(point => point.estimatedHitShare) },
      ],
      tokens: [
        ...(reported ? [{ label: 'reported input tokens', values: points.map(point => point.reportedInputTokens) }] : []),
        { label: 'estimated input tokens', values: points.map(point => point.estimatedInputTokens) },
      ],
    }
  }, [data])
  if (error) return html`<${Failure} error=${error} />`
  if (!data) return html`<p class="loading">Rebuilding every request…</p>`
  if (!data.points.length) return html`<p>This session has sent no request yet.</p>`
  const changes = data.points.filter(point => point.header)
  return html`<${Heading}>Cache and tokens over the session</${Heading}>
    <p class="muted">
      ${count(data.totals.requests)} requests · estimated cache hits ${percent(data.totals.hitTokens / Math.max(1, data.totals.hitTokens + data.totals.missTokens))}
      ${data.totals.reported && html` · reported ${percent(data.totals.reported.hitShare)} of ${count(data.totals.reported.inputTokens)} input tokens`}
    </p>
    <${Chart} title="Cache-hit share per request" x=${charts.x} series=${charts.hits} markers=${charts.markers} format=${percent} range=${[0, 1]} />
    <${Chart} title="Input tokens per request" x=${charts.x} series=${charts.tokens} markers=${charts.markers} format=${count} />
    <section aria-labelledby="changes-title">
      <h3 id="changes-title">Request header changes</h3>
      ${changes.length === 0
        ? html`<p>None.</p>`
        : html`<ul>
            ${changes.map(
              point => html`<li><a href=${sessionHref(id, 'r', point.request)}>Request ${point.request}</a>: ${point.header.reason}
                <ul>${point.header.causes.map(cause => html`<li>${cause}</li>`)}</ul></li>`,
            )}
          </ul>`}
    </section>
    <details>
      <summary>The figures as a table</summary>
      <table>
        <caption>Per request: cache-hit share and input tokens, reported and estimated</caption>
        <thead><tr>
          <th scope="col">Request</th><th scope="col" class="num">Turn</th><th scope="col" class="num">Hits (reported)</th><th scope="col" class="num">Hits (estimated)</th>
          <th scope="col" class="num">Input (reported)</th><th scope="col" class="num">Input (estimated)</th><th scope="col" class="num">Cost</th><th scope="col">Header</th>
        </tr></thead>
        <tbody>
          ${data.points.map(
            point => html`<tr>
              <td><a href=${sessionHref(id, 'r', point.request)}>${point.request}</a></td><td class="num">${point.turn ?? '–'}</td>
              <td class="num">${percent(point.reportedHitShare)}</td><td class="num">${percent(point.estimatedHitShare)}</td>
              <td class="num">${count(point.reportedInputTokens)}</td><td class="num">${count(point.estimatedInputTokens)}</td>
              <td class="num">${money(point.cost)}</td><td>${point.header ? point.header.reason : ''}</td>
            </tr>`,
          )}
        </tbody>
      </table>
    </details>`
}
