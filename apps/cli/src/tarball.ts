// npm's package tarballs: a gzipped tar whose entries sit under `package/`.
// `packFolder` makes one from an installed package's folder (what `npm pack`
// would ship, for a package npm already unpacked), `readTarballManifest` reads
// the package.json of one. Plain ustar, with a pax header for a path too long
// for it; dates fixed as npm fixes them, so equal content gives equal bytes.
import { lstatSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { gunzipSync, gzipSync } from 'node:zlib'

const BLOCK = 512
// npm packs every entry with this date (1985-10-26T08:15:00Z), so a tarball depends on its content only.
const MTIME = Date.UTC(1985, 9, 26, 8, 15, 0) / 1000

/** Every file of the package folder `dir`, relative with `/`, sorted; its own node_modules only for the dependencies it bundles. */
export function packageFiles(dir: string, bundled: readonly string[] = []): string[] {
  const files: string[] = []
  const walk = (relative: string) => {
    for (const entry of readdirSync(join(dir, relative), { withFileTypes: true })) {
      const path = relative ? `${relative}/${entry.name}` : entry.name
      if (entry.isDirectory() && path === 'node_modules') {
        // The package's own dependencies are installed there: only the ones it bundles are its content.
        for (const name of bundled) if (isFolder(join(dir, 'node_modules', name))) walk(`node_modules/${name}`)
      } else if (entry.isDirectory()) {
        walk(path)
      } else if (entry.isFile()) {
        files.push(path)
      }
      // Symbolic links are left out, as npm pack leaves them out.
    }
  }
  walk('')
  return files.sort()
}

const isFolder = (path: string) => {
  try {
    return lstatSync(path).isDirectory()
  } catch {
    return false
  }
}

/** The gzipped tarball of the package folder `dir`: its files under `package/`, executables 0755, the rest 0644. */
export function packFolder(dir: string, bundled: readonly string[] = []): Buffer {
  const blocks: Buffer[] = []
  for (const file of packageFiles(dir, bundled)) {
    const content = readFileSync(join(dir, file))
    const executable = (lstatSync(join(dir, file)).mode & 0o111) !== 0
    blocks.push(...entry(`package/${file}`, content, executable ? 0o755 : 0o644))
  }
  blocks.push(Buffer.alloc(2 * BLOCK))
  return gzipSync(Buffer.concat(blocks))
}

/** The header (a pax header first when the path does not fit ustar) and the padded content of one file. */
function entry(path: string, content: Buffer, mode: number): Buffer[] {
  const split = ustarPath(path)
  const blocks: Buffer[] = []
  if (!split) {
    const record = paxRecord('path', path)
    blocks.push(header({ name: 'PaxHeader', size: record.length, mode: 0o644, type: 'x' }), padded(record))
  }
  blocks.push(header({ name: split?.name ?? path.slice(-100), prefix: split?.prefix, size: content.length, mode, type: '0' }), padded(content))
  return blocks
}

/** `path` as ustar's prefix (155 bytes) and name (100 bytes), split at a `/`; undefined when it cannot be. */
function ustarPath(path: string): { prefix: string; name: string } | undefined {
  if (Buffer.byteLength(path) <= 100) return { prefix: '', name: path }
  for (let at = path.indexOf('/'); at !== -1; at = path.indexOf('/', at + 1)) {
    const prefix = path.slice(0, at)
    const name = path.slice(at + 1)
    if (Buffer.byteLength(prefix) <= 155 && Buffer.byteLength(name) <= 100) return { prefix, name }
  }
  return undefined
}

/** One pax record, `"<length> key=value\n"`, its length counting its own digits. */
function paxRecord(key: string, value: string): Buffer {
  const body = ` ${key}=${value}\n`
  let length = Buffer.byteLength(body)
  while (String(length).length + Buffer.byteLength(body) !== length) length = String(length).length + Buffer.byteLength(body)
  return Buffer.from(`${length}${body}`)
}

function header(fields: { name: string; prefix?: string; size: number; mode: number; type: '0' | 'x' }): Buffer {
  const block = Buffer.alloc(BLOCK)
  const put = (text: string, at: number, width: number) => block.write(text, at, width, 'utf8')
  const octal = (value: number, at: number, width: number) => put(`${value.toString(8).padStart(width - 1, '0')}\0`, at, width)
  put(fields.name, 0, 100)
  octal(fields.mode, 100, 8)
  octal(0, 108, 8) // uid
  octal(0, 116, 8) // gid
  octal(fields.size, 124, 12)
  octal(MTIME, 136, 12)
  put(' '.repeat(8), 148, 8) // the checksum counts its own field as spaces
  put(fields.type, 156, 1)
  put('ustar\0', 257, 6)
  put('00', 263, 2)
  put(fields.prefix ?? '', 345, 155)
  const sum = block.reduce((total, byte) => total + byte, 0)
  put(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8)
  return block
}

const padded = (content: Buffer) => Buffer.concat([content, Buffer.alloc((BLOCK - (content.length % BLOCK)) % BLOCK)])

/** The package.json of the package tarball `file` (the first entry named package.json one folder down, as npm unpacks it). */
export function readTarballManifest(file: string): Record<string, unknown> {
  let tar: Buffer
  try {
    tar = gunzipSync(readFileSync(file))
  } catch (error) {
    throw new Error(`${file} is not a gzipped package tarball: ${(error as Error).message}`)
  }
  let longPath: string | undefined
  for (let at = 0; at + BLOCK <= tar.length; ) {
    const block = tar.subarray(at, at + BLOCK)
    if (block.every(byte => byte === 0)) break
    const text = (from: number, width: number) => block.toString('utf8', from, from + width).replace(/\0.*$/s, '')
    const size = Number.parseInt(text(124, 12).trim() || '0', 8)
    const type = text(156, 1)
    const body = tar.subarray(at + BLOCK, at + BLOCK + size)
    at += BLOCK + Math.ceil(size / BLOCK) * BLOCK
    if (type === 'x') {
      longPath = /(?:^|\n)\d+ path=([^\n]*)\n/.exec(body.toString('utf8'))?.[1]
      continue
    }
    const prefix = text(345, 155)
    const path = longPath ?? (prefix ? `${prefix}/${text(0, 100)}` : text(0, 100))
    longPath = undefined
    if ((type === '0' || type === '') && /^[^/]+\/package\.json$/.test(path)) return JSON.parse(body.toString('utf8'))
  }
  throw new Error(`${file} has no package.json: not a package tarball`)
}
