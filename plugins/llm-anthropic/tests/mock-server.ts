// A scriptable Anthropic Messages API server on a real loopback socket. Each
// request is first checked the way the real API checks it (key, version header,
// alternation, tool_use/tool_result pairing, at most 4 cache_control blocks,
// thinking blocks passed back with the signature this server issued, unchanged),
// and refused with a 400/401 like the real API; then it takes the next behaviour
// of the script (or asks a function for one). An exhausted script answers 400.

import { createHash } from 'node:crypto'
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'

export type MockBlock =
  | { type: 'text'; text: string }
  /** The server issues the signature (remembered with the text it signs). */
  | { type: 'thinking'; thinking: string }
  | { type: 'redacted_thinking' }
  | { type: 'tool_use'; id: string; name: string; input: Record<string, unknown> }

export interface MockUsage {
  input: number
  output: number
  cacheRead?: number
  cacheWrite?: number
}

export type Behaviour =
  | { type: 'message'; blocks?: MockBlock[]; stopReason?: string; usage?: MockUsage; delayMs?: number; splitWrites?: boolean }
  | {
      type: 'http_error'
      status: number
      errorType: string
      message: string
      headers?: Record<string, string> /** Appends the request's key to the message. */
      echoKey?: boolean
    }
  | { type: 'error_event'; errorType: string; message: string; echoKey?: boolean }
  /** Some text, then the socket is destroyed. */
  | { type: 'reset_mid_stream' }
  /** Destroyed before any answer. */
  | { type: 'connection_reset' }
  /** Headers and one event, then silence. */
  | { type: 'stall' }
  /** A complete-looking stream that ends (cleanly) without `message_stop`. */
  | { type: 'truncated' }
  /** A text answer of about `bytes` bytes. */
  | { type: 'huge'; bytes: number }
  | { type: 'raw'; status: number; contentType: string; body: string }

export interface RecordedRequest {
  method: string
  path: string
  headers: IncomingHttpHeaders
  /** The parsed JSON body (or the raw text when it was not JSON). */
  body: any
  /** What the request was answered with: the behaviour's type, or `refused` (a validation 4xx). */
  outcome: string
  /** The validation message when refused. */
  refusal?: string
  /** Resolves when the server side of the exchange closed; `early` when before the response ended. */
  closed: Promise<{ early: boolean }>
}

export interface MockServer {
  /** Base URL for the adapter, e.g. `http://127.0.0.1:PORT` (the adapter appends `/v1/messages`). */
  url: string
  requests: RecordedRequest[]
  close(): Promise<void>
}

export interface MockServerOptions {
  /** The key requests must carry in `x-api-key`. Default `sk-ant-test`. */
  apiKey?: string
}

export const DEFAULT_TEXT = 'Hello from the mock server.'
export const DEFAULT_USAGE: MockUsage = { input: 20, output: 40, cacheRead: 100, cacheWrite: 30 }

const wait = (ms: number) => new Promise<void>(resolve => setTimeout(resolve, ms))

/** Splits text into `parts` roughly equal pieces (at least one). */
export function pieces(text: string, parts = 3): string[] {
  const size = Math.max(1, Math.ceil(text.length / parts))
  const out: string[] = []
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size))
  return out.length ? out : ['']
}

interface Issued {
  /** signature → the thinking text it signs. */
  signatures: Map<string, string>
  redacted: Set<string>
  /** tool_use id → the thinking blocks of the answer that made the call, in order. */
  thinkingOfCall: Map<string, unknown[]>
}

