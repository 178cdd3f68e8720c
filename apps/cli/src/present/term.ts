// Terminal output: colors and a spinner only on a TTY; plain text otherwise;
// never a known secret.
import { hostSecretValues } from '@loom/secrets'
import { clipToWidth } from './width.ts'

export interface Stream {
  write(text: string): unknown
  isTTY?: boolean
  /** The terminal's width, when it is one. */
  columns?: number
}

export interface Io {
  stdout: Stream
  stderr: Stream
}

export const processIo: Io = { stdout: process.stdout, stderr: process.stderr }

/** The host's secret values (provider keys, tokens, passwords in URLs, secrets registered from files): never printed. */
export const hostSecrets = () => hostSecretValues()

/** Styles text when the stream is a TTY (and NO_COLOR is not set); otherwise returns it unchanged. */
export function styler(stream: Stream) {
  const on = Boolean(stream.isTTY) && !process.env.NO_COLOR && process.env.TERM !== 'dumb'
  const wrap = (open: number, close: number) => (text: string) => (on ? `\x1b[${open}m${text}\x1b[${close}m` : text)
  return {
    enabled: on,
    bold: wrap(1, 22),
    dim: wrap(2, 22),
    italic: wrap(3, 23),
    underline: wrap(4, 24),
    red: wrap(31, 39),
    green: wrap(32, 39),
    yellow: wrap(33, 39),
    cyan: wrap(36, 39),
  }
}

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏']

/**
 * A one-line spinner on `stream` while the program waits (for the model, for a
 * tool), with the seconds this wait has lasted. It draws only when the stream is
 * a TTY; elsewhere every call is a no-op, so piped output never holds an escape code.
 */
export class Spinner {
  private readonly stream: Stream
  private readonly enabled: boolean
  private timer: NodeJS.Timeout | undefined
  private frame = 0
  private label = ''
  private detail = ''
  private since = 0

  constructor(stream: Stream, enabled = Boolean(stream.isTTY)) {
    this.stream = stream
    this.enabled = enabled
  }

  /** Shows `label`; the elapsed time counts from the start of this wait (a new label keeps counting). */
  start(label: string): void {
    if (!this.enabled) return
    this.label = label
    if (this.timer) return
    this.since = Date.now()
    this.draw()
    this.timer = setInterval(() => this.draw(), 80)
    this.timer.unref()
  }

  /** Shown dimmed after the label and time (the conversation's status), until set again. */
  setDetail(detail: string | undefined): void {
    this.detail = detail ?? ''
  }

  /** Clears the spinner line; call before writing anything else to the terminal. */
  stop(): void {
    if (!this.timer) return
    clearInterval(this.timer)
    this.timer = undefined
    this.stream.write('\r\x1b[K')
  }

  private draw() {
    const seconds = Math.floor((Date.now() - this.since) / 1000)
    const line = `${FRAMES[this.frame++ % FRAMES.length]} ${this.label}${seconds ? ` \x1b[2m${seconds}s\x1b[22m` : ''}${this.detail ? `\x1b[2m · ${this.detail}\x1b[22m` : ''}`
    // One row: a wrapped spinner line could not be cleared by the next frame.
    this.stream.write(`\r\x1b[K${clipToWidth(line, (this.stream.columns ?? 80) - 1)}`)
  }
}

/** `text` cut to `max` characters, with an ellipsis when cut. */
export function clip(text: string, max: number): string {
  return text.length <= max ? text : text.slice(0, Math.max(0, max - 1)) + '…'
}
