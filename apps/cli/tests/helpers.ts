// Runs `loom` for the tests, in a temporary project folder with its own
// LOOM_HOME and no API keys. `loom()` calls main() in this process: the
// deployment's modules load once per test file instead of once per command.
// `loomProcess()` runs the real command as a subprocess (Node runs the
// TypeScript sources natively), for
// what needs a process: signals, SIGKILL, the launcher, two writers at once.
import { spawn, type ChildProcess } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll } from 'vitest'
import { main } from '../src/cli.ts'
import type { Interrupt } from '../src/context.ts'
import { readLayerSource } from '../src/compose.ts'
import { readTrust, trustKey, writeTrust } from '../src/trust.ts'

export const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url))
export const BIN = fileURLToPath(new URL('../bin/loom.js', import.meta.url))

const KEYS = [
  'DEEPSEEK_API_KEY',
  'DEEPSEEK_BASE_URL',
  'ANTHROPIC_API_KEY',
  'ANTHROPIC_BASE_URL',
  'OPENAI_API_KEY',
  'OPENAI_BASE_URL',
  'OPENAI_MODEL',
  'NO_COLOR',
  'FORCE_COLOR',
]

export interface Run {
  code: number | null
  signal: NodeJS.Signals | null
  stdout: string
  stderr: string
}

export interface LoomOptions {
  cwd: string
  home: string
  /** Variables set for this command only (the API keys are unset unless given here). */
  env?: Record<string, string>
  /** Called once the command runs in this process: its output so far, and a stop signal to send it. */
  onStart?: (running: { stdout: () => string; signal: (signal: NodeJS.Signals) => void }) => void
}

export interface ProcessOptions {
  cwd: string
  home: string
  env?: Record<string, string>
  /** Written to the child's stdin, which then ends (default: no stdin). */
  stdin?: string
  /** Called with the child once it runs (to send a signal). */
  onSpawn?: (child: ChildProcess, output: { stdout: () => string }) => void
}

export function cleanEnv(home: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, LOOM_HOME: home, ...extra }
  for (const key of KEYS) if (!(key in extra)) delete env[key]
  return env
}

/** In-process commands share process.env (the bundles and the plugins read it): one at a time. */
let queue: Promise<unknown> = Promise.resolve()

/** `loom ...args` in this process, with its output captured. */
export function loom(args: string[], options: LoomOptions): Promise<Run> {
  const run = queue.then(() => inProcess(args, options))
  queue = run.catch(() => {})
  return run
}

async function inProcess(args: string[], { cwd, home, env = {}, onStart }: LoomOptions): Promise<Run> {
  let stdout = ''
  let stderr = ''
  const io = {
    stdout: {
      write: (text: string) => {
        stdout += text
      },
    },
    stderr: {
      write: (text: string) => {
        stderr += text
      },
    },
  }
  let interrupt: Interrupt | undefined
  const restore = setEnv({ ...Object.fromEntries(KEYS.map(key => [key, undefined])), LOOM_HOME: home, ...env })
  try {
    onStart?.({ stdout: () => stdout, signal: signal => interrupt?.(signal) })
    const code = await main(args, {
      io,
      cwd,
      onInterrupt: value => {
        interrupt = value
      },
    })
    return { code, signal: null, stdout, stderr }
  } finally {
    restore()
  }
}

/** Sets (or, for undefined, unsets) these variables; returns what puts the old values back. */
function setEnv(vars: Record<string, string | undefined>): () => void {
  const saved = Object.entries(vars).map(([key]) => [key, process.env[key]] as const)
  const put = ([key, value]: readonly [string, string | undefined]) => {
    if (value === undefined) delete process.env[key]
    else process.env[key] = value
  }
  Object.entries(vars).forEach(put)
  return () => saved.forEach(put)
}

/** `loom ...args` as a subprocess. */
export function loomProcess(args: string[], options: ProcessOptions): Promise<Run> {
  return spawnRun(process.execPath, [MAIN, ...args], options)
}

export function spawnRun(command: string, args: string[], options: ProcessOptions): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: options.cwd, env: cleanEnv(options.home, options.env), stdio: ['pipe', 'pipe', 'pipe'] })
    // No input given: the child reads end of input at once.
    child.stdin.end(options.stdin ?? '')
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (data: string) => {
      stdout += data
    })
    child.stderr.setEncoding('utf8').on('data', (data: string) => {
      stderr += data
    })
    const timer = setTimeout(() => child.kill('SIGKILL'), 45_000)
    child.on('error', reject)
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stdout, stderr })
    })
    options.onSpawn?.(child, { stdout: () => stdout })
  })
}

const folders: string[] = []
afterAll(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true })
})

/**
 * A fresh project folder with these files, and a fresh LOOM_HOME (removed after the test file).
 * Its loom.yml is trusted, as after `loom trust` (`trusted: false` leaves it untrusted: trust.test.ts).
 */
