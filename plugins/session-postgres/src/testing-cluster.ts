// A real high-availability PostgreSQL cluster for tests: pg_auto_failover (Debian's
// `pg-auto-failover-cli` and `postgresql-NN-auto-failover`) with a monitor, a
// primary and a synchronous secondary, on loopback ports in a temp folder.
//
// Like the test server (testing.ts), it runs as the account PostgreSQL runs as
// when this process is root, in that account's private temp folder; every
// `pg_autoctl` process (a keeper: it starts PostgreSQL and follows the monitor)
// gets its own process group, so that it can be killed with everything it
// started, as a machine that dies, and so is all of it at the end. The monitor's health checks
// are tuned down so a failover takes seconds rather than a minute; those values
// trade safety against a network partition for speed and are for tests only.
// Without trust of the network (`--auth trust`, `--no-ssl`) nothing here is fit
// for anything but loopback.
import { execFile, spawn, type ChildProcess } from 'node:child_process'
import * as fs from 'node:fs'
import { userInfo } from 'node:os'
import { delimiter, join } from 'node:path'
import pg from 'pg'
import { freePort, type ServerUser, serverHome } from './testing.ts'

/** How long one `pg_autoctl create` may take (initdb, or pg_basebackup of the primary). */
const CREATE_MS = 120_000
/** How long the cluster may take to settle: a primary and a secondary in sync. */
const SETTLE_MS = 90_000

/**
 * The monitor's settings: a node fails when a health check (a connection, checked every second) fails
 * twice and its keeper has not reported for 3 s (defaults: 5 s period, 20 s unhealthy). Both must hold,
 * so a loaded machine that makes one of them late does not fail a live primary.
 */
const MONITOR_SETTINGS = {
  'pgautofailover.health_check_period': 1000,
  'pgautofailover.health_check_timeout': 2000,
  'pgautofailover.health_check_max_retries': 1,
  'pgautofailover.health_check_retry_delay': 500,
  'pgautofailover.node_considered_unhealthy_timeout': 3000,
  // How long a lost primary may still drain before the secondary takes writes (default 30 s). In production this must
  // exceed the keepers' network_partition_timeout (20 s), after which a cut-off primary stops itself.
  'pgautofailover.primary_demote_timeout': 2000,
  'pgautofailover.startup_grace_period': 1000,
}

/** Each server is small: pg_auto_failover sizes shared_buffers after the machine's memory. */
const SERVER_SETTINGS = "shared_buffers = '32MB'\nlisten_addresses = '127.0.0.1'\n"

export interface ClusterTools {
  pgAutoctl: string
  pgCtl: string
}

/** pg_autoctl and the pg_ctl of the PostgreSQL its extension is built for, or why the cluster cannot be built here. */
export function clusterTools(): ClusterTools | { missing: string } {
  const pgAutoctl = (process.env.PATH ?? '')
    .split(delimiter)
    .map(dir => join(dir, 'pg_autoctl'))
    .find(path => isExecutable(path))
  if (!pgAutoctl) return { missing: 'pg_autoctl is not on PATH (Debian: apt-get install pg-auto-failover-cli postgresql-15-auto-failover)' }
  // Debian installs each major version under /usr/lib/postgresql/NN; the one with the pgautofailover library serves.
  const root = '/usr/lib/postgresql'
  const versions = fs.existsSync(root) ? fs.readdirSync(root).sort((a, b) => Number(b) - Number(a)) : []
  const version = versions.find(v => fs.existsSync(join(root, v, 'lib', 'pgautofailover.so')) && isExecutable(join(root, v, 'bin', 'pg_ctl')))
  if (!version) return { missing: `no PostgreSQL under ${root} has the pgautofailover extension (Debian: apt-get install postgresql-15-auto-failover)` }
  // As root the nodes run as `postgres`, whose socket folder Debian made; anyone else needs to be able to write there.
  const sockets = '/var/run/postgresql'
  if (process.getuid?.() !== 0 && !isWritable(sockets))
    return { missing: `pg_autoctl's PostgreSQL puts its socket in ${sockets}, which this user cannot write (run as root, or join the postgres group)` }
  return { pgAutoctl, pgCtl: join(root, version, 'bin', 'pg_ctl') }
}

function isWritable(path: string): boolean {
  try {
    fs.accessSync(path, fs.constants.W_OK)
    return true
  } catch {
    return false
  }
}

