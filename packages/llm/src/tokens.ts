// The fixed token heuristic (agent-session-spec 4.1). It is deliberately simple
// and stable: the same text always costs the same, on every machine and with
// every provider, so reports, budgets and compaction triggers are reproducible.
// Provider-reported usage replaces it where the token meter can prove it applies.
import type { ContentBlock, Message, ToolSchema } from './types.ts'

/** Characters (UTF-16 code units) per token. */
export const CHARS_PER_TOKEN = 4
/** Added once per content block. */
export const BLOCK_OVERHEAD = 4
/** Added once per message (its role). */
export const ROLE_OVERHEAD = 4

/** The request fields priced by `estimateHeader` (a `RequestHeader` fits). */
export interface EstimatedHeader {
  readonly system?: string
  readonly tools?: readonly ToolSchema[]
}

/** `ceil(text.length / 4)`: the price of bare text, without overhead. */
export function estimateText(text: string): number {
  return Math.ceil(text.length / CHARS_PER_TOKEN)
}

/**
 * One content block: text or reasoning `ceil(len/4) + 4`; tool call
 * `ceil(name/4) + ceil(arguments/4) + 4`; tool result `Σ nested + 4`; a block of
 * any other type `4 + ceil(JSON.stringify(block).length / 4)`.
 */
export function estimateBlock(block: ContentBlock): number {
  switch (block.type) {
    case 'text':
    case 'reasoning':
      return estimateText(block.text) + BLOCK_OVERHEAD
    case 'tool-call':
      return estimateText(block.name) + estimateText(block.arguments) + BLOCK_OVERHEAD
    case 'tool-result':
      return estimateBlocks(block.content) + BLOCK_OVERHEAD
    default:
      return BLOCK_OVERHEAD + estimateText(JSON.stringify(block))
  }
}

function estimateBlocks(blocks: readonly ContentBlock[]): number {
  let total = 0
  for (const block of blocks) total += estimateBlock(block)
  return total
}

/** `Σ blocks + 4`: a single text `'abcd'` costs 9. */
export function estimateMessage(message: Pick<Message, 'content'>): number {
  return estimateBlocks(message.content) + ROLE_OVERHEAD
}

/** `ceil(system.length / 4) + 4`, or 0 without a system text. */
export function estimateSystemTokens(header: EstimatedHeader | undefined): number {
  return header?.system ? estimateText(header.system) + ROLE_OVERHEAD : 0
}

// A frozen tool list (a logged header's, a request's: the loop sends the logged one while it holds) is
// priced once: budgets and meters price it at every step, and stringifying it is most of a step's estimate.
const toolPrices = new WeakMap<readonly ToolSchema[], number>()

/** `ceil(JSON.stringify(tools).length / 4) + 4`, or 0 when there are no tools. */
export function estimateToolsTokens(header: EstimatedHeader | undefined): number {
  const tools = header?.tools
  if (!tools?.length) return 0
  let price = toolPrices.get(tools)
  if (price === undefined) {
    price = estimateText(JSON.stringify(tools)) + BLOCK_OVERHEAD
    if (Object.isFrozen(tools) && tools.every(tool => Object.isFrozen(tool) && Object.isFrozen(tool.parameters))) toolPrices.set(tools, price)
  }
  return price
}

/** System plus tools: what a request costs before its first message. */
export function estimateHeader(header: EstimatedHeader | undefined): number {
  return estimateSystemTokens(header) + estimateToolsTokens(header)
}
