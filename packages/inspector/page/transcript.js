// A session's transcript: turns, messages, reasoning, tool calls with their
// results, approvals and their decisions, header changes with their causes,
// retries and subagent links, one row each, collapsible where long.
import { useCallback, useState } from 'preact/hooks'
import { get } from './api.js'
import { html, sessionHref } from './ui.js'
import { VirtualList } from './virtual-list.js'

const COLLAPSIBLE = new Set(['context', 'tool', 'assistant', 'compaction', 'approval'])
const lines = text => Math.min(40, (text.match(/\n/g)?.length ?? 0) + 1 + Math.floor(text.length / 160))

/** A row's height before it is measured: about one line per 19 px. */
function estimate(item) {
  switch (item.kind) {
    case 'user':
      return 36 + 19 * lines(item.text.text)
    case 'assistant':
      return 36 + 19 * lines(item.text.text)
    case 'header':
      return 32 + (item.reason === 'change' ? 19 * item.causes.length : 0)
    default:
      return 32
  }
}

/** The text of content blocks, as the server's transcript makes it. */
const blockText = blocks => blocks.map(block => (block.type === 'text' ? block.text : block.type === 'tool-result' ? blockText(block.content) : '')).filter(Boolean).join('\n')

/** The whole text an item shows, read from its event (`part`: which text of it). */
async function wholeText(id, seq, part) {
  const event = await get(`sessions/${encodeURIComponent(id)}/events/${seq}`)
  const data = event.data
  if (event.type === 'tool/call') return data.arguments
  if (event.type === 'tool/result') return blockText(data.message.content)
  if (event.type === 'assistant/message') return data.message.content.filter(block => block.type === part).map(block => block.text).join(part === 'text' ? '' : '\n')
  if (event.type === 'compaction/summary') return blockText(data.summary)
  return blockText(data.content ?? [])
}

