// The surface as compaction sees it: one priced node per model-visible event,
// and the cuts that keep every tool call together with its results.
import { estimateMessage, type Message } from '@loom/llm'
import type { Session } from '@loom/session'

export interface SurfaceNode {
  seq: number
  /** What the node contributes to the history (`null`: an empty assistant message). */
  message: Message | null
  tokens: number
}

/** The current surface of a session, priced with the fixed heuristic. */
export function surfaceNodes(session: Session): SurfaceNode[] {
  return session.surface.nodes.map(seq => {
    const message = session.deriveEventMessage(session.eventAt(seq)!)
    return { seq, message, tokens: message ? estimateMessage(message) : 0 }
  })
}

function toolResultIds(message: Message | null): string[] {
  if (!message) return []
  return message.content.flatMap(block => (block.type === 'tool-result' ? [block.toolCallId] : []))
}

function toolCallIds(message: Message | null): string[] {
  if (!message || message.role !== 'assistant') return []
  return message.content.flatMap(block => (block.type === 'tool-call' ? [block.id] : []))
}

/**
 * The balanced cuts: every `k` (1 ≤ k ≤ n) such that shadowing nodes `[0, k)`
 * and keeping `[k, n)` separates no tool call from its results. The shadowed
 * part answers every call it makes, and the kept part does not start with a
 * tool result (whose call would be cut away).
 */
export function balancedCuts(nodes: readonly SurfaceNode[]): number[] {
  const cuts: number[] = []
  const open = new Set<string>()
  for (let k = 1; k <= nodes.length; k++) {
    const node = nodes[k - 1]
    for (const id of toolCallIds(node.message)) open.add(id)
    for (const id of toolResultIds(node.message)) open.delete(id)
    const next = nodes[k]
    if (open.size === 0 && (next === undefined || toolResultIds(next.message).length === 0)) cuts.push(k)
  }
  return cuts
}

/**
 * The cut that keeps at least `retainTokens` of the most recent surface: the
 * largest balanced `k` whose kept part `[k, n)` costs at least that much.
 * `undefined` when no balanced cut does.
 */
export function chooseCut(nodes: readonly SurfaceNode[], retainTokens: number): number | undefined {
  const suffix: number[] = new Array(nodes.length + 1).fill(0)
  for (let i = nodes.length - 1; i >= 0; i--) suffix[i] = suffix[i + 1] + nodes[i].tokens
  let best: number | undefined
  for (const k of balancedCuts(nodes)) if (suffix[k] >= retainTokens) best = k
  return best
}
