// One request as the model received it: its manifest as stacked bars by owner
// and by category, each row's stability, trust and age, the exact system text
// and tools, and the runtime-context snapshot. Without a number: every request.
import { age, count, Failure, Heading, html, money, percent, sessionHref, StackedBar, useData, useFirstView, when } from './ui.js'

function sumBy(rows, key) {
  const sums = new Map()
  for (const row of rows) if (row.counted) sums.set(row[key] ?? 'none', (sums.get(row[key] ?? 'none') ?? 0) + row.tokens)
  return [...sums].map(([label, value]) => ({ label, value }))
}

export function RequestList({ id, session }) {
  useFirstView(true)
  if (!session.requests.length) return html`<p>This session has sent no request yet.</p>`
  return html`<table>
    <caption>Every request the session sent, rebuilt from its log.</caption>
    <thead><tr><th scope="col">Request</th><th scope="col" class="num">Turn</th><th scope="col" class="num">Step</th><th scope="col">Sent</th></tr></thead>
    <tbody>
      ${session.requests.map(
        request => html`<tr>
          <td><a href=${sessionHref(id, 'r', request.request)}>Request ${request.request}</a></td>
          <td class="num">${request.turn ?? '–'}</td><td class="num">${request.step ?? '–'}</td><td>${when(request.time)}</td>
        </tr>`,
      )}
    </tbody>
  </table>`
}

export function RequestView({ id, number, version }) {
  const { data, error } = useData(`sessions/${encodeURIComponent(id)}/requests/${number}`, version)
  useFirstView(Boolean(data))
  if (error) return html`<${Failure} error=${error} />`
  if (!data) return html`<p class="loading">Rebuilding request ${number}…</p>`
  const { manifest, economics } = data
  const rows = manifest.rows.filter(row => row.kind !== 'message')
  const messages = manifest.rows.filter(row => row.kind === 'message')
  const historyTokens = messages.reduce((sum, row) => sum + row.tokens, 0)
  return html`<${Heading}>Request ${data.request} of ${data.requests}</${Heading}>
    <nav aria-label="Other requests" class="toolbar">
      ${data.request > 1 && html`<a href=${sessionHref(id, 'r', data.request - 1)}>← Request ${data.request - 1}</a>`}
      ${data.request < data.requests && html`<a href=${sessionHref(id, 'r', data.request + 1)}>Request ${data.request + 1} →</a>`}
      <a href=${sessionHref(id, 'r')}>All requests</a>
      ${data.request > 1 && html`<a href=${sessionHref(id, 'diff', data.request - 1, data.request)}>Diff with the previous request</a>`}
    </nav>
    <ul class="facts">
      <li><span>turn</span>${data.turn ?? '–'}</li><li><span>step</span>${data.step ?? '–'}</li><li><span>sent</span>${when(data.time)}</li>
      <li><span>route</span>${data.route ?? '–'}</li><li><span>history</span>${count(data.messages)} messages</li>
      <li><span>estimated tokens</span>~${count(manifest.totals.tokens)}</li>
      <li><span>cache hits (estimated)</span>${percent(economics.hitTokens / Math.max(1, economics.hitTokens + economics.missTokens))}</li>
      <li><span>cache hits (reported)</span>${economics.reported ? percent(economics.reported.hitShare) : 'not reported'}</li>
      <li><span>cost</span>${money(economics.reported ? sum(economics.reported.inputCost, economics.reported.outputCost) : sum(economics.inputCost, economics.outputCost))}</li>
    </ul>
    ${data.header &&
    html`<section aria-labelledby="header-title">
      <h3 id="header-title">${data.header.reason === 'change' ? 'The request header changed before this request' : `Request header (${data.header.reason})`}</h3>
      <ul>${data.header.causes.map(cause => html`<li>${cause}</li>`)}</ul>
    </section>`}
    <section aria-labelledby="manifest-title">
      <h3 id="manifest-title">Manifest</h3>
      <${StackedBar} title="Tokens by owner" parts=${sumBy(manifest.rows, 'owner')} />
      <${StackedBar} title="Tokens by category" parts=${sumBy(manifest.rows, 'category')} />
      <table>
        <caption>Sections, runtime contexts and tools (context rows are counted in their snapshot message)</caption>
        <thead><tr>
          <th scope="col">Kind</th><th scope="col">Name</th><th scope="col">Owner</th><th scope="col" class="num">Order</th><th scope="col">Stability</th>
          <th scope="col">Trust</th><th scope="col">Category</th><th scope="col" class="num">Age</th><th scope="col" class="num">Tokens</th>
        </tr></thead>
        <tbody>
          ${rows.map(
            row => html`<tr>
              <td>${row.kind}</td><td>${row.name}</td><td>${row.owner}</td><td class="num">${row.order}</td><td>${row.stability ?? '–'}</td>
              <td>${row.trust ?? '–'}</td><td>${row.category ?? '–'}</td><td class="num">${age(row.age)}</td><td class="num">${count(row.tokens)}${row.counted ? '' : '*'}</td>
            </tr>`,
          )}
          <tr><td>history</td><td>${count(messages.length)} messages</td><td colspan="6"></td><td class="num">${count(historyTokens)}</td></tr>
        </tbody>
      </table>
      ${data.leftOut.length > 0 && html`<p>Left out by the budgets: ${data.leftOut.join(', ')}</p>`}
    </section>
    <details open>
      <summary><h3 class="inline">System text</h3> <span class="muted">(${count(data.system.length)} characters)</span></summary>
      <pre aria-label="System text">${data.system || '(none)'}</pre>
    </details>
    <details>
      <summary><h3 class="inline">Tools (${data.tools.length})</h3></summary>
      <ol>
        ${data.tools.map(
          tool => html`<li><details><summary><code>${tool.name}</code> <span class="muted">← ${tool.owner}</span></summary>
            <p>${tool.description}</p><pre>${JSON.stringify(tool.parameters, null, 2)}</pre></details></li>`,
        )}
      </ol>
    </details>
    <details open>
      <summary><h3 class="inline">Runtime-context snapshot</h3></summary>
      <pre aria-label="Runtime-context snapshot">${data.runtimeContext ?? '(none)'}</pre>
    </details>`
}

const sum = (a, b) => (a === null || b === null ? null : a + b)
