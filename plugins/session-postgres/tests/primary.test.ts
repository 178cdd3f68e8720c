// A multi-host URL over two real servers: a primary and its streaming standby
// (testing.ts copies the primary's data and starts the copy in recovery). The
// store writes to whichever is the writable primary, whatever the order of the
// URL; while none is (the primary gone, the standby not promoted yet, or
// promoted but still read-only, as pg_auto_failover keeps it until the old
// primary is fenced) every query is StoreUnavailableError naming both hosts and
// what each answered; a pooled connection to a primary made read-only (a
// demotion) refuses the write with 25006, which counts as unavailable too.
// Then the standby is promoted and the store writes there, with every row
// written before the failover. The plugin takes the same URL, and refuses one
// it cannot use at start, naming every host and never the password.
import net from 'node:net'
import { Context } from '@deepseek-ai/cordis'
import SessionStore, { SESSION_FORMAT_VERSION, type SessionHeader } from '@loom/session'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Db } from '../src/db.ts'
import PostgresPersistence from '../src/index.ts'
import { describeUrl, parseStoreUrl } from '../src/hosts.ts'
import { isConnectionError, StoreUnavailableError } from '../src/unavailable.ts'
import { startTestPostgres, type TestPostgres } from '../src/testing.ts'

let primary: TestPostgres
let standby: TestPostgres

beforeAll(async () => {
  primary = await startTestPostgres()
  standby = await primary.standby()
}, 180_000)

afterAll(async () => {
  await standby?.stop()
  await primary?.stop()
})

const header = (id: string, createdAt = 1): SessionHeader => ({ version: SESSION_FORMAT_VERSION, id, createdAt })
const port = (server: TestPostgres) => new URL(server.url).port
/** Both servers in one URL, as `pg_autoctl show uri` prints a cluster's. */
const cluster = (...servers: TestPostgres[]) =>
  `postgres://loom:loom@${servers.map(server => `127.0.0.1:${port(server)}`).join(',')}/postgres?target_session_attrs=read-write`
const serverPort = async (db: Db) => (await db.pool.query<{ port: number }>('SELECT inet_server_port() AS port')).rows[0].port
const setReadOnly = async (server: TestPostgres, on: boolean) => {
  await server.query(on ? 'ALTER SYSTEM SET default_transaction_read_only = on' : 'ALTER SYSTEM RESET default_transaction_read_only')
  await server.query('SELECT pg_reload_conf()')
  // The reload reaches the server's processes asynchronously: wait until a new session sees it.
  for (let tries = 0; (await server.query('SHOW default_transaction_read_only')).rows[0].default_transaction_read_only !== (on ? 'on' : 'off'); tries++) {
    if (tries > 600) throw new Error(`default_transaction_read_only did not become ${on} on ${server.url}`)
    await new Promise(resolve => setTimeout(resolve, 50))
  }
}
const unavailable = async (work: Promise<unknown>) => {
  const error = await work.then(
    () => undefined,
    error => error,
  )
  expect(error).toBeInstanceOf(StoreUnavailableError)
  expect(isConnectionError(error)).toBe(true)
  expect(error.message).not.toContain('loom:loom')
  return error as StoreUnavailableError
}

