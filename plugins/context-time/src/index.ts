import type { Context } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import type {} from '@loom/system-prompt'
import { readlinkSync } from 'node:fs'

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

/**
 * The host's IANA time zone: the zone its `/etc/localtime` link names, when the
 * TZ variable does not name another (the zone ICU itself reads there; UTC under
 * any of its aliases is `UTC`, as Intl says), else Intl's answer. The link is
 * read because any first use of Intl starts ICU's formatting (~20 ms of every
 * start); `formatLocalTime` then gives the time without it.
 */
export function hostTimeZone(): string {
  return linkedTimeZone() ?? intlTimeZone()
}

const intlTimeZone = () => new Intl.DateTimeFormat().resolvedOptions().timeZone

/** The zone the host's `/etc/localtime` link names, when TZ is unset; undefined otherwise (no link, a copied file, Windows). */
function linkedTimeZone(): string | undefined {
  if (process.env.TZ !== undefined) return undefined
  try {
    return zoneOfLink(readlinkSync('/etc/localtime'))
  } catch {
    return undefined
  }
}

const UTC_ALIASES = new Set(['UTC', 'UCT', 'GMT', 'GMT0', 'Greenwich', 'Universal', 'Zulu'].flatMap(name => [name, `Etc/${name}`]))

/** `/usr/share/zoneinfo/Europe/Berlin` → `Europe/Berlin` (also under `posix/` or `right/`); undefined when the target is no zoneinfo file. */
export function zoneOfLink(target: string): string | undefined {
  const match = /\/zoneinfo\/(?:posix\/|right\/)?([A-Za-z][\w+\-/]*)$/.exec(target)
  if (!match) return undefined
  return UTC_ALIASES.has(match[1]) ? 'UTC' : match[1]
}

/** A wall time and its UTC offset in minutes (east positive). */
interface WallTime {
  year: number
  month: number
  day: number
  hour: number
  minute: number
  second: number
  offset: number
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

function zoneWallTime(date: Date, timeZone: string): WallTime {
  const parts: Record<string, string> = {}
  for (const part of formatterFor(timeZone).formatToParts(date)) parts[part.type] = part.value
  const [year, month, day, hour, minute, second] = [parts.year, parts.month, parts.day, parts.hour, parts.minute, parts.second].map(Number)
  // The zone's offset: the local wall time read as UTC, minus the instant (whole seconds).
  const wall = Date.UTC(year, month - 1, day, hour, minute, second)
  const instant = Math.floor(date.getTime() / 1000) * 1000
  return { year, month, day, hour, minute, second, offset: Math.round((wall - instant) / 60_000) }
}

function localWallTime(date: Date): WallTime {
  return {
    year: date.getFullYear(),
    month: date.getMonth() + 1,
    day: date.getDate(),
    hour: date.getHours(),
    minute: date.getMinutes(),
    second: date.getSeconds(),
    offset: -Math.round(date.getTimezoneOffset()),
  }
}

const pad = (value: number, width = 2) => String(Math.abs(value)).padStart(width, '0')

function iso({ year, month, day, hour, minute, second, offset }: WallTime, precision: Precision): string {
  const sign = offset < 0 ? '-' : '+'
  const clock = precision === 'hour' ? `${pad(hour)}:00` : precision === 'minute' ? `${pad(hour)}:${pad(minute)}` : `${pad(hour)}:${pad(minute)}:${pad(second)}`
  return `${pad(year, 4)}-${pad(month)}-${pad(day)}T${clock}` + `${sign}${pad(Math.trunc(Math.abs(offset) / 60))}:${pad(Math.abs(offset) % 60)}`
}

/**
 * `date` as ISO 8601 local time of `timeZone` with its UTC offset, to the
 * second, minute or hour (the smaller units are cut, not rounded):
 * `formatTime(new Date('2026-03-04T05:06:07Z'), 'Asia/Kolkata')` is
 * `2026-03-04T10:36:07+05:30`, and `2026-03-04T10:36+05:30` to the minute.
 * Throws a `RangeError` for an unknown zone.
 */
export function formatTime(date: Date, timeZone: string, precision: Precision = 'second'): string {
  return iso(zoneWallTime(date, timeZone), precision)
}

/** `formatTime` in the process's own zone (the host's), from the Date's local fields: no Intl. */
export function formatLocalTime(date: Date, precision: Precision = 'second'): string {
  return iso(localWallTime(date), precision)
}

/** The exact text of the context. */
export function timeText(date: Date, timeZone: string, precision: Precision = 'second'): string {
  return contextLine(formatTime(date, timeZone, precision), timeZone)
}

const contextLine = (time: string, timeZone: string) => `Current time: ${time} (${timeZone})`

export function apply(ctx: Context, config: Config) {
  const precision = config.precision ?? 'minute'
  const linked = config.timeZone === undefined ? linkedTimeZone() : undefined
  const timeZone = linked ?? config.timeZone ?? intlTimeZone()
  // The host's own zone needs no check, and its time no Intl.
  if (!linked) {
    try {
      formatTime(new Date(), timeZone)
    } catch {
      throw new RangeError(`${name}: unknown time zone "${timeZone}" (config timeZone); use an IANA name such as "Europe/Berlin"`)
    }
  }
  const text = linked ? () => contextLine(formatLocalTime(new Date(), precision), timeZone) : () => timeText(new Date(), timeZone, precision)
  ctx.systemPrompt.context({ name: CONTEXT_NAME, order: CONTEXT_ORDER, stability: 'step', text })
}
