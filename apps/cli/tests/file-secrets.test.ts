// Secrets beyond the environment, end to end: the bearer token `loom serve` reads from
// --token-file, and the credential stores of the user's home folder (here a fake one), never reach
// the model or the session log, whatever the agent's tools try. Each case is a forced tool call of
// the scripted model through the real command.
import { probeBwrap } from '@loom/tool-shell'
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { events, loom, project, scriptedModel, sessionFiles, trustLayer, type Run } from './helpers.ts'
import { client, eventually, turnEnded } from './serve-client.ts'

/** The text of every tool result the model read, in order. */
function resultTexts(loomHome: string): string {
  return events(sessionFiles(loomHome)[0])
    .filter(event => event.type === 'tool/result')
    .map(event => event.data.message.content[0].content[0].text as string)
    .join('\n')
}

const TOKEN = 'serve-file-token-7f3a9c2e51d84b06'

describe('loom serve --token-file', () => {
  it("the token's value never reaches the model or the session log, and its file is out of the tools' reach", async () => {
    const script = scriptedModel(`
- toolCalls:
    - { id: c1, name: read, arguments: { path: ops-notes.txt } }
    - { id: c2, name: read, arguments: { path: serve.token } }
    - { id: c3, name: bash, arguments: { command: 'cat serve.token; base64 serve.token; grep -h token ops-notes.txt' } }
- Done.
`)
    const at = project({ 'loom.yml': script, 'serve.token': `${TOKEN}\n`, 'ops-notes.txt': `the serve token is ${TOKEN}\n` })
    let signal: ((signal: NodeJS.Signals) => void) | undefined
    let stdout: (() => string) | undefined
    const served: Promise<Run> = loom(['serve', '--port', '0', '--token-file', join(at.cwd, 'serve.token')], {
      ...at,
      onStart: running => {
        signal = running.signal
        stdout = running.stdout
      },
    })
    try {
      const url = await eventually(() => /listening on (http:\S+)/.exec(stdout?.() ?? '')?.[1], 30_000, 'the server to listen')
      const api = client(url, TOKEN)
      const created = await api.request('POST', '/v1/sessions', { task: 'look around' })
      expect(created.status).toBe(201)
      const stream = await api.events(created.body.id, { until: turnEnded(1), timeoutMs: 60_000 })
      expect(stream.frames.some(frame => frame.event.type === 'turn/end')).toBe(true)
    } finally {
      signal?.('SIGTERM')
    }
    const run = await served
    expect(run.code, run.stderr).toBe(0)
    const log = readFileSync(sessionFiles(at.home)[0], 'utf8')
    expect(log).not.toContain(TOKEN)
    expect(log).not.toContain(Buffer.from(`${TOKEN}\n`).toString('base64').slice(0, 24))
    const texts = resultTexts(at.home)
    // A copy of the value elsewhere is redacted; the file itself is not read at all.
    expect(texts).toContain('the serve token is [REDACTED]')
    expect(texts).toMatch(/"serve\.token" is out of reach: tools may not read or change ".*serve\.token" \(the bearer token of loom serve\)/)
    expect(run.stdout + run.stderr).not.toContain(TOKEN)
  })
})

const KEY_BODY = 'b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAAB'
const KEY = `-----BEGIN OPENSSH PRIVATE KEY-----\n${KEY_BODY}\n-----END OPENSSH PRIVATE KEY-----\n`
const DOCKER_AUTH = 'dXNlcjpodW50ZXIyLXJlZ2lzdHJ5'
const GH_PAT = `ghp_${'Zq8Lw3Xv9K'.repeat(3)}Tn4Rs2`

const folders: string[] = []
afterAll(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true })
})

/**
 * A fake home folder holding an SSH key and a Docker login, which is also the project folder (the
 * workspace, so only the read rules stand between the tools and the keys). Made under /var/tmp:
 * the sandbox's /tmp is its own, and a home there would be out of sight anyway.
 */
