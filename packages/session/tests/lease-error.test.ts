// SessionLeaseError: the refusal every persistence backend gives a second writer.
import { describe, expect, it } from 'vitest'
import { SessionLeaseError } from '../src/store.ts'

describe('SessionLeaseError', () => {
  const today = new Date()
  today.setHours(12, 1, 3, 0)

  it('held: names the session, the holder (pid, host, since, command) and what to do', () => {
    const error = SessionLeaseError.held('20261129-134221-abc', { pid: 4242, host: 'x', since: today.getTime(), command: 'loom run' })
    expect(error).toBeInstanceOf(Error)
    expect(error).toMatchObject({ name: 'SessionLeaseError', code: 'SESSION_LEASE_HELD', sessionId: '20261129-134221-abc', holder: { pid: 4242, host: 'x' } })
    expect(error.message).toBe('session 20261129-134221-abc is being written by pid 4242 on host x since 12:01:03 (loom run); wait for it to finish or stop it')
  })

  it('a lease from another day shows its date; no command, no parentheses', () => {
    const error = SessionLeaseError.held('s', { pid: 1, host: 'h', since: new Date(2020, 0, 2, 3, 4, 5).getTime() })
    expect(error.message).toBe('session s is being written by pid 1 on host h since 2020-01-02 03:04:05; wait for it to finish or stop it')
  })

  it('lost: says this writer lost its lease and who holds it now', () => {
    const error = SessionLeaseError.lost('s', { pid: 7, host: 'h', since: today.getTime(), command: 'loom sessions repair' })
    expect(error.code).toBe('SESSION_LEASE_LOST')
    expect(error.message).toBe(
      `session s: this writer (pid ${process.pid}) lost its write lease, now held by pid 7 on host h since 12:01:03 (loom sessions repair); nothing more is written by this process`,
    )
    expect(SessionLeaseError.lost('s', undefined).message).toBe(
      `session s: this writer (pid ${process.pid}) lost its write lease; nothing more is written by this process`,
    )
  })
})
