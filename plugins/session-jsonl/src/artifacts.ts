// The artifacts of a session (long tool output kept whole, see `@loom/tools/artifacts`) as
// files in a folder beside its log: `<session dir>/artifacts/<name>`. They live and go with
// the session's folder. Each file is written to a temp file, fsynced, then renamed into
// place, so a reader sees a whole artifact or none; temp files start with a dot, which no
// artifact name does, so a listing never shows one.
import { randomBytes } from 'node:crypto'
import { readdir, readFile, rename, stat, unlink } from 'node:fs/promises'
import { join } from 'node:path'
import type { ArtifactEntry, ArtifactStorage } from '@loom/tools/artifacts'
import { ensureDir, nodeFileOps } from './file.ts'

/** The folder of a session's artifacts, inside its session folder. */
export const ARTIFACTS_DIRNAME = 'artifacts'

export class JsonlArtifacts implements ArtifactStorage {
  /** The session folder of `sessionId` (where its log is or will be). */
  readonly #sessionDir: (sessionId: string) => Promise<string>

  constructor(sessionDir: (sessionId: string) => Promise<string>) {
    this.#sessionDir = sessionDir
  }

  async put(sessionId: string, name: string, content: string): Promise<void> {
    const dir = await this.#dir(sessionId)
    await ensureDir(dir, nodeFileOps)
    const tmp = join(dir, `.${name}.${randomBytes(6).toString('hex')}.tmp`)
    const handle = await nodeFileOps.open(tmp, 'wx', 0o600)
    try {
      try {
        await nodeFileOps.write(handle, Buffer.from(content))
        await nodeFileOps.sync(handle)
      } finally {
        await nodeFileOps.close(handle)
      }
      await rename(tmp, join(dir, name))
    } catch (error) {
      await unlink(tmp).catch(() => {})
      throw error
    }
  }

  async get(sessionId: string, name: string): Promise<string | undefined> {
    try {
      return await readFile(join(await this.#dir(sessionId), name), 'utf8')
    } catch (error) {
      if (isMissing(error)) return undefined
      throw error
    }
  }

  async list(sessionId: string): Promise<ArtifactEntry[]> {
    const dir = await this.#dir(sessionId)
    let names: string[]
    try {
      names = (await readdir(dir)).filter(name => !name.startsWith('.'))
    } catch (error) {
      if (isMissing(error)) return []
      throw error
    }
    const entries = await Promise.all(
      names.map(async name => {
        const info = await stat(join(dir, name)).catch(error => (isMissing(error) ? undefined : Promise.reject(error)))
        return info && { name, bytes: info.size, createdAt: info.mtimeMs }
      }),
    )
    return entries.filter(entry => entry !== undefined)
  }

  async remove(sessionId: string, names: readonly string[]): Promise<void> {
    const dir = await this.#dir(sessionId)
    await Promise.all(names.map(name => unlink(join(dir, name)).catch(error => (isMissing(error) ? undefined : Promise.reject(error)))))
  }

  async #dir(sessionId: string): Promise<string> {
    return join(await this.#sessionDir(sessionId), ARTIFACTS_DIRNAME)
  }
}

function isMissing(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code
  return code === 'ENOENT' || code === 'ENOTDIR'
}
