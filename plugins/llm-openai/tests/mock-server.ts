// A scriptable OpenAI-compatible chat-completions server on a real loopback
// socket. Each request takes the next behaviour of the script (or asks a
// function for one); an exhausted script answers 400 "script exhausted".

import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'

export type BehaviourName =
  | 'success'
  | 'tool_call'
  | 'max_tokens'
  | 'rate_limit'
  | 'server_error'
  | 'service_unavailable'
  | 'auth_error'
  | 'context_overflow'
  | 'quota'
  | 'connection_reset'
  | 'reset_mid_stream'
  | 'stall'
  | 'malformed_json'
  | 'wrong_content_type'
  | 'empty'

export interface UsageScript {
  prompt: number
  completion: number
  cacheHit?: number
  reasoning?: number
}

export type Behaviour =
  | BehaviourName
  | {
      type: 'success'
      text?: string /** `null`: no reasoning. */
      reasoning?: string | null
      usage?: UsageScript | null
      delayMs?: number
      splitWrites?: boolean /** The text in one delta. */
      oneChunk?: boolean
    }
  | {
      type: 'tool_call'
      text?: string /** Thinking mode: `reasoning_content` before the calls ('' streams empty ones). */
      reasoning?: string
      calls?: { id: string; name: string; arguments: string }[]
      delayMs?: number
      usage?: UsageScript
    }
  | { type: 'max_tokens'; text?: string }
  | { type: 'rate_limit'; retryAfter?: string | null; retryAfterMs?: number; message?: string }
  | { type: 'server_error' | 'service_unavailable' | 'auth_error' | 'context_overflow' | 'quota'; message?: string }
  | { type: 'connection_reset' | 'reset_mid_stream' | 'stall' | 'malformed_json' | 'wrong_content_type' | 'empty' }

export interface RecordedRequest {
  method: string
  path: string
  headers: IncomingHttpHeaders
  /** The parsed JSON body (or the raw text when it was not JSON). */
  body: any
  behaviour: BehaviourName
  /** Resolves when the server side of the exchange closed; `early` when before the response ended. */
  closed: Promise<{ early: boolean }>
}

export interface MockServer {
  /** Base URL to give the adapter, e.g. `http://127.0.0.1:PORT/v1`. */
  url: string
  requests: RecordedRequest[]
  close(): Promise<void>
}

export const DEFAULT_TEXT = 'Hello from the mock server.'
export const DEFAULT_REASONING = 'Thinking it through.'
export const DEFAULT_USAGE: UsageScript = { prompt: 120, completion: 40, cacheHit: 100, reasoning: 12 }
export const DEFAULT_CALLS = [{ id: 'call_1', name: 'read_file', arguments: '{"path":"src/index.ts","limit":20}' }]

const wait = (ms: number) => new Promise<void>(resolve => setTimeout(resolve, ms))

/** Splits text into `parts` roughly equal pieces (at least one). */
export function pieces(text: string, parts = 3): string[] {
  const size = Math.max(1, Math.ceil(text.length / parts))
  const out: string[] = []
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size))
  return out.length ? out : ['']
}

function usageJson(usage: UsageScript) {
  return {
    prompt_tokens: usage.prompt,
    completion_tokens: usage.completion,
    total_tokens: usage.prompt + usage.completion,
    ...(usage.cacheHit !== undefined && {
      prompt_cache_hit_tokens: usage.cacheHit,
      prompt_cache_miss_tokens: usage.prompt - usage.cacheHit,
      prompt_tokens_details: { cached_tokens: usage.cacheHit },
    }),
    ...(usage.reasoning !== undefined && { completion_tokens_details: { reasoning_tokens: usage.reasoning } }),
  }
}

export interface MockServerOptions {
  /**
   * Answer 400 as DeepSeek's thinking mode does when an assistant message that
   * made tool calls comes back without its `reasoning_content`.
   */
  requireReasoningContent?: boolean
}

export const REASONING_REQUIRED = 'The reasoning_content in the thinking mode must be passed back to the API.'

export async function startMockServer(
  script: Behaviour[] | ((request: RecordedRequest, index: number) => Behaviour),
  options: MockServerOptions = {},
): Promise<MockServer> {
  const requests: RecordedRequest[] = []
  const sockets = new Set<Socket>()
  let next = 0

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
      const request: RecordedRequest = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body, behaviour: 'success', closed }
      const index = requests.length
      requests.push(request)
      let behaviour: Behaviour | undefined
      if (typeof script === 'function') behaviour = script(request, index)
      else behaviour = script[next++]
      if (!req.url?.endsWith('/chat/completions') || req.method !== 'POST') {
        return json(res, 404, { error: { message: `no route ${req.method} ${req.url}`, type: 'invalid_request_error' } })
      }
      if (behaviour === undefined) {
        return json(res, 400, { error: { message: 'mock server: script exhausted', type: 'invalid_request_error' } })
      }
      const messages: unknown[] = isObject(body) && Array.isArray(body.messages) ? body.messages : []
      if (
        options.requireReasoningContent &&
        messages.some(m => isObject(m) && m.role === 'assistant' && Array.isArray(m.tool_calls) && typeof m.reasoning_content !== 'string')
      ) {
        return json(res, 400, { error: { message: REASONING_REQUIRED, type: 'invalid_request_error', param: null, code: 'invalid_request_error' } })
      }
      const spec = typeof behaviour === 'string' ? ({ type: behaviour } as Exclude<Behaviour, string>) : behaviour
      request.behaviour = spec.type
      const model = isObject(body) && typeof body.model === 'string' ? body.model : 'mock-model'
      void serve(spec, res, model).catch(() => res.destroy())
    })
  })
  server.on('connection', socket => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo

  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () =>
      new Promise<void>(resolve => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resolve())
      }),
  }
}

