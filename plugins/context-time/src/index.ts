import type { Context } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import type {} from '@loom/system-prompt'

export const name = '@loom/context-time'
export const inject = ['systemPrompt']

export const CONTEXT_NAME = 'runtime:time'
export const CONTEXT_ORDER = 10

export interface Config {
  /** IANA time zone the time is given in; default: the host's. */
  timeZone?: string
}

export const Config: Schema<Config> = Schema.object({
  timeZone: Schema.string().description('IANA time zone of the reported time (default: the host time zone).'),
}) as Schema<Config>

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
 * `date` as ISO 8601 local time of `timeZone` with its UTC offset, to the second:
 * `formatTime(new Date('2026-03-04T05:06:07Z'), 'Asia/Kolkata')` is
 * `2026-03-04T10:36:07+05:30`. Throws a `RangeError` for an unknown zone.
 */
export function formatTime(date: Date, timeZone: string): string {
  const parts: Record<string, string> = {}
  for (const part of formatterFor(timeZone).formatToParts(date)) parts[part.type] = part.value
  const [year, month, day, hour, minute, second] =
    [parts.year, parts.month, parts.day, parts.hour, parts.minute, parts.second].map(Number)
  // The zone's offset: the local wall time read as UTC, minus the instant (whole seconds).
  const wall = Date.UTC(year, month - 1, day, hour, minute, second)
  const instant = Math.floor(date.getTime() / 1000) * 1000
  const offset = Math.round((wall - instant) / 60_000)
  const sign = offset < 0 ? '-' : '+'
  return `${pad(year, 4)}-${pad(month)}-${pad(day)}T${pad(hour)}:${pad(minute)}:${pad(second)}`
    + `${sign}${pad(Math.trunc(Math.abs(offset) / 60))}:${pad(Math.abs(offset) % 60)}`
}

/** The exact text of the context. */
export function timeText(date: Date, timeZone: string): string {
  return `Current time: ${formatTime(date, timeZone)} (${timeZone})`
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
    text: () => timeText(new Date(), timeZone),
  })
}