export async function startMockServer(
  script: Behaviour[] | ((request: RecordedRequest, index: number) => Behaviour),
  options: MockServerOptions = {},
): Promise<MockServer> {
  const apiKey = options.apiKey ?? 'sk-ant-test'
  const requests: RecordedRequest[] = []
  const sockets = new Set<Socket>()
  const issued: Issued = { signatures: new Map(), redacted: new Set(), thinkingOfCall: new Map() }
  let next = 0
  let messageCount = 0

  const server = createServer((req, res) => {
    const parts: Buffer[] = []
    req.on('data', part => parts.push(part))
    req.on('end', () => {
      const raw = Buffer.concat(parts).toString('utf8')
      let body: unknown = raw
      try {
        body = JSON.parse(raw)
      } catch {
        // keep the raw text
      }
      let early = true
      res.on('finish', () => {
        early = false
      })
      const closed = new Promise<{ early: boolean }>(resolve => res.on('close', () => resolve({ early })))
      const request: RecordedRequest = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body, outcome: 'refused', closed }
      const index = requests.length
      requests.push(request)
      if (req.url !== '/v1/messages' || req.method !== 'POST') {
        request.refusal = `no route ${req.method} ${req.url}`
        return error(res, 404, 'not_found_error', request.refusal)
      }
      if (req.headers['x-api-key'] !== apiKey) {
        request.refusal = 'invalid x-api-key'
        return error(res, 401, 'authentication_error', 'invalid x-api-key')
      }
      if (req.headers['anthropic-version'] !== '2023-06-01') {
        request.refusal = 'anthropic-version: header is required'
        return error(res, 400, 'invalid_request_error', request.refusal)
      }
      const refusal = validate(body, issued)
      if (refusal) {
        request.refusal = refusal
        return error(res, 400, 'invalid_request_error', refusal)
      }
      const behaviour = typeof script === 'function' ? script(request, index) : script[next++]
      if (behaviour === undefined) {
        request.refusal = 'mock server: script exhausted'
        return error(res, 400, 'invalid_request_error', request.refusal)
      }
      request.outcome = behaviour.type
      const model = (body as { model: string }).model
      void serve(behaviour, res, model, `msg_mock_${++messageCount}`, issued, String(req.headers['x-api-key'])).catch(() => res.destroy())
    })
  })
  server.on('connection', socket => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo

  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>(resolve => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resolve())
      }),
  }
}

// ---------------------------------------------------------------------------
// The real API's checks, as far as the adapter's requests can break them.

