// Scripting with `loom run`: the task `-` read from stdin, `--output
// stream-json` (one JSON object per line, in log order, a tool result only once
// it is on disk), and the usage errors around them.
import type { Context } from '@deepseek-ai/cordis'
import type { Session, SessionEvent } from '@loom/session'
import { describe, expect, it } from 'vitest'
import { StreamJsonTurn } from '../src/present/stream-json.ts'
import { readTurn } from '../src/present/turn-view.ts'
import { events, loom, loomProcess, project, scriptedModel, sessionFiles, type Run } from './helpers.ts'

/** The shell is off: these turns only read files. */
const layer = (script: string) => `- id: shell\n  disabled: true\n${scriptedModel(script)}`

const READS = layer(`
- text: Reading.
  toolCalls:
    - { name: read, arguments: { path: notes.txt } }
- Done.
`)

const READS_MISSING = layer(`
- text: Reading.
  toolCalls:
    - { name: read, arguments: { path: missing.txt } }
- Never reached.
`)

/** `loom ...args` as a subprocess with `input` on its stdin, then end of input. */
const withStdin = (args: string[], input: string, at: { cwd: string; home: string }): Promise<Run> => loomProcess(args, { ...at, stdin: input })

/** Every stdout line as JSON: each must be one complete object. */
function lines(stdout: string): Record<string, any>[] {
  expect(stdout.endsWith('\n'), stdout).toBe(true)
  return stdout
    .slice(0, -1)
    .split('\n')
    .map(line => {
      const value = JSON.parse(line)
      expect(typeof value === 'object' && value !== null && !Array.isArray(value), line).toBe(true)
      return value
    })
}

/** The line types in order, a run of deltas (text, reasoning) as one. */
const types = (parsed: Record<string, any>[]) =>
  parsed.map(line => line.type).filter((type, index, all) => !('delta' in parsed[index]) || all[index - 1] !== type)

/** The user's own messages in a log (not the runtime-context snapshots). */
function userTexts(file: string): string[] {
  return events(file)
    .filter(event => event.type === 'user/message' && event.data.source.kind === 'user')
    .map(event => event.data.content.map((block: { text: string }) => block.text).join(''))
}

describe('the task - is read from stdin', () => {
  it('run - takes all of stdin without its trailing line breaks; sessions resume ID - as well', async () => {
    const at = project({ 'loom.yml': READS, 'notes.txt': 'hello\n' })
    const run = await withStdin(['run', '--output', 'stream-json', '-'], 'first line\n  second line\n\n', at)
    expect(run.code, run.stderr).toBe(0)
    const [session] = lines(run.stdout)
    const [file] = sessionFiles(at.home)
    expect(file).toContain(session.id)
    expect(userTexts(file)).toEqual(['first line\n  second line'])

    const resumed = await withStdin(['sessions', 'resume', session.id, '-'], 'and now?\n', at)
    expect(resumed.code, resumed.stderr).toBe(0)
    expect(userTexts(file)).toEqual(['first line\n  second line', 'and now?'])
  })

  it('an empty stdin is a usage error, before anything starts', async () => {
    const at = project({ 'loom.yml': READS })
    for (const input of ['', '\n\n']) {
      const run = await withStdin(['run', '-'], input, at)
      expect([run.code, run.stdout, run.stderr]).toEqual([2, '', 'loom: run: the task read from stdin (-) is empty; see: loom run --help\n'])
    }
    expect(sessionFiles(at.home)).toEqual([])
  })
})

