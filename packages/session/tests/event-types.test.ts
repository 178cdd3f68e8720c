// The type predicates a load asks of every event (switches; tsc checks that isKnownEventType lists every type).
import { describe, expect, it } from 'vitest'
import { isKnownEventType, isSurfaceEventType, type SessionEventType } from '../src/events.ts'

// Every type, as a record the compiler holds to SessionEventType's keys.
const TYPES: Record<SessionEventType, true> = {
  'turn/start': true,
  'turn/end': true,
  'step/start': true,
  'step/end': true,
  'user/message': true,
  'assistant/chunk': true,
  'assistant/message': true,
  'tool/call': true,
  'tool/result': true,
  'request/header': true,
  'request/context': true,
  'agent/route': true,
  'request/retry': true,
  'compaction/start': true,
  'compaction/summary': true,
  'compaction/end': true,
  'compaction/prune': true,
  'session/end-seed': true,
  'agent/inbox/spliced': true,
  'approval/requested': true,
  'approval/answered': true,
}

describe('event type predicates', () => {
  it('know every type of this build, and nothing else', () => {
    for (const type of Object.keys(TYPES)) expect(isKnownEventType(type), type).toBe(true)
    for (const type of ['future/thing', 'request/header-delta', '', 'Turn/start', 'turn/start ']) expect(isKnownEventType(type), type).toBe(false)
  })

  it('find the model-visible types among them', () => {
    expect(Object.keys(TYPES).filter(isSurfaceEventType)).toEqual(['user/message', 'assistant/message', 'tool/result'])
    expect(isSurfaceEventType('future/message')).toBe(false)
  })
})
