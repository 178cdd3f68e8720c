import { type Context, Service } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import { buildManifest } from '@loom/agent-loop'
import { estimateMessage, type Message } from '@loom/llm'
import type { RequestHeader } from '@loom/session'
import type { PromptAssembly } from '@loom/system-prompt'
import { createReplayState, foldEvent, measureState, type MeteredSession, type ReplayState, type TokenMeasurement } from './meter.ts'

export {
  createReplayState,
  foldEvent,
  measureState,
  optionalHeaderEquals,
  type MeteredSession,
  type ReplayState,
  type TokenBaseline,
  type TokenMeasurement,
  type TokenNode,
} from './meter.ts'

export const name = '@loom/token-meter'
export const inject: string[] = []

/** The meter has no settings: its heuristic is fixed so that every figure is reproducible. */
export type Config = Record<string, never>

export const Config: Schema<Config> = Schema.object({}).description(
  'No settings: the token meter uses a fixed heuristic (~4 characters per token plus structural overhead).',
) as Schema<Config>

/** Refuses any key, as the spec demands: a setting that silently does nothing would mislead. */
export function checkConfig(config: unknown): void {
  if (config === undefined || config === null) return
  if (typeof config !== 'object' || Array.isArray(config)) throw new Error('TokenMeterConfig: expected an object')
  const [key] = Object.keys(config)
  if (key !== undefined) throw new Error(`TokenMeterConfig: unknown key "${key}" (no settings are supported)`)
}

declare module '@deepseek-ai/cordis' {
  interface Context {
    tokenMeter: TokenMeter
  }
}

/** The tokens one plugin contributes to an assembly. */
export interface OwnerTokens {
  owner: string
  system: number
  tools: number
  contexts: number
  total: number
}

export interface TokenBreakdown {
  /** Σ of the sections' estimates (the header estimate adds separators and overhead). */
  systemTokens: number
  toolsTokens: number
  contextTokens: number
  totalTokens: number
  /** Most tokens first, ties by owner name. */
  byOwner: OwnerTokens[]
}

/**
 * The token meter (ctx key `tokenMeter`): a fixed-heuristic estimate of a
 * session's context pressure that reuses provider-reported usage whenever the
 * request envelope it was reported for is still the one in force, and a
 * breakdown of an assembly by the plugins that own its parts.
 */
export class TokenMeter extends Service {
  /** The plugin name (`fiber.name`), so what the plugin registers is owned by the package. */
  static override readonly name = name
  static readonly inject = inject
  static readonly Config = Config
  private readonly states = new WeakMap<object, ReplayState>()

  constructor(ctx: Context, config?: Config) {
    super(ctx, 'tokenMeter')
    checkConfig(config)
    // Eager fold, only for sessions already measured; a malformed event is left
    // unfolded here and reported by the next `measure`.
    ctx.on('session/event', session => {
      const state = this.states.get(session)
      if (!state) return
      try {
        this.advance(session, state)
      } catch {}
    })
  }

  /** Folds the events the state has not seen yet. */
  private advance(session: MeteredSession, state: ReplayState): ReplayState {
    if ('eventsFrom' in session) {
      // A live session: only what it appended since, not a copy of its whole log per event.
      for (const event of session.eventsFrom(state.consumedEvents)) foldEvent(state, event, session)
    } else {
      const events = session.events
      while (state.consumedEvents < events.length) foldEvent(state, events[state.consumedEvents], events)
    }
    return state
  }

  /**
   * The session's pressure. With `header`, the pressure of a request with that
   * header over the current history (only the pressure fields change).
   */
  measure(session: MeteredSession, header?: RequestHeader): TokenMeasurement {
    let state = this.states.get(session)
    if (!state) this.states.set(session, (state = createReplayState()))
    return measureState(this.advance(session, state), header)
  }

  /** The fixed heuristic: Σ blocks + 4 (a single text 'abcd' costs 9). */
  estimateMessage(message: Pick<Message, 'content'>): number {
    return estimateMessage(message)
  }

  /** System, tool and context tokens of an assembly, attributed to the plugins that own them. */
  breakdown(assembly: PromptAssembly): TokenBreakdown {
    return breakdown(assembly)
  }
}

/** The kind of total a manifest row adds to. */
const TOTAL_OF = { section: 'system', tool: 'tools', context: 'contexts' } as const

/** See `TokenMeter.breakdown`: the assembly's manifest rows (sections and contexts as rendered, tools as their schema JSON), summed by owner. */
export function breakdown(assembly: PromptAssembly): TokenBreakdown {
  const owners = new Map<string, OwnerTokens>()
  for (const row of buildManifest({ assembly }).rows) {
    if (row.kind === 'message') continue
    let total = owners.get(row.owner)
    if (!total) owners.set(row.owner, (total = { owner: row.owner, system: 0, tools: 0, contexts: 0, total: 0 }))
    total[TOTAL_OF[row.kind]] += row.tokens
    total.total += row.tokens
  }
  const byOwner = [...owners.values()].sort((a, b) => b.total - a.total || (a.owner < b.owner ? -1 : a.owner > b.owner ? 1 : 0))
  const sum = (kind: 'system' | 'tools' | 'contexts') => byOwner.reduce((total, row) => total + row[kind], 0)
  const [systemTokens, toolsTokens, contextTokens] = [sum('system'), sum('tools'), sum('contexts')]
  return { systemTokens, toolsTokens, contextTokens, totalTokens: systemTokens + toolsTokens + contextTokens, byOwner }
}

export default TokenMeter
