// `@loom/serve`: the HTTP API of a deployment (ctx key `serve`). It needs the
// deployment's runner (which creates and resumes agents with the deployment's
// route, limits and agent name), its live sessions and its session store. It
// listens when it starts; `drain()` is the graceful stop, unloading the plugin
// the abrupt one. api.ts has the endpoints, sessions.ts what they do to
// sessions, auth.ts and sse.ts the token and the event streams.
import { Context, Service } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createApi, isProbe } from './api.ts'
import { ApiApprovals } from './approvals.ts'
import { bearerCheck, MIN_TOKEN_LENGTH } from './auth.ts'
import { createHttpServer } from './http.ts'
import { KEY_TTL_MS } from './idempotency.ts'
import { type ModelCatalog, ModelAllowlist } from './models.ts'
import { HostedSessions, type Persistence, type SessionOpener } from './sessions.ts'
import { createUi, type UiOptions } from './ui.ts'

export { ApiApprovals, DECISIONS, type Answer, type AskedCall, type ClientAnswer, type Decision } from './approvals.ts'
export { bearerCheck, loadToken, MIN_TOKEN_LENGTH, TOKEN_VARIABLE, TokenError } from './auth.ts'
export { ApiError, withoutPaths } from './http.ts'
export { OPENAPI } from './openapi.ts'
export {
  HostedSessions,
  leaseHeld,
  type Created,
  type Delivered,
  type MessageMode,
  type Persistence,
  type SessionOpener,
  type SessionSummary,
} from './sessions.ts'
export { resumeAfter } from './sse.ts'

export const name = '@loom/serve'
/** How long a question over the API waits for an answer by default: long enough for a person to read a diff. */
export const DEFAULT_APPROVAL_DEADLINE_MS = 300_000
export const inject = ['runner', 'sessions', 'sessionPersistence']

export interface Config {
  /** The bearer token every request but /healthz must carry. */
  token: string
  /** TCP port; 0 picks a free one (see `url`). */
  port: number
  /** Address to listen on. */
  host: string
  /** Largest request body, in bytes. */
  maxBodyBytes: number
  /** Working directory of the agents of new sessions (default: the process's): the project whose sessions the server hosts. */
  cwd?: string
  /** The route of new sessions unless a request names one (default: the runner's). */
  provider?: string
  model?: string
  /** An agent idle this long is disposed, which frees its session's lease for any host. */
  idleReleaseMs: number
  /** How often an event stream reads the store for a session whose agent runs on another host. */
  tailIntervalMs: number
  /** How long an Idempotency-Key is honoured: a retry within it gets the first answer. */
  idempotencyTtlMs: number
  /** Interval of the heartbeat comments of an event stream. */
  heartbeatMs: number
  /** The reconnection delay event streams announce (`retry:`). */
  retryMs: number
  /** A request's headers must arrive within this (ms); else 408 and the connection closes. */
  headersTimeoutMs: number
  /** A request's headers and body must arrive within this (ms); else 408 and the connection closes. Responses (event streams) are not bounded. */
  requestTimeoutMs: number
  /** Connections served at once; another one gets 503 `TOO_MANY_CONNECTIONS` (probes are answered); past twice as many, refused. */
  maxConnections: number
  /** The routes a client may choose (`provider/model`, `provider/*`); empty: the models the deployment's providers declare. */
  models?: string[]
  /**
   * Who answers a tool call the policy asks about: `deployment` leaves it to the deployment's own
   * approver (`loom serve --approve policy|never|all`); `api` makes this server the approver, asking
   * the session's clients (`approval/requested`), with the rule's unattended answer after `deadlineMs`.
   */
  approvals: { mode: 'deployment' | 'api'; deadlineMs: number }
}

/** What a caller gives: the token, and any setting to change from its default. */
export type ServeOptions = Partial<Config> & Pick<Config, 'token'>