describe('--output stream-json', () => {
  it('prints one JSON object per line, in the order of the log: session, text, tool call, tool result, text, turn end', async () => {
    const { cwd, home } = project({ 'loom.yml': READS, 'notes.txt': 'hello from the notes\n' })
    const run = await loom(['run', '--output', 'stream-json', 'read the notes'], { cwd, home })
    expect([run.code, run.stderr]).toEqual([0, ''])
    const parsed = lines(run.stdout)
    expect(types(parsed)).toEqual(['session', 'text', 'message', 'tool_call', 'tool_result', 'text', 'message', 'turn_end'])
    const [session] = parsed
    expect(session).toEqual({ type: 'session', version: 1, id: expect.stringMatching(/^\d{8}-\d{6}-[0-9a-f]{6}$/), provider: 'scripted', model: 'scripted-1' })
    expect(sessionFiles(home)[0]).toContain(session.id)
    const call = parsed.find(line => line.type === 'tool_call')
    expect(call).toMatchObject({ id: expect.any(String), name: 'read', arguments: { path: 'notes.txt' } })
    expect(parsed.find(line => line.type === 'tool_result')).toMatchObject({ id: call!.id, name: 'read', isError: false, errorCode: null })
    expect(parsed.find(line => line.type === 'tool_result')!.content).toContain('hello from the notes')
    const text = parsed.filter(line => line.type === 'text').map(line => line.delta)
    expect(text.join('')).toBe('Reading.Done.')
    expect(parsed.at(-1)).toMatchObject({ type: 'turn_end', status: 'completed', reason: null, error: null, text: 'Done.' })
    expect(parsed.at(-1)!.usage.inputTokens).toBeGreaterThan(0)
    // The scripted model has no price: no cost rather than another model's.
    expect(parsed.at(-1)!.costUsd).toBeNull()
  })

  it('a failed tool and a limit come with their reasons; the exit code is 1', async () => {
    const { cwd, home } = project({ 'loom.yml': READS_MISSING })
    const run = await loom(['run', '--output', 'stream-json', '--max-steps', '1', 'read it'], { cwd, home })
    expect([run.code, run.stderr]).toEqual([1, ''])
    const parsed = lines(run.stdout)
    expect(types(parsed)).toEqual(['session', 'text', 'message', 'tool_call', 'tool_result', 'turn_end'])
    const result = parsed.find(line => line.type === 'tool_result')!
    expect(result).toMatchObject({ name: 'read', isError: true })
    expect(result.content).toContain('missing.txt')
    expect(parsed.at(-1)).toMatchObject({ type: 'turn_end', status: 'limit', reason: { kind: 'limit', limit: 'max-steps', used: 1, max: 1 } })
  })

  it('a turn that fails says so in its last line', async () => {
    const { cwd, home } = project({ 'loom.yml': layer('- error: { code: QUOTA, message: no balance left }') })
    const run = await loom(['run', '--output', 'stream-json', 'hi'], { cwd, home })
    expect(run.code).toBe(1)
    expect(types(lines(run.stdout))).toEqual(['session', 'turn_end'])
    expect(lines(run.stdout).at(-1)).toMatchObject({ status: 'error', reason: { code: 'QUOTA', message: 'no balance left' } })
  })

  it('reasoning lines come only with --show-reasoning', async () => {
    const { cwd, home } = project({ 'loom.yml': layer('- { reasoning: Thinking it over., text: Hi. }') })
    const plain = await loom(['run', '--output', 'stream-json', 'hi'], { cwd, home })
    expect(types(lines(plain.stdout))).toEqual(['session', 'text', 'message', 'turn_end'])
    const shown = await loom(['run', '--output', 'stream-json', '--show-reasoning', 'hi'], { cwd, home })
    const parsed = lines(shown.stdout)
    expect(types(parsed)).toEqual(['session', 'reasoning', 'text', 'message', 'turn_end'])
    const reasoning = parsed.filter(line => line.type === 'reasoning')
    expect(reasoning.every(line => Object.keys(line).join() === 'type,delta')).toBe(true)
    expect(reasoning.map(line => line.delta).join('')).toBe('Thinking it over.')
  })

  it('--json with --output is refused, and so is an unknown format; both exit 2', async () => {
    const at = project()
    const both = await loom(['run', '--json', '--output', 'stream-json', 'hi'], at)
    expect([both.code, both.stdout, both.stderr]).toEqual([
      2,
      '',
      'loom: --json and --output stream-json are two output formats: give one; see: loom run --help\n',
    ])
    const unknown = await loom(['sessions', 'resume', 'some-id', '--output', 'xml', 'hi'], at)
    expect([unknown.code, unknown.stderr]).toEqual([2, 'loom: --output: expected text or stream-json, got "xml"; see: loom sessions resume --help\n'])
    const elsewhere = await loom(['prompt', '--output', 'stream-json'], at)
    expect([elsewhere.code, elsewhere.stderr]).toEqual([
      2,
      'loom: prompt: --output does not apply here (it is for: run, sessions resume); see: loom prompt --help\n',
    ])
  })
})

describe('stream-json: durable before shown', () => {
  it('a message, and everything after it, and a tool result wait until their events are on disk', () => {
    const listeners = new Map<string, (...args: any[]) => void>()
    const ctx = {
      get: (name: string) => (name === 'sessionPersistence' ? {} : undefined),
      agents: { get: () => ({ options: { provider: 'p', model: 'm' } }) },
      on: (name: string, listener: (...args: any[]) => void) => {
        listeners.set(name, listener)
        return () => listeners.delete(name)
      },
    } as unknown as Context
    const session = { id: 's1' } as Session
    let stdout = ''
    const io = { stdout: { write: (text: string) => (stdout += text) }, stderr: { write: () => {} } }
    const stop = readTurn(new StreamJsonTurn(io), { reasoning: false })(ctx, session)
    const shown = () => (stdout ? lines(stdout).map(line => line.type) : [])
    const emit = (seq: number, type: string, data: unknown) => listeners.get('session/event')!(session, { seq, type, data } as SessionEvent)
    const durable = (seq: number) => listeners.get('session/durable')!('s1', seq)

    emit(1, 'assistant/chunk', { chunk: { type: 'text-delta', text: 'Hi.' } })
    emit(2, 'assistant/message', { step: 1, message: { content: [{ type: 'text', text: 'Hi.' }] } })
    emit(3, 'tool/call', { step: 1, callId: 'c1', name: 'read', arguments: '{}' })
    expect(shown()).toEqual(['session', 'text'])
    durable(2)
    expect(shown()).toEqual(['session', 'text', 'message', 'tool_call'])
    emit(4, 'tool/result', { message: { content: [{ toolCallId: 'c1', content: [{ type: 'text', text: 'ok' }] }] } })
    expect(shown()).toEqual(['session', 'text', 'message', 'tool_call'])
    durable(4)
    expect(shown()).toEqual(['session', 'text', 'message', 'tool_call', 'tool_result'])
    expect(lines(stdout).at(-1)).toEqual({ type: 'tool_result', id: 'c1', name: 'read', isError: false, errorCode: null, content: 'ok' })
    stop()
    expect(listeners.size).toBe(0)
  })
})
