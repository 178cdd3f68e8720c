import type { Context } from '@deepseek-ai/cordis'
import type {} from '@loom/agent-loop'
import type { GenerateOptions, StreamChunk } from '@loom/llm'
import type { Session } from '@loom/session'
import { untraced } from '@loom/scope'
import { abortedBeforeDispatchResult, type ToolRunContext } from '@loom/tools'

/**
 * The checkpoint policy: the session is flushed (made durable) before every
 * model call, every tool execution and every step, so a crash can lose nothing
 * that a model or a tool has already acted on. Without it, a crash loses at most
 * one write-behind window.
 */
export function installCheckpoints(ctx: Context) {
  // Looked up once and called directly (see `untraced`): every step makes several calls; the plugin restarts if it is replaced.
  const sessions = untraced(ctx.sessions)
  const live = (id: unknown): Session | undefined => (typeof id === 'string' ? sessions.get(id) : undefined)

  // Before the first chunk is pulled: a failed flush means the adapter is never called.
  ctx.on(
    'llm/stream',
    (options: GenerateOptions, next: () => AsyncIterable<StreamChunk>) => {
      const session = live(options.sessionId)
      if (!session) return next()
      return (async function* () {
        await sessions.flush(session)
        yield* next()
      })()
    },
    { global: true },
  )

  ctx.on(
    'tools/execute',
    async (exec: ToolRunContext, next) => {
      const session = live(exec.agent?.sessionId)
      if (session) {
        await sessions.flush(session)
        if (exec.signal.aborted) return abortedBeforeDispatchResult()
      }
      return next()
    },
    { global: true },
  )

  // Typed by @loom/agent-loop's event declarations (a type-only import); at run
  // time the event simply never fires in a host without the loop.
  ctx.on(
    'agent/pre-step',
    async (payload, next) => {
      const session = live(payload.agent.sessionId)
      if (session) await sessions.flush(session)
      return next()
    },
    { global: true },
  )
}
