// What every view shares: `html` (htm over Preact, no build step), number
// formats, the data hook that reloads when the session grows, stacked bars
// with their table, and the mark the benchmark reads.
import { h } from 'preact'
import { useEffect, useRef, useState } from 'preact/hooks'
import htm from 'htm'
import { get } from './api.js'

export const html = htm.bind(h)

const integer = new Intl.NumberFormat('en-US')
export const count = value => (value === null || value === undefined ? '–' : integer.format(value))
export const percent = share => (share === null || share === undefined ? '–' : `${(Math.floor(share * 1000) / 10).toFixed(1)}%`)
export const money = value => (value === null || value === undefined ? 'unknown price' : `$${value < 0.01 ? value.toFixed(6) : value.toFixed(4)}`)
export const when = ms => new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC')
export const age = ms => {
  if (ms === null || ms === undefined) return '–'
  const s = Math.floor(ms / 1000)
  return s < 60 ? `${s}s` : s < 3600 ? `${Math.floor(s / 60)}m` : s < 86400 ? `${Math.floor(s / 3600)}h` : `${Math.floor(s / 86400)}d`
}
export const sessionHref = (id, ...rest) => `#/s/${[id, ...rest].map(part => encodeURIComponent(String(part))).join('/')}`

/** A status as a word with its colour: completed is fine, running is news, the rest went wrong. */
export function Status({ status }) {
  const tone = status === 'completed' ? 'ok' : status === 'running' || status === 'new' || status === 'subagent' ? 'warn' : 'bad'
  return html`<span class=${`badge ${tone}`}>${status}</span>`
}

/**
 * `GET api/<path>`, again whenever `version` changes (the session grew); the
 * previous data stays on screen while the new arrives.
 */
export function useData(path, version = 0) {
  const [state, setState] = useState({ data: null, error: null, path: null })
  useEffect(() => {
    const abort = new AbortController()
    get(path, abort.signal).then(
      data => setState({ data, error: null, path }),
      error => abort.signal.aborted || setState(previous => ({ data: previous.path === path ? previous.data : null, error, path })),
    )
    return () => abort.abort()
  }, [path, version])
  return state.path === path ? state : { data: null, error: null, path }
}

/** The first view with its data on screen: the benchmark reads this mark (navigation start → here). */
export function useFirstView(ready) {
  useEffect(() => {
    if (ready && !performance.getEntriesByName('loom:first-view').length) {
      requestAnimationFrame(() => performance.mark('loom:first-view'))
      document.querySelector('main')?.setAttribute('data-ready', 'true')
    }
  }, [ready])
}

/** Set when the reader opens another view: the next heading allowed to (`take`) takes the focus, so a screen reader and the keyboard start there. */
export const focusOnOpen = { pending: false }

export function Heading({ level = 2, take = true, children, ...rest }) {
  const ref = useRef(null)
  useEffect(() => {
    if (take && focusOnOpen.pending && ref.current) {
      focusOnOpen.pending = false
      ref.current.focus()
    }
  })
  return h(`h${level}`, { ref, tabIndex: -1, ...rest }, children)
}

export function Failure({ error }) {
  return html`<p class="error" role="alert">${error.message}</p>`
}

const PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#bab0ac', '#2f6690', '#d37295']

/** The colour of a bar's part by its rank, so the parts of one bar differ. */
const colorAt = rank => PALETTE[rank % PALETTE.length]

/** One stacked bar of `parts` ({ label, value }) and the same figures as a table: the bar for the eye, the table for everyone. */
export function StackedBar({ title, parts, unit = 'tokens' }) {
  const total = parts.reduce((sum, part) => sum + part.value, 0)
  const sorted = [...parts].filter(part => part.value > 0).sort((a, b) => b.value - a.value)
  return html`<figure class="stacked">
    <figcaption><strong>${title}</strong> <span class="muted">(${count(total)} ${unit})</span></figcaption>
    <div class="bar" role="img" aria-label=${`${title}: ${sorted.map(part => `${part.label} ${percent(part.value / total)}`).join(', ')}`}>
      ${sorted.map((part, rank) => html`<span title=${`${part.label}: ${count(part.value)} ${unit}`} style=${`width:${(part.value / total) * 100}%;background:${colorAt(rank)}`}></span>`)}
    </div>
    <table>
      <caption class="sr">${title}</caption>
      <thead><tr><th scope="col">${title.replace(/^Tokens by /, '')}</th><th scope="col" class="num">${unit}</th><th scope="col" class="num">share</th></tr></thead>
      <tbody>
        ${sorted.map(
          (part, rank) => html`<tr><td><span class="swatch" style=${`background:${colorAt(rank)}`}></span>${part.label}</td><td class="num">${count(part.value)}</td><td class="num">${percent(part.value / total)}</td></tr>`,
        )}
      </tbody>
    </table>
  </figure>`
}
