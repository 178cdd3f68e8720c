// The tool-result pruner (agent-session-spec 4.3): a tool result over a size
// threshold keeps its head and its tail, with a marker where the middle was.
// The original event stays in the log; a replacing `tool/result` (same message
// id, only the content changed) takes its place on the surface.
import { type Context, Service } from '@deepseek-ai/cordis'
import { estimateMessage, type ContentBlock, type ToolResultMessage } from '@loom/llm'
import type { Session, SessionEvent } from '@loom/session'

export const PRUNE_MARKER = '\n\n[... tool result middle pruned ...]\n\n'
/** The marker's length in code points (39). */
export const PRUNE_MARKER_LENGTH = Array.from(PRUNE_MARKER).length

export interface PrunerConfig {
  /** A result whose text is longer than this (in code points) is pruned. */
  thresholdChars: number
  /** Code points kept from the start. */
  headChars: number
  /** Code points kept from the end. */
  tailChars: number
}

export const PRUNER_DEFAULTS: Readonly<PrunerConfig> = Object.freeze({ thresholdChars: 8192, headChars: 4096, tailChars: 1024 })

export interface PrunedResult {
  originalSeq: number
  replacementSeq: number
  callId: string
  charsBefore: number
  charsAfter: number
}

export interface PruneReport {
  pruned: PrunedResult[]
  charsRemoved: number
}

/** Checks a pruner config (defaults filled in); throws naming the key. */
export function prunerConfig(input: Partial<PrunerConfig> = {}): PrunerConfig {
  for (const key of Object.keys(input)) {
    if (!(key in PRUNER_DEFAULTS)) throw new Error(`ToolResultPrunerConfig: unknown key "${key}" (known: thresholdChars, headChars, tailChars)`)
  }
  const config = { ...PRUNER_DEFAULTS, ...Object.fromEntries(Object.entries(input).filter(([, value]) => value !== undefined)) } as PrunerConfig
  for (const key of ['thresholdChars', 'headChars', 'tailChars'] as const) {
    if (!Number.isSafeInteger(config[key])) throw new Error(`ToolResultPrunerConfig: "${key}" must be an integer, got ${JSON.stringify(config[key])}`)
  }
  if (config.thresholdChars <= 0) throw new Error(`ToolResultPrunerConfig: "thresholdChars" must be > 0, got ${config.thresholdChars}`)
  if (config.headChars < 0) throw new Error(`ToolResultPrunerConfig: "headChars" must be >= 0, got ${config.headChars}`)
  if (config.tailChars < 0) throw new Error(`ToolResultPrunerConfig: "tailChars" must be >= 0, got ${config.tailChars}`)
  if (config.headChars + PRUNE_MARKER_LENGTH + config.tailChars > config.thresholdChars) {
    throw new Error(
      `ToolResultPrunerConfig: headChars + ${PRUNE_MARKER_LENGTH} + tailChars (${config.headChars + PRUNE_MARKER_LENGTH + config.tailChars}) must not exceed thresholdChars (${config.thresholdChars})`,
    )
  }
  return config
}

/** Σ Unicode code points over the text blocks. */
export function measureContent(blocks: readonly ContentBlock[]): number {
  let total = 0
  for (const block of blocks) if (block.type === 'text') total += Array.from(block.text).length
  return total
}

/** The pruned content, or `null` when it is within the threshold. */
export function pruneContent(blocks: readonly ContentBlock[], config: PrunerConfig = PRUNER_DEFAULTS): ContentBlock[] | null {
  const total = measureContent(blocks)
  if (total <= config.thresholdChars) return null
  const spanStart = config.headChars
  const spanEnd = total - config.tailChars
  const out: ContentBlock[] = []
  let offset = 0
  let marked = false
  for (const block of blocks) {
    if (block.type !== 'text') {
      out.push(block)
      continue
    }
    const points = Array.from(block.text)
    const from = offset
    const to = offset + points.length
    offset = to
    const intersects = from < spanEnd && to > spanStart
    const before = points.slice(0, Math.max(0, Math.min(points.length, spanStart - from))).join('')
    const after = points.slice(Math.max(0, Math.min(points.length, spanEnd - from))).join('')
    let text: string
    if (!intersects) {
      text = block.text
    } else {
      text = before + (marked ? '' : PRUNE_MARKER) + after
      marked = true
    }
    if (text !== '') out.push({ ...block, text })
  }
  return out
}

