import { STATUS_CODES } from 'node:http'
import { excerpt, type Shorten } from '@loom/tools/artifacts'
import { looksBinary, SNIFF_BYTES } from '@loom/tools/workspace'
import { htmlToMarkdown, prettyJson } from './convert.ts'
import { checkUrl, type HostRules, type Resolver, resolveAll } from './rules.ts'

/** Sent with every request, and nothing of the host's: no environment, no cookies, no credentials. */
export const USER_AGENT = 'Mozilla/5.0 (compatible; Loom-web-fetch/0.1)'
const ACCEPT = 'text/html, application/xhtml+xml, application/json;q=0.9, text/markdown;q=0.9, text/plain;q=0.8, */*;q=0.1'
const REDIRECTS = new Set([301, 302, 303, 307, 308])

export interface FetchLimits extends HostRules {
  /** Bytes of a response body read at most (after decompression); the rest is not read. */
  maxResponseBytes: number
  /** Characters of converted text returned at most. */
  maxOutputChars: number
  /** Redirects followed at most. */
  maxRedirects: number
}

export interface FetchArgs {
  url: string
  max_chars?: number
}

export interface FetchMeta {
  [key: string]: string | number | boolean | null
  url: string
  finalUrl: string
  status: number
  contentType: string | null
  redirects: number
  /** Bytes of the body read (at most `maxResponseBytes`). */
  bytes: number
  /** The body was longer than `maxResponseBytes` and was cut. */
  bodyCut: boolean
  /** Characters of the converted text before the output cut. */
  chars: number
  /** The converted text was longer than the output limit: its head and tail are shown. */
  outputCut: boolean
  /** The artifact keeping the whole converted text when it was cut (`read` pages through it), else null. */
  artifact: string | null
}

/** Without a session to keep the rest in: head and tail only. */
const excerptOnly: Shorten = async (text, limit) => excerpt(text, limit)

type Kind = 'html' | 'json' | 'text'

/** Text types besides text/*: markup, code and config formats a model reads as text. */
const TEXT_TYPES = new Set([
  'application/xml',
  'application/javascript',
  'application/x-javascript',
  'application/ecmascript',
  'application/yaml',
  'application/x-yaml',
  'application/toml',
  'application/x-sh',
  'application/sql',
  'application/graphql',
])

/** How a media type is shown; undefined when it is refused. */
export function kindOf(mediaType: string): Kind | undefined {
  if (mediaType === 'text/html' || mediaType === 'application/xhtml+xml') return 'html'
  if (mediaType === 'application/json' || mediaType.endsWith('+json')) return 'json'
  if (mediaType.startsWith('text/') || TEXT_TYPES.has(mediaType) || mediaType.endsWith('+xml') || mediaType.endsWith('+yaml')) return 'text'
  return undefined
}

/**
 * Fetches a URL (GET) and returns its body as readable text under a short header.
 * Every request, redirects included, is checked against the host rules first.
 * HTTP error statuses, refused URLs and content types, and network failures throw
 * an error naming the URL.
 */
export async function fetchPage(args: FetchArgs, limits: FetchLimits, signal: AbortSignal, resolve: Resolver = resolveAll, shorten: Shorten = excerptOnly) {
  const start = parseUrl(args.url)
  const requested = start.href
  const { response, url, redirects } = await follow(start, limits, signal, resolve)
  const status = `${response.status} ${response.statusText || STATUS_CODES[response.status] || ''}`.trim()
  if (!response.ok) {
    await response.body?.cancel()
    throw new Error(`HTTP ${status} from ${url.href}`)
  }

  const contentType = response.headers.get('content-type')
  const mediaType = (contentType ?? '').split(';')[0].trim().toLowerCase()
  let kind = mediaType === '' ? undefined : kindOf(mediaType)
  if (mediaType !== '' && kind === undefined) {
    await response.body?.cancel()
    throw new Error(`unsupported content type "${mediaType}" from ${url.href}: web_fetch returns HTML, JSON and text only`)
  }
  const body = await readCapped(response, limits.maxResponseBytes, signal, url)
  // Without a declared type, a body that looks like text is shown as text (or HTML).
  if (kind === undefined) {
    if (looksBinary(body.bytes.subarray(0, SNIFF_BYTES)))
      throw new Error(`${url.href} sent no content type and its body looks binary; web_fetch returns HTML, JSON and text only`)
    kind = /^\s*<(!doctype html|html)[\s>]/i.test(new TextDecoder().decode(body.bytes.subarray(0, 512))) ? 'html' : 'text'
  }

  const text = decode(body.bytes, charsetOf(contentType), body.cut)
  const header = [`URL: ${url.href}`]
  if (redirects > 0) header.push(`Redirected from: ${requested}`)
  header.push(`Status: ${status}`, `Content-Type: ${contentType ?? '(none)'}`)
  const notes: string[] = []
  let converted = text
  if (kind === 'html') {
    const page = htmlToMarkdown(text, url.href)
    if (page.title !== undefined) header.push(`Title: ${page.title}`)
    converted = page.markdown.trim()
  } else if (kind === 'json') {
    const pretty = prettyJson(text)
    if (pretty !== undefined) converted = pretty
    else if (!body.cut) notes.push('(The body is not valid JSON; shown as sent.)')
  }
  const max = Math.min(args.max_chars ?? limits.maxOutputChars, limits.maxOutputChars)
  // Over the limit: head and tail, the whole kept as an artifact the model can page through.
  const { text: shown, omitted, reference } = await shorten(converted, { maxChars: max })
  const outputCut = omitted !== undefined
  if (body.cut)
    notes.push(`(Response cut: only its first ${limits.maxResponseBytes} bytes were read${body.declared === undefined ? '' : ` of ${body.declared}`}.)`)

  const meta: FetchMeta = {
    url: requested,
    finalUrl: url.href,
    status: response.status,
    contentType,
    redirects,
    bytes: body.bytes.length,
    bodyCut: body.cut,
    chars: converted.length,
    outputCut,
    artifact: reference ?? null,
  }
  const content = [header.join('\n'), shown === '' ? emptyNote(body.bytes.length, kind) : shown, ...notes].join('\n\n')
  return { content, meta }
}

