import type { ContentBlock, FinishReason, ReplayEnvelope, StreamChunk, TokenUsage } from './types.ts'

/** One block as it is being assembled: its type, the deltas so far, and the closing block once seen. */
interface Slot {
  type: string
  text: string
  id?: string
  name?: string
  closed?: ContentBlock
}

const DELTA_TYPES: Record<string, string> = {
  'text-delta': 'text',
  'reasoning-delta': 'reasoning',
  'tool-call-delta': 'tool-call',
}

/**
 * Folds the chunks of one model call into content blocks.
 *
 * Blocks are kept per `index` in first-seen order. `block-start` registers an
 * index; deltas create it lazily and accumulate; `block-end` sets the
 * authoritative block (the first close wins, later deltas for it are ignored).
 * A delta whose kind does not match the block's type is ignored.
 */
export class BlockAssembler {
  readonly #slots = new Map<number, Slot>()
  #usage: TokenUsage | undefined
  #finish: FinishReason | undefined
  #replayState: ReplayEnvelope | undefined

  push(chunk: StreamChunk): void {
    switch (chunk.type) {
      case 'block-start':
        this.#slot(chunk.index, chunk.blockType)
        return
      case 'text-delta':
      case 'reasoning-delta':
      case 'tool-call-delta': {
        const slot = this.#slot(chunk.index, DELTA_TYPES[chunk.type])
        if (slot.closed || slot.type !== DELTA_TYPES[chunk.type]) return
        if (chunk.type === 'tool-call-delta') {
          if (chunk.id) slot.id = chunk.id
          if (chunk.name !== undefined) slot.name = chunk.name
          slot.text += chunk.argumentsDelta
        } else {
          slot.text += chunk.text
        }
        return
      }
      case 'block-end': {
        const slot = this.#slot(chunk.index, chunk.block.type)
        slot.closed ??= structuredClone(chunk.block)
        return
      }
      case 'usage':
        this.#usage = structuredClone(chunk.usage)
        return
      case 'finish':
        this.#finish = structuredClone(chunk.reason)
        this.#replayState = chunk.replayState === undefined ? undefined : structuredClone(chunk.replayState)
        return
    }
  }

  /** The finish reason, or `{kind: 'stop'}` when no finish chunk arrived. */
  get finish(): FinishReason {
    return this.#finish ?? { kind: 'stop' }
  }

  /** The last usage chunk's usage. */
  get usage(): TokenUsage | undefined {
    return this.#usage
  }

  /**
   * The finish chunk's replay envelope, with `blocks` pruned at the positions of
   * the blocks `blocks()` drops. `undefined` when the envelope's `blocks` does
   * not have one entry per emitted block.
   */
  get replayState(): ReplayEnvelope | undefined {
    const state = this.#replayState
    if (state === undefined || state.blocks === undefined) return state
    const slots = [...this.#slots.values()]
    if (state.blocks.length !== slots.length) return undefined
    if (!this.#dropsToolCalls) return state
    return { ...state, blocks: state.blocks.filter((_, i) => this.#typeOf(slots[i]) !== 'tool-call') }
  }

  /**
   * The blocks in first-seen order: closed blocks as closed, open ones assembled
   * from their deltas. On a `max-tokens` finish every tool call is dropped.
   */
  blocks(): ContentBlock[] {
    const blocks: ContentBlock[] = []
    for (const [index, slot] of this.#slots) {
      if (this.#dropsToolCalls && this.#typeOf(slot) === 'tool-call') continue
      blocks.push(slot.closed ? structuredClone(slot.closed) : this.#assemble(index, slot))
    }
    return blocks
  }

  /** What survives an interruption: text and reasoning blocks, open or closed, with non-whitespace text. */
  interruptedBlocks(): ContentBlock[] {
    const blocks: ContentBlock[] = []
    for (const slot of this.#slots.values()) {
      const block = slot.closed ?? (slot.type === 'text' || slot.type === 'reasoning' ? { type: slot.type, text: slot.text } : undefined)
      if (block && (block.type === 'text' || block.type === 'reasoning') && block.text.trim() !== '') {
        blocks.push(structuredClone(block))
      }
    }
    return blocks
  }

  get #dropsToolCalls(): boolean {
    return this.#finish?.kind === 'max-tokens'
  }

  #typeOf(slot: Slot): string {
    return slot.closed?.type ?? slot.type
  }

  #slot(index: number, type: string): Slot {
    let slot = this.#slots.get(index)
    if (!slot) this.#slots.set(index, (slot = { type, text: '' }))
    return slot
  }

  #assemble(index: number, slot: Slot): ContentBlock {
    switch (slot.type) {
      case 'text':
        return { type: 'text', text: slot.text }
      case 'reasoning':
        return { type: 'reasoning', text: slot.text }
      case 'tool-call':
        return { type: 'tool-call', id: slot.id ?? `call-${index}`, name: slot.name ?? '', arguments: slot.text }
      default:
        throw new Error(`cannot assemble incomplete block of type "${slot.type}"`)
    }
  }
}
