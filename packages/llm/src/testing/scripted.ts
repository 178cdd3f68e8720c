import { LlmAdapter, type ContentBlock, type GenerateOptions, type LlmFailure, type LlmModelInfo, type StreamChunk, type TokenUsage } from '../index.ts'
import { blockChunks } from './chunks.ts'
import { loadReplay } from './replay.ts'

export interface ScriptedToolCall {
  /** Defaults to `scripted-<n>`, counting every defaulted call of this adapter. */
  id?: string
  name: string
  arguments?: Record<string, unknown>
}

/** A model answer: optional reasoning, then text, then tool calls (in that block order). */
export interface ScriptReply {
  text?: string
  reasoning?: string
  toolCalls?: ScriptedToolCall[]
}

/** A failing call: the stream ends with `finish {kind: 'error', failure: error}`. */
export interface ScriptFailure {
  error: { code: string; message: string }
}

/** What a script function may answer with. */
export type ScriptResult = string | ScriptReply | ScriptFailure | readonly StreamChunk[] | AsyncIterable<StreamChunk>

/** Decides the answer when the call happens (programmatic use); a throw fails the call. */
export type ScriptFunction = (request: GenerateOptions) => ScriptResult | Promise<ScriptResult>

/**
 * One scripted answer: a text reply, a structured reply, a failure, a verbatim
 * chunk sequence, or a function of the request.
 */
export type ScriptEntry = string | ScriptReply | ScriptFailure | readonly StreamChunk[] | ScriptFunction

export interface ScriptedConfig {
  /** The provider id the adapter is routed under (default `scripted`). */
  provider?: string
  /** The model `listModels` reports; any model id is served. */
  model?: string
  script?: readonly ScriptEntry[]
  /** A session log whose recorded answers are played first, before `script`. */
  replay?: string
  /** Start over when the script runs out, instead of failing with SCRIPT_EXHAUSTED. */
  loop?: boolean
}

type Step =
  | { kind: 'reply'; reply: ScriptReply }
  | { kind: 'blocks'; blocks: ContentBlock[]; usage?: TokenUsage }
  | { kind: 'failure'; failure: LlmFailure }
  | { kind: 'chunks'; chunks: readonly StreamChunk[] }
  | { kind: 'function'; fn: ScriptFunction }

const REPLY_KEYS = ['text', 'reasoning', 'toolCalls']
const TOOL_CALL_KEYS = ['id', 'name', 'arguments']