export interface ClusterNode {
  /** pg_auto_failover's node name: node1 (the first primary) or node2. */
  name: string
  port: number
  /** This node alone. */
  url: string
}

export interface NodeState {
  name: string
  port: number
  /** What the node's keeper last reported (`primary`, `secondary`, `wait_primary`, ...). */
  reported: string
  /** What the monitor assigned it. */
  assigned: string
}

export interface TestCluster {
  /** Every node in one URL, as `pg_autoctl show uri --formation default` prints it, with the user and without TLS. */
  url: string
  nodes: ClusterNode[]
  /** The monitor's view of the nodes. */
  states(): Promise<NodeState[]>
  /** The rows of one statement on node `name` (a standby answers reads), or on the monitor's database (`monitor`: pgautofailover.node, .event). */
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(name: string, sql: string, params?: unknown[]): Promise<R[]>
  /**
   * Kills node `name` with SIGKILL, as a machine that dies: its keeper (which would otherwise restart
   * PostgreSQL), its postmaster and every backend. Resolves once they are all gone.
   */
  kill(name: string): Promise<void>
  /** The last lines of every process's log, for a failure message. */
  logs(lines?: number): string
  /** Kills what still runs, as `kill` does, and removes the folder. */
  stop(): Promise<void>
}

interface Keeper {
  name: string
  data: string
  child: ChildProcess
  exited: Promise<void>
  killed: boolean
}

/**
 * Builds and starts the cluster: the monitor, node1 (the primary) and node2 (its synchronous
 * secondary, made by pg_basebackup). Resolves once the monitor says primary and secondary and
 * the primary waits for the secondary at every commit. Throws with every log's tail otherwise.
 */