async function serve(spec: Exclude<Behaviour, string>, res: ServerResponse, model: string): Promise<void> {
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
    id: 'chatcmpl-mock',
    object: 'chat.completion.chunk',
    created: 1_700_000_000,
    model,
    choices: [{ index: 0, delta, finish_reason: finish }],
  })
  const sse = () => res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-request-id': 'req-mock' })
  const send = async (data: unknown, options: { delayMs?: number; split?: boolean } = {}) => {
    const text = `data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`
    if (options.split) {
      // Split mid-line (and between the CR-free blank line) to exercise the parser.
      const cut = Math.floor(text.length / 2)
      res.write(text.slice(0, cut))
      await wait(1)
      res.write(text.slice(cut))
    } else res.write(text)
    if (options.delayMs) await wait(options.delayMs)
  }
  const usageChunk = (usage: UsageScript) => ({
    id: 'chatcmpl-mock',
    object: 'chat.completion.chunk',
    created: 1_700_000_000,
    model,
    choices: [],
    usage: usageJson(usage),
  })

  switch (spec.type) {
    case 'success': {
      const options = { delayMs: spec.delayMs, split: spec.splitWrites }
      sse()
      res.write(': keep-alive comment\n\n')
      await send(chunk({ role: 'assistant', content: '' }), options)
      if (spec.reasoning !== null) {
        for (const part of pieces(spec.reasoning ?? DEFAULT_REASONING)) await send(chunk({ reasoning_content: part, content: null }), options)
      }
      for (const part of spec.oneChunk ? [spec.text ?? DEFAULT_TEXT] : pieces(spec.text ?? DEFAULT_TEXT)) await send(chunk({ content: part }), options)
      await send(chunk({}, 'stop'), options)
      if (spec.usage !== null) await send(usageChunk(spec.usage ?? DEFAULT_USAGE), options)
      await send('[DONE]', options)
      return void res.end()
    }
    case 'tool_call': {
      sse()
      await send(chunk({ role: 'assistant', content: '' }))
      if (spec.reasoning !== undefined) {
        for (const part of spec.reasoning ? pieces(spec.reasoning) : ['', '']) await send(chunk({ reasoning_content: part, content: null }))
      }
      if (spec.text) for (const part of pieces(spec.text)) await send(chunk({ content: part }), { delayMs: spec.delayMs })
      const calls = spec.calls ?? DEFAULT_CALLS
      for (const [index, call] of calls.entries()) {
        await send(chunk({ tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.name, arguments: '' } }] }))
        for (const part of pieces(call.arguments, 4)) {
          await send(chunk({ tool_calls: [{ index, function: { arguments: part } }] }), { delayMs: spec.delayMs })
        }
      }
      await send(chunk({}, 'tool_calls'))
      await send(usageChunk(spec.usage ?? { prompt: 50, completion: 20 }))
      await send('[DONE]')
      return void res.end()
    }
    case 'max_tokens': {
      sse()
      for (const part of pieces(spec.text ?? 'This answer is cut')) await send(chunk({ content: part }))
      await send(chunk({}, 'length'))
      await send(usageChunk({ prompt: 10, completion: 5 }))
      await send('[DONE]')
      return void res.end()
    }
    case 'rate_limit': {
      const headers: Record<string, string> = {}
      if (spec.retryAfter !== null) headers['retry-after'] = spec.retryAfter ?? '1'
      if (spec.retryAfterMs !== undefined) headers['retry-after-ms'] = String(spec.retryAfterMs)
      return json(res, 429, { error: { message: spec.message ?? 'Rate limit reached for requests', type: 'rate_limit_error' } }, headers)
    }
    case 'server_error':
      return json(res, 500, { error: { message: spec.message ?? 'Internal server error', type: 'server_error' } })
    case 'service_unavailable':
      return json(res, 503, { error: { message: spec.message ?? 'The server is overloaded', type: 'server_error' } })
    case 'auth_error':
      return json(res, 401, { error: { message: spec.message ?? 'Authentication Fails, Your api key is invalid', type: 'authentication_error' } })
    case 'context_overflow':
      return json(res, 400, {
        error: {
          message:
            spec.message ??
            "This model's maximum context length is 65536 tokens. However, you requested 70000 tokens. Please reduce the length of the messages.",
          type: 'invalid_request_error',
        },
      })
    case 'quota':
      return json(res, 402, { error: { message: spec.message ?? 'Insufficient Balance', type: 'unknown_error' } })
    case 'connection_reset':
      return void res.socket?.resetAndDestroy()
    case 'reset_mid_stream': {
      sse()
      await send(chunk({ role: 'assistant', content: '' }))
      for (const part of pieces('This will be cut')) await send(chunk({ content: part }))
      await wait(20)
      return void res.socket?.destroy()
    }
    case 'stall':
      sse()
      await send(chunk({ content: 'Hel' }))
      return // never ends; the client or close() hangs up
    case 'malformed_json':
      sse()
      await send(chunk({ content: 'ok' }))
      res.write('data: {"choices": [{"delta": {"content": \n\n')
      return void res.end()
    case 'wrong_content_type':
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
      return void res.end('<html><body>Gateway login</body></html>')
    case 'empty':
      sse()
      await send('[DONE]')
      return void res.end()
  }
}

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', 'x-request-id': 'req-mock', ...headers })
  res.end(JSON.stringify(body))
}

function isObject(value: unknown): value is Record<string, any> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