export const Config: Schema<ServeOptions, Config> = Schema.object({
  token: Schema.string()
    .min(MIN_TOKEN_LENGTH)
    .required()
    .description(
      `Bearer token every request but /healthz must carry (at least ${MIN_TOKEN_LENGTH} characters). \`loom serve\` reads it from LOOM_SERVE_TOKEN or --token-file.`,
    ),
  port: Schema.natural().max(65535).default(8080).description('TCP port; 0 picks a free one.'),
  host: Schema.string().default('127.0.0.1').description('Address to listen on (0.0.0.0 or :: for every interface).'),
  maxBodyBytes: Schema.natural()
    .min(1)
    .default(1 << 20)
    .description('Largest request body in bytes; a larger one is refused with 413.'),
  cwd: Schema.string().description(
    "Working directory of new sessions' agents (default: the process's), and the project the server hosts: sessions recorded in another folder are not listed, read or continued.",
  ),
  provider: Schema.string().description("Provider of new sessions unless a request names one (default: the runner's choice)."),
  model: Schema.string().description("Model of new sessions unless a request names one (default: the runner's choice for the provider)."),
  idleReleaseMs: Schema.natural().default(5000).description("An agent idle this long is disposed, freeing its session's lease for any host."),
  tailIntervalMs: Schema.natural()
    .min(10)
    .default(250)
    .description('How often an event stream reads the store for a session whose agent runs on another host.'),
  idempotencyTtlMs: Schema.natural()
    .min(1000)
    .default(KEY_TTL_MS)
    .description('How long an Idempotency-Key is honoured: a retry within it gets the first answer and does nothing more.'),
  heartbeatMs: Schema.natural().min(100).default(15_000).description('Interval of the heartbeat comments of an event stream.'),
  retryMs: Schema.natural().default(1000).description('Reconnection delay announced to event stream clients (retry:).'),
  headersTimeoutMs: Schema.natural()
    .min(1)
    .default(10_000)
    .description("A request's headers must arrive within this many ms; a slower one is answered 408 and its connection closed."),
  requestTimeoutMs: Schema.natural()
    .min(1)
    .default(30_000)
    .description(
      "A request's headers and body must arrive within this many ms (at least headersTimeoutMs); a slower one is answered 408 and its connection closed. Event streams are responses: not bounded.",
    ),
  maxConnections: Schema.natural()
    .min(1)
    .default(1000)
    .description(
      'Connections served at once (event streams count); another one is answered 503 TOO_MANY_CONNECTIONS (/healthz and /readyz are answered) and closed; past twice as many, refused.',
    ),
  models: Schema.array(Schema.string()).description(
    "The routes a request's provider/model may name, as provider/model or provider/* (any model of it); empty (the default): the models the deployment's providers declare. The server's default route is always allowed.",
  ),
  approvals: Schema.object({
    mode: Schema.union(['deployment', 'api'] as const)
      .default('deployment')
      .description("Who answers a tool call the policy asks about: the deployment's approver, or the session's clients over the API."),
    deadlineMs: Schema.natural()
      .min(1)
      .default(DEFAULT_APPROVAL_DEADLINE_MS)
      .description("With mode api: how long a call waits for a client's answer before the rule's unattended answer (absent: deny)."),
  }).default({ mode: 'deployment', deadlineMs: DEFAULT_APPROVAL_DEADLINE_MS }),
})

declare module '@deepseek-ai/cordis' {
  interface Context {
    serve: Serve
  }
}

/** The server of a deployment (ctx key `serve`). */
export class Serve extends Service {
  /** The plugin name (`fiber.name`), so what the plugin registers is owned by the package. */
  static override readonly name = name
  static readonly inject = inject
  static readonly Config = Config

  readonly config: Config
  readonly sessions: HostedSessions
  /** The questions of tool calls to the sessions' clients, with `approvals.mode` api (this server is then `ctx.approver`). */
  readonly approvals: ApiApprovals | undefined
  /** What the store is: `jsonl`, `postgres` (from the backend's `locate`), else `custom`. */
  readonly store: string
  private readonly server: Server
  private drained: Promise<{ finished: number; cancelled: number }> | undefined

