// The commands' environment has no secrets, and their output shows none.
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createHost, type Host } from '@loom/testkit'
import * as shell from '../src/index.ts'
import { tempDir, textOf } from './helpers.ts'

const KEY = `sk-test-${Math.random().toString(36).slice(2)}0123456789`
const GH = `ghp_${Math.random().toString(36).slice(2)}0123456789`
const DB_PASSWORD = 'db-pass-0123456789'
const FAKE_ENV: Record<string, string> = {
  DEEPSEEK_API_KEY: KEY,
  LOOM_TEST_GITHUB_TOKEN: GH,
  LOOM_TEST_DB_URL: `postgres://app:${DB_PASSWORD}@db:5432/app`,
  LOOM_TEST_CORP_SETTING: 'corp-value-0123456789',
  LOOM_TEST_PLAIN: 'plain-value',
}

let host: Host
let work: ReturnType<typeof tempDir>
let saved: Record<string, string | undefined>

beforeEach(async () => {
  saved = Object.fromEntries(Object.keys(FAKE_ENV).map(name => [name, process.env[name]]))
  Object.assign(process.env, FAKE_ENV)
  work = tempDir()
  host = await createHost({ cwd: work.dir, approve: () => ({ kind: 'allow' }) })
})

afterEach(async () => {
  await host.dispose()
  work.remove()
  for (const [name, value] of Object.entries(saved)) {
    if (value === undefined) delete process.env[name]
    else process.env[name] = value
  }
})

const bash = (command: string) => host.callTool('bash', { command }).then(textOf)

describe('scrubbed environment', () => {
  it('runs commands without secret variables: neither the names nor the values appear', async () => {
    await host.mount(shell)
    const env = await bash('env')
    expect(env).toContain('LOOM_TEST_PLAIN=plain-value')
    for (const text of ['DEEPSEEK_API_KEY', KEY, 'LOOM_TEST_GITHUB_TOKEN', GH]) expect(env).not.toContain(text)
    expect(await bash('echo "[${DEEPSEEK_API_KEY:-unset}]"')).toBe('[unset]\n[exit code: 0]')
  })

  it('keeps allowlisted variables in the environment, their values still redacted from the output', async () => {
    await host.mount(shell, { env: { allow: ['LOOM_TEST_GITHUB_*'] } })
    const env = await bash('env')
    expect(env).toContain('LOOM_TEST_GITHUB_TOKEN=[REDACTED]')
    expect(env).not.toContain(GH)
    expect(await bash('[ "$LOOM_TEST_GITHUB_TOKEN" = "$(printenv LOOM_TEST_GITHUB_TOKEN)" ] && echo ${#LOOM_TEST_GITHUB_TOKEN}')).toBe(
      `${GH.length}\n[exit code: 0]`,
    )
  })

  it('removes the configured extra patterns too', async () => {
    await host.mount(shell, { env: { secretPatterns: ['loom_test_corp_*'] } })
    const env = await bash('env')
    expect(env).not.toContain('LOOM_TEST_CORP_SETTING')
    expect(env).toContain('LOOM_TEST_PLAIN=plain-value')
    // A URL with credentials stays (commands may need it), its password redacted.
    expect(env).toContain('LOOM_TEST_DB_URL=postgres://app:[REDACTED]@db:5432/app')
  })

  it('describes the config keys', () => {
    const schema = JSON.stringify(shell.Config.toJSON())
    expect(schema).toContain('secretPatterns')
    expect(schema).toContain('allow')
    expect(shell.Config({} as shell.Config)).toMatchObject({ sandbox: 'auto', env: { secretPatterns: [], allow: [] } })
  })
})

describe('redacted output', () => {
  it('redacts the host secrets wherever a command finds them: a file, stderr, an argument', async () => {
    await host.mount(shell)
    writeFileSync(join(work.dir, '.env'), `DEEPSEEK_API_KEY=${KEY}\nother=1\n`)
    expect(await bash('cat .env')).toBe('DEEPSEEK_API_KEY=[REDACTED]\nother=1\n[exit code: 0]')
    expect(await bash(`echo "key: ${KEY}" >&2`)).toBe('[stderr]\nkey: [REDACTED]\n[exit code: 0]')
    expect(await bash(`echo ${DB_PASSWORD}`)).toBe('[REDACTED]\n[exit code: 0]')
  })

  it('redacts credentials in header echoes even when they are not known', async () => {
    await host.mount(shell)
    expect(await bash(`echo '> Authorization: Bearer abc123def456ghi'; echo 'x-api-key: zz99zz99zz99'`)).toBe(
      '> Authorization: Bearer [REDACTED]\nx-api-key: [REDACTED]\n[exit code: 0]',
    )
  })

  it('redacts both ends of a secret that a cut split, where nothing keeps the rest', async () => {
    await host.mount(shell, { root: work.dir, maxOutputBytes: 20 })
    // No session: the run keeps 10 bytes of head (the key's start) and 10 of tail (its last 5 characters, then ABCDE).
    const result = await host.ctx.tools.execute({
      callId: 'no-session',
      name: 'bash',
      arguments: { command: `printf '%s' '${KEY}'; printf 'ABCDE'` },
      signal: new AbortController().signal,
    })
    expect(textOf(result)).toBe(`[REDACTED]\n[… ${KEY.length - 15} bytes not kept: the stream is longer than one call keeps]\n[REDACTED]ABCDE\n[exit code: 0]`)
  })

  it('redacts what it keeps as an artifact', async () => {
    await host.mount(shell, { maxOutputBytes: 50 })
    const result = await host.callTool('bash', { command: `seq 1 100; printf '%s\\n' '${KEY}'; seq 1 100` })
    const reference = (result.meta as { artifact: string }).artifact
    const whole = await host.root.tools.artifacts.read({ callId: 'reader', agent: host.agent() }, reference)
    expect(whole).toContain('\n[REDACTED]\n')
    expect(whole).not.toContain(KEY)
  })

  it('changes nothing in ordinary output', async () => {
    await host.mount(shell)
    expect(await bash(`printf 'const token = getToken()\\npassword: string\\n'`)).toBe('const token = getToken()\npassword: string\n[exit code: 0]')
  })
})
