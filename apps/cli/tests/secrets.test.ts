// The host's secrets reach neither the model, nor the log, nor the terminal: a
// tool that prints its environment or reads a file holding a key, a literal key
// in loom.yml, an error that echoes one.
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { loom, project, scriptedModel, sessionFiles } from './helpers.ts'

const TOKEN = 'tok-live-4f9a8b7c6d5e'

const LEAKY_MODEL = scriptedModel(`
- toolCalls:
    - { name: bash, arguments: { command: 'env; echo "token is $BILLING_SERVICE_TOKEN"' } }
    - { name: read, arguments: { path: deploy.env } }
- Done.
`)

describe('secrets', () => {
  it('a tool run printing its environment or reading a key file never shows the host secret', async () => {
    const { cwd, home } = project({ 'loom.yml': LEAKY_MODEL, 'deploy.env': `BILLING_SERVICE_TOKEN=${TOKEN}\n` })
    const run = await loom(['run', 'show me the environment'], { cwd, home, env: { BILLING_SERVICE_TOKEN: TOKEN } })
    expect(run.code).toBe(0)
    const log = readFileSync(sessionFiles(home)[0], 'utf8')
    // bash never had the variable; the file's copy of the value is redacted.
    expect(log).not.toContain('BILLING_SERVICE_TOKEN=tok')
    expect(log).not.toContain(TOKEN)
    expect(log).toContain('token is ')
    expect(log).toContain('BILLING_SERVICE_TOKEN=[REDACTED]')
    expect(run.stdout + run.stderr).not.toContain(TOKEN)
  })

  it('loom config and loom prompt print a literal key from loom.yml as [REDACTED]', async () => {
    const literal = 'sk-literal-0123456789'
    const { cwd, home } = project({
      'loom.yml': `- id: openai\n  disabled: false\n  config:\n    provider: openai\n    apiKey: ${literal}\n    baseUrl: http://127.0.0.1:9/v1\n`,
    })
    for (const args of [['config'], ['config', '--json']]) {
      const shown = await loom(args, { cwd, home })
      expect(shown.code).toBe(0)
      expect(shown.stdout).toContain('[REDACTED]')
      expect(shown.stdout).not.toContain(literal)
    }
    const prompt = await loom(['prompt', '--json'], { cwd, home, env: { BILLING_SERVICE_TOKEN: TOKEN } })
    expect(prompt.stdout).not.toContain(literal)
  })

  it('an error that would print a secret prints [REDACTED]', async () => {
    const { cwd, home } = project({ 'loom.yml': `- insert:\n    - id: broken\n      name: ./missing-${TOKEN}.ts\n` })
    const run = await loom(['prompt'], { cwd, home, env: { BILLING_SERVICE_TOKEN: TOKEN } })
    expect(run.code).toBe(1)
    expect(run.stderr).toContain('missing-[REDACTED].ts')
    expect(run.stderr).not.toContain(TOKEN)
  })
})
