// `loom` in a real terminal for the tests: a tmux session running the command,
// keys sent with send-keys (text, named keys, a bracketed paste), the screen read
// with capture-pane. Waits poll the screen with generous deadlines: a loaded
// machine stretches everything, and no test depends on how long a thing takes.
import { execFileSync } from 'node:child_process'
import { existsSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { MAIN, cleanEnv, project } from './helpers.ts'

export const TMUX = ['/usr/bin/tmux', '/usr/local/bin/tmux'].find(existsSync)

/**
 * `loom ...args` in a tmux terminal of 120x40, on a tmux server of its own: a
 * server gives each new session the environment it was started with, so a shared
 * one (another test's, or anyone's) would run loom with the wrong $LOOM_HOME.
 */
export class Terminal {
  static count = 0
  readonly name = `loom-terminal-${process.pid}-${Terminal.count++}`
  /** The server's socket, removed with the session. */
  private readonly socket = join(tmpdir(), this.name)

  constructor(cwd: string, home: string, args: string[] = []) {
    const env = cleanEnv(home)
    // The shell line keeps the pane open after loom exits, with its exit code on screen.
    const command = [process.execPath, '--conditions=loom-source', MAIN, ...args].map(word => `'${word}'`).join(' ')
    this.tmux(['new-session', '-d', '-s', this.name, '-x', '120', '-y', '40', `${command}; echo "exited $?"; sleep 600`], { cwd, env })
  }

  private tmux(args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): string {
    return execFileSync(TMUX!, ['-S', this.socket, ...args], { ...options, encoding: 'utf8' })
  }

  /** The whole history (tmux keeps 2000 lines): an offset into an earlier screen stays valid in a later one. */
  screen(): string {
    return this.tmux(['capture-pane', '-p', '-J', '-S', '-2000', '-t', this.name])
  }

  /** What the terminal shows now, without the history above it. */
  visible(): string {
    return this.tmux(['capture-pane', '-p', '-J', '-t', this.name])
  }

  /** Types `keys` (tmux key names: `Enter`, `C-c`, `C-d`, `Escape`, `Tab`, or text). */
  send(...keys: string[]) {
    this.tmux(['send-keys', '-t', this.name, ...keys])
  }

  line(text: string) {
    this.send('-l', text)
    this.send('Enter')
  }

  /** Pastes `text` as a terminal pastes it: bracketed, when the program asked for that. */
  paste(text: string) {
    this.tmux(['set-buffer', '-b', this.name, text])
    this.tmux(['paste-buffer', '-p', '-d', '-b', this.name, '-t', this.name])
  }

  /** Resolves with the screen once `pattern` is on it (matched from `from` characters on), or fails with what it shows. */
  async waitFor(pattern: RegExp, from = 0, timeoutMs = 30_000): Promise<string> {
    const start = Date.now()
    for (;;) {
      const screen = this.screen()
      if (pattern.test(screen.slice(from))) return screen
      if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${pattern}; the screen:\n${screen}`)
      await new Promise(resolve => setTimeout(resolve, 100))
    }
  }

  /** Waits for the next prompt after `from`: a line that is `> ` alone. */
  prompt(from: number) {
    return this.waitFor(/^> ?$/m, from)
  }

  /** Ends the session, and with it its server. */
  kill() {
    try {
      execFileSync(TMUX!, ['-S', this.socket, 'kill-session', '-t', this.name], { stdio: 'ignore' })
    } catch {
      /* already gone */
    }
    rmSync(this.socket, { force: true })
  }
}

const terminals: Terminal[] = []

/** Kills the terminals `open` started: a test file calls it after each test (`afterEach(closeTerminals)`). */
export function closeTerminals() {
  for (const terminal of terminals.splice(0)) terminal.kill()
}

/** A terminal running `loom ...args` in a new project with `files` (or in `at`); killed after the test. */
export function open(files: Record<string, string>, args: string[] = [], at = project(files)) {
  const terminal = new Terminal(at.cwd, at.home, args)
  terminals.push(terminal)
  return { ...at, terminal }
}
