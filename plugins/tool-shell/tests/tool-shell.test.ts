import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createHost, type Host } from '@loom/testkit'
import * as shell from '../src/index.ts'
import { tempDir, textOf } from './helpers.ts'

let host: Host
let work: ReturnType<typeof tempDir>

beforeEach(async () => {
  work = tempDir()
  host = await createHost({ cwd: work.dir, approve: () => ({ kind: 'allow' }) })
})

afterEach(async () => {
  await host.dispose()
  work.remove()
})

const bash = (command: string, extra: Record<string, unknown> = {}, cwd?: string) => host.callTool('bash', { command, ...extra }, cwd ? { cwd } : {})

describe('prompt delta', () => {
  it('adds the tool bash and the static guidance section tool:bash (105), nothing else', async () => {
    const mounted = await host.mount(shell)
    const delta = await mounted.delta()
    expect(delta.contexts).toEqual([])
    expect(delta.variables).toEqual([])
    expect(delta.tools.map(tool => tool.name)).toEqual(['bash'])
    expect(delta.tools[0].parameters).toMatchObject({ required: ['command'], properties: { command: { type: 'string' }, timeout: { type: 'integer' } } })
    expect(delta.sections.map(({ name, order, stability }) => ({ name, order, stability }))).toEqual([{ name: 'tool:bash', order: 105, stability: 'static' }])
    expect(delta.sections[0].rendered).toBe(shell.guidance(mounted.config as shell.Config))
    for (const phrase of [
      'fresh, non-interactive',
      '[exit code: N]',
      'stopped after 120 s',
      'at most 600 s',
      'last 64000 bytes',
      'ends with the call',
      '`[REDACTED]`',
    ]) {
      expect(delta.sections[0].text).toContain(phrase)
    }
  })

  it('the guidance follows the config', async () => {
    const mounted = await host.mount(shell, { timeoutMs: 30_000, maxTimeoutMs: 90_000, maxOutputBytes: 1000 })
    const [section] = (await mounted.delta()).sections
    expect(section.text).toContain('stopped after 30 s')
    expect(section.text).toContain('at most 90 s')
    expect(section.text).toContain('last 1000 bytes')
  })

  it('is exclusive: a bash call never runs alongside another call', async () => {
    const mounted = await host.mount(shell)
    expect(mounted.ctx.tools.executionMode({ name: 'bash', arguments: { command: 'ls' } })).toBe('exclusive')
  })

  it('rejects a default timeout above the maximum, naming both keys', async () => {
    await expect(host.mount(shell, { timeoutMs: 700_000 })).rejects.toThrow(/timeoutMs \(700000\) exceeds maxTimeoutMs \(600000\)/)
  })
})

describe('results', () => {
  beforeEach(async () => {
    await host.mount(shell)
  })

  it('gives stdout then [exit code: 0]', async () => {
    const result = await bash('echo hello; echo world')
    expect(result.isError).toBe(false)
    expect(textOf(result)).toBe('hello\nworld\n[exit code: 0]')
    expect(result.meta).toMatchObject({ exitCode: 0, signal: null, timedOut: false, stdoutBytes: 12, stderrBytes: 0 })
  })

  it('gives a [stderr] section and a non-zero exit code as a normal result', async () => {
    const result = await bash('echo out; echo oops >&2; exit 3')
    expect(result.isError).toBe(false)
    expect(textOf(result)).toBe('out\n[stderr]\noops\n[exit code: 3]')
  })

  it('says so when there is no output', async () => {
    expect(textOf(await bash('true'))).toBe('(no output)\n[exit code: 0]')
    expect(textOf(await bash('echo only-err >&2; false'))).toBe('[stderr]\nonly-err\n[exit code: 1]')
  })

  it('reports a shell ended by a signal (with bwrap, as the exit code 128 + n: see process-tree tests)', async () => {
    expect(textOf(await bash('kill -KILL $$'))).toMatch(/^\(no output\)\n\[(killed by signal SIGKILL|exit code: 137)\]$/)
  })

  it('runs a fresh shell per call: state does not carry over', async () => {
    await bash('export LOOM_X=1; cd /')
    expect(textOf(await bash('echo "x=${LOOM_X:-unset}"; pwd'))).toBe(`x=unset\n${work.dir}\n[exit code: 0]`)
  })

  it('runs non-interactively: dumb terminal, no colours, cat pagers, empty stdin', async () => {
    const result = await bash(
      'echo "$TERM $NO_COLOR $PAGER $GIT_PAGER"; [ -t 0 ] && echo tty || echo no-tty; read line; echo "read=$?"; echo "color=${FORCE_COLOR:-none}"',
    )
    expect(textOf(result)).toBe('dumb 1 cat cat\nno-tty\nread=1\ncolor=none\n[exit code: 0]')
  })

  it('starts in the session cwd of the calling agent', async () => {
    const sub = join(work.dir, 'sub')
    mkdirSync(sub)
    expect(textOf(await bash('pwd', {}, sub))).toBe(`${sub}\n[exit code: 0]`)
  })

  it('an invalid call is an error result the model can read', async () => {
    const missing = await host.callTool('bash', {})
    expect(missing.isError).toBe(true)
    expect(textOf(missing)).toMatch(/must have required property 'command'/)
    const gone = await bash('pwd', {}, join(work.dir, 'nope'))
    expect(gone.isError).toBe(true)
    expect(textOf(gone)).toContain(`working directory "${join(work.dir, 'nope')}" does not exist`)
  })
})

