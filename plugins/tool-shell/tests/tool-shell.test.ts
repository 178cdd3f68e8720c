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
      'at most 64000 bytes each',
      '`read` pages through',
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
    expect(section.text).toContain('at most 1000 bytes each')
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
  /** The reference a result names, and the line of its artifact the notice says to read on from. */
  const noticeOf = (text: string) => {
    const match =
      /^\[… (?:part of )?lines? (\d+)(?:-(\d+))? not shown \((\d+) bytes\)\. The whole output is kept as (artifact:\/\/\S+): read it with `read` \(path "\4", offset \1\)\.\]$/m.exec(
        text,
      )
    if (!match) throw new Error(`no artifact notice in:\n${text.slice(0, 2000)}`)
    return { from: Number(match[1]), to: Number(match[2] ?? match[1]), reference: match[4] }
  }
  const readArtifact = (reference: string, cwd = work.dir) => host.root.tools.artifacts.read({ callId: 'reader', agent: host.agent(cwd) }, reference)

  it('shows the head and tail of a long stdout and keeps the whole as an artifact of the session', async () => {
    await host.mount(shell)
    const result = await bash('seq 1 40000')
    const text = textOf(result)
    const lines = text.split('\n')
    const { from, to, reference } = noticeOf(text)
    expect(lines[0]).toBe('1')
    expect(lines[from - 2]).toBe(String(from - 1))
    expect(lines.slice(-2)).toEqual(['40000', '[exit code: 0]'])
    expect(Buffer.byteLength(text)).toBeLessThan(64_000 + 400)
    expect(result.meta).toMatchObject({ stdoutBytes: 228_894, truncatedBytes: 0, artifact: reference })
    const whole = await readArtifact(reference)
    expect(whole).toBe(Array.from({ length: 40000 }, (_, i) => i + 1).join('\n'))
    // The notice's lines are the artifact's: the first one left out is where reading goes on.
    expect(whole.split('\n')[from - 1]).toBe(String(from))
    expect(whole.split('\n')[to]).toBe(lines[from])
  })

  it('writes no artifact for output that fits', async () => {
    await host.mount(shell, { maxOutputBytes: 1000 })
    const result = await bash('seq 1 10')
    expect(result.meta).not.toHaveProperty('artifact')
    expect(textOf(result)).toBe(`${Array.from({ length: 10 }, (_, i) => i + 1).join('\n')}\n[exit code: 0]`)
  })

  it('cuts each stream on its own; stderr lines are numbered after stdout in the artifact', async () => {
    await host.mount(shell, { maxOutputBytes: 1000 })
    const text = textOf(await bash(`seq 1 2000; seq 1 3000 >&2; exit 2`))
    const [stdout, stderr] = text.split('\n[stderr]\n')
    expect(stdout.startsWith('1\n2\n')).toBe(true)
    expect(stdout.endsWith('\n1999\n2000')).toBe(true)
    expect(stderr.endsWith('\n2999\n3000\n[exit code: 2]')).toBe(true)
    const out = noticeOf(stdout)
    const err = noticeOf(stderr)
    expect(err.reference).toBe(out.reference)
    const whole = (await readArtifact(out.reference)).split('\n')
    expect(whole[2000]).toBe('[stderr]')
    expect(whole[out.from - 1]).toBe(String(out.from))
    // stderr's first line is line 2002 of the artifact.
    expect(whole[err.from - 1]).toBe(String(err.from - 2001))
    expect(err.from).toBeGreaterThan(2002)
  })

  it('never splits a UTF-8 character at a cut', async () => {
    await host.mount(shell, { maxOutputBytes: 9 })
    // 12 × 'é' (2 bytes each) is 24 bytes on one line: 5 bytes of head keep 2 characters, 4 of tail 2.
    const text = textOf(await bash(`printf 'éééééééééééé'`))
    const lines = text.split('\n')
    expect([lines[0], lines[2], lines[3]]).toEqual(['éé', 'éé', '[exit code: 0]'])
    expect(noticeOf(text)).toMatchObject({ from: 1, to: 1 })
    expect(lines[1]).toMatch(/^\[… part of line 1 not shown \(16 bytes\)/)
  })

  it("another session cannot read a session's artifact", async () => {
    await host.mount(shell, { maxOutputBytes: 100 })
    const { reference } = noticeOf(textOf(await bash('seq 1 1000')))
    const elsewhere = tempDir()
    try {
      await expect(readArtifact(reference, elsewhere.dir)).rejects.toThrow(/is not an artifact of this session/)
    } finally {
      elsewhere.remove()
    }
  })

  it('keeps at most one artifact of a stream, its head and tail, however much the command prints', async () => {
    await host.mount(shell, { maxOutputBytes: 1000 })
    const limit = host.root.tools.artifacts.limits.maxBytes
    const result = await bash(`head -c ${3 * limit} /dev/zero | tr '\\0' x; echo; echo END`)
    const { reference } = noticeOf(textOf(result))
    const whole = await readArtifact(reference)
    expect(Buffer.byteLength(whole)).toBeLessThanOrEqual(limit)
    expect(whole).toMatch(/^x+\n\[… \d+ bytes not kept: the stream is longer than one call keeps\]\nx+\nEND$/)
    expect((result.meta as { truncatedBytes: number }).truncatedBytes).toBeGreaterThan(2 * limit)
  })

  it('without a session, shows the head and tail it kept and says the rest was not kept', async () => {
    await host.mount(shell, { root: work.dir, maxOutputBytes: 100 })
    const result = await host.ctx.tools.execute({
      callId: 'no-session',
      name: 'bash',
      arguments: { command: 'seq 1 1000' },
      signal: new AbortController().signal,
    })
    const text = textOf(result)
    expect(text).toMatch(/^1\n2\n[^]*\n\[… \d+ bytes not kept: the stream is longer than one call keeps\]\n[^]*\n999\n1000\n\[exit code: 0\]$/)
    expect(result.meta).not.toHaveProperty('artifact')
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
