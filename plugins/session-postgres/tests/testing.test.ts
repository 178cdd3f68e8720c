// The test PostgreSQL helper when the server cannot start: it fails at once, naming the program,
// the cause and the ways out, instead of leaving a test hook to time out. The binaries are small
// shell scripts standing in for a broken install; the temp folder is the test's own.
import { chmodSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { startTestPostgres } from '../src/testing.ts'

let dir: string
const saved = { TMPDIR: process.env.TMPDIR, LOOM_TEST_PG_URL: process.env.LOOM_TEST_PG_URL }

beforeEach(() => {
  // A space in the path, as a user's folder may have; open to the server's user when we are root.
  dir = mkdtempSync(join(tmpdir(), 'loom pg helper '))
  chmodSync(dir, 0o755)
  process.env.TMPDIR = join(dir, 'tmp')
  mkdirSync(process.env.TMPDIR, { mode: 0o755 })
  delete process.env.LOOM_TEST_PG_URL
})
afterEach(async () => {
  for (const [key, value] of Object.entries(saved)) {
    if (value === undefined) delete process.env[key]
    else process.env[key] = value
  }
  await rm(dir, { recursive: true, force: true })
})

/** A folder of stand-in PostgreSQL programs: `postgres --version` answers unless `version` says otherwise. */
function binaries(scripts: { postgres?: string; initdb?: string; executable?: boolean }): string {
  const bin = join(dir, 'install', 'bin')
  mkdirSync(bin, { recursive: true, mode: 0o755 })
  const version = 'if [ "$1" = --version ]; then echo "postgres (PostgreSQL) 99.1"; exit 0; fi'
  writeFileSync(join(bin, 'postgres'), `#!/bin/sh\n${version}\n${scripts.postgres ?? 'exit 0'}\n`, { mode: scripts.executable === false ? 0o644 : 0o755 })
  writeFileSync(join(bin, 'initdb'), `#!/bin/sh\n${scripts.initdb ?? 'exit 0'}\n`, { mode: 0o755 })
  return bin
}

describe('a test PostgreSQL that cannot start', { timeout: 10_000 }, () => {
  it('a binary that cannot be run names it, the error and the ways out', async () => {
    const bin = binaries({ executable: false })
    const failed = startTestPostgres({ binDir: bin })
    await expect(failed).rejects.toThrow(`${join(bin, 'postgres')} --version could not be run (EACCES)`)
    await expect(failed).rejects.toThrow(/LOOM_TEST_PG_URL.*LOOM_TEST_PG_BIN/)
  })

  it('an initdb that fails shows its exit code and its own words', async () => {
    const failed = startTestPostgres({ binDir: binaries({ initdb: 'echo "initdb: cannot create directory: No space left on device" >&2; exit 3' }) })
    await expect(failed).rejects.toThrow(/initdb( as user \w+)? exited with code 3\ninitdb: cannot create directory: No space left on device/)
  })

  it('a server that exits before it is ready shows its log', async () => {
    const failed = startTestPostgres({ binDir: binaries({ postgres: 'echo "FATAL:  could not load library libicu: not found" >&2; exit 1' }) })
    await expect(failed).rejects.toThrow(/postgres( as user \w+)? exited with code 1 before it was ready\nFATAL: {2}could not load library libicu: not found/)
  })
})
