import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { batchedFsync, fsyncCounts, fsyncHelper } from '../src/fsync-batch.ts'

let dir: string
let fds: number[]

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'loom-fsync-batch-'))
  fds = Array.from({ length: 6 }, (_, i) => fs.openSync(path.join(dir, `log-${i}`), 'a'))
})

afterAll(() => {
  for (const fd of fds) fs.closeSync(fd)
  fs.rmSync(dir, { recursive: true, force: true })
})

/** One turn of the event loop's worth of fsyncs, each written to first; their outcomes. */
function turnOfFsyncs(targets: number[]) {
  return Promise.allSettled(
    targets.map(fd => {
      if (fds.includes(fd)) fs.writeSync(fd, 'line\n')
      return batchedFsync(fd)
    }),
  )
}

const messagePorts = () => process.getActiveResourcesInfo().filter(resource => resource === 'MessagePort').length

describe('batchedFsync', () => {
  // First: the helper is started here, and has taken no batch yet.
  it('a started helper keeps the process alive only while it has fsyncs to answer', async () => {
    const before = messagePorts()
    expect(fsyncHelper()).toBeUndefined()
    await turnOfFsyncs([fds[0], fds[1]])
    expect(fsyncHelper(), 'started by a batch').toBeDefined()
    expect(messagePorts()).toBe(before)
  })

  it('hands the fsyncs of one turn of the loop to the helper in one batch, and settles each', async () => {
    const before = fsyncCounts()
    // The helper starts at the first batch and takes batches once it runs; until then they go to the pool one by one.
    for (let round = 0; fsyncCounts().batches === before.batches; round++) {
      expect(round, 'the helper thread never took a batch').toBeLessThan(2000)
      const outcomes = await turnOfFsyncs(fds)
      expect(outcomes.every(outcome => outcome.status === 'fulfilled')).toBe(true)
    }
    const after = fsyncCounts()
    expect(after.fsyncs - before.fsyncs).toBeGreaterThanOrEqual(fds.length)
  })

  it('fails only the fsync whose descriptor is bad, with its code; the rest of the batch is durable', async () => {
    const closed = fs.openSync(path.join(dir, 'closed'), 'a')
    fs.closeSync(closed)
    const batches = fsyncCounts().batches
    const outcomes = await turnOfFsyncs([fds[0], closed, fds[1], -1, fds[2]])
    expect(outcomes.map(outcome => outcome.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'rejected', 'fulfilled'])
    const reason = (outcomes[1] as PromiseRejectedResult).reason as NodeJS.ErrnoException
    expect(reason).toBeInstanceOf(Error)
    expect(reason.code).toBe('EBADF')
    expect(reason.syscall).toBe('fsync')
    expect(((outcomes[3] as PromiseRejectedResult).reason as NodeJS.ErrnoException).code).toBe('ERR_OUT_OF_RANGE')
    // Through the helper (it is running since the test above), not the pool one by one.
    expect(fsyncCounts().batches).toBe(batches + 1)
  })

  it('sends a lone fsync straight to the thread pool (a value that is no descriptor is rejected, not thrown)', async () => {
    const batches = fsyncCounts().batches
    const outcomes = await turnOfFsyncs([fds[3]])
    expect(outcomes[0].status).toBe('fulfilled')
    const lone = await Promise.allSettled([batchedFsync(-1)])
    expect(((lone[0] as PromiseRejectedResult).reason as NodeJS.ErrnoException).code).toBe('ERR_OUT_OF_RANGE')
    expect(fsyncCounts().batches).toBe(batches)
  })

  // Last: afterwards this module's helper is gone for good.
  it('a helper that dies loses no fsync: what it had not answered is made from here, and later batches go to the pool', async () => {
    const warnings: string[] = []
    const onWarning = (warning: Error) => warnings.push(warning.message)
    process.on('warning', onWarning)
    try {
      const helper = fsyncHelper()
      expect(helper, 'started by the tests above').toBeDefined()
      const exited = new Promise<void>(resolve => helper!.once('exit', () => resolve()))
      const pending = turnOfFsyncs(fds)
      // The batch is posted at the end of this turn of the loop; the helper dies before it can answer it all.
      setImmediate(() => void helper!.terminate())
      await exited
      expect((await pending).every(outcome => outcome.status === 'fulfilled')).toBe(true)
      const batches = fsyncCounts().batches
      expect((await turnOfFsyncs(fds)).every(outcome => outcome.status === 'fulfilled')).toBe(true)
      expect(fsyncCounts().batches).toBe(batches)
      expect(warnings.some(message => /fsync helper thread exited.*one by one/.test(message))).toBe(true)
    } finally {
      process.off('warning', onWarning)
    }
  })
})