/**
 * Prunes every tool result on the session's surface that is over the threshold:
 * for each, `compaction/prune` and then the replacing `tool/result`. A rejected
 * append propagates; replacements committed before it remain.
 */
export function pruneSession(session: Session, config: PrunerConfig = PRUNER_DEFAULTS): PruneReport {
  const report: PruneReport = { pruned: [], charsRemoved: 0 }
  for (const seq of toolResults(session)) {
    const block = (session.eventAt(seq) as SessionEvent<'tool/result'>).data.message.content[0]
    const pruned = pruneContent(block.content, config)
    if (pruned) replaceResult(session, seq, pruned, report)
  }
  return report
}

/** What a tool result left out by the tool-results budget says instead. */
export function budgetStub(chars: number): string {
  return `[This tool result (${chars} characters) was left out to stay within the tool-results budget. Call the tool again if you need it.]`
}
const STUB = /^\[This tool result \(\d+ characters\) was left out to stay within the tool-results budget\./

/**
 * Keeps the tool results of the history within `maxChars` together, with
 * hysteresis: while their total is within the cap nothing changes; when it is
 * over, the oldest are replaced by a stub that says so until the total is at most
 * `lowWaterChars`. The history is then rewritten only at a crossing, not at every
 * step once the cap is reached, and the provider's cached prefix survives in
 * between. Stateless: a stub counts at its own size, so the same history always
 * gives the same answer (a resumed session too). The newest result always stays,
 * whatever its size (the pruner's head and tail handle a huge one), and so does
 * one no longer than its stub would be.
 */
export function pruneToBudget(session: Session, maxChars: number, lowWaterChars: number = maxChars): PruneReport {
  const report: PruneReport = { pruned: [], charsRemoved: 0 }
  const results = toolResults(session).map(seq => {
    const content = (session.eventAt(seq) as SessionEvent<'tool/result'>).data.message.content[0].content
    const stubbed = content.length === 1 && content[0].type === 'text' && STUB.test(content[0].text)
    return { seq, chars: measureContent(content), stubbed }
  })
  let total = results.reduce((sum, result) => sum + result.chars, 0)
  if (total <= maxChars) return report
  for (const { seq, chars, stubbed } of results.slice(0, -1)) {
    if (total <= lowWaterChars) break
    const stub = budgetStub(chars)
    if (stubbed || chars <= stub.length) continue
    replaceResult(session, seq, [{ type: 'text', text: stub }], report)
    total -= chars - stub.length
  }
  return report
}

/** The seqs of the tool results on the session's surface, oldest first. */
function toolResults(session: Session): number[] {
  return session.surface.nodes.filter(seq => session.eventAt(seq)?.type === 'tool/result')
}

/** Shadows the tool result at `seq` and appends its replacement with `content`, in the log. */
function replaceResult(session: Session, seq: number, content: ContentBlock[], report: PruneReport) {
  const data = (session.eventAt(seq) as SessionEvent<'tool/result'>).data
  const { message } = data
  const block = message.content[0]
  session.append('compaction/prune', {
    shadowedRange: { start: seq, end: seq },
    shadowedSeqs: [seq],
    shadowedTokenCount: estimateMessage(message),
  })
  const replacement = session.append(
    'tool/result',
    { ...data, message: { ...message, content: [{ ...block, content }] } as ToolResultMessage },
    { surfaceOp: { op: 'replace', start: seq, end: seq }, sourceEventSeqs: [seq] },
  )
  const charsBefore = measureContent(block.content)
  const charsAfter = measureContent(content)
  report.pruned.push({ originalSeq: seq, replacementSeq: replacement.seq, callId: block.toolCallId, charsBefore, charsAfter })
  report.charsRemoved += charsBefore - charsAfter
}

/** The pruner with one config (ctx key `toolResultPruner`), provided by the compaction plugin. */
export class ToolResultPruner extends Service {
  static override readonly name = '@loom/compaction'
  readonly config: Readonly<PrunerConfig>

  constructor(ctx: Context, config: Partial<PrunerConfig> = {}) {
    super(ctx, 'toolResultPruner')
    this.config = Object.freeze(prunerConfig(config))
  }

  measureContent(blocks: readonly ContentBlock[]): number {
    return measureContent(blocks)
  }

  pruneContent(blocks: readonly ContentBlock[]): ContentBlock[] | null {
    return pruneContent(blocks, this.config)
  }

  pruneSession(session: Session): PruneReport {
    return pruneSession(session, this.config)
  }
}
