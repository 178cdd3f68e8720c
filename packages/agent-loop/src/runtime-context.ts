import { createUserMessage, type ContextSnapshotSection, type UserMessage } from '@loom/llm'
import { isReplacementSurfaceEvent, type Session, type SessionEvent } from '@loom/session'
import { defaultTrust, renderAssembly, type PromptAssembly } from '@loom/system-prompt'

/** The plugin that owns runtime-context snapshot messages. */
export const RUNTIME_CONTEXT_OWNER = '@loom/system-prompt'
export const CLEARED_RUNTIME_CONTEXT = 'Current runtime context: none. Earlier runtime-context snapshots no longer apply.'

/**
 * The runtime contexts of `assembly` that reach the model (rendered text not
 * empty), each with what the manifest of the request shows of it: owner, order,
 * stability, trust, category and source. The snapshot message records them, so a
 * stored request's manifest has one row per context, as `loom prompt` has.
 */
export function snapshotSections(assembly: PromptAssembly): ContextSnapshotSection[] {
  const rendered = renderAssembly(assembly).contexts
  return assembly.contexts.flatMap((context, i): ContextSnapshotSection[] => {
    const { text } = rendered[i]
    if (text === '') return []
    const declared = assembly.attribution?.contexts[context.name]
    const source = declared?.source
    return [
      {
        name: context.name,
        text,
        owner: context.owner,
        order: context.order,
        stability: context.stability,
        trust: declared?.trust ?? defaultTrust(context.owner),
        category: declared?.category ?? 'runtime',
        ...(source && { sourceHash: source.sha256 }),
        ...(source?.modifiedAt !== undefined && { modifiedAt: source.modifiedAt }),
      },
    ]
  })
}

type Retained = undefined | null | { seq: number; text: string | undefined }

function isOwned(event: SessionEvent): event is SessionEvent<'user/message'> {
  if (event.type !== 'user/message') return false
  const { source } = event.data
  return source.kind === 'plugin' && source.plugin === RUNTIME_CONTEXT_OWNER
}

function textOf(event: SessionEvent<'user/message'>): string | undefined {
  const { content } = event.data
  return content.length === 1 && content[0].type === 'text' ? content[0].text : undefined
}

/**
 * Runtime facts (time, git state, ...) reach the model as user-role snapshots in
 * the history, never in the system text. The projection proposes a snapshot only
 * when its text differs from the one the model can still see, the cleared marker
 * when facts went away, and a fresh snapshot when compaction hid the last one.
 * It only proposes: the loop commits the candidate if the step is entered.
 */
export class RuntimeContextProjection {
  /** `undefined`: never seen one; `null`: seen, but none is visible now. */
  #retained: Retained

  constructor(session: Session) {
    const nodes = new Set(session.surface.nodes)
    // Newest first, and only as far back as the latest visible snapshot.
    for (let event = session.lastOfType('user/message'); event; event = session.lastOfType('user/message', event.seq)) {
      if (!isOwned(event)) continue
      if (this.#retained === undefined) this.#retained = null
      if (nodes.has(event.seq)) {
        this.#retained = { seq: event.seq, text: textOf(event) }
        break
      }
    }
  }

  /** Follows the session: an owned snapshot becomes retained; a replacement that hides it resets. */
  observe(event: SessionEvent): void {
    if (isOwned(event)) {
      this.#retained = { seq: event.seq, text: textOf(event) }
    } else if (this.#retained && isReplacementSurfaceEvent(event) && event.sourceEventSeqs?.includes(this.#retained.seq)) {
      this.#retained = null
    }
  }

  /** The snapshot message to enter with the next step, if the model needs one. */
  project(current: string, sections: readonly ContextSnapshotSection[]): UserMessage | undefined {
    if (this.#retained === undefined && current === '') return undefined
    const snapshot = current === '' ? CLEARED_RUNTIME_CONTEXT : current
    if (this.#retained?.text === snapshot) return undefined
    return createUserMessage({
      content: [{ type: 'text', text: snapshot }],
      source:
        sections.length === 0
          ? { kind: 'plugin', plugin: RUNTIME_CONTEXT_OWNER }
          : { kind: 'plugin', plugin: RUNTIME_CONTEXT_OWNER, form: 'snapshot', sections },
    })
  }
}
