// A list that puts only the rows in view (and a few around them) in the page,
// so a transcript of 10,000 events scrolls as lightly as one of ten. Row heights
// are estimated until a row has been shown, then measured and remembered by key.
// Keyboard: the list is one tab stop; arrows, Page Up/Down, Home and End move
// between rows (the row in focus is always rendered), Enter acts on the row.
import { useLayoutEffect, useMemo, useRef, useState } from 'preact/hooks'
import { html } from './ui.js'

const OVERSCAN = 8

/** The first index whose offset is above `y` (offsets ascend). */
function indexAt(offsets, y) {
  let low = 0
  let high = offsets.length - 1
  while (low < high) {
    const mid = (low + high + 1) >> 1
    if (offsets[mid] <= y) low = mid
    else high = mid - 1
  }
  return low
}

export function VirtualList({ items, keyOf, estimate, renderRow, label, onActivate, follow = false }) {
  const scroller = useRef(null)
  const heights = useRef(new Map())
  const [measured, setMeasured] = useState(0)
  const [view, setView] = useState({ top: 0, height: 800 })
  const [active, setActive] = useState(0)
  const focusPending = useRef(false)
  const atBottom = useRef(follow)

  const offsets = useMemo(() => {
    const offsets = new Float64Array(items.length + 1)
    for (let i = 0; i < items.length; i++) offsets[i + 1] = offsets[i] + (heights.current.get(keyOf(items[i])) ?? estimate(items[i]))
    return offsets
  }, [items, measured])
  const total = offsets[items.length]
  const start = Math.max(0, indexAt(offsets, view.top) - OVERSCAN)
  const end = Math.min(items.length, indexAt(offsets, view.top + view.height) + 1 + OVERSCAN)
  const focused = Math.min(active, items.length - 1)
  // The row in focus stays in the page even when scrolled away, so focus is never lost.
  const indices = []
  if (focused >= 0 && focused < start) indices.push(focused)
  for (let i = start; i < end; i++) indices.push(i)
  if (focused >= end) indices.push(focused)

  // Measure what was rendered; a height that differs from what was assumed moves the rows below.
  useLayoutEffect(() => {
    const element = scroller.current
    if (!element) return
    let changed = false
    for (const row of element.querySelectorAll('[data-index]')) {
      const item = items[Number(row.dataset.index)]
      if (!item) continue
      const key = keyOf(item)
      const height = row.offsetHeight
      if (heights.current.get(key) !== height) {
        heights.current.set(key, height)
        changed = true
      }
    }
    if (changed) setMeasured(value => value + 1)
    if (focusPending.current) {
      focusPending.current = false
      element.querySelector(`[data-index="${focused}"]`)?.focus({ preventScroll: true })
    }
  })

  // A growing list (a live session) stays at its end when the reader was there.
  useLayoutEffect(() => {
    const element = scroller.current
    if (element && atBottom.current) element.scrollTop = element.scrollHeight
  }, [items.length, total])

  useLayoutEffect(() => {
    const element = scroller.current
    if (!element) return
    const observer = new ResizeObserver(() => setView({ top: element.scrollTop, height: element.clientHeight }))
    observer.observe(element)
    return () => observer.disconnect()
  }, [])

  const onScroll = event => {
    const element = event.currentTarget
    atBottom.current = element.scrollTop + element.clientHeight >= element.scrollHeight - 4
    setView({ top: element.scrollTop, height: element.clientHeight })
  }

  const moveTo = index => {
    const next = Math.max(0, Math.min(items.length - 1, index))
    const element = scroller.current
    const top = offsets[next]
    const bottom = offsets[next + 1]
    if (top < element.scrollTop) element.scrollTop = top
    else if (bottom > element.scrollTop + element.clientHeight) element.scrollTop = bottom - element.clientHeight
    focusPending.current = true
    setActive(next)
    setView({ top: element.scrollTop, height: element.clientHeight })
  }

  const onKeyDown = event => {
    const page = Math.max(1, Math.floor(view.height / 40))
    const moves = { ArrowDown: 1, ArrowUp: -1, PageDown: page, PageUp: -page, j: 1, k: -1 }
    if (event.key in moves) moveTo(focused + moves[event.key])
    else if (event.key === 'Home') moveTo(0)
    else if (event.key === 'End') moveTo(items.length - 1)
    else if ((event.key === 'Enter' || event.key === ' ') && event.target.dataset.index !== undefined) onActivate?.(items[focused])
    else return
    event.preventDefault()
  }

  return html`<div class="vlist" ref=${scroller} onScroll=${onScroll} onKeyDown=${onKeyDown}>
    <div role="list" aria-label=${label} style=${`height:${total}px`}>
      <div class="rows" style=${`transform:translateY(${offsets[start]}px)`}>
        ${indices.map(
          i => html`<div
            role="listitem"
            key=${keyOf(items[i])}
            data-index=${i}
            aria-posinset=${i + 1}
            aria-setsize=${items.length}
            tabindex=${i === focused ? 0 : -1}
            onFocus=${() => i !== active && setActive(i)}
            style=${i < start || i >= end ? `position:absolute;left:0;right:0;top:${offsets[i] - offsets[start]}px` : ''}
          >${renderRow(items[i], i, i === focused)}</div>`,
        )}
      </div>
    </div>
  </div>`
}