export function project(files: Record<string, string> = {}, { trusted = true } = {}): { cwd: string; home: string } {
  const base = mkdtempSync(join(tmpdir(), 'loom-cli-test-'))
  folders.push(base)
  const cwd = join(base, 'project')
  const home = join(base, 'home')
  mkdirSync(cwd)
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(cwd, path)), { recursive: true })
    writeFileSync(join(cwd, path), text)
  }
  if (trusted && 'loom.yml' in files) trustLayer(home, join(cwd, 'loom.yml'))
  return { cwd, home }
}

/** Records trust in the bytes `file` has now, in `home`, as `loom trust` does. */
export function trustLayer(home: string, file: string) {
  // The hash only: a layer the test means to be malformed is trusted as well, and refused for what it is.
  const layers = readTrust(home)
  layers[trustKey(file)] = { sha256: readLayerSource(file).sha256, trustedAt: new Date().toISOString(), items: [] }
  writeTrust(layers, home)
}

/** Writes a layer the test trusts: its trust is recorded first, so a running `loom dev` applies it when it sees the change. */
export function writeTrusted(home: string, file: string, text: string) {
  const layers = readTrust(home)
  layers[trustKey(file)] = { sha256: createHash('sha256').update(text).digest('hex'), trustedAt: new Date().toISOString(), items: [] }
  writeTrust(layers, home)
  writeFileSync(file, text)
}

/** Every session.jsonl under `home`. */
export function sessionFiles(home: string): string[] {
  const root = join(home, 'sessions')
  const files: string[] = []
  const walk = (dir: string) => {
    let entries
    try {
      entries = readdirSync(dir, { withFileTypes: true })
    } catch {
      return
    }
    for (const entry of entries) {
      if (entry.isDirectory()) walk(join(dir, entry.name))
      else if (entry.name === 'session.jsonl') files.push(join(dir, entry.name))
    }
  }
  walk(root)
  return files
}

/** The plain (unpacked) event lines of a log; packed chunk rows are skipped. */
export function events(file: string): { type: string; seq: number; data: any }[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .slice(1)
    .filter(Boolean)
    .flatMap(line => {
      try {
        const value = JSON.parse(line)
        return typeof value.type === 'string' ? [value] : []
      } catch {
        return []
      }
    })
}

export const ESC = '\x1b'

/**
 * A loom.yml whose model is `@loom/llm-scripted` (provider `scripted`, model
 * `scripted-1`) playing `script`: the YAML of its script list, as written at
 * the left margin (it is indented into place here).
 */
export function scriptedModel(script: string): string {
  const indented = script
    .trim()
    .split('\n')
    .map(line => `          ${line}`)
    .join('\n')
  return `
- id: scripted
  disabled: true
- insert:
    - id: script
      name: '@loom/llm-scripted'
      config:
        provider: scripted
        model: scripted-1
        script:
${indented}
`
}

/** A layer switching the default bundle's session store to PostgreSQL (`LOOM_PG_URL`) under `schema`, as docs/operating.md shows; `extra`: more config lines of the row. */
export function postgresStore(schema: string, extra: Record<string, string | number> = {}): string {
  const lines = Object.entries(extra).map(([key, value]) => `\n        ${key}: ${value}`)
  return `
- id: session-jsonl
  disabled: true
- insert:
    - id: session-postgres
      name: '@loom/session-postgres'
      config:
        url: !!js "process.env.LOOM_PG_URL"
        schema: ${schema}${lines.join('')}
`
}

/** A loom.yml whose model calls bash \`sleep 30\` and then answers: a turn that runs until it is cancelled. */
export const SLOW_MODEL = scriptedModel(`
- text: Sleeping.
  toolCalls:
    - { name: bash, arguments: { command: 'sleep 30' } }
- Woke up.
`)

/** One model for both agents of @loom/subagents, in call order: the parent delegates, the child answers, the parent concludes. */
export const DELEGATING_MODEL = `${scriptedModel(`
- toolCalls:
    - { id: call-task, name: task, arguments: { description: 'summarize the readme', prompt: 'What does README.md say?' } }
- The README greets the reader.
- The subagent reports that the README greets the reader.
`)}
- insert:
    - id: subagents
      name: '@loom/subagents'
      config:
        maxSteps: 5
`

/** A loom.yml whose model runs bash `command` and then says `Done.`, with the default bundle's policy patched to ask about bash with no unattended answer. */
export function bashAskedByPolicy(command: string): string {
  return `${scriptedModel(`
- toolCalls:
    - { id: c1, name: bash, arguments: { command: '${command}' } }
- Done.
`)}
- id: permissions
  config:
    default: allow
    rules:
      - { tool: bash, action: ask }
`
}
