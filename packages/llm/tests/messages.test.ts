// Messages are detached from the caller's objects and deeply frozen, once.
import { describe, expect, it } from 'vitest'
import { createUserMessage, freezeMessage, frozenJsonSnapshot, userText, type UserMessage } from '@loom/llm'

describe('freezeMessage', () => {
  it("copies a caller's message, so changing the caller's objects later changes nothing", () => {
    const block = { type: 'text' as const, text: 'hi' }
    const message: UserMessage = { id: 'm1', role: 'user', content: [block], source: { kind: 'user' } }
    const frozen = freezeMessage(message)
    expect(frozen).not.toBe(message)
    expect(Object.isFrozen(frozen.content[0])).toBe(true)
    block.text = 'changed'
    expect(frozen.content[0]).toEqual({ type: 'text', text: 'hi' })
  })

  it('returns a message it made as it is: detached and frozen already', () => {
    const made = createUserMessage({ content: [{ type: 'text', text: 'hi' }], source: { kind: 'user' } })
    expect(freezeMessage(made)).toBe(made)
    const typed = userText('hello')
    expect(Object.isFrozen(typed.content[0])).toBe(true)
    expect(freezeMessage(typed)).toBe(typed)
    // Frozen by someone else is not enough: it may share objects with its maker.
    const foreign = Object.freeze({ id: 'm2', role: 'user', content: Object.freeze([{ type: 'text', text: 'x' }]), source: { kind: 'user' } }) as UserMessage
    expect(freezeMessage(foreign)).not.toBe(foreign)
  })

  it('makes a JSON message a frozen JSON snapshot, which logging takes as it is; a message JSON cannot carry is still copied', () => {
    const made = createUserMessage({ content: [{ type: 'text', text: 'hi' }], source: { kind: 'user' } })
    const event = frozenJsonSnapshot({ message: made })
    expect(event.message).toBe(made)
    // structuredClone keeps what JSON would lose: such a message is copied that way, and refused only where it is logged.
    const dated = freezeMessage({ id: 'm3', role: 'user', content: [{ type: 'text', text: 'x' }], source: { kind: 'user' }, at: new Date(0) } as UserMessage)
    expect((dated as unknown as { at: Date }).at).toBeInstanceOf(Date)
    expect(Object.isFrozen(dated.content[0])).toBe(true)
    expect(() => frozenJsonSnapshot({ message: dated })).toThrow(/an instance of Date at \/message\/at/)
  })
})