/** What an empty output means: an empty body, or a page whose content is all script. */
function emptyNote(bytes: number, kind: Kind): string {
  return kind === 'html' && bytes > 0
    ? '(The page has no text once scripts, styles and navigation are removed; it may be rendered by JavaScript.)'
    : '(The response body is empty.)'
}

function parseUrl(text: string): URL {
  try {
    return new URL(text)
  } catch {
    throw new Error(`invalid URL ${JSON.stringify(text)}: give an absolute http or https URL such as https://example.com/page`)
  }
}

/** Requests `url`, following redirects by hand so that every target is checked before it is requested. */
async function follow(start: URL, limits: FetchLimits, signal: AbortSignal, resolve: Resolver) {
  let url = start
  await checkUrl(url, limits, resolve)
  for (let redirects = 0; ; redirects++) {
    signal.throwIfAborted()
    const response = await request(url, signal)
    const location = response.headers.get('location')
    if (!REDIRECTS.has(response.status) || location === null) return { response, url, redirects }
    await response.body?.cancel()
    if (redirects === limits.maxRedirects) throw new Error(`too many redirects: more than ${limits.maxRedirects}, starting at ${start.href}`)
    let next: URL
    try {
      next = new URL(location, url)
    } catch {
      throw new Error(`${url.href} redirects to an invalid URL ${JSON.stringify(location)}`)
    }
    try {
      await checkUrl(next, limits, resolve)
    } catch (error) {
      throw new Error(`redirect from ${url.href} to ${next.href} refused: ${(error as Error).message}`)
    }
    url = next
  }
}

/** One GET, without following redirects; network failures name the URL and their cause. */
async function request(url: URL, signal: AbortSignal): Promise<Response> {
  try {
    return await fetch(url, {
      method: 'GET',
      redirect: 'manual',
      signal,
      // Only these headers: nothing of the host's (no environment, cookies or credentials) is sent.
      // `connection: close` leaves no pooled socket (and its timers) behind once the call ends.
      headers: { 'user-agent': USER_AGENT, accept: ACCEPT, connection: 'close' },
    })
  } catch (error) {
    if (signal.aborted) throw signal.reason
    const cause = (error as Error).cause
    const detail = cause instanceof Error ? cause.message : (error as Error).message
    throw new Error(`could not fetch ${url.href}: ${detail}`)
  }
}

/** The body, at most `max` bytes of it: past the cap nothing more is read and the stream is cancelled. */
async function readCapped(response: Response, max: number, signal: AbortSignal, url: URL) {
  const chunks: Uint8Array[] = []
  let size = 0
  let cut = false
  const length = Number(response.headers.get('content-length') ?? Number.NaN)
  const declared = Number.isSafeInteger(length) ? length : undefined
  if (response.body === null) return { bytes: new Uint8Array(0), cut, declared }
  const reader = response.body.getReader()
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      if (size + value.length > max) {
        chunks.push(value.subarray(0, max - size))
        size = max
        cut = true
        break
      }
      chunks.push(value)
      size += value.length
    }
  } catch (error) {
    if (signal.aborted) throw signal.reason
    throw new Error(`could not read the response from ${url.href}: ${(error as Error).message}`)
  } finally {
    if (cut) await reader.cancel().catch(() => {})
    reader.releaseLock()
  }
  return { bytes: Buffer.concat(chunks, size), cut, declared }
}

/** The `charset` parameter of a Content-Type header, when the decoder knows it. */
function charsetOf(contentType: string | null): string {
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(contentType ?? '')?.[1]
  if (charset === undefined) return 'utf-8'
  try {
    return new TextDecoder(charset).encoding
  } catch {
    return 'utf-8'
  }
}

/** Decodes bytes; a character cut in half at the byte cap is dropped, not shown as U+FFFD. */
function decode(bytes: Uint8Array, charset: string, cut: boolean): string {
  return new TextDecoder(charset).decode(bytes, { stream: cut })
}