function validate(body: unknown, issued: Issued): string | undefined {
  if (!isObject(body)) return 'the body must be a JSON object'
  if (typeof body.model !== 'string' || !body.model) return 'model: Field required'
  if (!Number.isInteger(body.max_tokens) || (body.max_tokens as number) < 1) return 'max_tokens: Field required'
  if (body.stream !== true) return 'this mock only streams'
  const thinking = body.thinking
  if (thinking !== undefined) {
    if (!isObject(thinking) || !['enabled', 'disabled', 'adaptive'].includes(thinking.type as string)) return 'thinking.type: invalid'
    if (thinking.type === 'enabled') {
      const budget = thinking.budget_tokens as number
      if (!Number.isInteger(budget) || budget < 1024) return 'thinking.budget_tokens: Input should be greater than or equal to 1024'
      if (budget >= (body.max_tokens as number)) return '`max_tokens` must be greater than `thinking.budget_tokens`'
    }
  }
  let breakpoints = 0
  const countMarker = (block: any, where: string): string | undefined => {
    if (block?.cache_control === undefined) return undefined
    if (block.cache_control?.type !== 'ephemeral') return `${where}.cache_control: invalid`
    if (block.type === 'thinking' || block.type === 'redacted_thinking') return `${where}.cache_control: thinking blocks cannot be cached directly`
    breakpoints++
  }
  if (body.system !== undefined) {
    if (!Array.isArray(body.system)) return 'system: expected a list of text blocks here'
    for (const [i, block] of body.system.entries()) {
      if (block?.type !== 'text' || typeof block.text !== 'string' || !block.text) return `system.${i}: text content blocks must be non-empty`
      const bad = countMarker(block, `system.${i}`)
      if (bad) return bad
    }
  }
  if (body.tools !== undefined) {
    if (!Array.isArray(body.tools)) return 'tools: expected a list'
    for (const [i, tool] of body.tools.entries()) {
      if (typeof tool?.name !== 'string' || !isObject(tool.input_schema) || tool.input_schema.type !== 'object') return `tools.${i}: invalid tool`
      const bad = countMarker(tool, `tools.${i}`)
      if (bad) return bad
    }
  }
  const messages = body.messages
  if (!Array.isArray(messages) || !messages.length) return 'messages: at least one message is required'
  for (const [m, message] of messages.entries()) {
    const where = `messages.${m}`
    if (message?.role !== (m % 2 === 0 ? 'user' : 'assistant')) return `${where}: roles must alternate between "user" and "assistant", starting with "user"`
    if (!Array.isArray(message.content) || !message.content.length) return `${where}: all messages must have non-empty content`
    for (const [b, block] of message.content.entries()) {
      const at = `${where}.content.${b}`
      const bad = countMarker(block, at)
      if (bad) return bad
      switch (block?.type) {
        case 'text':
          if (typeof block.text !== 'string' || !block.text) return `${at}: text content blocks must be non-empty`
          break
        case 'thinking':
          if (message.role !== 'assistant') return `${at}: thinking blocks belong to assistant turns`
          if (typeof block.signature !== 'string' || !block.signature) return `${at}.signature: Field required`
          if (issued.signatures.get(block.signature) !== block.thinking) return `${at}: Invalid \`signature\` in \`thinking\` block`
          break
        case 'redacted_thinking':
          if (!issued.redacted.has(block.data)) return `${at}: Invalid \`data\` in \`redacted_thinking\` block`
          break
        case 'tool_use':
          if (message.role !== 'assistant') return `${at}: tool_use belongs to assistant turns`
          if (!isObject(block.input)) return `${at}.input: Input should be a valid dictionary`
          break
        case 'tool_result':
          if (message.role !== 'user') return `${at}: tool_result belongs to user turns`
          break
        default:
          return `${at}.type: unknown block type ${block?.type}`
      }
    }
    if (message.role === 'assistant') {
      const ids = message.content.filter((b: any) => b.type === 'tool_use').map((b: any) => b.id as string)
      if (ids.length) {
        const following = messages[m + 1]
        const results: string[] = []
        for (const block of following?.content ?? []) {
          if (block.type !== 'tool_result') break // tool results first
          results.push(block.tool_use_id)
        }
        const missing = ids.filter((id: string) => !results.includes(id))
        if (following && missing.length) return `${where}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${missing.join(', ')}`
        // The thinking of an answer that called tools must come back with it, unchanged.
        const sent = message.content.filter((b: any) => b.type === 'thinking' || b.type === 'redacted_thinking')
        const key = (blocks: any[]) => JSON.stringify(blocks.map(b => [b.type, b.thinking ?? b.data, b.signature ?? null]))
        for (const id of ids) {
          const expected = issued.thinkingOfCall.get(id)
          if (expected && key(expected) !== key(sent)) {
            return `${where}.content.0.type: Expected \`thinking\` or \`redacted_thinking\`, but found \`${message.content[0]?.type}\`. The thinking blocks of a turn that used tools must be passed back unchanged`
          }
        }
      }
    } else if (m > 0) {
      const previous = messages[m - 1]
      const ids = new Set(previous.content.filter((b: any) => b.type === 'tool_use').map((b: any) => b.id))
      for (const block of message.content) {
        if (block.type === 'tool_result' && !ids.has(block.tool_use_id)) {
          return `${where}: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${block.tool_use_id}`
        }
      }
    }
  }
  if (breakpoints > 4) return `A maximum of 4 blocks with cache_control may be provided. Found ${breakpoints}.`
  return undefined
}

// ---------------------------------------------------------------------------