function homeProject(loomYml: string): { home: string; loomHome: string } {
  const base = realpathSync(mkdtempSync(join('/var/tmp', 'loom-cli-home-')))
  folders.push(base)
  const home = join(base, 'home')
  const files: Record<string, string> = {
    '.ssh/id_ed25519': KEY,
    '.docker/config.json': `{"auths":{"registry.example":{"auth":"${DOCKER_AUTH}"}}}\n`,
    // Not a credential store: a dotfile the agent may read, with a token it must not see.
    '.bashrc': `export EDITOR=vi\nexport GH_PAT=${GH_PAT}\n`,
    'loom.yml': loomYml,
    'README.md': '# home\n',
  }
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(home, path)), { recursive: true })
    writeFileSync(join(home, path), text)
  }
  const loomHome = join(base, 'loom-home')
  trustLayer(loomHome, join(home, 'loom.yml'))
  return { home, loomHome }
}

function expectNoKeys(loomHome: string, run: Run) {
  const log = readFileSync(sessionFiles(loomHome)[0], 'utf8')
  for (const secret of [KEY_BODY, DOCKER_AUTH, GH_PAT, 'PRIVATE KEY']) {
    expect(log).not.toContain(secret)
    expect(run.stdout + run.stderr).not.toContain(secret)
  }
}

describe('~/.ssh and the other credential stores', () => {
  it('read and grep refuse or skip them, in a workspace that is the home folder; the model reads why', async () => {
    const { home, loomHome } = homeProject(
      scriptedModel(`
- toolCalls:
    - { id: c1, name: read, arguments: { path: .ssh/id_ed25519 } }
    - { id: c2, name: read, arguments: { path: ~/.docker/config.json } }
    - { id: c3, name: grep, arguments: { pattern: 'PRIVATE|auth', hidden: true } }
    - { id: c4, name: glob, arguments: { pattern: '.ssh/*' } }
    - { id: c5, name: read, arguments: { path: .bashrc } }
- Done.
`),
    )
    const run = await loom(['run', 'find my keys'], { cwd: home, home: loomHome, env: { HOME: home } })
    expect(run.code, run.stderr).toBe(0)
    expectNoKeys(loomHome, run)
    const texts = resultTexts(loomHome)
    expect(texts).toContain(`".ssh/id_ed25519" is out of reach: tools may not read or change "${join(home, '.ssh')}" (a credential store: SSH keys)`)
    expect(texts).toContain('(a credential store: Docker registry logins)')
    expect(texts).toContain('ask the user, who can let it through with allowRead on the @loom/tools row of loom.yml')
    expect(texts).toContain('(Skipped 2 entries that tools may not read, such as credential stores;')
    expect(texts).toContain('export GH_PAT=[REDACTED]')
    expect(texts).toContain('export EDITOR=vi')
  })

  it.skipIf(!probeBwrap().ok)('bash under bubblewrap finds them hidden: cat reads nothing, ls ~/.ssh is empty', async () => {
    const command = 'cat ~/.ssh/id_ed25519; cat ~/.docker/config.json; ls -A ~/.ssh; echo listed; cp ~/.ssh/id_ed25519 copy.txt; grep GH_PAT ~/.bashrc'
    const { home, loomHome } = homeProject(
      scriptedModel(`
- toolCalls:
    - { id: c1, name: bash, arguments: { command: '${command}' } }
- Done.
`),
    )
    const run = await loom(['run', 'find my keys'], { cwd: home, home: loomHome, env: { HOME: home } })
    expect(run.code, run.stderr).toBe(0)
    expectNoKeys(loomHome, run)
    const texts = resultTexts(loomHome)
    expect(texts).toContain('listed')
    expect(texts).toContain('export GH_PAT=[REDACTED]')
    expect(texts).toContain('No such file or directory')
    expect(() => readFileSync(join(home, 'copy.txt'))).toThrow(/ENOENT/)
    // Hidden, not touched: the user's files are as they were.
    expect(readFileSync(join(home, '.ssh', 'id_ed25519'), 'utf8')).toBe(KEY)
  })
})