describe('a multi-host URL', () => {
  it('names every host and the database, never the password; a URL the store cannot use is refused saying why', () => {
    const url = 'postgres://loom:s3cret@db-1:5432,db-2:5433,[::1]/loom?target_session_attrs=read-write&application_name=web'
    const parsed = parseStoreUrl(url)
    expect(parsed.where).toBe('db-1:5432,db-2:5433,[::1]:5432/loom')
    expect(describeUrl(url)).toBe(parsed.where)
    expect(parsed.writable).toBe(true)
    expect(parsed.forHost(1)).toBe('postgres://loom:s3cret@db-2:5433/loom?application_name=web')
    expect(parseStoreUrl('postgresql://u@db:6432/x')).toMatchObject({ where: 'db:6432/x', writable: false })
    expect(parseStoreUrl('postgres://u@db/x?target_session_attrs=primary').writable).toBe(true)

    expect(() => parseStoreUrl('postgres://u@db-1,db-2/x?target_session_attrs=standby')).toThrow(
      'target_session_attrs=standby, a server this store cannot write to',
    )
    expect(() => parseStoreUrl('postgres://u@db-1,db-2/x?target_session_attrs=any')).toThrow('target_session_attrs=any with several hosts')
    expect(() => parseStoreUrl('postgres://u@db-1:5432;db-2:5432/x')).toThrow('has a host "db-1:5432;db-2:5432" that is not host[:port]')
    // A password with an unescaped slash cuts the userinfo short: its pieces are not echoed.
    const cut = (() => {
      try {
        return parseStoreUrl('postgres://u:zq/xy@db/x')
      } catch (error) {
        return error as Error
      }
    })() as Error
    expect(cut.message).toContain('has a host number 1')
    expect(cut.message).not.toMatch(/zq|xy/)
  })

  it('writes to the primary when the standby is listed first', async () => {
    expect((await standby.query('SELECT pg_is_in_recovery() AS standby')).rows[0].standby).toBe(true)
    const db = new Db({ url: cluster(standby, primary), schema: primary.schema(), poolMax: 2 }, () => {})
    try {
      expect(db.where).toBe(`127.0.0.1:${port(standby)},127.0.0.1:${port(primary)}/postgres`)
      await db.migrate()
      await db.transaction(client => db.insertHeader(header('s1', 1), client))
      expect(await serverPort(db)).toBe(Number(port(primary)))
      expect(await db.ids()).toEqual(['s1'])
    } finally {
      await db.pool.end()
    }
  })

  it('refuses a write on a primary made read-only (25006), finds no writable host while none is, and comes back', async () => {
    const primaries: string[] = []
    const db = new Db({ url: cluster(primary, standby), schema: primary.schema(), poolMax: 1, onPrimary: host => primaries.push(host) }, () => {})
    try {
      await db.migrate()
      expect(primaries).toEqual([`127.0.0.1:${port(primary)}`])
      // The pool's one connection was checked when it opened; the server turns read-only under it, as a demoted primary does.
      await setReadOnly(primary, true)
      // The pool's connection reads the reloaded setting between its commands, once it has taken the signal: wait until it
      // has (or until the pool, having opened a new connection, already refuses the read-only server as a primary).
      const pooledSees = async (value: 'on' | 'off') => {
        for (let tries = 0; ; tries++) {
          const seen = await db.pool.query('SHOW default_transaction_read_only').then(
            result => result.rows[0].default_transaction_read_only,
            () => 'on',
          )
          if (seen === value) return
          if (tries > 600) throw new Error(`the pooled connection never saw default_transaction_read_only = ${value}`)
          await new Promise(resolve => setTimeout(resolve, 50))
        }
      }
      await pooledSees('on')
      const refused = await unavailable(db.transaction(client => db.insertHeader(header('s2', 1), client)))
      expect(refused.message).toMatch(/read-only transaction|no host is a writable primary/)
      // Looked for again: neither host takes writes.
      const none = await unavailable(db.ids())
      expect(none.message).toContain(`the session store PostgreSQL at ${db.where} is unreachable: no host is a writable primary: `)
      expect(none.message).toContain(`127.0.0.1:${port(primary)} is not the writable primary: it is read-only (default_transaction_read_only is on`)
      expect(none.message).toContain(`127.0.0.1:${port(standby)} is not the writable primary: it is a standby (in recovery)`)
      await setReadOnly(primary, false)
      await pooledSees('off')
      expect(await db.ids()).toEqual([])
      expect(primaries).toEqual([`127.0.0.1:${port(primary)}`, `127.0.0.1:${port(primary)}`])
    } finally {
      await setReadOnly(primary, false)
      await db.pool.end()
    }
  })

  it('through the plugin: a session is stored on the primary; a bad or unreachable host list fails the start naming every host, never the password', async () => {
    const root = new Context()
    root.logger.exporter({ levels: { default: 0 }, export() {} })
    await root.plugin(SessionStore)
    const schema = primary.schema()
    const backend = await root.plugin(PostgresPersistence, { url: cluster(standby, primary), schema, maxDelayMs: 10 })
    try {
      // Typed by @loom/session-jsonl's declaration of the key: this backend is another class.
      const persistence = root.get('sessionPersistence') as unknown as PostgresPersistence
      persistence.create(header('p1'))
      await persistence.append('p1', [{ type: 'turn/start', seq: 0, time: 1, data: { turn: 1 } }])
      expect((await primary.query(`SELECT seq FROM "${schema}".session_events WHERE session_id = 'p1'`)).rows).toEqual([{ seq: 0 }])
      expect(persistence.locate({ id: 'p1' }).where).toBe(`127.0.0.1:${port(standby)},127.0.0.1:${port(primary)}/postgres ${schema}.sessions id="p1"`)
    } finally {
      await backend.dispose()
    }

    const failed = (url: string) =>
      Promise.resolve(root.plugin(PostgresPersistence, { url })).then(
        () => undefined,
        (error: Error) => error.message,
      )
    const down = await failed('postgres://loom:secret@127.0.0.1:1,127.0.0.1:2/loom')
    expect(down).toMatch(
      /^@loom\/session-postgres: cannot use PostgreSQL at 127\.0\.0\.1:1,127\.0\.0\.1:2\/loom \(config key "url" of the @loom\/session-postgres row/,
    )
    expect(down).toMatch(/no host is a writable primary: 127\.0\.0\.1:1: connect ECONNREFUSED 127\.0\.0\.1:1; 127\.0\.0\.1:2: connect ECONNREFUSED/)
    const standbyOnly = await failed('postgres://loom:secret@127.0.0.1:1,127.0.0.1:2/loom?target_session_attrs=read-only')
    expect(standbyOnly).toBe(
      '@loom/session-postgres: config key "url" of the @loom/session-postgres row asks for target_session_attrs=read-only, a server this store cannot write to; use read-write (or leave it out)',
    )
    for (const message of [down, standbyOnly]) expect(message).not.toContain('secret')
  })

  // Last: it promotes the standby for good.
  it('a connection cut while it is checked for being the primary is StoreUnavailableError, not an error event that ends the process', async () => {
    // A proxy in front of the primary that drops a connection as soon as it sends the writable check:
    // the server gone in the middle of a new connection's check, as when the primary is killed.
    const proxy = net.createServer(socket => {
      const upstream = net.connect(Number(port(primary)), '127.0.0.1')
      socket.on('error', () => upstream.destroy())
      upstream.on('error', () => socket.destroy())
      upstream.pipe(socket)
      socket.on('data', chunk => {
        if (chunk.includes('pg_is_in_recovery')) {
          upstream.destroy()
          socket.destroy()
        } else upstream.write(chunk)
      })
    })
    await new Promise<void>(resolve => proxy.listen(0, '127.0.0.1', resolve))
    const proxyPort = (proxy.address() as net.AddressInfo).port
    const db = new Db({ url: cluster(standby).replace('@', `@127.0.0.1:${proxyPort},`), schema: primary.schema(), poolMax: 2 }, () => {})
    try {
      const cut = await unavailable(db.ids())
      expect(cut.message).toContain(`127.0.0.1:${proxyPort}: Connection terminated unexpectedly`)
      expect(cut.message).toContain(`127.0.0.1:${port(standby)} is not the writable primary`)
    } finally {
      await db.pool.end()
      proxy.close()
    }
  })

  it('follows a failover: the primary gone, the standby promoted (read-only at first), every row written before it there', async () => {
    const db = new Db({ url: cluster(primary, standby), schema: primary.schema(), poolMax: 2 }, () => {})
    try {
      await db.migrate()
      await db.transaction(client => db.insertHeader(header('before', 1), client))
      expect(await serverPort(db)).toBe(Number(port(primary)))

      await primary.halt()
      const down = await unavailable(db.ids())
      expect(down.message).toMatch(new RegExp(`no host is a writable primary: .*127\\.0\\.0\\.1:${port(primary)}: .*ECONNREFUSED`))
      // Promoted, but kept read-only until it is confirmed, as pg_auto_failover does: still no writes.
      await setReadOnly(standby, true)
      expect((await standby.query('SELECT pg_promote() AS promoted')).rows[0].promoted).toBe(true)
      const promoting = await unavailable(db.ids())
      expect(promoting.message).toContain(`127.0.0.1:${port(standby)} is not the writable primary: it is read-only`)

      await setReadOnly(standby, false)
      expect(await db.ids()).toEqual(['before'])
      await db.transaction(client => db.insertHeader(header('after', 2), client))
      expect(await serverPort(db)).toBe(Number(port(standby)))
      expect((await standby.query(`SELECT id FROM "${db.schema}".sessions ORDER BY id`)).rows.map(row => row.id)).toEqual(['after', 'before'])
    } finally {
      await db.pool.end()
    }
  })
})