export async function startTestCluster(): Promise<TestCluster> {
  const tools = clusterTools()
  if ('missing' in tools) throw new Error(`cannot build a pg_auto_failover cluster: ${tools.missing}`)
  const { as, home } = serverHome()
  const dir = fs.mkdtempSync(join(home, 'cluster-'))
  const own = (path: string) => as && fs.chownSync(path, as.uid, as.gid)
  for (const sub of ['', 'config', 'share', 'run', 'logs']) {
    fs.mkdirSync(join(dir, sub), { recursive: true, mode: 0o700 })
    own(join(dir, sub))
  }
  const env = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: dir,
    XDG_CONFIG_HOME: join(dir, 'config'),
    XDG_DATA_HOME: join(dir, 'share'),
    XDG_RUNTIME_DIR: join(dir, 'run'),
    LC_ALL: 'C',
  }
  const keepers: Keeper[] = []
  const killAll = () => {
    for (const keeper of keepers) signalKeeper(keeper, 'SIGKILL')
  }
  // This process may end without stop() (a crash, a timeout): what it started must not outlive it.
  process.once('exit', killAll)

  /** `pg_autoctl args...` to its end, in its own process group (a create starts PostgreSQL: a timeout kills it all); throws with its output. */
  const autoctl = (args: string[], timeoutMs = CREATE_MS) =>
    new Promise<string>((resolve, reject) => {
      const child = spawn(tools.pgAutoctl, args, { cwd: dir, env, ...runAs(as), detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
      let stdout = ''
      let output = ''
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
        stdout += chunk
        output += chunk
      })
      child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
        output += chunk
      })
      const what = `pg_autoctl ${args.slice(0, 2).join(' ')}`
      const timer = setTimeout(() => {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL')
      }, timeoutMs)
      child.once('error', error => reject(new Error(`${what} could not be run: ${error.message}`)))
      child.once('close', (code, signal) => {
        clearTimeout(timer)
        if (code === 0) resolve(stdout)
        else reject(new Error(`${what} ${signal ? `was killed by ${signal} after ${timeoutMs / 1000} s` : `exited with code ${code}`}:\n${tail(output, 30)}`))
      })
    })
  /** `pg_autoctl run` for one data folder, in its own process group, its output in logs/. */
  const run = (name: string, data: string) => {
    const log = fs.openSync(join(dir, 'logs', `${name}.log`), 'a')
    const child = spawn(tools.pgAutoctl, ['run', '--pgdata', data], { cwd: dir, env, ...runAs(as), detached: true, stdio: ['ignore', log, log] })
    fs.closeSync(log)
    const keeper: Keeper = { name, data, child, exited: new Promise(resolve => child.once('exit', () => resolve())), killed: false }
    keepers.push(keeper)
    return keeper
  }
  const logs = (lines = 15) =>
    fs
      .readdirSync(join(dir, 'logs'))
      .map(file => `--- ${file}\n${tail(fs.readFileSync(join(dir, 'logs', file), 'utf8'), lines)}`)
      .join('\n')

  const user = as?.name ?? userInfo().username
  const ports: Record<string, number> = { monitor: await freePort(), node1: await freePort(), node2: await freePort() }
  const monitorUrl = `postgres://autoctl_node@127.0.0.1:${ports.monitor}/pg_auto_failover?sslmode=disable`
  const monitorData = join(dir, 'monitor')
  const nodeData = (name: string) => join(dir, name)
  const common = ['--hostname', '127.0.0.1', '--auth', 'trust', '--no-ssl', '--pgctl', tools.pgCtl]
  const cluster: TestCluster = {
    url: '',
    nodes: [],
    async states() {
      const rows = await queryOnce<{ name: string; port: number; reported: string; assigned: string }>(
        monitorUrl,
        'SELECT nodename AS name, nodeport AS port, reportedstate::text AS reported, goalstate::text AS assigned FROM pgautofailover.node ORDER BY nodeid',
      )
      return rows
    },
    query: (name, sql, params) => {
      if (!(name in ports)) throw new Error(`no node ${name} in this cluster`)
      return queryOnce(name === 'monitor' ? monitorUrl : nodeUrl(user, ports[name]), sql, params)
    },
    async kill(name) {
      const keeper = keepers.find(candidate => candidate.name === name)
      if (!keeper) throw new Error(`no node ${name} in this cluster`)
      await killNode(keeper)
    },
    logs,
    async stop() {
      // Nothing of the cluster is kept, so nothing needs a clean shutdown: SIGKILL is quick and sure. A server that a
      // failed create left running has no keeper: its data folder names it.
      await Promise.all(keepers.map(keeper => (keeper.killed ? undefined : killNode(keeper))))
      await Promise.all([monitorData, nodeData('node1'), nodeData('node2')].map(killServer))
      process.off('exit', killAll)
      fs.rmSync(dir, { recursive: true, force: true })
    },
  }

  try {
    await autoctl(['create', 'monitor', '--pgdata', monitorData, '--pgport', String(ports.monitor), ...common])
    fs.appendFileSync(join(monitorData, 'postgresql.auto.conf'), `${SERVER_SETTINGS}${settingsText(MONITOR_SETTINGS)}`)
    await autoctl(['config', 'set', '--pgdata', monitorData, 'postgresql.listen_addresses', '127.0.0.1'])
    run('monitor', monitorData)
    await until(
      () =>
        queryOnce(monitorUrl, 'SELECT 1').then(
          () => true,
          () => false,
        ),
      'the monitor to accept connections',
    )

    for (const name of ['node1', 'node2'] as const) {
      const data = nodeData(name)
      const node = ['--pgdata', data, '--pgport', String(ports[name]), '--listen', '127.0.0.1', '--pghost', '127.0.0.1', '--name', name]
      // node1 starts as the primary; node2, created while node1 runs, is copied from it by pg_basebackup.
      await autoctl(['create', 'postgres', ...node, '--monitor', monitorUrl, ...common])
      if (name === 'node1') fs.appendFileSync(join(data, 'postgresql.auto.conf'), SERVER_SETTINGS)
      // After the primary stopped, how long to wait for the WAL receiver before promoting (default 5 s).
      await autoctl(['config', 'set', '--pgdata', data, 'timeout.prepare_promotion_walreceiver', '1'])
      run(name, data)
    }
    await until(
      async () => {
        const states = await cluster.states().catch(() => [])
        const settled = states.map(state => `${state.name}:${state.reported}:${state.assigned}`).join(' ')
        if (settled !== 'node1:primary:primary node2:secondary:secondary') return false
        // The primary waits for its standby at every commit.
        const standbys = await cluster.query<{ names: string }>('node1', "SELECT current_setting('synchronous_standby_names') AS names").catch(() => [])
        return standbys[0]?.names.startsWith('ANY 1') === true
      },
      'node1 to be primary with node2 as its synchronous secondary',
      SETTLE_MS,
    )
    const uri = (await autoctl(['show', 'uri', '--formation', 'default', '--monitor', monitorUrl])).trim()
    // node-postgres reads sslmode=prefer as verify-full; this cluster runs without TLS.
    cluster.url = uri.replace('postgres://', `postgres://${user}@`).replace('sslmode=prefer', 'sslmode=disable')
    cluster.nodes = (['node1', 'node2'] as const).map(name => ({ name, port: ports[name], url: nodeUrl(user, ports[name]) }))
    return cluster
  } catch (error) {
    const failure = new Error(`the pg_auto_failover cluster could not start: ${(error as Error).message}\n${logs()}`)
    await cluster.stop().catch(() => {})
    throw failure
  }
}

