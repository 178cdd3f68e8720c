// Compile-time checks of the SessionEvent union, checked by `tsc -b` (never run):
// each `@ts-expect-error` line must stay an error, or the typecheck fails.
import type { UserMessage } from '@loom/llm'
import { eventsOfType, lastEventOfType, type RequestHeader, type SessionEvent, type SessionEventMap, type TurnEndReason } from '@loom/session'
import { expectTypeOf } from 'vitest'

export function narrowing(event: SessionEvent, events: readonly SessionEvent[]) {
  if (event.type === 'turn/end') expectTypeOf(event.data.reason).toEqualTypeOf<TurnEndReason>()
  if (event.type === 'user/message') expectTypeOf(event.data).toEqualTypeOf<UserMessage>()
  switch (event.type) {
    case 'request/header':
      expectTypeOf(event.data.header).toEqualTypeOf<RequestHeader>()
      break
    case 'tool/call':
      expectTypeOf(event.data.callId).toBeString()
      // @ts-expect-error a tool call has no reason
      void event.data.reason
      break
  }
  // @ts-expect-error not narrowed: most event types have no reason
  void event.data.reason

  // One type parameter is one event type; several make a union.
  expectTypeOf<SessionEvent<'turn/end'>['data']>().toEqualTypeOf<SessionEventMap['turn/end']>()
  expectTypeOf<SessionEvent<'turn/start' | 'turn/end'>['type']>().toEqualTypeOf<'turn/start' | 'turn/end'>()

  expectTypeOf(lastEventOfType(events, 'request/header')).toEqualTypeOf<SessionEvent<'request/header'> | undefined>()
  expectTypeOf(lastEventOfType(events, 'turn/end')?.data.reason).toEqualTypeOf<TurnEndReason | undefined>()
  // @ts-expect-error not an event type
  lastEventOfType(events, 'turn/finish')
  expectTypeOf(eventsOfType(events, 'turn/end')).toEqualTypeOf<SessionEvent<'turn/end'>[]>()
  expectTypeOf(eventsOfType(events, 'turn/end')[0].data.reason).toEqualTypeOf<TurnEndReason>()
}
