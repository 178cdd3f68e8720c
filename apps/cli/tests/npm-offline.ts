// For the tests of projects that install with no registry: package folders as
// npm leaves them in node_modules, and npm itself run with the registry
// unreachable and an empty cache, so anything it would fetch fails.
import { execFile } from 'node:child_process'
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { delimiter, dirname, join } from 'node:path'

/** One npm command's limit: generous, as npm unpacking a tree on a loaded machine is slow; a command that hangs still fails, naming itself. */
export const NPM_MS = 240_000

/** Writes a package folder: its package.json and these files (a leading `#!` makes one executable). */
export function writePackage(dir: string, manifest: Record<string, unknown>, files: Record<string, string> = {}) {
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`)
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true })
    writeFileSync(join(dir, path), text, { mode: text.startsWith('#!') ? 0o755 : 0o644 })
  }
}

/**
 * The environment of npm with no registry: an unreachable registry URL, a new
 * empty cache, no retries (a fetch fails at once), this Node first on PATH. The
 * user's npm config is one that drops registry locations from lockfiles
 * (`omit-lockfile-registry-resolved`), as some users set it: a project must not
 * depend on it being off.
 */
export function offlineEnv(base: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const folder = mkdtempSync(join(tmpdir(), 'loom-offline-npm-'))
  writeFileSync(join(folder, 'npmrc'), 'omit-lockfile-registry-resolved=true\n')
  return {
    ...Object.fromEntries(Object.entries(base).filter(([key]) => !/^(NODE_OPTIONS|npm_|VITEST)/.test(key))),
    PATH: [dirname(process.execPath), base.PATH].join(delimiter),
    npm_config_registry: 'http://127.0.0.1:1/',
    npm_config_userconfig: join(folder, 'npmrc'),
    npm_config_cache: join(folder, 'cache'),
    npm_config_fetch_retries: '0',
    npm_config_update_notifier: 'false',
    npm_config_fund: 'false',
    npm_config_audit: 'false',
  }
}

/** Runs a command (npm by default) in `cwd`; rejects with its output when it fails. */
export function run(args: string[], cwd: string, env: NodeJS.ProcessEnv, command = 'npm'): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(command, args, { cwd, env, encoding: 'utf8', timeout: NPM_MS, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (!error) return resolve(stdout)
      const why = error.killed ? `ran out of time after ${NPM_MS / 1000} s` : `failed (${error.code})`
      reject(new Error(`${command} ${args.join(' ')} (in ${cwd}) ${why}\n${stdout}\n${stderr}`))
    })
  })
}