function describe(value: unknown): string {
  return typeof value === 'function' ? 'a function' : (JSON.stringify(value) ?? String(value))
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** Validates one entry; `where` names it in errors (`script entry 3`). */
function toStep(entry: unknown, where: string, allowFunction: boolean): Step {
  if (typeof entry === 'string') return { kind: 'reply', reply: { text: entry } }
  if (typeof entry === 'function') {
    if (!allowFunction) throw new TypeError(`${where}: a script function must not return another function`)
    return { kind: 'function', fn: entry as ScriptFunction }
  }
  if (Array.isArray(entry)) {
    entry.forEach((chunk, i) => {
      if (!isPlainObject(chunk) || typeof chunk.type !== 'string') throw new TypeError(`${where}: chunk ${i} is not a stream chunk: ${describe(chunk)}`)
    })
    return { kind: 'chunks', chunks: structuredClone(entry) as StreamChunk[] }
  }
  if (!isPlainObject(entry)) throw new TypeError(`${where} must be a string, a reply object, an error object or a chunk array, got ${describe(entry)}`)
  if ('error' in entry) {
    const error = entry.error
    const extra = Object.keys(entry).filter(key => key !== 'error' && !(key === 'toolCalls' && Array.isArray(entry.toolCalls) && !entry.toolCalls.length))
    if (extra.length) throw new TypeError(`${where}: an error entry takes only "error", got also ${extra.map(k => `"${k}"`).join(', ')}`)
    if (!isPlainObject(error) || typeof error.code !== 'string' || !error.code || typeof error.message !== 'string' || !error.message) {
      throw new TypeError(`${where}: "error" needs a non-empty "code" and "message", got ${describe(error)}`)
    }
    return { kind: 'failure', failure: { message: error.message, code: error.code } }
  }
  for (const key of Object.keys(entry)) {
    if (!REPLY_KEYS.includes(key)) throw new TypeError(`${where} has unknown key "${key}" (a reply takes text, reasoning, toolCalls; a failure takes error)`)
  }
  for (const key of ['text', 'reasoning'] as const) {
    if (entry[key] !== undefined && typeof entry[key] !== 'string') throw new TypeError(`${where}: "${key}" must be a string, got ${describe(entry[key])}`)
  }
  const calls = entry.toolCalls ?? []
  if (!Array.isArray(calls)) throw new TypeError(`${where}: "toolCalls" must be an array, got ${describe(calls)}`)
  calls.forEach((call: unknown, i) => {
    const at = `${where}, tool call ${i}`
    if (!isPlainObject(call)) throw new TypeError(`${at} must be an object, got ${describe(call)}`)
    for (const key of Object.keys(call)) {
      if (!TOOL_CALL_KEYS.includes(key)) throw new TypeError(`${at} has unknown key "${key}" (expected id, name, arguments)`)
    }
    if (typeof call.name !== 'string' || !call.name) throw new TypeError(`${at} needs a non-empty "name"`)
    if (call.id !== undefined && (typeof call.id !== 'string' || !call.id)) throw new TypeError(`${at}: "id" must be a non-empty string`)
    if (call.arguments !== undefined && !isPlainObject(call.arguments))
      throw new TypeError(`${at}: "arguments" must be an object, got ${describe(call.arguments)}`)
  })
  return { kind: 'reply', reply: structuredClone(entry) as ScriptReply }
}

function exhausted(played: number): LlmFailure {
  return { message: `the scripted model has no more responses (${played} played)`, code: 'SCRIPT_EXHAUSTED' }
}

/**
 * An offline model: answers each call with the next scripted (or replayed)
 * response, streamed as a provider would, and records every request it was sent.
 */
export class ScriptedAdapter extends LlmAdapter {
  readonly provider: string
  readonly model: string | undefined
  /** Every request this adapter was sent, in order, as received. */
  readonly requests: GenerateOptions[] = []
  readonly #steps: Step[] = []
  readonly #loop: boolean
  #cursor = 0
  #played = 0
  #calls = 0

  constructor(config: ScriptedConfig = {}) {
    super()
    this.provider = config.provider ?? 'scripted'
    this.model = config.model
    this.#loop = config.loop ?? false
    if (config.replay !== undefined) {
      for (const { blocks, usage } of loadReplay(config.replay)) this.#steps.push({ kind: 'blocks', blocks, ...(usage && { usage }) })
    }
    this.append(...(config.script ?? []))
  }

  /** Adds entries at the end of the script. */
  append(...entries: ScriptEntry[]): void {
    const base = this.#steps.length
    const steps = entries.map((entry, i) => toStep(entry, `script entry ${base + i}`, true))
    this.#steps.push(...steps)
  }

  /** How many responses were played (exhausted calls excluded). */
  get played(): number {
    return this.#played
  }

  /** How many responses are left before the script runs out (or starts over). */
  get remaining(): number {
    return this.#steps.length - this.#cursor
  }

  override providerInfo(provider: string): { id: string; name: string } {
    return { id: provider, name: `${provider} (scripted)` }
  }

  override async listModels(provider: string): Promise<readonly LlmModelInfo[]> {
    return this.model === undefined ? [] : [{ provider, id: this.model, name: this.model }]
  }

  stream(request: GenerateOptions): AsyncIterable<StreamChunk> {
    this.requests.push(request)
    return this.#play(this.#next(), request)
  }

  #next(): Step {
    if (this.#cursor >= this.#steps.length) {
      if (!this.#loop || this.#steps.length === 0) return { kind: 'failure', failure: exhausted(this.#played) }
      this.#cursor = 0
    }
    this.#played++
    return this.#steps[this.#cursor++]
  }

  async *#play(scripted: Step, request: GenerateOptions): AsyncGenerator<StreamChunk, void, undefined> {
    const signal = request.signal
    signal?.throwIfAborted()
    let step = scripted
    if (step.kind === 'function') {
      const result = await step.fn(request)
      if (typeof result === 'object' && result !== null && Symbol.asyncIterator in result) {
        for await (const chunk of result as AsyncIterable<StreamChunk>) {
          signal?.throwIfAborted()
          yield chunk
        }
        return
      }
      step = toStep(result, "the script function's result", false)
    }
    for (const chunk of this.#chunks(step as Exclude<Step, { kind: 'function' }>, request)) {
      signal?.throwIfAborted()
      yield chunk
    }
  }

  #chunks(step: Exclude<Step, { kind: 'function' }>, request: GenerateOptions): readonly StreamChunk[] {
    switch (step.kind) {
      case 'failure':
        return [{ type: 'finish', reason: { kind: 'error', failure: { ...step.failure } } }]
      case 'chunks':
        return structuredClone(step.chunks)
      case 'blocks':
        return blockChunks(step.blocks, request, step.usage)
      case 'reply': {
        const { reasoning, text, toolCalls = [] } = step.reply
        const blocks: ContentBlock[] = []
        if (reasoning) blocks.push({ type: 'reasoning', text: reasoning })
        if (text) blocks.push({ type: 'text', text })
        for (const call of toolCalls) {
          blocks.push({ type: 'tool-call', id: call.id ?? `scripted-${++this.#calls}`, name: call.name, arguments: JSON.stringify(call.arguments ?? {}) })
        }
        return blockChunks(blocks, request)
      }
    }
  }
}
