// Loom request → Anthropic Messages API request body: system text blocks, tools,
// alternating user/assistant turns, thinking blocks replayed with their
// signatures, and at most four `cache_control` breakpoints.
import { LlmError, type ContentBlock, type GenerateOptions, type Message, type ToolSchema } from '@loom/llm'
import { isObject } from './errors.ts'

export interface CacheControl {
  type: 'ephemeral'
}

export type WireBlock =
  | { type: 'text'; text: string; cache_control?: CacheControl }
  | { type: 'thinking'; thinking: string; signature: string }
  | { type: 'redacted_thinking'; data: string }
  | { type: 'tool_use'; id: string; name: string; input: Record<string, unknown>; cache_control?: CacheControl }
  | { type: 'tool_result'; tool_use_id: string; content?: { type: 'text'; text: string }[]; is_error?: true; cache_control?: CacheControl }

export interface WireMessage {
  role: 'user' | 'assistant'
  content: WireBlock[]
}

export interface WireTool {
  name: string
  description: string
  input_schema: Record<string, unknown>
  cache_control?: CacheControl
}

/** One entry per emitted block of an answer, in `replayState.blocks` (null: nothing to carry). */
export type ReplayBlock = { type: 'thinking'; signature: string } | { type: 'redacted_thinking'; data: string } | null

/** How a route asks for thinking (see the README). */
export type ThinkingMode = 'auto' | 'adaptive' | 'enabled' | 'disabled'

export interface BodySettings {
  /** The output cap when the call gives no `maxTokens` (the API requires one). */
  maxTokens: number
  thinking: ThinkingMode
  thinkingBudgetTokens: number
  prefixMismatchBehavior?: 'error' | 'drop_block'
}

/** The key a tool call's arguments go under when they are not a JSON object. */
export const RAW_ARGUMENTS_KEY = '_raw_arguments'

const ephemeral = (): CacheControl => ({ type: 'ephemeral' })

/**
 * The request body of one call. Key order is fixed, so equal requests are equal
 * bytes. Throws BAD_REQUEST for a thinking budget the API would refuse.
 */
export function buildBody(options: GenerateOptions, settings: BodySettings): Record<string, unknown> {
  const maxTokens = options.maxTokens ?? settings.maxTokens
  const body: Record<string, unknown> = { model: options.model, max_tokens: maxTokens, stream: true }
  if (options.system) body.system = [{ type: 'text', text: options.system, cache_control: ephemeral() }]
  if (options.tools?.length) body.tools = mapTools(options.tools)
  body.messages = mapMessages(options.messages)
  Object.assign(body, thinkingFields(options.reasoningEffort, settings, maxTokens, options.provider))
  if (options.temperature !== undefined) body.temperature = options.temperature
  if (options.stop?.length) body.stop_sequences = [...options.stop]
  return body
}

/** Tools in the given (canonical) order; the last carries a breakpoint that caches all of them. */
export function mapTools(tools: readonly ToolSchema[]): WireTool[] {
  return tools.map((tool, i) => ({
    name: tool.name,
    description: tool.description,
    input_schema: tool.parameters,
    ...(i === tools.length - 1 && { cache_control: ephemeral() }),
  }))
}

function thinkingFields(effort: string | undefined, settings: BodySettings, maxTokens: number, provider: string): Record<string, unknown> {
  let thinking: Record<string, unknown> | undefined
  if (effort === 'off') thinking = { type: 'disabled' }
  else {
    switch (settings.thinking) {
      case 'adaptive':
        thinking = { type: 'adaptive' }
        break
      case 'enabled':
        if (!(settings.thinkingBudgetTokens < maxTokens)) {
          throw new LlmError(
            `${provider}: thinkingBudgetTokens (${settings.thinkingBudgetTokens}) must be less than max_tokens (${maxTokens}); lower the budget or raise maxTokens`,
            'BAD_REQUEST',
          )
        }
        thinking = { type: 'enabled', budget_tokens: settings.thinkingBudgetTokens }
        break
      case 'disabled':
        thinking = { type: 'disabled' }
        break
      case 'auto':
        break
    }
  }
  if (thinking && thinking.type !== 'disabled' && settings.prefixMismatchBehavior) {
    thinking.block_binding = { prefix_mismatch_behavior: settings.prefixMismatchBehavior }
  }
  return {
    ...(thinking && { thinking }),
    ...(effort !== undefined && effort !== 'off' && { output_config: { effort } }),
  }
}

/**
 * Loom messages → alternating Anthropic turns, with the history's cache
 * breakpoints (see `markHistoryBreakpoints`).
 *
 * - user and system messages become user turns (text blocks; tool results become
 *   `tool_result` blocks); assistant messages become assistant turns;
 * - consecutive turns of one role are merged into one, and in a user turn the
 *   `tool_result` blocks come first (the API wants them right after the
 *   `tool_use` turn), the rest keeps its order;
 * - empty text blocks and turns without blocks are left out.
 *
 * A message's serialization depends on that message alone (and its neighbours
 * of the same role), so a past turn is the same bytes in every later request;
 * only the breakpoint markers move.
 */