async function serve(spec: Behaviour, res: ServerResponse, model: string, id: string, issued: Issued, key: string): Promise<void> {
  const sse = () => res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'request-id': 'req_mock' })
  const send = async (data: Record<string, unknown>, opts: { delayMs?: number; split?: boolean } = {}) => {
    const text = `event: ${data.type}\ndata: ${JSON.stringify(data)}\n\n`
    if (opts.split) {
      const cut = Math.floor(text.length / 2)
      res.write(text.slice(0, cut))
      await wait(1)
      res.write(text.slice(cut))
    } else res.write(text)
    if (opts.delayMs) await wait(opts.delayMs)
  }
  const start = (usage: MockUsage) =>
    send({
      type: 'message_start',
      message: {
        id,
        type: 'message',
        role: 'assistant',
        model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: {
          input_tokens: usage.input,
          ...(usage.cacheWrite !== undefined && { cache_creation_input_tokens: usage.cacheWrite }),
          ...(usage.cacheRead !== undefined && { cache_read_input_tokens: usage.cacheRead }),
          output_tokens: 1,
        },
      },
    })

  switch (spec.type) {
    case 'message': {
      const opts = { delayMs: spec.delayMs, split: spec.splitWrites }
      const blocks = spec.blocks ?? [{ type: 'text', text: DEFAULT_TEXT }]
      const usage = spec.usage ?? DEFAULT_USAGE
      sse()
      res.write(': keep-alive comment\n\n')
      await start(usage)
      await send({ type: 'ping' }, opts)
      const thinking: unknown[] = []
      for (const [index, block] of blocks.entries()) {
        switch (block.type) {
          case 'text':
            await send({ type: 'content_block_start', index, content_block: { type: 'text', text: '' } }, opts)
            for (const part of pieces(block.text)) await send({ type: 'content_block_delta', index, delta: { type: 'text_delta', text: part } }, opts)
            break
          case 'thinking': {
            const signature = `sig_${createHash('sha256').update(`${id}:${index}:${block.thinking}`).digest('base64url')}`
            issued.signatures.set(signature, block.thinking)
            thinking.push({ type: 'thinking', thinking: block.thinking, signature })
            await send({ type: 'content_block_start', index, content_block: { type: 'thinking', thinking: '', signature: '' } }, opts)
            if (block.thinking) {
              for (const part of pieces(block.thinking))
                await send({ type: 'content_block_delta', index, delta: { type: 'thinking_delta', thinking: part } }, opts)
            }
            await send({ type: 'content_block_delta', index, delta: { type: 'signature_delta', signature } }, opts)
            break
          }
          case 'redacted_thinking': {
            const data = `redacted_${createHash('sha256').update(`${id}:${index}`).digest('base64url')}`
            issued.redacted.add(data)
            thinking.push({ type: 'redacted_thinking', data })
            await send({ type: 'content_block_start', index, content_block: { type: 'redacted_thinking', data } }, opts)
            break
          }
          case 'tool_use': {
            await send({ type: 'content_block_start', index, content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} } }, opts)
            await send({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: '' } }, opts)
            for (const part of pieces(JSON.stringify(block.input), 4)) {
              await send({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: part } }, opts)
            }
            break
          }
        }
        await send({ type: 'content_block_stop', index }, opts)
      }
      for (const block of blocks) if (block.type === 'tool_use' && thinking.length) issued.thinkingOfCall.set(block.id, thinking)
      const stopReason = spec.stopReason ?? (blocks.some(block => block.type === 'tool_use') ? 'tool_use' : 'end_turn')
      await send({ type: 'message_delta', delta: { stop_reason: stopReason, stop_sequence: null }, usage: { output_tokens: usage.output } }, opts)
      await send({ type: 'message_stop' }, opts)
      return void res.end()
    }
    case 'http_error':
      return error(res, spec.status, spec.errorType, spec.echoKey ? `${spec.message} (x-api-key: ${key}; got ${key})` : spec.message, spec.headers)
    case 'error_event':
      sse()
      await start(DEFAULT_USAGE)
      await send({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } })
      await send({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Partial' } })
      await send({ type: 'error', error: { type: spec.errorType, message: spec.echoKey ? `${spec.message} for key ${key}` : spec.message } })
      return void res.end()
    case 'reset_mid_stream':
      sse()
      await start(DEFAULT_USAGE)
      await send({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } })
      await send({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'This will be cut' } })
      await wait(20)
      return void res.socket?.destroy()
    case 'connection_reset':
      return void res.socket?.resetAndDestroy()
    case 'stall':
      sse()
      await start(DEFAULT_USAGE)
      return // never ends; the client or close() hangs up
    case 'truncated':
      sse()
      await start(DEFAULT_USAGE)
      await send({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } })
      await send({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Complete-looking' } })
      await send({ type: 'content_block_stop', index: 0 })
      await send({ type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 3 } })
      return void res.end()
    case 'huge': {
      sse()
      await start(DEFAULT_USAGE)
      await send({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } })
      const chunk = 'x'.repeat(16 * 1024)
      for (let sent = 0; sent < spec.bytes && !res.destroyed; sent += chunk.length) {
        await send({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: chunk } })
        await new Promise(resolve => setImmediate(resolve))
      }
      if (res.destroyed) return
      await send({ type: 'content_block_stop', index: 0 })
      await send({ type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 5 } })
      await send({ type: 'message_stop' })
      return void res.end()
    }
    case 'raw':
      res.writeHead(spec.status, { 'content-type': spec.contentType })
      return void res.end(spec.body)
  }
}

function error(res: ServerResponse, status: number, type: string, message: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', 'request-id': 'req_mock_error', ...headers })
  res.end(JSON.stringify({ type: 'error', error: { type, message }, request_id: 'req_mock_error' }))
}

function isObject(value: unknown): value is Record<string, any> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