  constructor(ctx: Context, config: Config) {
    super(ctx, 'serve')
    this.config = config
    // The runner and the store are other plugins' services: reached by name, typed by what is used of them.
    const opener: SessionOpener = ctx.get('runner')!
    const store: Persistence = ctx.get('sessionPersistence')!
    this.sessions = new HostedSessions(ctx, opener, store, {
      cwd: config.cwd ?? process.cwd(),
      route: { provider: config.provider, model: config.model },
      idleReleaseMs: config.idleReleaseMs,
      tailIntervalMs: config.tailIntervalMs,
      idempotencyTtlMs: config.idempotencyTtlMs,
    })
    this.store = storeKind(store)
    ctx.on('session/durable', id => this.sessions.durable(id))
    ctx.on('session/write-failed', (id, error) => this.sessions.writeFailed(id, error))
    const logger = ctx.logger('serve')
    if (config.approvals.mode === 'api') {
      this.approvals = new ApiApprovals(ctx, this.sessions, {
        deadlineMs: config.approvals.deadlineMs,
        idempotencyTtlMs: config.idempotencyTtlMs,
        report: error => logger.error(error),
      })
      // Fails the start when the deployment has an approver already: one of the two would be ignored.
      ctx.provide('approver', this.approvals)
    }
    const models = new ModelAllowlist({
      models: config.models,
      catalog: () => ctx.get('llm') as ModelCatalog | undefined,
      route: { provider: config.provider, model: config.model },
      defaultRoute: async () => opener.route?.({ provider: config.provider, model: config.model }),
    })
    this.server = createHttpServer(
      createApi(this.sessions, {
        token: config.token,
        maxBodyBytes: config.maxBodyBytes,
        heartbeatMs: config.heartbeatMs,
        retryMs: config.retryMs,
        store: this.store,
        approvals: this.approvals,
        report: error => logger.error(error),
        models,
        ui: createUi({
          sessions: this.sessions,
          store,
          authorize: bearerCheck(config.token),
          prices: (opener as { prices?: UiOptions['prices'] }).prices?.bind(opener),
          report: error => logger.error(error),
        }),
      }),
      { headersTimeoutMs: config.headersTimeoutMs, requestTimeoutMs: config.requestTimeoutMs, maxConnections: config.maxConnections },
      isProbe,
    )
    ctx.effect(() => () => this.close(), 'serve close')
  }

  /** Listens; a port in use or an address that cannot be bound fails the plugin's start. */
  async [Service.init]() {
    await new Promise<void>((resolve, reject) => {
      const failed = (error: NodeJS.ErrnoException) =>
        reject(new Error(`${name}: cannot listen on ${this.config.host}:${this.config.port}: ${error.code ?? error.message}`, { cause: error }))
      this.server.once('error', failed)
      this.server.listen(this.config.port, this.config.host, () => {
        this.server.off('error', failed)
        resolve()
      })
    })
  }

  /** `http://host:port` as bound (the port 0 picked). */
  get url(): string {
    const address = this.server.address() as AddressInfo | null
    if (!address) throw new Error(`${name}: the server is not listening`)
    const host = address.family === 'IPv6' ? `[${address.address}]` : address.address
    return `http://${host}:${address.port}`
  }

  /**
   * The graceful stop: new work is refused with 503 (and /healthz says
   * draining), running turns get `deadlineMs` to finish and are then cancelled
   * and closed in their logs, every agent is flushed and disposed (its lease
   * released), event streams end after their last events, and the listener
   * closes. Idempotent.
   */
  drain(deadlineMs: number): Promise<{ finished: number; cancelled: number }> {
    return (this.drained ??= (async () => {
      const outcome = await this.sessions.drain(deadlineMs)
      await this.closeServer()
      return outcome
    })())
  }

  private async close() {
    await this.sessions.dispose()
    await this.closeServer()
  }

  private closeServer(): Promise<void> {
    return new Promise(resolve => {
      if (!this.server.listening) return resolve()
      this.server.close(() => resolve())
      // Idle keep-alive connections would hold the close open; streams have ended by now.
      this.server.closeIdleConnections()
      setTimeout(() => this.server.closeAllConnections(), 1000).unref()
    })
  }
}

export default Serve

/** `jsonl` or `postgres`, from the backend's own `locate`; else `custom`. */
function storeKind(store: Persistence): string {
  const locate = (store as { locate?: (meta: { id: string }) => { kind?: unknown } }).locate
  try {
    const kind = locate?.call(store, { id: 'probe' })?.kind
    return typeof kind === 'string' ? kind : 'custom'
  } catch {
    return 'custom'
  }
}