export function mapMessages(messages: readonly Message[], options: { breakpoints?: boolean } = {}): WireMessage[] {
  const turns: WireMessage[] = []
  for (const message of messages) {
    const role = message.role === 'assistant' ? 'assistant' : 'user'
    const blocks = role === 'assistant' ? assistantBlocks(message) : userBlocks(message.content)
    if (!blocks.length) continue
    const last = turns.at(-1)
    if (last?.role === role) last.content.push(...blocks)
    else turns.push({ role, content: blocks })
  }
  for (const turn of turns) {
    if (turn.role === 'user') {
      turn.content = [...turn.content.filter(b => b.type === 'tool_result'), ...turn.content.filter(b => b.type !== 'tool_result')]
    }
  }
  if (options.breakpoints !== false) markHistoryBreakpoints(turns)
  return turns
}

function userBlocks(content: readonly ContentBlock[]): WireBlock[] {
  const blocks: WireBlock[] = []
  for (const block of content) {
    if (block.type === 'text') {
      if (block.text) blocks.push({ type: 'text', text: block.text })
    } else if (block.type === 'tool-result') {
      const texts = block.content.flatMap(part => (part.type === 'text' && part.text ? [{ type: 'text' as const, text: part.text }] : []))
      blocks.push({
        type: 'tool_result',
        tool_use_id: block.toolCallId,
        ...(texts.length && { content: texts }),
        ...(block.isError && { is_error: true as const }),
      })
    }
    // Reasoning and tool calls have no place in a user turn.
  }
  return blocks
}

/**
 * An assistant message, block by block. A reasoning block goes back as the
 * `thinking` block it came from (its text and signature, unchanged) or as the
 * `redacted_thinking` block (its data), found at the same position in
 * `source.replayState.blocks`; a reasoning block without such an entry (from
 * another provider, or an interrupted answer) is left out, since the API
 * refuses a thinking block without a valid signature.
 */
function assistantBlocks(message: Message): WireBlock[] {
  const replay = replayBlocksOf(message)
  const blocks: WireBlock[] = []
  message.content.forEach((block, i) => {
    switch (block.type) {
      case 'text':
        if (block.text) blocks.push({ type: 'text', text: block.text })
        return
      case 'reasoning': {
        const entry = replay?.[i]
        if (isObject(entry) && entry.type === 'thinking' && typeof entry.signature === 'string' && entry.signature) {
          blocks.push({ type: 'thinking', thinking: block.text, signature: entry.signature })
        } else if (isObject(entry) && entry.type === 'redacted_thinking' && typeof entry.data === 'string' && entry.data) {
          blocks.push({ type: 'redacted_thinking', data: entry.data })
        }
        return
      }
      case 'tool-call':
        blocks.push({ type: 'tool_use', id: block.id, name: block.name, input: toolInput(block.arguments) })
        return
      default:
        return // a tool result has no place in an assistant turn
    }
  })
  return blocks
}

/** The message's `replayState.blocks` when it has one entry per content block. */
function replayBlocksOf(message: Message): readonly unknown[] | undefined {
  const source = message.source
  if (source?.kind !== 'model') return undefined
  const state = source.replayState
  if (!isObject(state) || !Array.isArray(state.blocks) || state.blocks.length !== message.content.length) return undefined
  return state.blocks
}

/**
 * A tool call's raw JSON arguments → the `input` object the API requires:
 * empty → `{}`; a JSON object → itself; anything else (invalid JSON, an array,
 * a scalar) → `{"_raw_arguments": "<the text>"}`, so the model sees what it sent.
 */
export function toolInput(args: string): Record<string, unknown> {
  if (!args.trim()) return {}
  try {
    const value: unknown = JSON.parse(args)
    if (isObject(value)) return value
  } catch {
    // kept raw below
  }
  return { [RAW_ARGUMENTS_KEY]: args }
}

/**
 * The history's breakpoints, at most two:
 *
 * 1. the last markable block of the last turn: this request's whole prefix is
 *    written to the cache (the next request reads it);
 * 2. the last markable block of the turn just before the last assistant turn:
 *    in an agent loop that is the previous request's last turn, so the prefix
 *    the previous request wrote is read back exactly, however many blocks the
 *    newest assistant turn and tool results added (the API looks back only
 *    about 20 blocks from a breakpoint).
 *
 * Thinking blocks cannot carry `cache_control`; a turn with nothing else gets none.
 */
export function markHistoryBreakpoints(turns: WireMessage[]): void {
  const last = turns.length - 1
  if (last < 0) return
  mark(turns[last])
  let assistant = last
  while (assistant >= 0 && turns[assistant].role !== 'assistant') assistant--
  if (assistant > 0) mark(turns[assistant - 1])
}

function mark(turn: WireMessage): void {
  for (let i = turn.content.length - 1; i >= 0; i--) {
    const block = turn.content[i]
    if (block.type === 'thinking' || block.type === 'redacted_thinking') continue
    turn.content[i] = { ...block, cache_control: ephemeral() }
    return
  }
}

/** Every `cache_control` marker of a request body, as paths (for tests and diagnostics). */
export function breakpointsOf(body: { tools?: readonly WireTool[]; system?: readonly WireBlock[]; messages?: readonly WireMessage[] }): string[] {
  const paths: string[] = []
  body.tools?.forEach((tool, i) => {
    if (tool.cache_control) paths.push(`tools.${i}`)
  })
  body.system?.forEach((block, i) => {
    if ('cache_control' in block && block.cache_control) paths.push(`system.${i}`)
  })
  body.messages?.forEach((message, m) => {
    message.content.forEach((block, b) => {
      if ('cache_control' in block && block.cache_control) paths.push(`messages.${m}.content.${b}`)
    })
  })
  return paths
}
