// `loom serve`: the deployment booted as for `run` (tool calls answered by
// --approve; with --approve api, by the server's clients over its API), plus
// the HTTP server of @loom/serve on its root. It prints where
// it listens, and runs until a stop signal: the first one drains (new work gets
// 503, running turns get --drain-ms to finish, then are cancelled and closed in
// their logs), and the command exits 0 once everything is written; a second
// one exits at once.
import type { Context as Root } from '@deepseek-ai/cordis'
import { registerSecret } from '@loom/secrets'
import { DEFAULT_APPROVAL_DEADLINE_MS, loadToken, Serve, TokenError } from '@loom/serve'
import type { SessionPersistence } from '@loom/session'
import type {} from '@loom/tools'
import { resolve } from 'node:path'
import type { Context } from './context.ts'
import { ConfigError, UsageError } from './errors.ts'
import type { Runner } from './runner.ts'

export const DEFAULT_PORT = 8080
export const DEFAULT_HOST = '127.0.0.1'
export const DEFAULT_DRAIN_MS = 10_000

/** The bearer token: --token-file, else $LOOM_SERVE_TOKEN; a usage error (naming where it looked) when there is none. */
export function serveToken(file: string | undefined): string {
  try {
    return loadToken({ file })
  } catch (error) {
    if (error instanceof TokenError) throw new UsageError(`serve: ${error.message}`)
    throw error
  }
}

/** `--approve-deadline-ms` belongs to `--approve api`: alone it would change nothing, so it is refused. */
export function checkApprovalFlags(parsed: Pick<Context['parsed'], 'approve' | 'approveDeadlineMs'>): void {
  if (parsed.approveDeadlineMs !== undefined && parsed.approve !== 'api') {
    throw new UsageError(`serve: --approve-deadline-ms is the deadline of --approve api, and this server runs with --approve ${parsed.approve}`)
  }
}

export async function serve(runner: Runner, context: Context & { root: Root; token: string }): Promise<number> {
  const { parsed, io, cwd, root, token } = context
  const store: (SessionPersistence & { leaseCommand?: string }) | undefined = root.get('sessionPersistence')
  if (!store) {
    throw new ConfigError(
      "loom serve needs a session store: the deployment has no sessionPersistence (the default bundle's session-jsonl row, or @loom/session-postgres)",
    )
  }
  // The token is a secret wherever it came from: redacted from tool results, the session log and the terminal.
  root.effect(() => registerSecret(token), 'loom serve: the bearer token is a secret')
  // Its file is kept from the agent's tools and hidden in the sandbox: a copy the command transformed
  // (`base64 token.txt`) would escape redaction.
  const tokenFile = parsed.tokenFile
  if (tokenFile !== undefined) {
    await root.plugin({
      name: '@loom/cli/serve-token',
      inject: ['tools'],
      apply: ctx => void ctx.tools.denyRead(resolve(tokenFile), 'the bearer token of loom serve'),
    })
  }
  const drainMs = parsed.drainMs ?? DEFAULT_DRAIN_MS
  // The schema fills in the defaults of what the command has no flag for.
  await root.plugin(
    Serve,
    Serve.Config({
      token,
      port: parsed.port ?? DEFAULT_PORT,
      host: parsed.host ?? DEFAULT_HOST,
      cwd,
      ...(parsed.maxConnections !== undefined && { maxConnections: parsed.maxConnections }),
      ...(parsed.headersTimeoutMs !== undefined && { headersTimeoutMs: parsed.headersTimeoutMs }),
      ...(parsed.requestTimeoutMs !== undefined && { requestTimeoutMs: parsed.requestTimeoutMs }),
      ...(parsed.approve === 'api' && { approvals: { mode: 'api', deadlineMs: parsed.approveDeadlineMs ?? DEFAULT_APPROVAL_DEADLINE_MS } }),
    }),
  )
  const server: Serve | undefined = root.get('serve')
  if (!server) throw new ConfigError('the server did not start: its plugin waits for a service the deployment lacks (runner, sessions, sessionPersistence)')
  // A refused writer elsewhere reads which server holds the session.
  store.leaseCommand = `loom serve ${server.url}`
  // The default route of new sessions (the runner row's provider and model), checked before the first request.
  const route = await runner.route()
  const approvals = server.approvals ? `over the API, ${server.config.approvals.deadlineMs / 1000} s to answer` : `--approve ${parsed.approve}`
  io.stdout.write(
    `loom serve: listening on ${server.url} (sessions: ${server.store}; new sessions on ${route.provider}/${route.model}; approvals: ${approvals})\n`,
  )

  return new Promise<number>(resolve => {
    let draining = false
    context.onInterrupt?.(signal => {
      if (draining) return 'exit'
      draining = true
      io.stderr.write(`loom serve: ${signal}: draining (new work is refused; running turns have ${drainMs} ms to finish)\n`)
      server.drain(drainMs).then(
        ({ finished, cancelled }) => {
          io.stderr.write(`loom serve: drained: ${finished} running turn(s) finished in time, ${cancelled} cancelled and closed in their logs\n`)
          resolve(0)
        },
        error => {
          io.stderr.write(`loom serve: drain failed: ${(error as Error).message}\n`)
          resolve(1)
        },
      )
      return 'handled'
    })
  })
}