export function Transcript({ id, session }) {
  const [open, setOpen] = useState(() => new Set())
  const [whole, setWhole] = useState(() => new Map())
  const toggle = useCallback(
    seq =>
      setOpen(previous => {
        const next = new Set(previous)
        if (next.has(seq)) next.delete(seq)
        else next.add(seq)
        return next
      }),
    [],
  )
  const showWhole = (seq, part) => wholeText(id, seq, part).then(text => setWhole(previous => new Map(previous).set(`${seq}:${part}`, text)))
  const text = (clipped, seq, part) => {
    const full = whole.get(`${seq}:${part}`)
    if (full !== undefined) return html`<div class="text">${full}</div>`
    if (clipped.length === undefined) return html`<div class="text">${clipped.text}</div>`
    return html`<div class="text">${clipped.text}…</div>
      <button type="button" class="more" onClick=${() => showWhole(seq, part)}>Show all ${clipped.length.toLocaleString('en-US')} characters</button>`
  }
  const activate = item => {
    if (item.kind === 'assistant' && !item.reasoning) {
      if (item.request !== null) location.hash = sessionHref(id, 'r', item.request + 1)
    } else if (COLLAPSIBLE.has(item.kind)) toggle(item.seq)
  }
  // Inside the row in focus, its buttons and links are tab stops too; the other rows' are reached through their row.
  const renderRow = (item, index, focused) => {
    const expanded = open.has(item.seq)
    const tab = focused ? 0 : -1
    const toggler = label =>
      html`<button type="button" class="toggle" tabindex=${tab} aria-expanded=${expanded} onClick=${() => toggle(item.seq)}>${label}</button>`
    switch (item.kind) {
      case 'turn':
        return html`<div class="row turn"><span role="heading" aria-level="3">Turn ${item.turn}</span></div>`
      case 'turn-end':
        return html`<div class=${`row minor ${item.status === 'completed' ? 'ok' : 'bad'}`}>Turn ${item.turn} ended: ${item.reason}</div>`
      case 'user':
        return html`<div class="row"><span class="who">User</span> ${text(item.text, item.seq, 'text')}</div>`
      case 'context': {
        const title = item.form === 'snapshot' ? `Runtime context${item.names.length ? `: ${item.names.join(', ')}` : ''}` : `Message from ${item.plugin} (${item.form})`
        return html`<div class="row minor">${toggler(title)}${expanded && text(item.text, item.seq, 'text')}</div>`
      }
      case 'assistant':
        return html`<div class="row">
          <span class="who">Assistant${item.interrupted ? ' (interrupted)' : ''}</span>${' '}
          ${item.request !== null && html`<a href=${sessionHref(id, 'r', item.request + 1)} tabindex=${tab}>request ${item.request + 1}</a>`}
          ${item.reasoning && html`<div>${toggler('Reasoning')}${expanded && text(item.reasoning, item.seq, 'reasoning')}</div>`}
          ${item.text.text && text(item.text, item.seq, 'text')}
        </div>`
      case 'tool': {
        const result = item.result
        const mark = result === null ? html`<span class="warn">no result</span>` : result.isError ? html`<span class="bad">✗ failed${result.code ? ` (${result.code})` : ''}</span>` : html`<span class="ok">✓</span>`
        return html`<div class="row">
          ${toggler(html`<span class="who">Tool</span> ${item.summary}`)} ${mark}
          ${item.child && html` <a href=${sessionHref(item.child)} tabindex=${tab}>subagent session ${item.child}</a>`}
          ${expanded &&
          html`<div><div class="muted">arguments</div>${text(item.arguments, item.seq, 'arguments')}</div>
            ${result && html`<div><div class="muted">result</div>${text(result.text, result.seq, 'result')}</div>`}`}
        </div>`
      }
      case 'approval': {
        const decided = item.decision === null ? html`<span class="warn">waiting for an answer</span>` : html`<span class=${item.decision === 'deny' ? 'bad' : 'ok'}>${item.decision === 'deny' ? 'denied' : item.decision === 'allow-session' ? 'allowed for the session' : 'allowed'}</span>`
        return html`<div class="row">
          ${toggler(html`<span class="who">Approval</span> ${item.tool}: ${item.preview}`)} ${decided}
          ${item.source && html` <span class="muted">by ${item.source === 'deadline' ? 'the deadline' : item.by ?? 'a client'}</span>`}
          ${expanded &&
          html`<ul class="causes">
            ${item.reason && html`<li>asked because: ${item.reason}</li>`}
            ${item.note && html`<li>note: ${item.note}</li>`}
          </ul>`}
        </div>`
      }
      case 'header':
        return item.reason === 'change'
          ? html`<div class="row minor"><span class="who">Request header changed</span>${' '}
              <ul class="causes">${item.causes.map(cause => html`<li>${cause}</li>`)}</ul></div>`
          : html`<div class="row minor"><span class="who">Request header (${item.reason})</span> ${item.summary}
              ${item.causes.length > 0 && html`<ul class="causes">${item.causes.map(cause => html`<li>${cause}</li>`)}</ul>`}</div>`
      case 'model':
        return html`<div class="row minor">Model ${item.route}</div>`
      case 'retry':
        return html`<div class="row minor warn">Retry: ${item.text}</div>`
      case 'compaction':
        return html`<div class="row minor">${toggler('Compaction')}${expanded && text(item.text, item.seq, 'text')}</div>`
      case 'resumed':
        return html`<div class="row minor">Resumed</div>`
      default:
        return html`<div class="row minor">${item.kind}</div>`
    }
  }
  return html`<p class="muted">${session.items.length.toLocaleString('en-US')} entries from ${session.nextSeq.toLocaleString('en-US')} events. Arrow keys move between entries; Enter opens one.</p>
    <${VirtualList}
      items=${session.items}
      keyOf=${item => item.seq}
      estimate=${estimate}
      renderRow=${renderRow}
      label="Transcript"
      onActivate=${activate}
      follow=${session.row.status === 'running'}
    />`
}
