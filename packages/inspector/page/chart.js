// A time-series chart over the session's requests (uPlot), with the header
// changes drawn as dashed lines on the same axis. The chart is an image to
// assistive technology, named by what it shows; each view gives its figures
// as a table beside it.
import { useEffect, useRef } from 'preact/hooks'
import uPlot from 'uplot'
import { html } from './ui.js'

const cssVar = name => getComputedStyle(document.documentElement).getPropertyValue(name).trim()

/** `series`: [{ label, values, color? }] over `x` (request numbers); `markers`: x values of header changes. */
export function Chart({ title, x, series, format = value => String(value), markers = [], range }) {
  const box = useRef(null)
  useEffect(() => {
    const element = box.current
    const fg = cssVar('--fg')
    const grid = cssVar('--line')
    const markColor = cssVar('--bad')
    const palette = ['--series-1', '--series-2', '--series-3', '--series-4'].map(cssVar)
    const axis = { stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } }
    const options = {
      width: Math.max(320, element.clientWidth),
      height: 240,
      scales: { x: { time: false }, y: range ? { range } : {} },
      axes: [
        // Requests are whole numbers: ticks at 1, 2, 5, 10, … apart.
        { ...axis, label: 'request', incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000], values: (_, ticks) => ticks.map(String) },
        { ...axis, size: 70, values: (_, ticks) => ticks.map(format) },
      ],
      series: [
        { label: 'request' },
        ...series.map((line, i) => ({
          label: line.label,
          stroke: line.color ?? palette[i % palette.length],
          width: 2,
          points: { show: x.length <= 60 },
          spanGaps: false,
          value: (_, value) => (value === null || value === undefined ? '–' : format(value)),
        })),
      ],
      hooks: {
        draw: [
          plot => {
            const { ctx, bbox } = plot
            ctx.save()
            ctx.strokeStyle = markColor
            ctx.setLineDash([5, 4])
            ctx.lineWidth = 1.5
            for (const at of markers) {
              const left = Math.round(plot.valToPos(at, 'x', true))
              ctx.beginPath()
              ctx.moveTo(left, bbox.top)
              ctx.lineTo(left, bbox.top + bbox.height)
              ctx.stroke()
            }
            ctx.restore()
          },
        ],
      },
    }
    const plot = new uPlot(options, [x, ...series.map(line => line.values)], element)
    const observer = new ResizeObserver(() => plot.setSize({ width: Math.max(320, element.clientWidth), height: 240 }))
    observer.observe(element)
    return () => {
      observer.disconnect()
      plot.destroy()
    }
  }, [x, series, markers])
  const described = `${title}: ${series.map(line => line.label).join(' and ')} over ${x.length} requests${markers.length ? `; header changes at request ${markers.join(', ')}` : ''}`
  return html`<figure class="chart">
    <figcaption><strong>${title}</strong>${markers.length > 0 && html` <span class="muted">(dashed lines: request header changes)</span>`}</figcaption>
    <div ref=${box} role="img" aria-label=${described}></div>
  </figure>`
}
