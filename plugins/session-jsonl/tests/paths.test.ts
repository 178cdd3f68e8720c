import * as path from 'node:path'
import { describe, expect, it } from 'vitest'
import { encodeSegment, logPath, projectKey } from '../src/paths.ts'

describe('encodeSegment', () => {
  it('keeps safe characters and escapes the rest as ~XXXX', () => {
    expect(encodeSegment('abc-XYZ_0.9')).toBe('abc-XYZ_0.9')
    expect(encodeSegment('a/b')).toBe('a~002Fb')
    expect(encodeSegment('../x')).toBe('..~002Fx')
    expect(encodeSegment('a~b')).toBe('a~007Eb')
    expect(encodeSegment('é')).toBe('~00E9')
    expect(encodeSegment('😀')).toBe('~D83D~DE00')
    expect(encodeSegment('\uD800')).toBe('~D800')
  })

  it('escapes the special segments . and ..', () => {
    expect(encodeSegment('.')).toBe('~002E')
    expect(encodeSegment('..')).toBe('~002E~002E')
    expect(encodeSegment('...')).toBe('...')
  })

  it('rejects the empty string', () => {
    expect(() => encodeSegment('')).toThrow('cannot encode an empty path segment')
  })

  it('is injective', () => {
    // Strings built to collide under a naive escape: literal escapes, dots, separators, surrogates.
    const inputs = [
      '.',
      '..',
      '~002E',
      '~002E~002E',
      '~',
      '~007E',
      'a/b',
      'a~002Fb',
      'a\\b',
      'a:b',
      '/',
      '\\',
      ':',
      'x',
      'X',
      'é',
      'e\u0301',
      '\uD83D',
      '\uDE00',
      '😀',
      '\uD83D\uDE00x',
      ' ',
      '%20',
      '~0020',
      '...',
      '.a',
      'a.',
    ]
    const all = new Set(inputs)
    for (const a of inputs) for (const b of inputs) all.add(a + b)
    const encoded = new Map<string, string>()
    for (const s of all) {
      const e = encodeSegment(s)
      expect(encoded.get(e), `${JSON.stringify(s)} collides`).toBeUndefined()
      encoded.set(e, s)
      expect(e).toMatch(/^[A-Za-z0-9._~-]+$/)
      expect(e === '.' || e === '..').toBe(false)
    }
  })
})

describe('projectKey', () => {
  it('matches the examples', () => {
    expect(projectKey('/proj')).toBe('--proj--')
    expect(projectKey('/ws/space')).toBe('--ws-space--')
    expect(projectKey('/')).toBe('--root--')
    expect(projectKey(undefined)).toBe('_no-cwd')
  })

  it('collapses separator runs, strips leading dashes and escapes other units', () => {
    expect(projectKey('C:\\Users\\me')).toBe('--C-Users-me--')
    expect(projectKey('//a//b')).toBe('--a-b--')
    expect(projectKey('/-x/my dir')).toBe('--x-my~0020dir--')
    expect(projectKey('/a~b')).toBe('--a~007Eb--')
    expect(projectKey('///')).toBe('--root--')
  })

  it('truncates the slug to 251 characters', () => {
    const key = projectKey('/' + 'a'.repeat(400))
    expect(key).toBe(`--${'a'.repeat(251)}--`)
    expect(key.length).toBe(255)
  })
})

describe('logPath', () => {
  it('joins root, project and encoded id', () => {
    expect(logPath('/root', '/ws/space', 'a/b')).toBe(path.join('/root', '--ws-space--', 'a~002Fb', 'session.jsonl'))
    expect(logPath('/root', undefined, '..')).toBe(path.join('/root', '_no-cwd', '~002E~002E', 'session.jsonl'))
  })
})