describe('config', () => {
  it('root overrides the session cwd', async () => {
    const root = join(work.dir, 'root')
    mkdirSync(root)
    await host.mount(shell, { root })
    expect(textOf(await bash('pwd', {}, work.dir))).toBe(`${root}\n[exit code: 0]`)
  })

  it('a shell that cannot start is an error result naming the config key', async () => {
    await host.mount(shell, { shell: join(work.dir, 'no-such-shell') })
    const result = await bash('echo hi')
    expect(result.isError).toBe(true)
    expect(textOf(result)).toMatch(/cannot start shell ".*no-such-shell" \(@loom\/tool-shell config shell\): .*ENOENT/)
  })
})

describe('output limits', () => {
  it('keeps the tail of a 200 KB stdout with a truncation marker', async () => {
    await host.mount(shell)
    // 200000 'x', a newline, then 'END' and a newline: 200005 bytes.
    const result = await bash(`head -c 200000 /dev/zero | tr '\\0' x; echo; echo END`)
    const text = textOf(result)
    const lines = text.split('\n')
    expect(lines[0]).toBe('[... 136005 bytes truncated ...]')
    expect(lines[1]).toBe('x'.repeat(63_995))
    expect(lines.slice(2)).toEqual(['END', '[exit code: 0]'])
    expect(result.meta).toMatchObject({ stdoutBytes: 200_005, truncatedBytes: 136_005 })
  })

  it('caps each stream on its own, keeping the tail of stderr under [stderr]', async () => {
    await host.mount(shell, { maxOutputBytes: 1000 })
    const result = await bash(`seq 1 2000; seq 1 3000 >&2; exit 2`)
    const text = textOf(result)
    expect(text.startsWith('[... 7893 bytes truncated ...]\n')).toBe(true)
    const [stdout, stderr] = text.split('\n[stderr]\n')
    expect(stdout.endsWith('\n1999\n2000')).toBe(true)
    expect(stdout.length).toBe('[... 7893 bytes truncated ...]\n'.length + 999)
    expect(stderr.startsWith('[... 12893 bytes truncated ...]\n')).toBe(true)
    expect(stderr.endsWith('\n2999\n3000\n[exit code: 2]')).toBe(true)
  })

  it('never splits a UTF-8 character at the cut', async () => {
    await host.mount(shell, { maxOutputBytes: 9 })
    // 12 × 'é' (2 bytes each) is 24 bytes; the 9-byte tail starts inside a character,
    // so its first byte is dropped too: 4 whole characters remain.
    expect(textOf(await bash(`printf 'éééééééééééé'`))).toBe('[... 16 bytes truncated ...]\néééé\n[exit code: 0]')
  })
})

describe('through the model', () => {
  it('a scripted model calls bash and reads the result in its next request', async () => {
    await host.mount(shell)
    host.scriptedModel([{ toolCalls: [{ name: 'bash', arguments: { command: 'echo from-bash; exit 4' } }] }, 'done'])
    const run = await host.run('run it')
    expect(run.text).toBe('done')
    expect(run.requests).toHaveLength(2)
    expect(run.requests[0].system).toContain('[exit code: N]')
    expect(JSON.stringify(run.requests[1].messages)).toContain('from-bash\\n[exit code: 4]')
  })
})

describe('zero residue', () => {
  it('leaves nothing after dispose', async () => {
    const mounted = await host.mount(shell)
    await bash('echo hi; echo err >&2')
    await mounted.dispose()
    await host.assertZeroResidue(mounted)
  })
})
