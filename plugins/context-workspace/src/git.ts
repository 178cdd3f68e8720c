import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'

/** What the context reports about a git work tree. */
export interface GitState {
  /** The checked-out branch (also on a branch with no commits yet). */
  branch?: string
  /** Short sha of a detached HEAD. */
  detached?: string
  /** The branch has no commits yet. */
  unborn?: boolean
  /** Files `git status --porcelain` lists (modified, staged, untracked...); absent when status failed. */
  changed?: number
}

/** In-flight git processes, so that an unload can stop them. */
export class GitRunner {
  private readonly gitBinary: string
  private readonly live = new Set<{ timer: NodeJS.Timeout; stop(): void }>()
  private disposed = false

  constructor(gitBinary = 'git') {
    this.gitBinary = gitBinary
  }

  /**
   * Runs `git <args>` in `cwd`; resolves with stdout on exit code 0, `undefined` on
   * anything else (missing git, not a repository, timeout, abort, disposed). Never
   * rejects. Output over the cap stops git; `truncated` then holds its beginning.
   */
  run(args: string[], cwd: string, timeoutMs: number, signal?: AbortSignal): Promise<string | { truncated: string } | undefined> {
    return new Promise(resolve => {
      if (timeoutMs <= 0 || signal?.aborted || this.disposed) return resolve(undefined)
      let child: ChildProcess
      try {
        // Its own process group, so a stop also ends anything git started (hooks, helpers).
        child = spawn(this.gitBinary, args, { cwd, env: gitEnv(), stdio: ['ignore', 'pipe', 'ignore'], detached: true, windowsHide: true })
      } catch {
        return resolve(undefined)
      }
      const chunks: Buffer[] = []
      let size = 0
      const entry = {
        timer: setTimeout(() => stop(), timeoutMs),
        stop: () => stop(),
      }
      this.live.add(entry)
      const onAbort = () => stop()
      signal?.addEventListener('abort', onAbort, { once: true })
      let done = false
      const settle = (value: string | { truncated: string } | undefined) => {
        if (done) return
        done = true
        clearTimeout(entry.timer)
        this.live.delete(entry)
        signal?.removeEventListener('abort', onAbort)
        resolve(value)
      }
      const stop = (value?: { truncated: string }) => {
        try {
          if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL')
        } catch {} // already gone
        child.stdout?.destroy()
        settle(value)
      }
      child.stdout!.on('data', (chunk: Buffer) => {
        size += chunk.length
        if (size > MAX_OUTPUT_BYTES) return stop({ truncated: Buffer.concat(chunks).toString('utf8') })
        chunks.push(chunk)
      })
      child.on('error', () => settle(undefined))
      child.on('close', code => settle(code === 0 ? Buffer.concat(chunks).toString('utf8') : undefined))
    })
  }

  /** Kills every git process still running (its call resolves `undefined`) and clears its timer; starts none after. */
  dispose(): void {
    this.disposed = true
    for (const entry of [...this.live]) entry.stop()
    this.live.clear()
  }
}

/** More `git status` output than this (a tree with huge untracked dirs) is not counted. */
const MAX_OUTPUT_BYTES = 16 * 1024 * 1024

function gitEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    // Read-only: never take index.lock, so a concurrent `git` of the model never fails.
    GIT_OPTIONAL_LOCKS: '0',
    GIT_TERMINAL_PROMPT: '0',
    LC_ALL: 'C',
  }
  // Inherited repository overrides would make git describe some other repository.
  for (const key of ['GIT_DIR', 'GIT_WORK_TREE', 'GIT_INDEX_FILE', 'GIT_COMMON_DIR']) delete env[key]
  return env
}

/**
 * Whether git could find a repository from `dir`: a `.git` (a folder, or the file
 * of a linked work tree) in it or a parent, or a folder that is itself a git
 * directory (a bare repository, the inside of `.git`). A few stats, where git
 * itself is a process: outside every repository a step starts none. It errs
 * only towards running git (a ceiling or an unreadable folder is left to git).
 */
export function mayBeInRepository(dir: string): boolean {
  for (let at = resolve(dir); ; at = dirname(at)) {
    if (existsSync(join(at, '.git')) || (existsSync(join(at, 'HEAD')) && existsSync(join(at, 'objects')) && existsSync(join(at, 'refs')))) return true
    if (dirname(at) === at) return false
  }
}

/**
 * The git facts of `cwd`, or `undefined` when it is not a work tree or git fails.
 * One `git status --porcelain=v2 --branch` gives the branch (or a detached
 * HEAD, or a branch with no commits yet) and the changed files: one process
 * per model step. A detached HEAD takes a second call for its short sha. A
 * status whose output is over the cap (a tree with huge untracked folders)
 * still names the branch, from its first lines, but counts nothing. Every call
 * shares one deadline of `timeoutMs`. Outside every repository (see
 * `mayBeInRepository`) no git runs at all.
 */
export async function readGitState(runner: GitRunner, cwd: string, timeoutMs: number, signal?: AbortSignal): Promise<GitState | undefined> {
  // Checked at every step, like the status: a `git init` shows at the next one.
  if (!mayBeInRepository(cwd)) return undefined
  const deadline = Date.now() + timeoutMs
  const left = () => deadline - Date.now()
  const status = await runner.run(['status', '--porcelain=v2', '--branch'], cwd, left(), signal)
  if (status === undefined) return undefined
  const complete = typeof status === 'string'
  let head: string | undefined
  let oid: string | undefined
  let changed = 0
  for (const line of (complete ? status : status.truncated).split('\n')) {
    if (line.startsWith('# branch.head ')) head = line.slice('# branch.head '.length)
    else if (line.startsWith('# branch.oid ')) oid = line.slice('# branch.oid '.length)
    else if (line.length > 0 && !line.startsWith('# ')) changed++
  }
  const counted = complete ? { changed } : {}
  if (head === undefined) return complete ? counted : undefined
  if (head !== '(detached)') return { branch: head, ...(oid === '(initial)' && { unborn: true }), ...counted }
  const sha = await runner.run(['rev-parse', '--short', 'HEAD'], cwd, left(), signal)
  return typeof sha === 'string' ? { detached: sha.trim(), ...counted } : counted
}