const nodeUrl = (user: string, port: number) => `postgres://${user}@127.0.0.1:${port}/postgres?sslmode=disable`

/** The rows of one statement, on a connection of its own. */
async function queryOnce<R extends pg.QueryResultRow>(url: string, sql: string, params: unknown[] = []): Promise<R[]> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 })
  client.on('error', () => {})
  try {
    await client.connect()
    return (await client.query<R>(sql, params)).rows
  } finally {
    await client.end().catch(() => {})
  }
}

const runAs = (as: ServerUser | undefined) => (as ? { uid: as.uid, gid: as.gid } : {})

const settingsText = (settings: Record<string, number>) =>
  Object.entries(settings)
    .map(([name, value]) => `${name} = ${value}\n`)
    .join('')

const tail = (text: string, lines: number) => text.trimEnd().split('\n').slice(-lines).join('\n')

function isExecutable(path: string): boolean {
  try {
    fs.accessSync(path, fs.constants.X_OK)
    return fs.statSync(path).isFile()
  } catch {
    return false
  }
}

/** Polls `check` every 200 ms until it holds; throws after `timeoutMs`. */
async function until(check: () => Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`)
    await new Promise(resolve => setTimeout(resolve, 200))
  }
}

/** The postmaster of a data folder (its pid file's first line) and the shared memory id it holds (line 7), if it runs. */
function postmasterOf(data: string): { pid: number; shmid: number | undefined } | undefined {
  const lines = fs.readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')
  const pid = Number(lines[0])
  const shmid = Number(lines[6]?.trim().split(/\s+/)[1])
  return Number.isInteger(pid) && pid > 0 ? { pid, shmid: Number.isInteger(shmid) ? shmid : undefined } : undefined
}

/** The pids whose parent is `parent` (a postmaster's backends run in their own sessions, outside the keeper's group). */
function childrenOf(parent: number): number[] {
  const pids: number[] = []
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      // The command may hold spaces and parentheses: the fields after the last ')' are fixed.
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8')
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === parent) pids.push(Number(entry))
    } catch {}
  }
  return pids
}

/** The command line of `pid`, or '' when it is gone. */
function readCommand(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ')
  } catch {
    return ''
  }
}

/** Whether `pid` runs: a zombie (killed, not reaped yet by whoever adopted it) does not. */
function alive(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z'
  } catch {
    return false
  }
}

function signalKeeper(keeper: Keeper, signal: NodeJS.Signals) {
  if (keeper.child.pid === undefined || keeper.child.exitCode !== null || keeper.child.signalCode !== null) return
  try {
    process.kill(-keeper.child.pid, signal)
  } catch {}
}

/** SIGKILL to the keeper's group (the keeper and its services; the postmaster is among them), then to its server. */
async function killNode(keeper: Keeper): Promise<void> {
  keeper.killed = true
  // Read before the keeper dies: the backends are found through their parent, the postmaster.
  const server = killServer(keeper.data)
  signalKeeper(keeper, 'SIGKILL')
  await keeper.exited
  await server
}

/** SIGKILL to the postmaster of `data`, if one runs, and to its backends (each in a session of its own); waits until they are gone. */
async function killServer(data: string): Promise<void> {
  let postmaster: ReturnType<typeof postmasterOf>
  try {
    postmaster = postmasterOf(data)
  } catch {
    return
  }
  // A pid file left by a server killed before may name a pid reused since by something else.
  if (!postmaster || !alive(postmaster.pid) || !readCommand(postmaster.pid).includes(data)) return
  const pids = [postmaster.pid, ...childrenOf(postmaster.pid)]
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch {}
  }
  for (const deadline = Date.now() + 10_000; pids.some(alive) && Date.now() < deadline; ) await new Promise(resolve => setTimeout(resolve, 50))
  // A killed postmaster leaves its small System V segment behind: nobody is attached any more.
  const { shmid } = postmaster
  if (shmid !== undefined) await new Promise(resolve => execFile('ipcrm', ['-m', String(shmid)], () => resolve(undefined)))
}
