import type { Context } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import type {} from '@loom/system-prompt'

export const name = '@loom/context-time'
export const inject = ['systemPrompt']

export const CONTEXT_NAME = 'runtime:time'
export const CONTEXT_ORDER = 10

export type Precision = 'second' | 'minute' | 'hour'

export interface Config {
  /** IANA time zone the time is given in; default: the host's. */
  timeZone?: string
  /** The finest unit reported. Default `minute`: a fast tool loop does not log a new snapshot every step. */
  precision: Precision
}

export const Config: Schema<Partial<Config>, Config> = Schema.object({
  timeZone: Schema.string().description('IANA time zone of the reported time (default: the host time zone).'),
  precision: Schema.union(['second', 'minute', 'hour'])
    .default('minute')
    .description('Finest unit of the reported time. The text only changes (and a new runtime-context snapshot is only logged) when this unit ticks.'),
}) as Schema<Partial<Config>, Config>

/** The host's IANA time zone. */
export function hostTimeZone(): string {
  return new Intl.DateTimeFormat().resolvedOptions().timeZone
}

const formatters = new Map<string, Intl.DateTimeFormat>()

function formatterFor(timeZone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(timeZone)
  if (!formatter) {
    formatter = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
    })
    formatters.set(timeZone, formatter)
  }
  return formatter
}

const pad = (value: number, width = 2) => String(Math.abs(value)).padStart(width, '0')

/**
 * `date` as ISO 8601 local time of `timeZone` with its UTC offset, to the
 * second, minute or hour (the smaller units are cut, not rounded):
 * `formatTime(new Date('2026-03-04T05:06:07Z'), 'Asia/Kolkata')` is
 * `2026-03-04T10:36:07+05:30`, and `2026-03-04T10:36+05:30` to the minute.
 * Throws a `RangeError` for an unknown zone.
 */
export function formatTime(date: Date, timeZone: string, precision: Precision = 'second'): string {
  const parts: Record<string, string> = {}
  for (const part of formatterFor(timeZone).formatToParts(date)) parts[part.type] = part.value
  const [year, month, day, hour, minute, second] = [parts.year, parts.month, parts.day, parts.hour, parts.minute, parts.second].map(Number)
  // The zone's offset: the local wall time read as UTC, minus the instant (whole seconds).
  const wall = Date.UTC(year, month - 1, day, hour, minute, second)
  const instant = Math.floor(date.getTime() / 1000) * 1000
  const offset = Math.round((wall - instant) / 60_000)
  const sign = offset < 0 ? '-' : '+'
  const clock = precision === 'hour' ? `${pad(hour)}:00` : precision === 'minute' ? `${pad(hour)}:${pad(minute)}` : `${pad(hour)}:${pad(minute)}:${pad(second)}`
  return `${pad(year, 4)}-${pad(month)}-${pad(day)}T${clock}` + `${sign}${pad(Math.trunc(Math.abs(offset) / 60))}:${pad(Math.abs(offset) % 60)}`
}

/** The exact text of the context. */
export function timeText(date: Date, timeZone: string, precision: Precision = 'second'): string {
  return `Current time: ${formatTime(date, timeZone, precision)} (${timeZone})`
}

export function apply(ctx: Context, config: Config) {
  const timeZone = config.timeZone ?? hostTimeZone()
  try {
    formatTime(new Date(), timeZone)
  } catch {
    throw new RangeError(`${name}: unknown time zone "${timeZone}" (config timeZone); use an IANA name such as "Europe/Berlin"`)
  }
  ctx.systemPrompt.context({
    name: CONTEXT_NAME,
    order: CONTEXT_ORDER,
    stability: 'step',
    text: () => timeText(new Date(), timeZone, config.precision ?? 'minute'),
  })
}
