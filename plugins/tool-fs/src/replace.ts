import { randomBytes } from 'node:crypto'
import { open, rename, rm, stat } from 'node:fs/promises'
import { basename, dirname, join } from 'node:path'

/** Buffers handed to one `writev` call (the kernel takes at most 1024 per call on Linux). */
const WRITEV_BATCH = 1024

/**
 * Replaces the file at `path` (already resolved and confined) with `parts` written
 * one after the other, through a temporary file in the same directory and a rename.
 *
 * Why not write in place: the path may be a hard link whose inode is shared with a
 * file outside the workspace (pnpm's node_modules are hard links into a global
 * store). Writing in place would change that file too; the rename gives the path a
 * new inode and leaves the other names of the old one untouched. A reader also
 * never sees a half-written file, and a failed or aborted write leaves the old
 * content in place.
 *
 * The old file's mode is kept (and its owner, when the process may set it).
 */
export async function replaceFile(path: string, parts: readonly Uint8Array[], signal: AbortSignal): Promise<void> {
  const previous = await stat(path).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return undefined
    throw error
  })
  // 'wx' fails if the name exists, so a planted file or symlink at the temporary name is never written through.
  const temp = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`)
  const handle = await open(temp, 'wx', previous ? previous.mode & 0o7777 : 0o666)
  try {
    try {
      if (previous) {
        await handle.chmod(previous.mode & 0o7777) // the create mode above went through the umask
        if (previous.uid !== process.getuid?.() || previous.gid !== process.getgid?.()) {
          await handle.chown(previous.uid, previous.gid).catch(() => {}) // only root may; otherwise the file becomes ours
        }
      }
      const total = parts.reduce((sum, part) => sum + part.byteLength, 0)
      let written = 0
      for (let i = 0; i < parts.length; i += WRITEV_BATCH) {
        signal.throwIfAborted()
        written += (await handle.writev(parts.slice(i, i + WRITEV_BATCH))).bytesWritten
      }
      if (written !== total) throw new Error(`short write (${written} of ${total} bytes)`)
      await handle.sync() // the new content is on disk before the rename makes it the file
    } finally {
      await handle.close()
    }
    signal.throwIfAborted()
    await rename(temp, path)
  } catch (error) {
    await rm(temp, { force: true })
    throw error
  }
}
